//! The validated configuration: providers, routes and limits in the types the
//! rest of baton uses. Loading goes through [`raw`] first, so every mistake is
//! reported with its file, line and key before anything starts.

mod egress;
mod keys;
mod money;
mod ops;
mod raw;
mod retry_budget;
mod routing;
mod secret;
mod state;
mod store;
mod telemetry;
mod top;
mod validate;
mod warnings;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use thiserror::Error;

pub use money::{Budget, BudgetAction, BudgetScope, BudgetWindow, Budgets, Price, RequestCap, add_usd};
pub use ops::{AlertEvent, DEFAULT_DRILL_MAX_TOKENS, DEFAULT_DRILL_PROMPT, Drill, DrillExpect, Webhook};
pub use retry_budget::RetryBudgetSettings;
pub use secret::Secret;
pub use state::{DEFAULT_KEY_PREFIX, DEFAULT_REDIS_URL, DEFAULT_STATE_TIMEOUT, StateBackend, StateConfig};
pub use store::{DEFAULT_RETENTION_DAYS, DEFAULT_STORE_FILE, StoreBackend, StoreConfig};
pub use telemetry::{DEFAULT_SERVICE_NAME, Telemetry};

pub use crate::resilience::BreakerSettings;

use crate::providers::ProviderKind;
use crate::providers::client::Egress;
use raw::RawConfig;
use validate::Checker;

/// Where the proxy listens when the config does not say.
pub const DEFAULT_LISTEN: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 8080);
/// The largest request body accepted when the config does not say.
pub const DEFAULT_MAX_BODY_BYTES: usize = 32 * 1024 * 1024;

/// Request bytes all requests in flight may hold at once: eight bodies of
/// the largest size, far more of the usual few kilobytes.
pub const DEFAULT_MAX_BODY_BYTES_IN_FLIGHT: usize = 256 * 1024 * 1024;
/// How long an attempt may take to its first token when the route does not say.
pub const DEFAULT_FIRST_TOKEN_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a committed stream may go without an event when the route does not say.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long streams may finish after SIGTERM when the config does not say.
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(10);
/// The base of the retry backoff when the route does not say.
pub const DEFAULT_RETRY_BACKOFF: Duration = Duration::from_millis(100);
/// The longest `Retry-After` waited for when the route does not say.
pub const DEFAULT_MAX_RETRY_WAIT: Duration = Duration::from_secs(2);
/// Client connections served at once when the config does not say; each
/// open stream also holds a provider connection, so twice this many
/// descriptors must be available.
pub const DEFAULT_MAX_CONNECTIONS: usize = 10_000;
/// How long a client may take to send its request body when the config does not say.
pub const DEFAULT_BODY_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a client may leave the answer unread when the config does not say.
pub const DEFAULT_CLIENT_STALL_TIMEOUT: Duration = Duration::from_secs(30);
/// The most text and tool-call bytes one answer may hold when the config does not say.
pub const DEFAULT_MAX_ANSWER_BYTES: usize = 8 * 1024 * 1024;
/// The longest a provider's `Retry-After` keeps it aside when the config does not say.
pub const DEFAULT_MAX_COOLDOWN: Duration = Duration::from_secs(120);
/// What bounds the part of a request before its answer commits, and the
/// whole of a non-streamed one, when the route sets no `request_timeout_ms`.
pub const DEFAULT_REQUEST_BOUND: Duration = Duration::from_secs(300);

/// Everything `baton serve` needs.
#[derive(Debug, Clone)]
pub struct Config {
    /// The proxy's listen address.
    pub listen: SocketAddr,
    /// Request bodies above this size are refused with 413.
    pub max_body_bytes: usize,
    /// Request bytes all requests in flight may hold at once; past it a
    /// request gets 503 with `Retry-After` (read at start only).
    pub max_body_bytes_in_flight: usize,
    /// The credential for admin actions such as drills; none disables them.
    pub admin_token: Option<Secret>,
    /// On SIGTERM, how long streams in flight may go on before they are ended.
    pub shutdown_grace: Duration,
    /// Client connections served at once; past it, new ones get 503 at once.
    pub max_connections: usize,
    /// How long a request body may take to arrive.
    pub body_read_timeout: Duration,
    /// How long an answer may wait for a client that stopped reading before
    /// the client's connection, and the provider's, are dropped.
    pub client_stall_timeout: Duration,
    /// Who may call.
    pub access: Access,
    /// The providers, in file order.
    pub providers: Vec<Arc<Provider>>,
    /// The routes, in file order; shared with the streams that use them.
    pub routes: Vec<Arc<Route>>,
    /// Spend budgets and per-request cost caps.
    pub budgets: Budgets,
    /// Where the state replicas share lives (`[state]`).
    pub state: StateConfig,
    /// Where traces are exported; `None` when they are off.
    pub telemetry: Option<Telemetry>,
    /// Where the request log and the spend ledger are kept (`[store]`).
    pub store: StoreConfig,
    /// The webhooks alerts go to (`[[alerts]]`).
    pub alerts: Vec<Webhook>,
    /// The drills run on a schedule (`[[drills]]`).
    pub drills: Vec<Drill>,
}

