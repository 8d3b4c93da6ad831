//! Events back into the client's dialect: OpenAI `chat.completion.chunk` SSE
//! ([`ChunkEncoder`]) or one `chat.completion` body ([`completion`]). The
//! `model` is always the upstream model that answered, so cost dashboards
//! attribute a failover to the fallback.

mod chunks;
mod completion;

use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

pub use chunks::ChunkEncoder;
pub use completion::completion;

use crate::event::Usage;

/// The identity every chunk of one answer repeats.
pub struct Answer {
    id: String,
    created: u64,
    model: String,
}

impl Answer {
    /// A new answer from `model`, with a fresh id.
    pub fn new(model: &str) -> Self {
        let created = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        Answer { id: format!("chatcmpl-{:016x}", fastrand::u64(..)), created, model: model.to_owned() }
    }
}

/// Token counts as OpenAI reports them.
#[derive(Serialize)]
struct OpenAiUsage {
    prompt_tokens: u64,
    completion_tokens: u64,
    total_tokens: u64,
}

impl From<Usage> for OpenAiUsage {
    fn from(usage: Usage) -> Self {
        let (prompt_tokens, completion_tokens) = (usage.input_tokens.unwrap_or(0), usage.output_tokens.unwrap_or(0));
        OpenAiUsage { prompt_tokens, completion_tokens, total_tokens: prompt_tokens.saturating_add(completion_tokens) }
    }
}

/// What the encoders' tests share: a fixed answer and tool-call events.
#[cfg(test)]
mod test_support {
    use super::Answer;
    use crate::event::{Event, ToolCallDelta};

    pub fn answer() -> Answer {
        Answer { id: "chatcmpl-1".into(), created: 7, model: "m".into() }
    }

    pub fn call(index: u32, id: Option<&str>, name: Option<&str>, arguments: &str) -> Event {
        Event::ToolCall(ToolCallDelta {
            index,
            id: id.map(str::to_owned),
            name: name.map(str::to_owned),
            arguments: arguments.to_owned(),
        })
    }
}
