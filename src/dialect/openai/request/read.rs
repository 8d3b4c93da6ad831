//! How a Chat Completions body is read: straight into the fields baton
//! translates, every other key kept as sent, and each error naming the
//! field by its path (`temperature`, `messages[2].name`).

use std::marker::PhantomData;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use super::{WireBody, WireMessage};
use crate::request::Key;

/// A field's value parsed straight into `T`; its error names the field by
/// its path (`temperature`, `messages[2].name`).
struct Labeled<T> {
    message: Option<usize>,
    name: &'static str,
    parsed: PhantomData<T>,
}

fn labeled<T>(message: Option<usize>, name: &'static str) -> Labeled<T> {
    Labeled { message, name, parsed: PhantomData }
}

impl<'de, T: Deserialize<'de>> DeserializeSeed<'de> for Labeled<T> {
    type Value = T;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<T, D::Error> {
        T::deserialize(deserializer).map_err(|err| {
            // The parser adds the position to the labelled error again: say it once.
            let err = err.to_string();
            let err = without_position(&err);
            match self.message {
                Some(i) => de::Error::custom(format_args!("`messages[{i}].{}`: {err}", self.name)),
                None => de::Error::custom(format_args!("`{}`: {err}", self.name)),
            }
        })
    }
}

/// `message` without serde_json's closing "at line L column C".
fn without_position(message: &str) -> &str {
    match message.rsplit_once(" at line ") {
        Some((head, tail))
            if tail.split_once(" column ").is_some_and(|(line, column)| {
                [line, column].iter().all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            }) =>
        {
            head
        }
        _ => message,
    }
}

impl<'de> Deserialize<'de> for WireBody {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(BodyVisitor)
    }
}

struct BodyVisitor;

impl<'de> Visitor<'de> for BodyVisitor {
    type Value = WireBody;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a chat completion request, a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<WireBody, A::Error> {
        let mut body = WireBody::default();
        while let Some(Key(key)) = map.next_key()? {
            match key.as_ref() {
                "model" => body.model = map.next_value_seed(labeled(None, "model"))?,
                "messages" => body.messages = map.next_value_seed(Messages)?,
                "n" => body.n = map.next_value_seed(labeled(None, "n"))?,
                "stream" => body.stream = map.next_value_seed(labeled(None, "stream"))?,
                "stream_options" => body.stream_options = map.next_value_seed(labeled(None, "stream_options"))?,
                "max_completion_tokens" => {
                    body.max_completion_tokens = map.next_value_seed(labeled(None, "max_completion_tokens"))?;
                }
                "max_tokens" => body.max_tokens = map.next_value_seed(labeled(None, "max_tokens"))?,
                "tools" => body.tools = map.next_value_seed(labeled(None, "tools"))?,
                "temperature" => body.temperature = map.next_value_seed(labeled(None, "temperature"))?,
                "top_p" => body.top_p = map.next_value_seed(labeled(None, "top_p"))?,
                "stop" => body.stop = map.next_value_seed(labeled(None, "stop"))?,
                "tool_choice" => body.tool_choice = map.next_value_seed(labeled(None, "tool_choice"))?,
                "parallel_tool_calls" => {
                    body.parallel_tool_calls = map.next_value_seed(labeled(None, "parallel_tool_calls"))?
                }
                "response_format" => body.response_format = map.next_value_seed(labeled(None, "response_format"))?,
                "reasoning_effort" => body.reasoning_effort = map.next_value_seed(labeled(None, "reasoning_effort"))?,
                // Typed when they hold what every dialect means by them
                // (vLLM's `top_k: -1` does not): else kept as sent.
                "user" | "top_k" | "prompt_cache_key" => {
                    let value: Value = map.next_value()?;
                    let top_k = value.as_u64().and_then(|k| u32::try_from(k).ok());
                    match (key.as_ref(), value) {
                        ("user", Value::String(user)) => body.user = Some(user),
                        ("prompt_cache_key", Value::String(cache_key)) => body.cache_key = Some(cache_key),
                        ("top_k", _) if top_k.is_some() => body.top_k = top_k,
                        (_, value) => {
                            body.extra.insert(key.into_owned(), value);
                        }
                    }
                }
                _ => {
                    let value = map.next_value()?;
                    body.extra.insert(key.into_owned(), value);
                }
            }
        }
        Ok(body)
    }
}

/// The messages, each read knowing its place for its errors.
struct Messages;

impl<'de> DeserializeSeed<'de> for Messages {
    type Value = Option<Vec<WireMessage>>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_option(self)
    }
}

impl<'de> Visitor<'de> for Messages {
    type Value = Option<Vec<WireMessage>>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("`messages`, a list of messages")
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_seq(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        // The hint is the client's: bounded, so it cannot reserve much before a message is read.
        let mut messages = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
        while let Some(message) = seq.next_element_seed(MessageAt(messages.len()))? {
            messages.push(message);
        }
        Ok(Some(messages))
    }
}

/// Message `i` of the conversation.
struct MessageAt(usize);

impl<'de> DeserializeSeed<'de> for MessageAt {
    type Value = WireMessage;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<WireMessage, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for MessageAt {
    type Value = WireMessage;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "messages[{}] to be an object", self.0)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<WireMessage, A::Error> {
        let mut message = WireMessage::default();
        let i = Some(self.0);
        while let Some(Key(key)) = map.next_key()? {
            match key.as_ref() {
                "role" => message.role = map.next_value_seed(labeled(i, "role"))?,
                "content" => message.content = map.next_value_seed(labeled(i, "content"))?,
                "tool_calls" => message.tool_calls = map.next_value_seed(labeled(i, "tool_calls"))?,
                "tool_call_id" => message.tool_call_id = map.next_value_seed(labeled(i, "tool_call_id"))?,
                "name" => message.name = map.next_value_seed(labeled(i, "name"))?,
                _ => {
                    let value = map.next_value()?;
                    message.extra.insert(key.into_owned(), value);
                }
            }
        }
        Ok(message)
    }
}
