//! The vocabulary every layer speaks: the normalised chat request that adapters
//! translate from, and the [`Event`] stream they translate into. Nothing here
//! knows a provider's wire format, so neither the core nor the HTTP layer has to.

use std::sync::Arc;

pub use crate::request::{ChatRequest, DEFAULT_OUTPUT_RESERVE, Message, Role, Tool};

/// One unit of an answer, the same for every provider, so the core can apply
/// one deadline, one commit rule and one encoder whatever answered.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A fragment of answer text; adapters never emit an empty one.
    Text(String),
    /// A fragment of a tool call, keyed by `index` as OpenAI streams them.
    ToolCall(ToolCallDelta),
    /// A fragment of the model's reasoning (Anthropic's thinking, Gemini's
    /// thoughts): never answer text, and no first token unless the route
    /// streams reasoning to the client.
    Reasoning(String),
    /// The provider's signature over the reasoning so far (Anthropic's
    /// `signature_delta`), which lets a client send that reasoning back on
    /// its next turn; it travels, and commits nothing, with the reasoning.
    Signature(String),
    /// The log probabilities of the answer tokens that follow, which a
    /// client asked for: sent just before the text they belong to, so an
    /// encoder can write them on that text's chunk.
    Logprobs(Logprobs),
    /// Token counts so far; later values replace earlier ones.
    Usage(Usage),
    /// The provider said the answer is over, and why.
    Finish(FinishReason),
}

impl Event {
    /// Whether this event makes an attempt commit: the first token, or the end
    /// of a legitimately empty answer. Usage alone never commits.
    pub fn is_content(&self) -> bool {
        match self {
            Event::Text(text) => !text.is_empty(),
            Event::ToolCall(_) | Event::Finish(_) => true,
            Event::Usage(_) | Event::Reasoning(_) | Event::Signature(_) | Event::Logprobs(_) => false,
        }
    }

    /// Whether this event is part of the model's reasoning, which a client
    /// sees only when it or its route asks for it.
    pub fn is_reasoning(&self) -> bool {
        matches!(self, Event::Reasoning(_) | Event::Signature(_))
    }

    /// How many bytes of answer this event carries (text, or a tool call's
    /// id, name and arguments), for the caps on what baton holds.
    pub fn answer_bytes(&self) -> usize {
        match self {
            Event::Text(text) | Event::Reasoning(text) | Event::Signature(text) => text.len(),
            Event::ToolCall(call) => {
                call.arguments.len()
                    + call.id.as_ref().map_or(0, String::len)
                    + call.name.as_ref().map_or(0, String::len)
            }
            Event::Logprobs(logprobs) => logprobs.json().len(),
            Event::Usage(_) | Event::Finish(_) => 0,
        }
    }
}

/// A list of per-token log probabilities as the provider wrote it (entries
/// of `token`, `logprob`, `top_logprobs`), kept as raw JSON: baton reads
/// nothing in it, only carries it to the client.
#[derive(Debug, Clone)]
pub struct Logprobs(Box<serde_json::value::RawValue>);

impl Logprobs {
    /// The list, when `raw` holds a non-empty JSON array; `null` and `[]`
    /// carry nothing.
    pub fn from_list(raw: Box<serde_json::value::RawValue>) -> Option<Self> {
        let text = raw.get().trim();
        (text.starts_with('[') && text[1..].trim_start() != "]").then_some(Logprobs(raw))
    }

    /// The JSON array.
    pub fn json(&self) -> &str {
        self.0.get()
    }

    /// The JSON array, to serialise in place.
    pub fn raw(&self) -> &serde_json::value::RawValue {
        &self.0
    }
}

impl PartialEq for Logprobs {
    fn eq(&self, other: &Self) -> bool {
        self.json() == other.json()
    }
}

