//! The vocabulary every layer speaks: the normalised chat request that adapters
//! translate from, and the [`Event`] stream they translate into. Nothing here
//! knows a provider's wire format, so neither the core nor the HTTP layer has to.

use std::sync::Arc;

use serde_json::Value;

/// One unit of an answer, the same for every provider, so the core can apply
/// one deadline, one commit rule and one encoder whatever answered.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A fragment of answer text; adapters never emit an empty one.
    Text(String),
    /// A fragment of a tool call, keyed by `index` as OpenAI streams them.
    ToolCall(ToolCallDelta),
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
            Event::Usage(_) => false,
        }
    }

    /// How many bytes of answer this event carries (text, or a tool call's
    /// id, name and arguments), for the caps on what baton holds.
    pub fn answer_bytes(&self) -> usize {
        match self {
            Event::Text(text) => text.len(),
            Event::ToolCall(call) => {
                call.arguments.len()
                    + call.id.as_ref().map_or(0, String::len)
                    + call.name.as_ref().map_or(0, String::len)
            }
            Event::Usage(_) | Event::Finish(_) => 0,
        }
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
}

impl Usage {
    /// Folds a later report into this one: providers send running totals, so a
    /// newer count replaces an older one and a missing count keeps the old.
    pub fn merge(&mut self, later: Usage) {
        self.input_tokens = later.input_tokens.or(self.input_tokens);
        self.output_tokens = later.output_tokens.or(self.output_tokens);
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

/// Who said a message, reduced to what every provider can express.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Instructions; Anthropic and Gemini take them outside the message list.
    System,
    /// The person or application asking.
    User,
    /// A previous answer.
    Assistant,
}

/// One message of the conversation, as text.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    /// Who said it.
    pub role: Role,
    /// What was said.
    pub content: String,
}

/// A function the model may call, with its JSON Schema parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct Tool {
    /// The function name.
    pub name: String,
    /// What the function does, for the model.
    pub description: Option<String>,
    /// The JSON Schema of the arguments.
    pub parameters: Value,
}

/// The client's request with the dialect stripped away: what every adapter
/// translates into its provider's body. The upstream model comes from the route.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChatRequest {
    /// The conversation, in order.
    pub messages: Vec<Message>,
    /// The generation limit; adapters that require one supply a default.
    pub max_tokens: Option<u32>,
    /// Sampling temperature.
    pub temperature: Option<f64>,
    /// Nucleus sampling.
    pub top_p: Option<f64>,
    /// Stop sequences.
    pub stop: Vec<String>,
    /// Functions the model may call.
    pub tools: Vec<Tool>,
}

/// Output reserved against a token quota when the request sets no limit.
pub const DEFAULT_OUTPUT_RESERVE: u64 = 1024;

impl ChatRequest {
    /// Tokens this request may cost, for quotas before it is sent: its
    /// input estimated at four characters a token (one rule for every
    /// provider's tokenizer, within tens of percent for English; the
    /// reservation is settled to the usage the provider reports), plus its
    /// output limit, or [`DEFAULT_OUTPUT_RESERVE`].
    pub fn estimated_tokens(&self) -> u64 {
        self.estimated_input_tokens().saturating_add(self.output_reserve())
    }

    /// The input part of [`ChatRequest::estimated_tokens`], which a price
    /// charges at its own rate.
    pub fn estimated_input_tokens(&self) -> u64 {
        let chars: usize = self.messages.iter().map(|m| m.content.len()).sum::<usize>()
            + self.tools.iter().map(|t| t.name.len() + t.parameters.to_string().len()).sum::<usize>();
        u64::try_from(chars.div_ceil(4)).unwrap_or(u64::MAX)
    }

    /// The output part: the request's limit, or [`DEFAULT_OUTPUT_RESERVE`].
    pub fn output_reserve(&self) -> u64 {
        self.max_tokens.map_or(DEFAULT_OUTPUT_RESERVE, u64::from)
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
}