/// Who may call, and from where.
#[derive(Debug, Clone, Default)]
pub struct Access {
    /// With any, every `/v1` request needs one of them.
    pub keys: crate::access::ClientKeys,
    /// Serve a non-loopback address without keys (anyone who reaches it
    /// spends the providers' keys).
    pub allow_unauthenticated: bool,
    /// When not empty, the only `Host` names served (against DNS rebinding).
    pub allowed_hosts: Vec<String>,
    /// The web origins whose pages may call baton (`*` for any); empty
    /// sends no CORS headers at all.
    pub cors_origins: Vec<String>,
}

impl Access {
    /// Why serving `listen` with these settings would make baton an open
    /// relay, if it would: a non-loopback address with no keys, unless that
    /// is asked for.
    pub fn open_relay(&self, listen: SocketAddr) -> Option<String> {
        let open = !listen.ip().is_loopback() && !self.keys.required() && !self.allow_unauthenticated;
        open.then(|| {
            format!(
                "{listen} is not a loopback address and no [[keys]] are configured: anyone who reaches it would spend the providers' keys; add [[keys]], or set allow_unauthenticated = true"
            )
        })
    }

    /// On a non-loopback `listen`, with a store that can hold keys
    /// (`store_keeps_keys`) and no `allow_unauthenticated`, a key is
    /// required even before any exists: the gateway starts closed, and
    /// opens to each key `baton keys create` makes.
    pub fn close_until_keyed(&mut self, listen: SocketAddr, store_keeps_keys: bool) {
        if store_keeps_keys && !listen.ip().is_loopback() && !self.allow_unauthenticated {
            self.keys = std::mem::take(&mut self.keys).closed();
        }
    }
}

/// One upstream API account.
#[derive(Debug)]
pub struct Provider {
    /// Unique name, shown in headers, logs and errors.
    pub name: String,
    /// The wire dialect.
    pub kind: ProviderKind,
    /// Base URL, following the kind's official SDK convention.
    pub base_url: String,
    /// The gateway's credential, if the provider needs one.
    pub api_key: Option<Secret>,
    /// When the provider's circuit breaker opens.
    pub breaker: BreakerSettings,
    /// The provider's quota for this account, requests per minute: a
    /// target over it is skipped (`over_quota`).
    pub rpm: Option<u64>,
    /// The provider's quota, tokens per minute (estimated before, settled after).
    pub tpm: Option<u64>,
    /// How its connections leave: the proxy they go through (`proxy`, or
    /// the environment's `HTTPS_PROXY` / `HTTP_PROXY` unless `NO_PROXY`
    /// names the host) and the CA trusted beside the system's (`ca_file`).
    pub egress: Egress,
}

/// A model name clients ask for, and the ordered targets that can answer it.
#[derive(Debug, Clone)]
pub struct Route {
    /// The `model` a client sends: the route's name in metrics, logs and keys.
    pub model: String,
    /// Other names clients may send for this route (a tier, an upstream
    /// model's name), unique across every route's names and aliases.
    pub aliases: Vec<String>,
    /// How each request orders the targets before the first is tried.
    pub strategy: Strategy,
    /// After commit, the longest allowed gap between events.
    pub idle_timeout: Duration,
    /// Bounds the whole request: every attempt, retry and wait.
    pub request_timeout: Option<Duration>,
    /// When to start the next candidate alongside a slow one.
    pub hedge: Option<Hedge>,
    /// How much of an attempt is held back before it commits.
    pub commit: CommitWindow,
    /// The base of the exponential backoff between retries of one target.
    pub retry_backoff: Duration,
    /// The longest `Retry-After` worth waiting for; a longer one fails over.
    pub max_retry_wait: Duration,
    /// How many retries and hedges the route's requests may add.
    pub retry_budget: RetryBudgetSettings,
    /// What a stream that breaks after commit does.
    pub on_midstream_failure: MidstreamPolicy,
    /// What the route does with request fields and answer parts beyond text.
    pub surface: Surface,
    /// How many times one answer may be resumed.
    pub max_resumes: u32,
    /// Caps on what a provider's answer may make baton hold or wait for.
    pub limits: UpstreamLimits,
    /// Candidates, in config order (the `strategy` decides the order tried).
    pub targets: Vec<Target>,
}

