//! Continuing a broken answer: the requests that ask another provider to go
//! on from the text the client already has, and the splice that removes
//! whatever the continuation repeats of it.

use crate::event::{ChatRequest, Message, Role};

/// The instruction that carries the partial answer when prefill is not used.
const CONTINUE_INSTRUCTION: &str = "Your previous reply was cut off. Continue it from exactly where it stops: \
do not repeat any of it, add no preamble, and keep its language and format. The reply so far, between <partial> tags:";

/// The original conversation with the partial answer as a final assistant
/// message, for providers that continue their own prefilled reply.
pub fn prefill_request(original: &ChatRequest, partial: &str) -> ChatRequest {
    let mut request = translated(original);
    request.messages.push(Message::text(Role::Assistant, partial));
    request
}

/// The original conversation with a final user message that carries the
/// partial answer and asks for the rest of it.
pub fn instruction_request(original: &ChatRequest, partial: &str) -> ChatRequest {
    let mut request = translated(original);
    let content = format!("{CONTINUE_INSTRUCTION}\n<partial>{partial}</partial>");
    request.messages.push(Message::text(Role::User, content));
    request
}

/// A copy of `original` that goes upstream translated: the client's body
/// as sent does not hold the partial answer a continuation adds.
fn translated(original: &ChatRequest) -> ChatRequest {
    ChatRequest { native: None, ..original.clone() }
}

/// How far before the end of the text a repeat may begin, besides a restart
/// from its very beginning. Continuations repeat the last words or start
/// over; bounding where a repeat may begin keeps the splice linear in the
/// text, however long the answer.
const MAX_LOOKBACK: usize = 4096;

/// Joins a continuation to the text the client has: the start of the
/// continuation is held until it is clear how much of it repeats the end of
/// that text (a clean continuation, the last words again, or a restart from
/// the beginning), and only the new part is let through.
#[derive(Debug)]
pub struct Splice {
    have: String,
    held: String,
    /// Where in `have` a repeat may still begin: each agrees with `held` so far.
    candidates: Vec<usize>,
    decided: bool,
}

impl Splice {
    /// A splice onto `have`, the text the client already holds.
    pub fn new(have: &str) -> Self {
        let candidates = repeat_starts(have);
        Splice { have: have.to_owned(), held: String::new(), candidates, decided: have.is_empty() }
    }

    /// Takes the next fragment of the continuation; returns the text to send,
    /// if any can be sent yet.
    pub fn push(&mut self, fragment: &str) -> Option<String> {
        if self.decided {
            return Some(fragment.to_owned());
        }
        let before = self.held.len();
        self.held.push_str(fragment);
        let (have, held) = (self.have.as_bytes(), self.held.as_bytes());
        // Only the new bytes are compared: each candidate already agreed with the rest.
        self.candidates.retain(|&start| {
            let tail = &have[start..];
            let (from, to) = (before.min(tail.len()), held.len().min(tail.len()));
            tail[from..to] == held[from..to]
        });
        if self.could_still_repeat_more() { None } else { self.flush() }
    }

    /// The continuation ended or moved past text: sends whatever is held, minus the repeat.
    pub fn flush(&mut self) -> Option<String> {
        if self.decided {
            return None;
        }
        self.decided = true;
        let overlap = self.longest_repeat();
        let rest = self.held.split_off(overlap);
        (!rest.is_empty()).then_some(rest)
    }

    /// Whether the held text is the start of a longer repeat that more
    /// fragments could complete.
    fn could_still_repeat_more(&self) -> bool {
        self.candidates.iter().any(|&start| self.have.len() - start > self.held.len())
    }

    /// The longest end of `have` that the held text starts with.
    fn longest_repeat(&self) -> usize {
        self.candidates
            .iter()
            .map(|&start| self.have.len() - start)
            .filter(|&tail| tail <= self.held.len())
            .max()
            .unwrap_or(0)
    }
}

