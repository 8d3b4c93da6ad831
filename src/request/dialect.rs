//! Which client wire format a request came in, and what that decides: the
//! dialect's own name for each setting, whether the client sees reasoning,
//! and the body as sent for a target of the same API.

use bytes::Bytes;

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
    /// Google's Gemini API (`generateContent`).
    Gemini,
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

/// The untranslated fields of each dialect a target that cannot honour
/// them may go without by default (`unsupported_params = "drop_safe"`),
/// because they ask nothing of the answer: the model is asked the same
/// thing with the same tools to answer it. docs/dialects.md says why each
/// is safe.
const SAFE_TO_DROP: [(ClientDialect, &str); 2] = [
    // Claude Code's instruction to clear old thinking or tool results
    // server-side as the context grows: without it the model sees the
    // whole conversation.
    (ClientDialect::Messages, "context_management"),
    // What of `thinking` has no translation once its budget has one:
    // `display` (whether thinking text comes back; only Anthropic's own
    // thinking can go back to an Anthropic client, so another target's
    // never does), or `adaptive` thinking, which leaves the depth to the
    // model, as the target's own default does.
    (ClientDialect::Messages, "thinking"),
];

/// The client API's own tools a target of another API may go without by
/// default: Codex's `namespace` tool groups its sub-agent functions
/// (spawn, message, wait for an agent), an option Codex itself runs
/// without (`--disable multi_agent`); the task and every other tool stay.
const SAFE_TO_DROP_TOOLS: [(ClientDialect, &str); 1] = [(ClientDialect::Responses, "namespace")];

impl ClientDialect {
    /// Whether a target that cannot honour `field` may go without it by
    /// default, because it asks nothing of the answer.
    pub fn safe_to_drop(self, field: &super::Field) -> bool {
        match field {
            // The end user, for the provider's abuse monitoring: nothing the
            // model sees. A top-k cut where the target's API has none (the
            // Gemini CLI sends 64): the model is asked the same thing and
            // samples as `temperature` and `top_p` allow.
            super::Field::Top(name) | super::Field::Untranslated(name)
                if name == self.word(Setting::User) || name == self.word(Setting::TopK) =>
            {
                true
            }
            // Only what is untranslated: `thinking`'s translated budget is not among them.
            super::Field::Untranslated(name) => SAFE_TO_DROP.contains(&(self, name.as_str())),
            super::Field::Top(_) => false,
            super::Field::Tool { kind, .. } => SAFE_TO_DROP_TOOLS.contains(&(self, kind.as_str())),
            super::Field::Message(..) | super::Field::Part(..) | super::Field::Together(..) => false,
        }
    }

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
            (ClientDialect::Gemini, Setting::MaxTokens) => "generationConfig.maxOutputTokens",
            (ClientDialect::Gemini, Setting::Temperature) => "generationConfig.temperature",
            (ClientDialect::Gemini, Setting::TopP) => "generationConfig.topP",
            (ClientDialect::Gemini, Setting::TopK) => "generationConfig.topK",
            (ClientDialect::Gemini, Setting::Stop) => "generationConfig.stopSequences",
            (ClientDialect::Gemini, Setting::ToolChoice) => "toolConfig",
            (ClientDialect::Gemini, Setting::ResponseFormat) => "generationConfig.responseJsonSchema",
            (ClientDialect::Gemini, Setting::ReasoningEffort) => "generationConfig.thinkingConfig.thinkingLevel",
            (ClientDialect::Gemini, Setting::ThinkingBudget) => "generationConfig.thinkingConfig.thinkingBudget",
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
