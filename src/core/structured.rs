//! Structured answers checked before the client relies on them: providers
//! still wrap JSON in prose or a Markdown fence now and then, or leave out
//! a required field. An answer sent whole is checked before it commits (a
//! fence around otherwise valid JSON is taken off, and an invalid answer
//! fails over as `invalid_output`); a streamed one is checked when it ends,
//! and an invalid one ends with an error event instead of the end marker.

use std::pin::Pin;
use std::task::{Context, Poll};

use futures_util::Stream;
use serde_json::Value;

use super::{CommittedStream, Failure};
use crate::event::{Event, FinishReason};
use crate::request::ResponseFormat;

/// What the answer must be.
pub(super) enum Expected {
    /// Any JSON object.
    Object,
    /// JSON valid for a schema.
    Schema(Box<jsonschema::Validator>),
}

impl Expected {
    /// What `format` asks of the answer, if it asks for JSON. A schema that
    /// cannot be compiled (a remote `$ref`, say) is not checked, and says so
    /// in the log: the provider is the judge of it then.
    pub(super) fn of(format: Option<&ResponseFormat>, request_id: &str) -> Option<Expected> {
        match format? {
            ResponseFormat::Text => None,
            ResponseFormat::JsonObject => Some(Expected::Object),
            ResponseFormat::JsonSchema(schema) => match jsonschema::validator_for(&schema.schema) {
                Ok(validator) => Some(Expected::Schema(Box::new(validator))),
                Err(err) => {
                    tracing::warn!(request_id, schema = %schema.name, error = %err, "the answer's schema cannot be compiled, so the answer is not checked");
                    None
                }
            },
        }
    }

    /// Checks the answer's text: `Ok(Some(json))` when it is valid once a
    /// code fence around it is taken off, `Ok(None)` when valid as it is.
    pub(super) fn check(&self, text: &str, unfence: bool) -> Result<Option<String>, String> {
        match self.valid(text) {
            Ok(()) => Ok(None),
            Err(why) => match unfence.then(|| fenced(text)).flatten() {
                Some(inner) if self.valid(inner).is_ok() => Ok(Some(inner.to_owned())),
                _ => Err(why),
            },
        }
    }

    fn valid(&self, text: &str) -> Result<(), String> {
        let value: Value = serde_json::from_str(text).map_err(|err| format!("the answer is not JSON: {err}"))?;
        match self {
            Expected::Object if value.is_object() => Ok(()),
            Expected::Object => Err("the answer is JSON but not an object".to_owned()),
            Expected::Schema(validator) => {
                let errors: Vec<String> = validator
                    .iter_errors(&value)
                    .take(3)
                    .map(|err| format!("{}: {err}", err.instance_path()))
                    .collect();
                if errors.is_empty() { Ok(()) } else { Err(errors.join("; ")) }
            }
        }
    }
}

/// The JSON inside a Markdown code fence that is the whole answer.
fn fenced(text: &str) -> Option<&str> {
    let body = text.trim().strip_prefix("```")?.strip_suffix("```")?;
    let (language, rest) = body.split_once('\n')?;
    matches!(language.trim(), "" | "json" | "JSON").then(|| rest.trim())
}

/// An answer that called tools is not the JSON answer: it is not checked.
fn called_tools(events: &[Event]) -> bool {
    events.iter().any(|event| matches!(event, Event::ToolCall(_) | Event::Finish(FinishReason::ToolCalls)))
}

/// Checks a whole answer; a fenced one comes back with its text replaced by the JSON inside.
pub(super) fn checked(expected: &Expected, mut events: Vec<Event>) -> Result<Vec<Event>, Failure> {
    if called_tools(&events) {
        return Ok(events);
    }
    let text: String = events
        .iter()
        .filter_map(|event| if let Event::Text(text) = event { Some(text.as_str()) } else { None })
        .collect();
    match expected.check(&text, true).map_err(Failure::InvalidOutput)? {
        None => Ok(events),
        Some(json) => {
            events.retain(|event| !matches!(event, Event::Text(_)));
            events.insert(0, Event::Text(json));
            Ok(events)
        }
    }
}

/// A streamed answer whose text is kept (up to `max_bytes`) and checked at
/// its end: an invalid one ends with [`Failure::InvalidOutput`] instead.
/// Past `max_bytes` the check is given up, and the log says so.
pub(super) fn checked_stream(
    events: CommittedStream,
    expected: Expected,
    max_bytes: usize,
    request_id: std::sync::Arc<str>,
) -> CommittedStream {
    Box::pin(CheckedStream {
        events,
        expected,
        text: String::new(),
        max_bytes,
        given_up: false,
        ended: false,
        request_id,
    })
}

