//! The normalised chat request: a whole conversation — text and image
//! parts, the assistant's tool calls and their results — with the
//! generation settings every provider has an equivalent for. A dialect
//! parses its wire format into it and each adapter translates it into its
//! provider's body; a field an adapter cannot honour is named by
//! [`crate::providers::Adapter::unsupported`], never dropped silently.
//!
//! It speaks no dialect: the settings every dialect has are typed, what a
//! dialect carries that baton does not translate is kept tagged with the
//! dialect it came in ([`ChatRequest::dialect`]), and a refusal names a
//! field in the client's own words ([`ChatRequest::field`]).

use bytes::Bytes;
use serde_json::{Map, Value};

/// The client wire format a request came in: what its untranslated fields
/// and parts mean, and which upstream API can take its body as sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClientDialect {
    /// OpenAI Chat Completions.
    #[default]
    ChatCompletions,
    /// Anthropic Messages.
    Messages,
    /// OpenAI Responses.
    Responses,
}

/// A setting every dialect has, under the dialect's own name for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setting {
    /// The output limit.
    MaxTokens,
    /// Sampling temperature.
    Temperature,
    /// Nucleus sampling.
    TopP,
    /// Top-k sampling.
    TopK,
    /// Stop sequences.
    Stop,
    /// The end user, for the provider's abuse monitoring.
    User,
    /// Which tool must be called.
    ToolChoice,
    /// Whether tool calls may come several at once.
    ParallelToolCalls,
    /// The form of the answer.
    ResponseFormat,
    /// How hard a reasoning model thinks.
    ReasoningEffort,
    /// How many tokens a reasoning model may think for.
    ThinkingBudget,
}

impl Setting {
    /// Every setting, for mapping a client's word back to it.
    pub const ALL: [Setting; 11] = [
        Setting::MaxTokens,
        Setting::Temperature,
        Setting::TopP,
        Setting::TopK,
        Setting::Stop,
        Setting::User,
        Setting::ToolChoice,
        Setting::ParallelToolCalls,
        Setting::ResponseFormat,
        Setting::ReasoningEffort,
        Setting::ThinkingBudget,
    ];
}

impl ClientDialect {
    /// The dialect's name for `setting`, as its clients write it.
    pub fn word(self, setting: Setting) -> &'static str {
        match (self, setting) {
            (ClientDialect::Messages, Setting::Stop) => "stop_sequences",
            (ClientDialect::Messages, Setting::User) => "metadata.user_id",
            (ClientDialect::Messages, Setting::ParallelToolCalls) => "tool_choice.disable_parallel_tool_use",
            (ClientDialect::Messages, Setting::ResponseFormat) => "output_config.format",
            (ClientDialect::Messages, Setting::ReasoningEffort) => "output_config.effort",
            (ClientDialect::Responses, Setting::MaxTokens) => "max_output_tokens",
            (ClientDialect::Responses, Setting::ResponseFormat) => "text.format",
            (ClientDialect::Responses, Setting::ReasoningEffort) => "reasoning.effort",
            (_, Setting::ThinkingBudget) => "thinking",
            (_, Setting::MaxTokens) => "max_tokens",
            (_, Setting::Temperature) => "temperature",
            (_, Setting::TopP) => "top_p",
            (_, Setting::TopK) => "top_k",
            (_, Setting::Stop) => "stop",
            (_, Setting::User) => "user",
            (_, Setting::ToolChoice) => "tool_choice",
            (_, Setting::ParallelToolCalls) => "parallel_tool_calls",
            (_, Setting::ResponseFormat) => "response_format",
            (_, Setting::ReasoningEffort) => "reasoning_effort",
        }
    }
}

/// Whether a client asked to see the model's reasoning, and from whom.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReasoningShown {
    /// Not asked for.
    #[default]
    No,
    /// From any provider (a Responses reasoning summary is text).
    FromAny,
    /// Only from a target of the client's own API: Anthropic wants its
    /// thinking back with its own signature, which no other provider writes.
    FromOwnApi,
}

/// The client's body as it came, for a target whose API is the client's
/// dialect: it goes upstream as sent, with only `model` and `stream` set, so
/// nothing is lost between two speakers of one API.
#[derive(Debug, Clone, PartialEq)]
pub struct Native {
    /// The request body, as the client sent it.
    pub body: Bytes,
    /// The headers that belong to the API (`anthropic-version`,
    /// `anthropic-beta`), as the client sent them.
    pub headers: Vec<(http::HeaderName, http::HeaderValue)>,
}

