//! What one chaos request's answer was, checked word by word: a right answer
//! is every word `<nonce>.<provider>.<i>` of its own nonce, `i` from 0 to the
//! answer's length, each once, in order, one space apart.

use std::collections::BTreeMap;

use super::client::{Ask, Received, Response};

/// The simulated providers' markers: the only ones a right word may carry.
pub const MARKERS: [&str; 3] = ["openai", "anthropic", "gemini"];

/// The outcome of one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The whole answer and `[DONE]` (or a 200 JSON body with the whole answer).
    Answered,
    /// A JSON error with this status, before anything else was sent.
    ErrorBeforeCommit(u16),
    /// An SSE `data: {"error": …}` after some words, and no `[DONE]`.
    ErrorAfterCommit,
    /// No end within the hard deadline.
    Hung,
    /// A word that is not of this request's answer.
    Leaked,
    /// Presented as complete (`[DONE]`, or a 200 body) without the whole answer.
    TruncatedAsComplete,
    /// A word of the answer twice.
    Duplicated,
    /// The client went away mid-stream, on purpose.
    Disconnected,
    /// None of the clean endings above, and why.
    Unclean(String),
}

/// Judges what `ask` received; answers are `tokens` words long.
pub fn judge(ask: &Ask, received: &Received, tokens: usize) -> Verdict {
    match received {
        Received::Hung => Verdict::Hung,
        Received::NoResponse(why) => Verdict::Unclean(format!("no response: {}", short(why))),
        Received::Response(response) if response.status != 200 => error_before_commit(response),
        Received::Response(response) if ask.stream => streamed(ask, response, tokens),
        Received::Response(response) => whole(ask, response, tokens),
    }
}

fn error_before_commit(response: &Response) -> Verdict {
    let body: serde_json::Value = serde_json::from_slice(&response.body).unwrap_or_default();
    if body["error"].is_object() {
        Verdict::ErrorBeforeCommit(response.status)
    } else {
        Verdict::Unclean(format!("status {} without a JSON error", response.status))
    }
}

/// The events of a streamed answer, as a client assembles them.
#[derive(Default)]
struct Events {
    text: String,
    done: bool,
    error: bool,
    not_json: usize,
}

fn events(body: &[u8]) -> Events {
    let mut seen = Events::default();
    for block in String::from_utf8_lossy(body).split("\n\n") {
        let data: Vec<&str> = block
            .lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .map(|data| data.strip_prefix(' ').unwrap_or(data))
            .collect();
        if data.is_empty() {
            continue;
        }
        let data = data.join("\n");
        if data == "[DONE]" {
            seen.done = true;
            continue;
        }
        match serde_json::from_str::<serde_json::Value>(&data) {
            Ok(chunk) if chunk.get("error").is_some() => seen.error = true,
            Ok(chunk) => seen.text.push_str(chunk["choices"][0]["delta"]["content"].as_str().unwrap_or("")),
            Err(_) => seen.not_json += 1,
        }
    }
    seen
}

fn streamed(ask: &Ask, response: &Response, tokens: usize) -> Verdict {
    if !response.event_stream {
        return Verdict::Unclean("200 to a stream request, but not an event stream".to_owned());
    }
    let seen = events(&response.body);
    let complete = match words(&seen.text, &ask.nonce, tokens) {
        Words::Foreign => return Verdict::Leaked,
        Words::Repeated => return Verdict::Duplicated,
        Words::Complete => true,
        Words::Incomplete => false,
    };
    match (response.dropped, seen.done, seen.error) {
        (true, _, _) => Verdict::Disconnected,
        (false, true, true) => Verdict::Unclean("an error event and [DONE]".to_owned()),
        (false, true, false) if !complete => Verdict::TruncatedAsComplete,
        (false, true, false) if seen.not_json > 0 => Verdict::Unclean("an event that is not JSON".to_owned()),
        (false, true, false) => Verdict::Answered,
        (false, false, true) => Verdict::ErrorAfterCommit,
        (false, false, false) => match &response.broke {
            Some(why) => Verdict::Unclean(format!("the stream broke off: {}", short(why))),
            None => Verdict::Unclean("the stream ended without [DONE] or an error event".to_owned()),
        },
    }
}