/// Positions in `have` where a repeat may begin: its start, and within the
/// last [`MAX_LOOKBACK`] bytes the start of a word or the whitespace before
/// one, so a repeat is never part of a word.
fn repeat_starts(have: &str) -> Vec<usize> {
    let bytes = have.as_bytes();
    let from = have.len().saturating_sub(MAX_LOOKBACK).max(1);
    let near_end = (from..bytes.len()).filter(|&i| {
        have.is_char_boundary(i) && (bytes[i].is_ascii_whitespace() || bytes[i - 1].is_ascii_whitespace())
    });
    std::iter::once(0).filter(|_| !have.is_empty()).chain(near_end).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn splice(have: &str, fragments: &[&str]) -> String {
        let mut splice = Splice::new(have);
        let mut out: String = fragments.iter().filter_map(|f| splice.push(f)).collect();
        out.extend(splice.flush());
        out
    }

    #[test]
    fn a_clean_continuation_passes_through() {
        assert_eq!(splice("w0 w1 w2", &[" w3", " w4"]), " w3 w4");
    }

    #[test]
    fn repeated_last_words_are_dropped() {
        assert_eq!(splice("w0 w1 w2", &[" w1", " w2", " w3"]), " w3");
        assert_eq!(splice("w0 w1 w2", &[" w2 w3 w4"]), " w3 w4");
    }

    #[test]
    fn a_restart_from_the_beginning_is_dropped() {
        assert_eq!(splice("w0 w1 w2", &["w0", " w1", " w2", " w3", " w4"]), " w3 w4");
    }

    #[test]
    fn a_word_split_across_fragments_is_waited_for() {
        assert_eq!(splice("the story2", &[" sto", "ry3"]), " story3");
        assert_eq!(splice("the story2", &[" sto", "ry2", " end"]), " end");
    }

    #[test]
    fn a_repeat_is_never_part_of_a_word() {
        assert_eq!(splice("I saw a cat", &["at the door"]), "at the door", "'at' is not the end of 'cat' repeated");
    }

    #[test]
    fn a_short_continuation_is_flushed_at_the_end() {
        assert_eq!(splice("w0 w1 w2", &[" w2"]), "", "only a repeat of the last word");
        assert_eq!(splice("w0 w1 w2", &[" w1"]), " w1", "not an end of the text: new words");
        assert_eq!(splice("w0 w1 w2", &["."]), ".");
        assert_eq!(splice("", &["w0"]), "w0");
    }

    #[test]
    fn a_long_answer_splices_in_linear_time() {
        let have: String = (0..150_000).map(|i| format!("w{i} ")).collect();
        let started = std::time::Instant::now();
        let mut splice = Splice::new(&have);
        let mut out = String::new();
        for i in 149_990..151_000 {
            out.extend(splice.push(&format!("w{i} ")));
        }
        out.extend(splice.flush());
        assert!(out.starts_with("w150000 "), "the repeated last words are cut: {:?}", &out[..20]);
        let repeated: String = (0..20_000).map(|i| format!("w{i} ")).collect();
        let mut restart = Splice::new(&have);
        let mut rest: String = repeated.split_inclusive(' ').filter_map(|word| restart.push(word)).collect();
        rest.extend(restart.flush());
        assert_eq!(rest, repeated, "a partial restart that stops short is new text");
        assert!(started.elapsed() < std::time::Duration::from_secs(5), "took {:?}", started.elapsed());
    }

    #[test]
    fn requests_carry_the_partial_answer() {
        let original = ChatRequest { messages: vec![Message::text(Role::User, "tell me")], ..ChatRequest::default() };
        let prefill = prefill_request(&original, "once upon");
        assert_eq!(prefill.messages.last(), Some(&Message::text(Role::Assistant, "once upon")));
        let instruction = instruction_request(&original, "once upon");
        let last = instruction.messages.last().map(|m| (m.role, m.joined_text()));
        assert!(matches!(last, Some((Role::User, text)) if text.ends_with("<partial>once upon</partial>")));
        assert_eq!(instruction.messages.len(), 2);
    }
}