impl Native {
    /// `body` as sent, with those of the client's `headers` that `api` names.
    pub fn new(body: Bytes, headers: &http::HeaderMap, api: &[&str]) -> Box<Self> {
        let headers = headers
            .iter()
            .filter(|(name, _)| api.contains(&name.as_str()))
            .map(|(name, value)| (name.clone(), value.clone()))
            .collect();
        Box::new(Native { body, headers })
    }
}

/// Who said a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Instructions; Anthropic and Gemini take them outside the message list.
    System,
    /// The person or application asking.
    User,
    /// A previous answer, possibly with tool calls.
    Assistant,
    /// The result of one of the assistant's tool calls.
    Tool,
}

/// One message of the conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    /// Who said it.
    pub role: Role,
    /// What was said, in order: text and images.
    pub content: Vec<Part>,
    /// An assistant's calls to the request's tools.
    pub tool_calls: Vec<ToolCall>,
    /// The call a `Tool` message answers.
    pub tool_call_id: Option<String>,
    /// A participant's name (OpenAI's `name`).
    pub name: Option<String>,
    /// Fields of the message baton does not translate, passed through
    /// verbatim where the provider speaks the client's dialect.
    pub extra: Map<String, Value>,
}

impl Message {
    /// A message of plain text, as most of a conversation is.
    pub fn text(role: Role, text: impl Into<String>) -> Self {
        Message {
            role,
            content: vec![Part::Text { text: text.into(), cache: None }],
            tool_calls: Vec::new(),
            tool_call_id: None,
            name: None,
            extra: Map::new(),
        }
    }

    /// The message's text parts joined, for providers (and estimates) that
    /// take text only.
    pub fn joined_text(&self) -> String {
        let mut out = String::new();
        for part in &self.content {
            if let Part::Text { text, .. } = part {
                out.push_str(text);
            }
        }
        out
    }
}

/// One part of a message's content.
#[derive(Debug, Clone, PartialEq)]
pub enum Part {
    /// Text, with the client's cache hint if it gave one.
    Text {
        /// The text.
        text: String,
        /// Anthropic-style `cache_control`, kept where a provider accepts it.
        cache: Option<Value>,
    },
    /// An image, by URL or as a `data:` URL.
    Image(Image),
    /// The model's earlier reasoning, with the provider's signature that
    /// lets it be sent back (Anthropic's `thinking` block).
    Thinking {
        /// The reasoning text.
        text: String,
        /// The provider's signature over it.
        signature: Option<String>,
    },
    /// Reasoning the provider gave only in encrypted form (Anthropic's
    /// `redacted_thinking`).
    RedactedThinking(String),
    /// A part of a type baton does not translate (audio, a file), as the
    /// client sent it in the request's dialect: passed through only to a
    /// target of that dialect.
    Other(Value),
}

impl Part {
    /// Whether this is the model's own earlier reasoning: a target of
    /// another provider cannot check its signature, and every provider
    /// leaves earlier turns' reasoning out of the context anyway, so a
    /// translated conversation goes without it.
    pub fn is_reasoning(&self) -> bool {
        matches!(self, Part::Thinking { .. } | Part::RedactedThinking(_))
    }
}

/// An image the client sent.
#[derive(Debug, Clone, PartialEq)]
pub struct Image {
    /// An `https:` URL, or a `data:<media type>;base64,<data>` URL.
    pub url: String,
    /// OpenAI's `detail` (`low`, `high`, `auto`).
    pub detail: Option<String>,
    /// Anthropic-style `cache_control`.
    pub cache: Option<Value>,
}

/// An image carried inside the request, split out of its `data:` URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InlineImage<'a> {
    /// The media type, such as `image/png`.
    pub media_type: &'a str,
    /// The base64 data.
    pub data: &'a str,
}

impl Image {
    /// The image's bytes when it is a base64 `data:` URL, for providers that
    /// take images inline; `None` for a URL to fetch.
    pub fn inline(&self) -> Option<InlineImage<'_>> {
        let rest = self.url.strip_prefix("data:")?;
        let (meta, data) = rest.split_once(',')?;
        let media_type = meta.strip_suffix(";base64")?;
        Some(InlineImage { media_type, data })
    }
}

/// A tool call the assistant made earlier in the conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// The call's id, which its result refers to.
    pub id: String,
    /// The function called.
    pub name: String,
    /// The JSON-encoded arguments, as the model wrote them.
    pub arguments: String,
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
    /// OpenAI's `strict` (arguments held exactly to the schema).
    pub strict: Option<bool>,
    /// Anthropic-style `cache_control`.
    pub cache: Option<Value>,
}

