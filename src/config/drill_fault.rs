//! A drill's fault, as data: which provider a drill fails and with which
//! fault class. `[[drills]]` and the `x-baton-drill` header name them, so
//! the config reads and checks them here; what a fault does to an attempt
//! is the core's (`core/drill.rs`).

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

    /// The fault class named `name` in the fault table, if there is one.
    fn from_name(name: &str) -> Option<Self> {
        Self::NAMES.iter().find(|(known, _)| *known == name).map(|(_, fault)| *fault)
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
