//! The config file exactly as written: serde types that reject unknown keys and
//! keep each value's position, so validation can name the line.

use serde::Deserialize;
use toml::Spanned;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawConfig {
    pub listen: Option<Spanned<String>>,
    pub max_body_bytes: Option<Spanned<u64>>,
    pub max_body_bytes_in_flight: Option<Spanned<u64>>,
    pub admin_token: Option<Spanned<String>>,
    pub shutdown_grace_ms: Option<Spanned<u64>>,
    pub max_connections: Option<Spanned<u64>>,
    pub body_read_timeout_ms: Option<Spanned<u64>>,
    pub client_stall_timeout_ms: Option<Spanned<u64>>,
    pub max_event_bytes: Option<Spanned<u64>>,
    pub max_answer_bytes: Option<Spanned<u64>>,
    pub max_cooldown_ms: Option<Spanned<u64>>,
    pub allow_unauthenticated: Option<Spanned<bool>>,
    pub allowed_hosts: Option<Spanned<Vec<String>>>,
    pub cors_origins: Option<Spanned<Vec<String>>>,
    pub max_usd_per_request: Option<Spanned<f64>>,
    pub state: Option<Spanned<RawState>>,
    pub telemetry: Option<Spanned<super::telemetry::RawTelemetry>>,
    pub store: Option<Spanned<super::store::RawStore>>,
    #[serde(default)]
    pub keys: Vec<Spanned<RawKey>>,
    #[serde(default)]
    pub budgets: Vec<Spanned<RawBudget>>,
    #[serde(default)]
    pub providers: Vec<Spanned<RawProvider>>,
    #[serde(default)]
    pub routes: Vec<Spanned<RawRoute>>,
    #[serde(default)]
    pub alerts: Vec<Spanned<super::ops::RawAlert>>,
    #[serde(default)]
    pub drills: Vec<Spanned<super::ops::RawDrill>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawState {
    pub backend: Option<Spanned<String>>,
    pub redis_url: Option<Spanned<String>>,
    pub key_prefix: Option<Spanned<String>>,
    pub timeout_ms: Option<Spanned<u64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawKey {
    pub name: Spanned<String>,
    pub key: Option<Spanned<String>>,
    pub key_sha256: Option<Spanned<String>>,
    pub routes: Option<Spanned<Vec<String>>>,
    pub rpm: Option<Spanned<u64>>,
    pub tpm: Option<Spanned<u64>>,
    pub budget: Option<Spanned<RawKeyBudget>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawKeyBudget {
    pub usd_per_minute: Option<Spanned<f64>>,
    pub usd_per_hour: Option<Spanned<f64>>,
    pub usd_per_day: Option<Spanned<f64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawBudget {
    pub scope: Spanned<String>,
    pub window: Option<Spanned<String>>,
    pub usd: Option<Spanned<f64>>,
    pub action: Option<Spanned<String>>,
    pub downgrade_to: Option<Spanned<String>>,
    pub max_usd_per_request: Option<Spanned<f64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawProvider {
    pub name: Spanned<String>,
    pub kind: Spanned<String>,
    pub api: Option<Spanned<String>>,
    pub base_url: Spanned<String>,
    pub api_key: Option<Spanned<String>>,
    pub breaker: Option<Spanned<RawBreaker>>,
    pub rpm: Option<Spanned<u64>>,
    pub tpm: Option<Spanned<u64>>,
    pub ca_file: Option<Spanned<String>>,
    pub proxy: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawBreaker {
    pub failure_threshold: Option<Spanned<u32>>,
    pub failure_rate: Option<Spanned<f64>>,
    pub window: Option<Spanned<u32>>,
    pub cooldown_ms: Option<Spanned<u64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRoute {
    pub model: Spanned<String>,
    pub aliases: Option<Spanned<Vec<String>>>,
    pub strategy: Option<Spanned<String>>,
    pub first_token_timeout_ms: Option<Spanned<u64>>,
    pub idle_timeout_ms: Option<Spanned<u64>>,
    pub request_timeout_ms: Option<Spanned<u64>>,
    pub hedge_after_ms: Option<Spanned<RawHedge>>,
    pub commit_after_tokens: Option<Spanned<u32>>,
    pub commit_after_ms: Option<Spanned<u64>>,
    pub retry_backoff_ms: Option<Spanned<u64>>,
    pub max_retry_wait_ms: Option<Spanned<u64>>,
    pub retry_budget: Option<Spanned<super::retry_budget::RawRetryBudget>>,
    pub on_midstream_failure: Option<Spanned<String>>,
    pub unsupported_params: Option<Spanned<String>>,
    pub validate_json: Option<bool>,
    pub reasoning_keeps_alive: Option<bool>,
    pub stream_reasoning: Option<bool>,
    pub max_resumes: Option<Spanned<u32>>,
    pub targets: Spanned<Vec<Spanned<RawTarget>>>,
}

#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum RawHedge {
    Millis(u64),
    Word(String),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTarget {
    pub provider: Spanned<String>,
    pub model: Spanned<String>,
    pub context_window: Option<Spanned<u64>>,
    pub first_token_timeout_ms: Option<Spanned<u64>>,
    pub retries: Option<Spanned<u32>>,
    pub prefill: Option<bool>,
    pub weight: Option<Spanned<u32>>,
    pub price: Option<Spanned<RawPrice>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPrice {
    pub input_per_mtok: Spanned<f64>,
    pub output_per_mtok: Spanned<f64>,
    pub cached_input_per_mtok: Option<Spanned<f64>>,
}