/// Whether, and which, tools the model must call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolChoice {
    /// The model decides.
    Auto,
    /// No tool may be called.
    None,
    /// Some tool must be called.
    Required,
    /// This function must be called.
    Function(String),
}

/// The form the answer must take.
#[derive(Debug, Clone, PartialEq)]
pub enum ResponseFormat {
    /// Prose, the default.
    Text,
    /// Any JSON object.
    JsonObject,
    /// JSON valid for a schema.
    JsonSchema(JsonSchema),
}

/// A named JSON Schema the answer must follow.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonSchema {
    /// The schema's name.
    pub name: String,
    /// What the answer is, for the model.
    pub description: Option<String>,
    /// The schema itself.
    pub schema: Value,
    /// OpenAI's `strict`.
    pub strict: Option<bool>,
}

/// Which field the client set its output limit in: OpenAI's reasoning
/// models refuse the legacy `max_tokens`, so an OpenAI-kind target gets the
/// one the client sent (and a client of another dialect the current one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LimitField {
    /// `max_tokens`.
    #[default]
    MaxTokens,
    /// `max_completion_tokens`.
    MaxCompletionTokens,
}

/// The client's request with the dialect stripped away: what every adapter
/// translates into its provider's body. The upstream model comes from the route.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChatRequest {
    /// The conversation, in order.
    pub messages: Vec<Message>,
    /// The generation limit; adapters that require one supply a default.
    pub max_tokens: Option<u32>,
    /// The field the limit came in.
    pub limit_field: LimitField,
    /// Sampling temperature.
    pub temperature: Option<f64>,
    /// Nucleus sampling.
    pub top_p: Option<f64>,
    /// Stop sequences.
    pub stop: Vec<String>,
    /// Functions the model may call.
    pub tools: Vec<Tool>,
    /// Whether and which tool must be called.
    pub tool_choice: Option<ToolChoice>,
    /// Whether several tool calls may come in one answer.
    pub parallel_tool_calls: Option<bool>,
    /// The form of the answer.
    pub response_format: Option<ResponseFormat>,
    /// How hard a reasoning model thinks (`minimal`, `low`, `medium`, `high`).
    pub reasoning_effort: Option<String>,
    /// How many tokens a reasoning model may think for (Anthropic's
    /// `thinking.budget_tokens`).
    pub thinking_budget: Option<u32>,
    /// Top-k sampling.
    pub top_k: Option<u32>,
    /// The end user, for the provider's abuse monitoring.
    pub user: Option<String>,
    /// What the provider's prompt cache may group requests by (OpenAI's
    /// `prompt_cache_key`): a hint that asks nothing of the answer, which a
    /// target without such a cache honours by leaving it out.
    pub cache_key: Option<String>,
    /// The dialect the request came in, which its `extra` fields, its
    /// messages' and its [`Part::Other`] parts are written in.
    pub dialect: ClientDialect,
    /// Whether the client's dialect has a place for reasoning and the
    /// client asked for it (Anthropic's `thinking`, a Responses reasoning
    /// summary): then it is streamed to the client whatever the route's
    /// `stream_reasoning`.
    pub shows_reasoning: ReasoningShown,
    /// The body as sent, for a target that speaks the client's dialect.
    pub native: Option<Box<Native>>,
    /// Every top-level field baton does not translate (by name; JSON
    /// objects have no order): passed through verbatim to targets of the client's dialect,
    /// translated where another has an equivalent, refused by name otherwise.
    pub extra: Map<String, Value>,
}

/// A field of a request that a target cannot honour, named as the client
/// wrote it, so the skip, the 400 and `x-baton-dropped-params` can say
/// which, and `unsupported_params = "drop"` can take it out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Field {
    /// A top-level field, by name.
    Top(String),
    /// A field of message `.0`, by name.
    Message(usize, String),
    /// Content part `.1` of message `.0`, and what it is.
    Part(usize, usize, &'static str),
    /// Top-level field `.0`, which the target cannot honour together with
    /// field `.1`; dropping it takes out `.0` only.
    Together(String, String),
}

impl Field {
    /// A top-level field.
    pub fn top(name: &str) -> Self {
        Field::Top(name.to_owned())
    }

    /// A field of message `index`.
    pub fn message(index: usize, name: &str) -> Self {
        Field::Message(index, name.to_owned())
    }
}