fn whole(ask: &Ask, response: &Response, tokens: usize) -> Verdict {
    if let Some(why) = &response.broke {
        return Verdict::Unclean(format!("the body broke off: {}", short(why)));
    }
    let Ok(body) = serde_json::from_slice::<serde_json::Value>(&response.body) else {
        return Verdict::Unclean("200 without a JSON body".to_owned());
    };
    let Some(text) = body["choices"][0]["message"]["content"].as_str() else {
        return Verdict::Unclean("200 JSON without choices[0].message.content".to_owned());
    };
    match words(text, &ask.nonce, tokens) {
        Words::Foreign => Verdict::Leaked,
        Words::Repeated => Verdict::Duplicated,
        Words::Incomplete => Verdict::TruncatedAsComplete,
        Words::Complete => Verdict::Answered,
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Words {
    /// A word not of this nonce's answer.
    Foreign,
    /// A word of it twice.
    Repeated,
    /// Every word, in order, one space apart.
    Complete,
    /// Words of it, none twice, but not all or not in order.
    Incomplete,
}

fn words(text: &str, nonce: &str, tokens: usize) -> Words {
    let mut indices = Vec::new();
    for word in text.split_whitespace() {
        match own_index(word, nonce, tokens) {
            Some(index) => indices.push(index),
            None => return Words::Foreign,
        }
    }
    let mut sorted = indices.clone();
    sorted.sort_unstable();
    sorted.dedup();
    if sorted.len() != indices.len() {
        return Words::Repeated;
    }
    let in_order = indices.iter().copied().eq(0..tokens);
    let spaced = text.split(' ').count() == tokens && !text.starts_with(' ');
    if in_order && spaced { Words::Complete } else { Words::Incomplete }
}

/// The index of `word` if it is a word of `nonce`'s answer.
fn own_index(word: &str, nonce: &str, tokens: usize) -> Option<usize> {
    let mut parts = word.split('.');
    let (Some(n), Some(marker), Some(index), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
        return None;
    };
    let index: usize = index.parse().ok()?;
    (n == nonce && MARKERS.contains(&marker) && index < tokens).then_some(index)
}

fn short(why: &str) -> String {
    why.chars().take(120).collect()
}

/// Counts of verdicts over a run, with the detail the table and stderr show.
#[derive(Default)]
pub struct Tally {
    pub requests: usize,
    pub answered: usize,
    /// Clean errors before commit, by status.
    pub before_commit: BTreeMap<u16, usize>,
    pub after_commit: usize,
    pub hung: usize,
    pub leaked: usize,
    pub truncated: usize,
    pub duplicated: usize,
    pub disconnected: usize,
    /// Unclean endings, by reason.
    pub unclean: BTreeMap<String, usize>,
    /// The first body of each wrong kind, for the report on stderr.
    pub examples: BTreeMap<&'static str, String>,
}

impl Tally {
    pub fn add(&mut self, verdict: Verdict, received: &Received) {
        self.requests += 1;
        let wrong = match verdict {
            Verdict::Answered => return self.answered += 1,
            Verdict::ErrorBeforeCommit(status) => return *self.before_commit.entry(status).or_default() += 1,
            Verdict::ErrorAfterCommit => return self.after_commit += 1,
            Verdict::Disconnected => return self.disconnected += 1,
            Verdict::Unclean(why) => return *self.unclean.entry(why).or_default() += 1,
            Verdict::Hung => (&mut self.hung, "hung"),
            Verdict::Leaked => (&mut self.leaked, "leaked"),
            Verdict::TruncatedAsComplete => (&mut self.truncated, "truncated presented as complete"),
            Verdict::Duplicated => (&mut self.duplicated, "duplicated"),
        };
        *wrong.0 += 1;
        if let Received::Response(response) = received {
            let body: String = String::from_utf8_lossy(&response.body).chars().take(1500).collect();
            self.examples.entry(wrong.1).or_insert(body);
        }
    }

    pub fn clean_before_commit(&self) -> usize {
        self.before_commit.values().sum()
    }

    pub fn unclean_total(&self) -> usize {
        self.unclean.values().sum()
    }

    /// Hung, leaked, truncated-as-complete and duplicated answers together.
    pub fn wrong(&self) -> usize {
        self.hung + self.leaked + self.truncated + self.duplicated
    }
}