/// A streamed piece of a tool call: the first piece for an `index` carries the
/// id and name, later ones carry argument fragments.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ToolCallDelta {
    /// Position of the call among the answer's tool calls.
    pub index: u32,
    /// The provider's call id, on the first delta of a call.
    pub id: Option<String>,
    /// The function name, on the first delta of a call.
    pub name: Option<String>,
    /// A fragment of the JSON-encoded arguments.
    pub arguments: String,
}

/// Token counts as the provider reported them, for the client and for budgets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    /// Tokens of the prompt.
    pub input_tokens: Option<u64>,
    /// Tokens generated so far.
    pub output_tokens: Option<u64>,
    /// Of the prompt's tokens, those read from the provider's cache.
    pub cached_input_tokens: Option<u64>,
    /// Of the generated tokens, those spent reasoning.
    pub reasoning_tokens: Option<u64>,
}

impl Usage {
    /// Input and output tokens together, when the provider reported either:
    /// what a token limit's reservation is settled to.
    pub fn reported_tokens(&self) -> Option<u64> {
        (self.input_tokens.is_some() || self.output_tokens.is_some())
            .then(|| self.input_tokens.unwrap_or(0).saturating_add(self.output_tokens.unwrap_or(0)))
    }

    /// Folds a later report into this one: providers send running totals, so a
    /// newer count replaces an older one and a missing count keeps the old.
    pub fn merge(&mut self, later: Usage) {
        self.input_tokens = later.input_tokens.or(self.input_tokens);
        self.output_tokens = later.output_tokens.or(self.output_tokens);
        self.cached_input_tokens = later.cached_input_tokens.or(self.cached_input_tokens);
        self.reasoning_tokens = later.reasoning_tokens.or(self.reasoning_tokens);
    }

    /// The counts of two attempts together (a resumed answer's), saturating
    /// rather than wrapping on a provider's absurd numbers.
    pub fn plus(self, other: Usage) -> Usage {
        let add = |x: Option<u64>, y: Option<u64>| match (x, y) {
            (None, None) => None,
            (x, y) => Some(x.unwrap_or(0).saturating_add(y.unwrap_or(0))),
        };
        Usage {
            input_tokens: add(self.input_tokens, other.input_tokens),
            output_tokens: add(self.output_tokens, other.output_tokens),
            cached_input_tokens: add(self.cached_input_tokens, other.cached_input_tokens),
            reasoning_tokens: add(self.reasoning_tokens, other.reasoning_tokens),
        }
    }
}

/// Why an answer ended, in OpenAI's vocabulary since that is the client dialect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinishReason {
    /// A natural end or a stop sequence.
    Stop,
    /// The token limit was reached.
    Length,
    /// The model asked for tool calls.
    ToolCalls,
    /// A safety filter ended the answer.
    ContentFilter,
}

impl FinishReason {
    /// The OpenAI wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
            FinishReason::ToolCalls => "tool_calls",
            FinishReason::ContentFilter => "content_filter",
        }
    }
}

/// Who answered a request, and after how many attempts: what the response
/// headers, the request record and resume need to know of the winner.
#[derive(Debug, Clone)]
pub struct Winner {
    /// The provider's configured name.
    pub provider: Arc<str>,
    /// The upstream model that answered.
    pub model: String,
    /// Requests sent, the winner's included (skipped candidates are not counted).
    pub attempts: u32,
    /// The winner's position among the route's targets.
    pub target: usize,
    /// Request fields the winner was sent without (`unsupported_params = "drop"`).
    pub dropped: Vec<String>,
    /// The attempts before the winner's, failed or passed over, in order
    /// (empty, and free, when the first attempt won).
    pub tried: Vec<Tried>,
}

/// One attempt that did not answer, as the request log keeps it: which
/// target, and the failure class, never the provider's own words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tried {
    /// The provider's configured name.
    pub provider: String,
    /// The upstream model.
    pub model: String,
    /// The failure class (`http_5xx`, `first_token_timeout`, `breaker_open`...).
    pub class: &'static str,
    /// Whether a request was sent (a candidate passed over was not).
    pub sent: bool,
}
