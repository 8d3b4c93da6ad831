//! What the fault matrices share: which kind stands in for a failing
//! primary, and which faults hold an attempt until its first-token deadline.

use baton::mock::Fault;
use baton::providers::ProviderKind;

/// The secondary speaks another dialect than the primary, so every test also
/// crosses adapters (and, behind a door of its own API, a native path).
pub fn secondary_kind(primary: ProviderKind) -> ProviderKind {
    match primary {
        ProviderKind::OpenAi => ProviderKind::Anthropic,
        ProviderKind::Anthropic => ProviderKind::Gemini,
        ProviderKind::Gemini => ProviderKind::OpenAi,
    }
}

/// Whether `fault` fails an attempt only at its first-token deadline.
pub fn waits_for_deadline(fault: Fault) -> bool {
    matches!(fault, Fault::StallHeaders | Fault::StallFirstToken | Fault::RoleThenStall | Fault::SlowFirstToken)
}