impl std::fmt::Display for Field {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Field::Top(name) => f.write_str(name),
            Field::Message(i, name) => write!(f, "messages[{i}].{name}"),
            Field::Part(i, j, what) => write!(f, "messages[{i}].content[{j}] ({what})"),
            Field::Together(name, with) => write!(f, "{name} (together with {with})"),
        }
    }
}

/// Output reserved against a token quota when the request sets no limit.
pub const DEFAULT_OUTPUT_RESERVE: u64 = 1024;

impl ChatRequest {
    /// Whether any part, image or tool carries an Anthropic-style cache
    /// hint, which a provider that caches by itself does not take.
    pub fn has_cache_hints(&self) -> bool {
        let part_hint = |part: &Part| match part {
            Part::Text { cache, .. } | Part::Image(Image { cache, .. }) => cache.is_some(),
            Part::Thinking { .. } | Part::RedactedThinking(_) | Part::Other(_) => false,
        };
        self.tools.iter().any(|tool| tool.cache.is_some())
            || self.messages.iter().any(|message| message.content.iter().any(part_hint))
    }

    /// The body as sent, when the target's API is `dialect`: what the
    /// same-dialect path sends.
    pub fn native_in(&self, dialect: ClientDialect) -> Option<&Native> {
        self.native.as_deref().filter(|_| self.dialect == dialect)
    }

    /// The untranslated top-level fields, when a target speaks `dialect`
    /// and so can take them as they are; `None` for a target of another.
    pub fn extra_in(&self, dialect: ClientDialect) -> Option<&Map<String, Value>> {
        (self.dialect == dialect).then_some(&self.extra)
    }

    /// Whether the client sees the reasoning of a target whose native API
    /// is `target` (`None`: a kind that speaks no client dialect).
    pub fn shows_reasoning_from(&self, target: Option<ClientDialect>) -> bool {
        match self.shows_reasoning {
            ReasoningShown::No => false,
            ReasoningShown::FromAny => true,
            ReasoningShown::FromOwnApi => target == Some(self.dialect),
        }
    }

    /// `setting`, named as the client wrote it, for a refusal.
    pub fn field(&self, setting: Setting) -> Field {
        Field::Top(self.dialect.word(setting).to_owned())
    }

    /// Tokens this request may cost, for quotas before it is sent: its
    /// input estimated at four characters a token (one rule for every
    /// provider's tokenizer, within tens of percent for English; the
    /// reservation is settled to the usage the provider reports), plus its
    /// output limit, or [`DEFAULT_OUTPUT_RESERVE`]. An image counts as the
    /// length of its URL or data, an overestimate that errs on the safe side.
    pub fn estimated_tokens(&self) -> u64 {
        self.estimated_input_tokens().saturating_add(self.output_reserve())
    }

    /// The input part of [`ChatRequest::estimated_tokens`], which a price
    /// charges at its own rate.
    pub fn estimated_input_tokens(&self) -> u64 {
        let chars: usize = self.messages.iter().map(Message::estimated_chars).sum::<usize>()
            + self.tools.iter().map(|t| t.name.len() + t.parameters.to_string().len()).sum::<usize>();
        u64::try_from(chars.div_ceil(4)).unwrap_or(u64::MAX)
    }

    /// The output part: the request's limit, or [`DEFAULT_OUTPUT_RESERVE`].
    pub fn output_reserve(&self) -> u64 {
        self.max_tokens.map_or(DEFAULT_OUTPUT_RESERVE, u64::from)
    }
}

impl ChatRequest {
    /// This request without `fields`, for a route that drops what a target
    /// cannot honour rather than skip the target.
    pub fn without(&self, fields: &[Field]) -> ChatRequest {
        let mut out = self.clone();
        // What goes upstream is now baton's rewrite, not the body as sent.
        if !fields.is_empty() {
            out.native = None;
        }
        let mut parts: Vec<(usize, usize)> = Vec::new();
        for field in fields {
            match field {
                Field::Top(name) | Field::Together(name, _) => out.drop_top(name),
                Field::Message(i, name) => {
                    if let Some(message) = out.messages.get_mut(*i) {
                        match name.as_str() {
                            "name" => message.name = None,
                            other => {
                                message.extra.remove(other);
                            }
                        }
                    }
                }
                Field::Part(i, j, _) => parts.push((*i, *j)),
            }
        }
        // Later parts first, so each index still points at its part.
        parts.sort_unstable_by(|a, b| b.cmp(a));
        for (i, j) in parts {
            if let Some(message) = out.messages.get_mut(i)
                && j < message.content.len()
            {
                message.content.remove(j);
            }
        }
        out
    }
}

