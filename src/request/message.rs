//! A conversation's messages: who said what, in text, images and reasoning
//! parts, with the assistant's tool calls.

use std::sync::Arc;

use serde_json::{Map, Value};

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
    /// The provider that wrote this message, when baton kept it from an
    /// earlier answer (a stored Responses turn): its reasoning goes back
    /// only to that provider, the only one that can read it.
    pub made_by: Option<Arc<str>>,
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
            made_by: None,
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

    /// What the message holds, in characters: the input estimate's measure.
    pub(super) fn estimated_chars(&self) -> usize {
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
