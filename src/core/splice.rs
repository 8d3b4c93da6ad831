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
    let mut request = original.clone();
    request.messages.push(Message { role: Role::Assistant, content: partial.to_owned() });
    request
}

/// The original conversation with a final user message that carries the
/// partial answer and asks for the rest of it.
pub fn instruction_request(original: &ChatRequest, partial: &str) -> ChatRequest {
    let mut request = original.clone();
    let content = format!("{CONTINUE_INSTRUCTION}\n<partial>{partial}</partial>");
    request.messages.push(Message { role: Role::User, content });
    request
}

/// Joins a continuation to the text the client has: the start of the
/// continuation is held until it is clear how much of it repeats the end of
/// that text (a clean continuation, the last words again, or a restart from
/// the beginning), and only the new part is let through.
#[derive(Debug)]
pub struct Splice {
    have: String,
    held: String,
    decided: bool,
}

impl Splice {
    /// A splice onto `have`, the text the client already holds.
    pub fn new(have: &str) -> Self {
        Splice { have: have.to_owned(), held: String::new(), decided: have.is_empty() }
    }

    /// Takes the next fragment of the continuation; returns the text to send,
    /// if any can be sent yet.
    pub fn push(&mut self, fragment: &str) -> Option<String> {
        if self.decided {
            return Some(fragment.to_owned());
        }
        self.held.push_str(fragment);
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

    /// Positions in `have` where a repeat may begin: the start of a word, or
    /// the whitespace before one, so a repeat is never part of a word.
    fn repeat_starts(&self) -> impl Iterator<Item = usize> + '_ {
        let bytes = self.have.as_bytes();
        (0..bytes.len()).filter(move |&i| {
            self.have.is_char_boundary(i)
                && (i == 0 || bytes[i].is_ascii_whitespace() || bytes[i - 1].is_ascii_whitespace())
        })
    }

    /// Whether the held text is the start of a longer repeat that more
    /// fragments could complete.
    fn could_still_repeat_more(&self) -> bool {
        self.repeat_starts().any(|i| {
            let tail = &self.have[i..];
            tail.len() > self.held.len() && tail.starts_with(self.held.as_str())
        })
    }

    /// The longest end of `have` that the held text starts with.
    fn longest_repeat(&self) -> usize {
        self.repeat_starts()
            .map(|i| &self.have[i..])
            .filter(|tail| self.held.starts_with(tail))
            .map(str::len)
            .max()
            .unwrap_or(0)
    }
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
    fn requests_carry_the_partial_answer() {
        let original = ChatRequest {
            messages: vec![Message { role: Role::User, content: "tell me".into() }],
            ..ChatRequest::default()
        };
        let prefill = prefill_request(&original, "once upon");
        assert_eq!(prefill.messages.last(), Some(&Message { role: Role::Assistant, content: "once upon".into() }));
        let instruction = instruction_request(&original, "once upon");
        let last = instruction.messages.last().map(|m| (m.role, m.content.as_str()));
        assert!(matches!(last, Some((Role::User, text)) if text.ends_with("<partial>once upon</partial>")));
        assert_eq!(instruction.messages.len(), 2);
    }
}
