//! What the fault matrices share: their deadlines, which kind stands in for
//! a failing primary, which faults hold an attempt until its first-token
//! deadline, and the pair of simulated providers and the route over them.

use std::time::Duration;

use baton::mock::{Fault, MockHandle, MockProvider, refusing_addr};
use baton::providers::ProviderKind;

use super::{Spawned, mocks_toml, route_toml};

pub const FIRST_TOKEN_MS: u64 = 500;
pub const IDLE_MS: u64 = 500;
pub const SECONDARY_FIRST_TOKEN_MS: u64 = 50;
/// Slack for a loaded two-core machine; the bounds test behaviour, not speed.
pub const MARGIN_MS: u64 = 500;
pub const HARD_LIMIT: Duration = Duration::from_secs(20);
/// The failing primary's words, so a leak of its bytes is detectable.
pub const PRIMARY_MARKER: &str = "leaky";

/// The secondary speaks another dialect than the primary, so every test also
/// crosses adapters (and, behind a door of its own API, a native path).
pub fn secondary_kind(primary: ProviderKind) -> ProviderKind {
    match primary {
        ProviderKind::OpenAi => ProviderKind::Anthropic,
        ProviderKind::Anthropic => ProviderKind::OpenAiResponses,
        ProviderKind::OpenAiResponses => ProviderKind::Gemini,
        ProviderKind::Gemini => ProviderKind::Azure,
        ProviderKind::Azure => ProviderKind::Bedrock,
        ProviderKind::Bedrock => ProviderKind::Vertex,
        ProviderKind::Vertex => ProviderKind::OpenAi,
    }
}

/// Whether `fault` fails an attempt only at its first-token deadline.
pub fn waits_for_deadline(fault: Fault) -> bool {
    matches!(fault, Fault::StallHeaders | Fault::StallFirstToken | Fault::RoleThenStall | Fault::SlowFirstToken)
}

/// The secondary a matrix starts from: healthy, of the other kind, marked `clean`.
pub fn secondary(primary: ProviderKind) -> MockProvider {
    MockProvider::new(secondary_kind(primary))
        .marker("clean")
        .first_token_after(Duration::from_millis(SECONDARY_FIRST_TOKEN_MS))
}

/// A primary of `kind` injecting `fault` (for `refuse`, an address where
/// nothing listens), `secondary` behind it, and the config of route "chat"
/// over the two.
pub async fn primary_then(
    kind: ProviderKind,
    fault: Fault,
    secondary: MockProvider,
) -> (MockHandle, MockHandle, String) {
    let primary = MockProvider::new(kind).marker(PRIMARY_MARKER).fault(fault).spawned().await;
    let secondary = secondary.spawned().await;
    let config = if fault == Fault::Refuse {
        let dead = refusing_addr().await.expect("free port");
        let base = if kind == ProviderKind::OpenAi { format!("http://{dead}/v1") } else { format!("http://{dead}") };
        route_toml(
            &[("primary", kind, base), ("secondary", secondary.provider_kind(), secondary.base_url())],
            FIRST_TOKEN_MS,
            IDLE_MS,
        )
    } else {
        mocks_toml(&[("primary", &primary), ("secondary", &secondary)], FIRST_TOKEN_MS, IDLE_MS)
    };
    (primary, secondary, config)
}

/// Calls `$callback!(… $args … name => fault, …)` with every fault a
/// matrix covers: `before_commit`, the faults that strike before the first
/// token; `all`, those and the two that strike mid-stream.
#[macro_export]
macro_rules! with_faults {
    (before_commit, $callback:ident!($($args:tt)*)) => {
        $callback!($($args)*
            refuse => baton::mock::Fault::Refuse,
            http_5xx => baton::mock::Fault::Http5xx,
            http_429 => baton::mock::Fault::Http429,
            stall_headers => baton::mock::Fault::StallHeaders,
            stall_first_token => baton::mock::Fault::StallFirstToken,
            role_then_stall => baton::mock::Fault::RoleThenStall,
            close_before_token => baton::mock::Fault::CloseBeforeToken,
            malformed => baton::mock::Fault::Malformed,
            error_event => baton::mock::Fault::ErrorEvent,
            slow_first_token => baton::mock::Fault::SlowFirstToken,
        );
    };
    (all, $callback:ident!($($args:tt)*)) => {
        $crate::with_faults!(before_commit, $callback!($($args)*
            midstream_stall => baton::mock::Fault::MidstreamStall,
            midstream_close => baton::mock::Fault::MidstreamClose,
        ));
    };
}
