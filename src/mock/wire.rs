//! The words of simulated answers, and the few whole-answer shapes the
//! benchmarks and the stray response write. How each kind writes its
//! events is the kind's own ([`crate::providers::simulate::Simulated`]).

use crate::providers::ProviderKind;
pub use crate::providers::simulate::{Call, Counts, Ending, WireEvent};

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
    kind.simulated().opening(model, false, 0)
}

/// One text token of a plain answer.
pub fn text(kind: ProviderKind, model: &str, text: &str) -> WireEvent {
    kind.simulated().text_in(model, 0, text)
}

/// The events that end a plain answer of `tokens` tokens, end marker included.
pub fn finish(kind: ProviderKind, model: &str, tokens: usize) -> Vec<WireEvent> {
    let end = Ending { text_block: 0, call: None, counts: Counts { output: tokens, ..Counts::default() } };
    kind.simulated().ending(model, &end)
}