struct CheckedStream {
    events: CommittedStream,
    expected: Expected,
    text: String,
    max_bytes: usize,
    /// Tools were called or the answer outgrew `max_bytes`: nothing to check.
    given_up: bool,
    /// The answer's end (or its failure) has been passed on: the inner
    /// stream is not polled again.
    ended: bool,
    request_id: std::sync::Arc<str>,
}

impl Stream for CheckedStream {
    type Item = Result<Event, Failure>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        if this.ended {
            return Poll::Ready(None);
        }
        let next = std::task::ready!(this.events.as_mut().poll_next(cx));
        this.ended = next.is_none();
        match &next {
            Some(Ok(Event::Text(text))) if !this.given_up => {
                if this.text.len().saturating_add(text.len()) > this.max_bytes {
                    this.given_up = true;
                    this.text = String::new();
                    tracing::warn!(request_id = %this.request_id, max_bytes = this.max_bytes, "a structured answer outgrew the answer cap, so it is not checked");
                } else {
                    this.text.push_str(text);
                }
            }
            Some(Ok(Event::ToolCall(_) | Event::Finish(FinishReason::ToolCalls))) => this.given_up = true,
            None if !this.given_up => {
                this.given_up = true;
                if let Err(why) = this.expected.check(&this.text, false) {
                    return Poll::Ready(Some(Err(Failure::InvalidOutput(why))));
                }
            }
            _ => {}
        }
        Poll::Ready(next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Expected {
        let schema = json!({ "type": "object", "properties": { "n": { "type": "integer" } }, "required": ["n"] });
        let format = ResponseFormat::JsonSchema(crate::request::JsonSchema {
            name: "count".into(),
            description: None,
            schema,
            strict: Some(true),
        });
        Expected::of(Some(&format), "test").unwrap_or(Expected::Object)
    }

    #[test]
    fn valid_json_passes_and_a_fence_around_it_comes_off() {
        let expected = schema();
        assert_eq!(expected.check(r#"{"n": 3}"#, true), Ok(None));
        assert_eq!(expected.check("```json\n{\"n\": 3}\n```", true), Ok(Some("{\"n\": 3}".to_owned())));
        assert!(expected.check("```json\n{\"n\": 3}\n```", false).is_err(), "a streamed fence is not taken off");
    }

    #[test]
    fn prose_a_wrong_type_or_a_missing_field_is_invalid_and_says_where() {
        let expected = schema();
        assert!(expected.check("Sure! Here is the JSON: {\"n\": 3}", true).is_err());
        let wrong = expected.check(r#"{"n": "three"}"#, true).unwrap_err();
        assert!(wrong.contains("/n"), "{wrong}");
        assert!(expected.check("{}", true).unwrap_err().contains("n"));
        assert!(Expected::Object.check("[1, 2]", true).is_err());
        assert_eq!(Expected::Object.check("{\"any\": true}", true), Ok(None));
    }

    #[tokio::test]
    async fn a_streamed_answer_ends_once_with_its_verdict() {
        use futures_util::StreamExt;
        let events: CommittedStream = Box::pin(futures_util::stream::iter([Ok(Event::Text("{\"n\": \"x\"}".into()))]));
        let mut checked = checked_stream(events, schema(), 1024, std::sync::Arc::from("t"));
        assert!(matches!(checked.next().await, Some(Ok(Event::Text(_)))));
        assert!(matches!(checked.next().await, Some(Err(Failure::InvalidOutput(_)))));
        assert!(checked.next().await.is_none(), "after its verdict the stream is over");
        assert!(checked.next().await.is_none(), "and stays over");
    }

    #[test]
    fn a_whole_answer_is_checked_unless_it_called_tools() {
        let expected = schema();
        let fenced = vec![Event::Text("```\n{\"n\":".into()), Event::Text(" 1}\n```".into())];
        assert_eq!(checked(&expected, fenced).ok(), Some(vec![Event::Text("{\"n\": 1}".into())]));
        assert!(matches!(checked(&expected, vec![Event::Text("no".into())]), Err(Failure::InvalidOutput(_))));
        let tools = vec![Event::Finish(FinishReason::ToolCalls)];
        assert!(checked(&expected, tools).is_ok());
    }
}