impl Route {
    /// Whether a client's `model` names this route, by its name or an alias.
    pub fn answers_to(&self, model: &str) -> bool {
        self.model == model || self.aliases.iter().any(|alias| alias == model)
    }
}

/// How a route orders its targets for one request; failover then walks the
/// order, as it always has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Strategy {
    /// Config order, every time.
    #[default]
    Ordered,
    /// By the providers' recent p95 time to first token, fastest first,
    /// taken afresh for every request; ties stay in config order.
    Fastest,
    /// The first target drawn at random in proportion to `weight` (spreading
    /// load over several keys or regions of one provider), then the rest in
    /// config order.
    Weighted,
}

impl Strategy {
    /// The name the config uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::Ordered => "ordered",
            Strategy::Fastest => "fastest",
            Strategy::Weighted => "weighted",
        }
    }
}

/// Caps on what one provider's bytes can make baton hold or wait for: set
/// at the top level of the config, carried by every route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UpstreamLimits {
    /// The largest SSE event; a larger one fails the attempt (`event_too_large`).
    pub max_event_bytes: usize,
    /// The most text and tool-call bytes an answer that baton holds whole
    /// (non-streamed, or kept for resume) may reach.
    pub max_answer_bytes: usize,
    /// The longest a `Retry-After` keeps a provider aside.
    pub max_cooldown: Duration,
}

impl Default for UpstreamLimits {
    fn default() -> Self {
        UpstreamLimits {
            max_event_bytes: crate::providers::sse::DEFAULT_MAX_EVENT_BYTES,
            max_answer_bytes: DEFAULT_MAX_ANSWER_BYTES,
            max_cooldown: DEFAULT_MAX_COOLDOWN,
        }
    }
}

/// When a hedge starts: the next candidate runs in parallel once the current
/// attempt has gone this long without committing.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Hedge {
    /// A fixed delay.
    After(Duration),
    /// The primary's recent p95 time to first token, within a floor and a ceiling.
    Auto,
}

/// A route's rules for what a request may ask beyond text (DESIGN §6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Surface {
    /// Send a request without the fields a target cannot honour (announced
    /// in `x-baton-dropped-params`) instead of skipping the target.
    pub drop_unsupported: bool,
    /// Check a `json_schema` answer against its schema before it commits.
    pub validate_json: bool,
    /// While reasoning arrives, measure the first-token deadline from the
    /// latest reasoning delta: a thinking model is alive, not stalled.
    pub reasoning_keeps_alive: bool,
    /// Send reasoning to the client (`delta.reasoning_content`); it then
    /// commits like a token.
    pub stream_reasoning: bool,
}

impl Default for Surface {
    fn default() -> Self {
        Surface { drop_unsupported: false, validate_json: true, reasoning_keeps_alive: false, stream_reasoning: false }
    }
}

/// What happens when a committed stream breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MidstreamPolicy {
    /// End the stream with an error event and no `[DONE]`.
    Error,
    /// Ask the next candidate to continue the answer and splice it in.
    Resume,
}

/// An attempt commits once it has produced `tokens` content events and
/// `after` has passed since its first one, or its answer has ended: until
/// then a failure still fails over invisibly, at the price of a later first byte.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CommitWindow {
    /// Content events to hold back before commit (at least 1).
    pub tokens: u32,
    /// Time after the first token to hold back before commit.
    pub after: Duration,
}

/// One candidate of a route: a provider and the model to ask it for.
#[derive(Debug, Clone)]
pub struct Target {
    /// The provider to call.
    pub provider: Arc<Provider>,
    /// The provider's model name.
    pub model: String,
    /// The model's context window in tokens, when declared: a request whose
    /// estimate it cannot hold skips this target, and a context-length error
    /// moves on only to a candidate with a larger one.
    pub context_window: Option<u64>,
    /// From the attempt's start to its first token (the route's unless set here).
    pub first_token_timeout: Duration,
    /// How often a 429, 5xx or connection failure is retried here before moving on.
    pub retries: u32,
    /// Whether the model continues a partial answer given as a final
    /// assistant message (prefill); many current models reject that.
    pub prefill: bool,
    /// This target's share of first attempts on a `weighted` route (at least 1).
    pub weight: u32,
    /// What its tokens cost, when declared: the cost of the answers it
    /// gives, and the estimate a per-request cap is checked against.
    pub price: Option<Price>,
}

