//! Drills: an operator makes a chosen provider fail on purpose, with a chosen
//! fault class, for the requests that carry the drill, to see the fallback
//! path work on demand. A drilled failure looks like the real one to
//! everything downstream, but never counts against the provider's breaker.

use futures_util::{StreamExt, stream};

use crate::event::ChatRequest;
use crate::providers::{EventStream, Opener, Opening, ProviderError, ProviderKind, Upstream};

/// Tokens a mid-stream drill lets through before it breaks the stream.
const MIDSTREAM_DRILL_TOKENS: usize = 3;

/// The fault classes a drill can inject: those of the fault table in
/// `docs/failover.md`, each by its name there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DrillFault {
    /// A refused connection.
    Refuse,
    /// A 503.
    Http5xx,
    /// A 429 without `Retry-After`.
    Http429,
    /// No first token: the attempt waits out its deadline.
    StallFirstToken,
    /// The body ends before any token.
    CloseBeforeToken,
    /// An undecodable first event.
    Malformed,
    /// A provider error event before any token.
    ErrorEvent,
    /// A few tokens, then silence until the idle timeout.
    MidstreamStall,
    /// A few tokens, then the end of the body without its end marker.
    MidstreamClose,
}

impl DrillFault {
    const NAMES: [(&'static str, DrillFault); 12] = [
        ("refuse", DrillFault::Refuse),
        ("http_5xx", DrillFault::Http5xx),
        ("http_429", DrillFault::Http429),
        ("stall_headers", DrillFault::StallFirstToken),
        ("stall_first_token", DrillFault::StallFirstToken),
        ("role_then_stall", DrillFault::StallFirstToken),
        ("slow_first_token", DrillFault::StallFirstToken),
        ("close_before_token", DrillFault::CloseBeforeToken),
        ("malformed", DrillFault::Malformed),
        ("error_event", DrillFault::ErrorEvent),
        ("midstream_stall", DrillFault::MidstreamStall),
        ("midstream_close", DrillFault::MidstreamClose),
    ];

    fn from_name(name: &str) -> Option<Self> {
        Self::NAMES.iter().find(|(known, _)| *known == name).map(|(_, fault)| *fault)
    }

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

/// The drills one request carries: which provider fails, and how.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Drills(Vec<(String, DrillFault)>);

impl Drills {
    /// Parses `provider=fault_class` pairs separated by commas, as sent in
    /// the `x-baton-drill` header.
    pub fn parse(spec: &str) -> Result<Self, String> {
        let mut drills = Vec::new();
        for pair in spec.split(',').map(str::trim).filter(|pair| !pair.is_empty()) {
            let (provider, class) =
                pair.split_once('=').ok_or_else(|| format!("{pair:?} is not provider=fault_class"))?;
            let fault = DrillFault::from_name(class.trim()).ok_or_else(|| {
                let names: Vec<&str> = DrillFault::NAMES.iter().map(|(name, _)| *name).collect();
                format!("unknown fault class {:?}; expected one of {}", class.trim(), names.join(", "))
            })?;
            drills.push((provider.trim().to_owned(), fault));
        }
        Ok(Drills(drills))
    }

    /// The drill for `provider`, if this request carries one.
    pub fn for_provider(&self, provider: &str) -> Option<DrillFault> {
        self.0.iter().find(|(name, _)| name == provider).map(|(_, fault)| *fault)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_pairs_and_names_mistakes() {
        let drills = Drills::parse("openai=http_5xx, gemini = stall_first_token").unwrap_or_default();
        assert_eq!(drills.for_provider("openai"), Some(DrillFault::Http5xx));
        assert_eq!(drills.for_provider("gemini"), Some(DrillFault::StallFirstToken));
        assert_eq!(drills.for_provider("anthropic"), None);
        assert!(Drills::parse("openai").is_err_and(|e| e.contains("provider=fault_class")));
        assert!(Drills::parse("openai=explode").is_err_and(|e| e.contains("unknown fault class \"explode\"")));
    }
}
