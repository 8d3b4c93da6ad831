//! The attribute names spans carry: the OpenTelemetry GenAI semantic
//! conventions' where they have one, baton's own under `baton.*`.

use crate::resilience::BreakerState;

/// What the span does: always `chat`.
pub(super) const OPERATION: &str = "gen_ai.operation.name";
/// The provider's API, in the conventions' well-known values.
pub(super) const PROVIDER: &str = "gen_ai.provider.name";
/// The model asked for: the client's on the request, the target's on an attempt.
pub(super) const REQUEST_MODEL: &str = "gen_ai.request.model";
/// The model that answered.
pub(super) const RESPONSE_MODEL: &str = "gen_ai.response.model";
/// Prompt tokens the provider reported.
pub(super) const INPUT_TOKENS: &str = "gen_ai.usage.input_tokens";
/// Answer tokens the provider reported.
pub(super) const OUTPUT_TOKENS: &str = "gen_ai.usage.output_tokens";
/// Of the prompt's tokens, those read from the provider's cache.
pub(super) const CACHED_INPUT_TOKENS: &str = "gen_ai.usage.cache_read.input_tokens";
/// Seconds from the start to the first token.
pub(super) const TIME_TO_FIRST_CHUNK: &str = "gen_ai.response.time_to_first_chunk";
/// The class of a failure, from the general conventions.
pub(super) const ERROR_TYPE: &str = "error.type";
/// The HTTP status of a request refused before it reached a route.
pub(super) const HTTP_STATUS: &str = "http.response.status_code";

/// The route that served the request.
pub(super) const ROUTE: &str = "baton.route";
/// The provider by its name in the config.
pub(super) const PROVIDER_NAME: &str = "baton.provider";
/// How the request or attempt ended: `ok`/`committed`, or a failure class.
pub(super) const OUTCOME: &str = "baton.outcome";
/// Why an attempt failed, as the metrics and logs name it.
pub(super) const FAILURE_CLASS: &str = "baton.failure_class";
/// Attempts made, the answering one included.
pub(super) const ATTEMPTS: &str = "baton.attempts";
/// Attempts that failed over to the next before the answering one.
pub(super) const FALLBACK_COUNT: &str = "baton.fallback_count";
/// Which retry of its target an attempt was (0 for the first try).
pub(super) const RETRY: &str = "baton.retry";
/// The provider's breaker when the attempt ended.
pub(super) const BREAKER_STATE: &str = "baton.breaker_state";

/// The conventions' name for a provider kind (`gen_ai.provider.name`).
pub(super) fn provider_name(kind: &'static str) -> &'static str {
    match kind {
        "gemini" => "gcp.gemini",
        other => other,
    }
}

/// A breaker state as the status API names it.
pub(super) fn breaker_state(state: BreakerState) -> &'static str {
    match state {
        BreakerState::Closed => "closed",
        BreakerState::Open => "open",
        BreakerState::HalfOpen => "half_open",
    }
}
