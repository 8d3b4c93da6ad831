//! The normalised request itself: the conversation and every setting, typed
//! where every dialect has it and kept tagged with its dialect where not,
//! with the estimate quotas reserve against and the copy that leaves out
//! what a target cannot honour.

use serde_json::{Map, Value};

use super::field::{self, asks_nothing};
use super::{
    ClientDialect, Field, Image, Message, Native, Part, ReasoningShown, ResponseFormat, Setting, Tool, ToolChoice,
};

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

    /// The client's top-level fields baton does not translate that ask
    /// something (not `null` or `false`), as a target of another API names
    /// them: each of the client API's own tools apart.
    pub fn untranslated_fields(&self) -> Vec<Field> {
        let mut out = Vec::new();
        for (name, value) in self.extra.iter().filter(|(_, value)| !asks_nothing(value)) {
            match name.as_str() {
                "tools" => out.extend(field::own_tools(value)),
                _ => out.push(Field::Untranslated(name.clone())),
            }
        }
        out
    }

    /// The fields of message `i` baton does not translate that ask something.
    pub fn untranslated_message_fields(&self, i: usize) -> Vec<Field> {
        let Some(message) = self.messages.get(i) else { return Vec::new() };
        message
            .extra
            .iter()
            .filter(|(_, value)| !asks_nothing(value))
            .map(|(name, _)| Field::message(i, name))
            .collect()
    }

    /// This request as `provider` may read it, when it holds reasoning that
    /// another provider wrote in an earlier turn baton kept: that reasoning
    /// is left out (encrypted, it means something only to its maker). None
    /// when the request goes as it is.
    pub fn for_provider(&self, provider: &str) -> Option<ChatRequest> {
        let foreign = |message: &Message| {
            message.made_by.as_deref().is_some_and(|maker| maker != provider)
                && message.content.iter().any(Part::is_reasoning)
        };
        if !self.messages.iter().any(foreign) {
            return None;
        }
        let mut out = self.clone();
        out.native = None;
        for message in out.messages.iter_mut().filter(|message| foreign(message)) {
            message.content.retain(|part| !part.is_reasoning());
        }
        out.messages.retain(|message| !message.content.is_empty() || !message.tool_calls.is_empty());
        Some(out)
    }

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
                Field::Untranslated(name) => {
                    out.extra.remove(name);
                }
                Field::Tool { .. } => out.drop_tool(field),
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

    /// Takes out the client API's own tool that `field` names.
    fn drop_tool(&mut self, field: &Field) {
        if let Some(Value::Array(tools)) = self.extra.get_mut("tools") {
            tools.retain(|tool| !field::is_tool(field, tool));
            if tools.is_empty() {
                self.extra.remove("tools");
            }
        }
    }

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