impl Config {
    /// Serves `listen` instead of the configured address (`--listen`),
    /// with the access rules that address calls for.
    pub fn listen_on(&mut self, listen: SocketAddr) {
        self.listen = listen;
        self.access.close_until_keyed(listen, self.store.backend != StoreBackend::None);
    }

    /// Finds the route a client's `model` names, by its name or an alias.
    pub fn route(&self, model: &str) -> Option<&Arc<Route>> {
        self.routes.iter().find(|route| route.answers_to(model))
    }
}

/// A config that cannot be used, with where and why.
#[derive(Debug, Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("{path}: cannot read config: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The file was read but something in it is wrong.
    #[error("{path}:{line}: {key}: {message}")]
    Invalid {
        /// The file.
        path: String,
        /// The 1-based line of the offending value.
        line: usize,
        /// The offending key, as a dotted path.
        key: String,
        /// What is wrong with it.
        message: String,
    },
    /// Several mistakes, each with its place, reported together.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
    Many(Vec<ConfigError>),
}

/// Reads and validates the config at `path`, resolving `${VAR}` from the process environment.
pub fn load(path: &Path) -> Result<Config, ConfigError> {
    load_with_warnings(path).map(|(config, _)| config)
}

/// Validates config `text`; `label` names it in errors and `env` resolves
/// `${VAR}`. Text has no directory of its own: its store is off unless it
/// names one.
pub fn parse(text: &str, label: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Config, ConfigError> {
    parse_in(text, label, env, None)
}

/// [`parse`] for text that lives in `dir`, which relative paths (the
/// SQLite store's) are read against.
pub fn parse_in(
    text: &str,
    label: &str,
    env: &dyn Fn(&str) -> Option<String>,
    dir: Option<&Path>,
) -> Result<Config, ConfigError> {
    parse_with_warnings_in(text, label, env, dir).map(|(config, _)| config)
}

/// [`load`], with the likely mistakes a valid config still has.
pub fn load_with_warnings(path: &Path) -> Result<(Config, Vec<String>), ConfigError> {
    let label = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: label.clone(), source })?;
    let dir = path.parent().filter(|dir| !dir.as_os_str().is_empty()).unwrap_or(Path::new("."));
    parse_with_warnings_in(&text, &label, &|name| std::env::var(name).ok(), Some(dir))
}

/// [`parse`], with the likely mistakes a valid config still has: an
/// OpenAI-kind `base_url` without a version segment, a route whose targets
/// all use one provider, a thinking model with a short first-token deadline.
pub fn parse_with_warnings(
    text: &str,
    label: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(Config, Vec<String>), ConfigError> {
    parse_with_warnings_in(text, label, env, None)
}

/// [`parse_with_warnings`] for text that lives in `dir`.
fn parse_with_warnings_in(
    text: &str,
    label: &str,
    env: &dyn Fn(&str) -> Option<String>,
    dir: Option<&Path>,
) -> Result<(Config, Vec<String>), ConfigError> {
    let check = Checker { text, label, env, dir };
    let raw: RawConfig = toml::from_str(text).map_err(|err| {
        let line = err.span().map_or(1, |span| check.line(span.start));
        ConfigError::Invalid {
            path: label.to_owned(),
            line,
            key: key_of(text, err.span()),
            message: err.message().trim().to_owned(),
        }
    })?;
    let warnings = warnings::warnings(&check, &raw);
    check.config(raw).map(|config| (config, warnings))
}

/// The key a parse error points at: the text of its span when that is a bare
/// key, the line's own key otherwise.
fn key_of(text: &str, span: Option<std::ops::Range<usize>>) -> String {
    let Some(span) = span else { return "(file)".to_owned() };
    let spanned = text.get(span.clone()).unwrap_or_default().trim();
    // A number is a value, not a key: `-1` is the bad value of the line's key.
    let word = spanned.chars().all(|c| c.is_alphanumeric() || c == '_' || c == '-');
    if word && spanned.chars().any(|c| c.is_alphabetic() || c == '_') {
        return spanned.to_owned();
    }
    let line_start = text[..span.start.min(text.len())].rfind('\n').map_or(0, |i| i + 1);
    let line = text[line_start..].lines().next().unwrap_or_default();
    line.split('=').next().unwrap_or_default().trim().to_owned()
}
