//! The words of simulated answers, and the few whole-answer shapes the
//! benchmarks and the stray response write. How each kind writes its
//! events is the kind's own ([`crate::providers::simulate::Simulated`]).

use super::RecordedRequest;
use crate::providers::ProviderKind;
use crate::providers::simulate::Simulated;
pub use crate::providers::simulate::{Call, Counts, Ending, WireEvent};

/// The simulated wire of `model` of `kind` (Vertex AI's Claude and Gemini differ).
pub(super) fn of_model(kind: ProviderKind, model: &str) -> &'static dyn Simulated {
    let sim = kind.simulated();
    sim.for_model(model).unwrap_or(sim)
}

/// The simulated wire of the model `request` asks `kind` for.
pub(super) fn of_request(kind: ProviderKind, request: &RecordedRequest) -> &'static dyn Simulated {
    of_model(kind, &kind.simulated().model(&request.path, &request.body))
}

/// The words of token `i` of an answer written in `marker` words: `alpha0`,
/// ` alpha1`, … so a leaked fragment names the provider it came from.
pub fn token(marker: &str, i: usize) -> String {
    if i == 0 { format!("{marker}0") } else { format!(" {marker}{i}") }
}

/// The whole text of an answer of `tokens` marker words.
pub fn answer_text(marker: &str, tokens: usize) -> String {
    (0..tokens).map(|i| token(marker, i)).collect()
}

/// Events before the first token of a plain answer.
pub fn preamble(kind: ProviderKind, model: &str) -> Vec<WireEvent> {
    of_model(kind, model).opening(model, false, 0)
}

/// One text token of a plain answer.
pub fn text(kind: ProviderKind, model: &str, text: &str) -> WireEvent {
    of_model(kind, model).text_in(model, 0, text)
}

/// The events that end a plain answer of `tokens` tokens, end marker included.
pub fn finish(kind: ProviderKind, model: &str, tokens: usize) -> Vec<WireEvent> {
    let end = Ending { text_block: 0, call: None, counts: Counts { output: tokens, ..Counts::default() } };
    of_model(kind, model).ending(model, &end)
}
