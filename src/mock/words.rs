//! The words of a simulated answer — `marker0 marker1 …`, or, with
//! [`MockProvider::nonce_words`], words that name the request they answer —
//! and where an answer starts when the request carries a partial one.

use std::collections::BTreeMap;

use super::{Continuation, MockProvider, RecordedRequest, wire};

/// What a provider writes for one request: first `replay` (words of the
/// partial answer repeated as they were written), then tokens `start..`.
pub(super) struct Words {
    prefix: String,
    pub start: usize,
    pub replay: Vec<String>,
}

impl Words {
    pub(super) fn for_request(provider: &MockProvider, request: &RecordedRequest) -> Self {
        let body = request.body.to_string();
        // A partial answer is in the conversation's last message (a prefill,
        // or a user message quoting it); an earlier turn's answer is not one.
        let last = last_message(&request.body);
        match nonce(&body).filter(|_| provider.nonce_words) {
            Some(nonce) => Self::naming(provider, &last, nonce),
            None => Words { prefix: provider.marker.clone(), start: marker_start(provider, &last), replay: Vec::new() },
        }
    }

    /// The words of a response no request asked for: `<nonce>.<label>.<i>`
    /// (`<label><i>` without a nonce), foreign to whichever request gets them.
    pub(super) fn stray(provider: &MockProvider, request: &RecordedRequest, label: &str) -> Self {
        let body = request.body.to_string();
        let prefix = match nonce(&body).filter(|_| provider.nonce_words) {
            Some(nonce) => format!("{nonce}.{label}."),
            None => label.to_owned(),
        };
        Words { prefix, start: 0, replay: Vec::new() }
    }

    /// Token `i` of this answer, with its leading space.
    pub(super) fn token(&self, i: usize) -> String {
        wire::token(&self.prefix, i)
    }

    /// The words of `nonce`, going on after those of it already in `body`.
    fn naming(provider: &MockProvider, body: &str, nonce: &str) -> Self {
        let said = said_words(body, nonce);
        let count = (0..).take_while(|i| said.contains_key(i)).count();
        let from = match provider.continuation {
            Continuation::Clean => count,
            Continuation::RepeatLast(words) => count.saturating_sub(words),
            Continuation::Restart => 0,
        };
        let replay = (from..count)
            .filter_map(|i| said.get(&i).map(|word| if i == 0 { word.clone() } else { format!(" {word}") }))
            .collect();
        Words { prefix: format!("{nonce}.{}.", provider.marker), start: count, replay }
    }
}

/// The last message of the conversation in `body`, as JSON: the last of
/// its `messages` (Chat Completions, Messages, Converse), `input`
/// (Responses) or `contents` (Gemini); the whole body when it has none.
fn last_message(body: &serde_json::Value) -> String {
    let last = ["messages", "input", "contents"].iter().find_map(|list| body.get(*list)?.as_array()?.last());
    last.unwrap_or(body).to_string()
}

/// The request's nonce: the letters and digits after the first `nonce=`.
fn nonce(body: &str) -> Option<&str> {
    let rest = &body[body.find("nonce=")? + "nonce=".len()..];
    let end = rest.find(|c: char| !c.is_ascii_alphanumeric()).unwrap_or(rest.len());
    (end > 0).then(|| &rest[..end])
}

/// Every word `<nonce>.<marker>.<i>` in `body`, by index (the first of each).
fn said_words(body: &str, nonce: &str) -> BTreeMap<usize, String> {
    let head = format!("{nonce}.");
    let mut said = BTreeMap::new();
    for (at, _) in body.match_indices(&head) {
        let rest = &body[at + head.len()..];
        let marker_len = rest.find(|c: char| !c.is_ascii_alphabetic()).unwrap_or(rest.len());
        let Some(digits) = rest[marker_len..].strip_prefix('.') else { continue };
        let digits_len = digits.find(|c: char| !c.is_ascii_digit()).unwrap_or(digits.len());
        let Ok(index) = digits[..digits_len].parse::<usize>() else { continue };
        let word_len = head.len() + marker_len + 1 + digits_len;
        said.entry(index).or_insert_with(|| body[at..at + word_len].to_owned());
    }
    said
}

/// Where an answer in marker words starts: at 0, or — when the request
/// carries a partial answer in this provider's marker words — where the
/// provider's [`Continuation`] says to go on from it.
fn marker_start(provider: &MockProvider, body: &str) -> usize {
    let said = (0..provider.tokens).take_while(|i| body.contains(&format!("{}{i}", provider.marker))).count();
    if said == 0 {
        return 0;
    }
    match provider.continuation {
        Continuation::Clean => said,
        Continuation::RepeatLast(words) => said.saturating_sub(words),
        Continuation::Restart => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(body: serde_json::Value) -> RecordedRequest {
        RecordedRequest { path: String::new(), headers: Default::default(), body, fault: None }
    }

    fn ask(text: &str) -> RecordedRequest {
        request(serde_json::json!({"messages": [{"role": "user", "content": text}]}))
    }

    #[test]
    fn words_name_the_nonce_and_the_provider() {
        let words = Words::for_request(&MockProvider::gemini().nonce_words(), &ask("go nonce=n42 now"));
        assert_eq!((words.start, words.replay.len()), (0, 0));
        assert_eq!(words.token(0) + &words.token(1), "n42.gemini.0 n42.gemini.1");
    }

    #[test]
    fn a_partial_answer_is_continued_whoever_wrote_it() {
        let partial = "go nonce=n42 <partial>n42.openai.0 n42.openai.1 n42.anthropic.2</partial>";
        let clean = Words::for_request(&MockProvider::gemini().nonce_words(), &ask(partial));
        assert_eq!((clean.start, clean.replay.len()), (3, 0));
        assert_eq!(clean.token(3), " n42.gemini.3");
        let provider = MockProvider::gemini().nonce_words().continuation(Continuation::RepeatLast(2));
        let repeats = Words::for_request(&provider, &ask(partial));
        assert_eq!(repeats.replay, [" n42.openai.1", " n42.anthropic.2"], "repeated as written");
        let restarts = Words::for_request(&provider.continuation(Continuation::Restart), &ask(partial));
        assert_eq!(restarts.replay.concat(), "n42.openai.0 n42.openai.1 n42.anthropic.2");
        assert_eq!(restarts.start, 3);
    }

    #[test]
    fn an_earlier_turns_answer_is_not_a_partial_one() {
        let earlier = serde_json::json!({ "messages": [
            { "role": "user", "content": "hi" },
            { "role": "assistant", "content": "openai0 openai1" },
            { "role": "user", "content": "and then?" },
        ] });
        assert_eq!(Words::for_request(&MockProvider::openai(), &request(earlier)).start, 0, "a new answer");
        let prefilled = serde_json::json!({ "input": [
            { "role": "user", "content": "hi" },
            { "role": "assistant", "content": "openai0 openai1" },
        ] });
        assert_eq!(Words::for_request(&MockProvider::openai(), &request(prefilled)).start, 2, "continued");
    }

    #[test]
    fn other_nonces_and_plain_providers_keep_marker_words() {
        let other = Words::for_request(&MockProvider::openai().nonce_words(), &ask("nonce=n7 n42.openai.0"));
        assert_eq!(other.start, 0, "words of another nonce are not continued");
        let plain = Words::for_request(&MockProvider::openai(), &ask("nonce=n7"));
        assert_eq!(plain.token(1), " openai1", "without nonce_words, marker words as before");
    }
}
