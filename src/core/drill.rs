//! Drills: an operator makes a chosen provider fail on purpose, with a chosen
//! fault class, for the requests that carry the drill, to see the fallback
//! path work on demand. A drilled failure looks like the real one to
//! everything downstream, but never counts against the provider's breaker.

use futures_util::{StreamExt, stream};

use crate::config::DrillFault;
use crate::event::ChatRequest;
use crate::providers::{EventStream, Opener, Opening, ProviderError, ProviderKind, Upstream};

/// Tokens a mid-stream drill lets through before it breaks the stream.
const MIDSTREAM_DRILL_TOKENS: usize = 3;

impl DrillFault {
    /// The failure a pre-commit drill stands for; `None` for the classes that
    /// wait for the deadline or act after commit.
    fn immediate_failure(self) -> Option<ProviderError> {
        let why = || "drill: synthetic failure".to_owned();
        Some(match self {
            DrillFault::Refuse => ProviderError::Connect(why()),
            DrillFault::Http5xx => ProviderError::Server { status: 503, message: why() },
            DrillFault::Http429 => ProviderError::RateLimited { retry_after: None, message: why() },
            DrillFault::CloseBeforeToken => ProviderError::Truncated,
            DrillFault::Malformed => ProviderError::Malformed(why()),
            DrillFault::ErrorEvent => ProviderError::ErrorEvent(why()),
            DrillFault::StallFirstToken | DrillFault::MidstreamStall | DrillFault::MidstreamClose => return None,
        })
    }

    /// Breaks a committed stream the way a mid-stream drill says, after a
    /// few events; other classes leave it alone.
    fn break_after_commit(self, rest: EventStream) -> EventStream {
        match self {
            DrillFault::MidstreamStall => Box::pin(rest.take(MIDSTREAM_DRILL_TOKENS).chain(stream::pending())),
            DrillFault::MidstreamClose => {
                Box::pin(rest.take(MIDSTREAM_DRILL_TOKENS).chain(stream::once(async { Err(ProviderError::Truncated) })))
            }
            _ => rest,
        }
    }
}

/// A provider under a drill: a pre-commit fault answers without calling the
/// provider (a stall is a stream that never speaks, so the core's own
/// deadline ends it), a mid-stream fault lets the real answer start and
/// breaks it. The attempt it opens is marked as drilled, so nothing of its
/// failure reaches the provider's breaker or health.
pub(super) struct Drilled<'a> {
    /// The real way to the provider.
    pub real: &'a dyn Opener,
    /// What the drill makes the provider do.
    pub fault: DrillFault,
}

impl Opener for Drilled<'_> {
    fn open<'a>(&'a self, kind: ProviderKind, upstream: Upstream<'a>, request: &'a ChatRequest) -> Opening<'a> {
        let fault = self.fault;
        if let Some(failure) = fault.immediate_failure() {
            return Box::pin(async move { Err(failure) });
        }
        if fault == DrillFault::StallFirstToken {
            let silent: EventStream = Box::pin(stream::pending());
            return Box::pin(async move { Ok(silent) });
        }
        let real = self.real.open(kind, upstream, request);
        Box::pin(async move { Ok(fault.break_after_commit(real.await?)) })
    }
}