impl ChatRequest {
    /// Takes out top-level field `name`, translated or passed through.
    fn drop_top(&mut self, name: &str) {
        let setting = Setting::ALL.into_iter().find(|setting| self.dialect.word(*setting) == name);
        match setting {
            Some(Setting::Temperature) => self.temperature = None,
            Some(Setting::TopP) => self.top_p = None,
            Some(Setting::TopK) => self.top_k = None,
            Some(Setting::User) => self.user = None,
            Some(Setting::ToolChoice) => self.tool_choice = None,
            Some(Setting::ParallelToolCalls) => self.parallel_tool_calls = None,
            Some(Setting::ResponseFormat) => self.response_format = None,
            Some(Setting::ReasoningEffort) => self.reasoning_effort = None,
            Some(Setting::ThinkingBudget) => self.thinking_budget = None,
            Some(Setting::MaxTokens | Setting::Stop) | None => {}
        }
        // A setting's name may also hold what of it baton does not translate.
        self.extra.remove(name);
    }
}

impl Message {
    fn estimated_chars(&self) -> usize {
        let parts: usize = self
            .content
            .iter()
            .map(|part| match part {
                Part::Text { text, .. } => text.len(),
                Part::Image(image) => image.url.len(),
                Part::Thinking { text, .. } | Part::RedactedThinking(text) => text.len(),
                Part::Other(value) => value.to_string().len(),
            })
            .sum();
        parts + self.tool_calls.iter().map(|call| call.name.len() + call.arguments.len()).sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_data_url_splits_into_media_type_and_data() {
        let image = Image { url: "data:image/png;base64,iVBORw0KGgo=".into(), detail: None, cache: None };
        assert_eq!(image.inline(), Some(InlineImage { media_type: "image/png", data: "iVBORw0KGgo=" }));
        let remote = Image { url: "https://example.com/cat.png".into(), detail: None, cache: None };
        assert_eq!(remote.inline(), None);
        let not_base64 = Image { url: "data:text/plain,hello".into(), detail: None, cache: None };
        assert_eq!(not_base64.inline(), None);
    }

    #[test]
    fn dropping_fields_takes_out_exactly_those() {
        let mut user = Message::text(Role::User, "look");
        user.content.push(Part::Other(serde_json::json!({ "type": "input_audio" })));
        user.content.push(Part::Image(Image { url: "https://x/y.png".into(), detail: None, cache: None }));
        user.name = Some("ann".into());
        let mut req = ChatRequest { messages: vec![user], parallel_tool_calls: Some(false), ..ChatRequest::default() };
        req.extra.insert("seed".into(), serde_json::json!(7));
        req.extra.insert("user".into(), serde_json::json!("u1"));
        let fields = [
            Field::top("seed"),
            Field::top("parallel_tool_calls"),
            Field::message(0, "name"),
            Field::Part(0, 1, "audio"),
            Field::Part(0, 2, "an image by URL"),
        ];
        let dropped = req.without(&fields);
        assert_eq!(dropped.messages[0].content, vec![Part::Text { text: "look".into(), cache: None }]);
        assert_eq!(dropped.messages[0].name, None);
        assert_eq!(dropped.parallel_tool_calls, None);
        assert_eq!(dropped.extra.keys().collect::<Vec<_>>(), ["user"]);
        assert_eq!(fields[4].to_string(), "messages[0].content[2] (an image by URL)");
    }

    #[test]
    fn a_field_named_with_its_conflict_drops_only_itself() {
        let req = ChatRequest {
            temperature: Some(0.2),
            top_p: Some(0.5),
            reasoning_effort: Some("high".into()),
            ..ChatRequest::default()
        };
        let field = Field::Together("reasoning_effort".into(), "temperature".into());
        assert_eq!(field.to_string(), "reasoning_effort (together with temperature)");
        let dropped = req.without(&[field]);
        assert_eq!((dropped.reasoning_effort, dropped.temperature), (None, Some(0.2)));
        let dropped = req.without(&[Field::top("temperature"), Field::top("top_p")]);
        assert_eq!((dropped.temperature, dropped.top_p), (None, None));
    }

    #[test]
    fn the_estimate_counts_text_tool_calls_and_the_output_reserve() {
        let mut call = Message::text(Role::Assistant, "");
        call.tool_calls.push(ToolCall { id: "c1".into(), name: "abcd".into(), arguments: "{}".into() });
        let req = ChatRequest { messages: vec![Message::text(Role::User, "12345678"), call], ..ChatRequest::default() };
        assert_eq!(req.estimated_tokens(), 2 + 2 + DEFAULT_OUTPUT_RESERVE);
    }
}
