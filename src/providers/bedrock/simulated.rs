//! How Bedrock writes Claude's stream: each Anthropic event as one
//! event-stream `chunk` (its JSON base64 in `bytes`, beside Bedrock's
//! random `p` padding), exceptions as exception messages, errors in
//! Bedrock's `{"message": …}` shape. Frames are written by
//! `aws-smithy-eventstream`, CRCs and all.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_smithy_eventstream::frame::write_message_to;
use aws_smithy_types::event_stream::{Header, HeaderValue, Message};
use base64::Engine as _;
use bytes::Bytes;
use serde_json::{Value, json};

use crate::providers::anthropic::simulated::SimulatedAnthropic;
use crate::providers::simulate::{
    Asked, Call, Counts, Ending, Offered, PROMPT_TOKENS, Simulated, WireEvent, array_at, pick, str_at,
};

/// A simulated Bedrock runtime serving Claude.
pub struct SimulatedBedrock;

/// The path's end for a streamed Messages request.
const INVOKE: &str = "/invoke-with-response-stream";

/// The path's end for a streamed Converse request.
const CONVERSE: &str = "/converse-stream";

/// A simulated Bedrock serving a model other than Claude, through Converse.
pub struct SimulatedConverse;

/// A message of `headers` and `payload`, framed.
fn frame(headers: &[(&'static str, &str)], payload: &[u8]) -> WireEvent {
    let mut message = Message::new(Bytes::copy_from_slice(payload));
    for (name, value) in headers {
        message = message.add_header(Header::new(*name, HeaderValue::String(value.to_string().into())));
    }
    let mut out = Vec::new();
    match write_message_to(&message, &mut out) {
        Ok(()) => out,
        // Too large a header for the format: nothing a simulated answer writes.
        Err(_) => Vec::new(),
    }
}

/// Anthropic's SSE `event` as a `chunk` message.
fn chunk(event: &[u8]) -> WireEvent {
    chunk_padded(event, "abcdefghijklmnop")
}

/// [`chunk`] with `padding` as its `p`.
fn chunk_padded(event: &[u8], padding: &str) -> WireEvent {
    let text = String::from_utf8_lossy(event);
    let data = text.lines().find_map(|line| line.strip_prefix("data: ")).unwrap_or_default();
    let bytes = base64::engine::general_purpose::STANDARD.encode(data);
    let payload = json!({ "bytes": bytes, "p": padding }).to_string();
    let headers = [(":event-type", "chunk"), (":content-type", "application/json"), (":message-type", "event")];
    frame(&headers, payload.as_bytes())
}

/// An exception message of type `name`.
fn exception(name: &str, message: &str) -> WireEvent {
    let payload = json!({ "message": message }).to_string();
    let headers = [(":exception-type", name), (":content-type", "application/json"), (":message-type", "exception")];
    frame(&headers, payload.as_bytes())
}

fn chunks(events: Vec<WireEvent>) -> Vec<WireEvent> {
    events.iter().map(|event| chunk(event)).collect()
}

/// The model id in a request's path, percent-decoded.
fn model_in(path: &str) -> String {
    let encoded = path.strip_prefix("/model/").and_then(|rest| rest.split('/').next()).unwrap_or_default();
    let mut out = Vec::new();
    let mut bytes = encoded.bytes();
    while let Some(byte) = bytes.next() {
        let hex = |byte: Option<u8>| byte.and_then(|b| char::from(b).to_digit(16));
        match byte {
            b'%' => match (hex(bytes.next()), hex(bytes.next())) {
                (Some(high), Some(low)) => out.push((high * 16 + low) as u8),
                _ => return String::new(),
            },
            byte => out.push(byte),
        }
    }
    String::from_utf8(out).unwrap_or_default()
}

impl Simulated for SimulatedBedrock {
    fn base_url(&self, addr: SocketAddr) -> String {
        format!("http://{addr}")
    }

    /// A region to sign for, and a Bedrock API key: the simulated runtime
    /// takes any key unless it is given one to require.
    fn config_keys(&self, _addr: SocketAddr) -> String {
        "region = \"us-east-1\"\napi_key = \"bedrock-simulated-key\"".to_owned()
    }

    fn model_named(&self, name: &str) -> String {
        format!("anthropic.{name}-v1:0")
    }

    fn is_chat_path(&self, path: &str) -> bool {
        path.starts_with("/model/")
            && (path.ends_with(INVOKE) || path.ends_with(CONVERSE))
            && !model_in(path).is_empty()
    }

    fn for_model(&self, model: &str) -> Option<&'static dyn Simulated> {
        (!super::is_claude(model)).then_some(&SimulatedConverse as &'static dyn Simulated)
    }

    fn auth_header(&self, key: &str) -> (&'static str, String) {
        ("authorization", format!("Bearer {key}"))
    }

    /// A Bedrock API key as a bearer token, or, for a `key` written
    /// `ACCESS_KEY_ID:SECRET`, a SigV4 signature recomputed here from the
    /// request as it arrived and compared whole.
    fn authorized(&self, key: &str, path: &str, headers: &HashMap<String, String>, body: &[u8]) -> bool {
        let given = headers.get("authorization").map(String::as_str).unwrap_or_default();
        match key.split_once(':') {
            Some((id, secret)) if given.starts_with("AWS4-HMAC-SHA256 ") => {
                resigned(id, secret, path, headers, body).is_some_and(|expected| expected == given)
            }
            _ => given == format!("Bearer {key}"),
        }
    }

    fn model(&self, path: &str, _body: &Value) -> String {
        model_in(path)
    }

    fn call_id_prefix(&self) -> &'static str {
        SimulatedAnthropic.call_id_prefix()
    }

    fn asked(&self, body: &Value) -> Asked {
        SimulatedAnthropic.asked(body)
    }

    fn content_type(&self) -> &'static str {
        "application/vnd.amazon.eventstream"
    }

    fn opening(&self, model: &str, thinking: bool, cached: usize) -> Vec<WireEvent> {
        chunks(SimulatedAnthropic.opening(model, thinking, cached))
    }

    fn reasoning(&self, model: &str, text: &str) -> WireEvent {
        chunk(&SimulatedAnthropic.reasoning(model, text))
    }

    fn end_of_reasoning(&self) -> Vec<WireEvent> {
        chunks(SimulatedAnthropic.end_of_reasoning())
    }

    fn text_in(&self, model: &str, block: usize, text: &str) -> WireEvent {
        chunk(&SimulatedAnthropic.text_in(model, block, text))
    }

    fn tool_call(&self, model: &str) -> Vec<WireEvent> {
        chunks(SimulatedAnthropic.tool_call(model))
    }

    fn ending(&self, model: &str, end: &Ending<'_>) -> Vec<WireEvent> {
        chunks(SimulatedAnthropic.ending(model, end))
    }

    fn refusal(&self, model: &str) -> Vec<WireEvent> {
        chunks(SimulatedAnthropic.refusal(model))
    }

    /// The model failing mid-answer, as Bedrock reports it.
    fn error_event(&self) -> WireEvent {
        exception("modelStreamErrorException", "The model stream failed.")
    }

    /// A chunk whose last CRC byte is wrong: a frame no reader may trust.
    fn malformed(&self) -> WireEvent {
        let mut frame = chunk(&SimulatedAnthropic.text_in("m", 0, "broken"));
        if let Some(last) = frame.last_mut() {
            *last ^= 0xFF;
        }
        frame
    }

    fn error_body(&self, _status: u16, message: &str) -> String {
        json!({ "message": message }).to_string()
    }

    fn context_length_message(&self) -> &'static str {
        "Input is too long for requested model."
    }

    fn huge_line(&self, padding: &str) -> WireEvent {
        chunk_padded(&SimulatedAnthropic.huge_line(""), padding)
    }

    fn wrong_types(&self) -> WireEvent {
        chunk(&SimulatedAnthropic.wrong_types())
    }

    fn overflowing_finish(&self, model: &str) -> Vec<WireEvent> {
        chunks(SimulatedAnthropic.overflowing_finish(model))
    }
}

/// A Converse event `name` of `payload`, with Bedrock's padding.
fn converse(name: &str, mut payload: Value) -> WireEvent {
    payload["p"] = json!("abcdefgh");
    let headers = [(":event-type", name), (":content-type", "application/json"), (":message-type", "event")];
    frame(&headers, payload.to_string().as_bytes())
}

/// A tool call in content block `block`: opened, its input a fragment a delta, closed.
fn converse_call(block: usize, call: &Call<'_>) -> Vec<WireEvent> {
    let mut events = vec![converse(
        "contentBlockStart",
        json!({ "contentBlockIndex": block, "start": { "toolUse": { "toolUseId": call.id, "name": call.name } } }),
    )];
    events.extend(call.arguments.iter().map(|fragment| {
        converse(
            "contentBlockDelta",
            json!({ "contentBlockIndex": block, "delta": { "toolUse": { "input": fragment } } }),
        )
    }));
    events.push(converse("contentBlockStop", json!({ "contentBlockIndex": block })));
    events
}

/// The end of a Converse answer: why it stopped, then its usage.
fn converse_end(stop_reason: &str, output: u64) -> Vec<WireEvent> {
    let prompt = PROMPT_TOKENS as u64;
    vec![
        converse("messageStop", json!({ "stopReason": stop_reason })),
        converse(
            "metadata",
            json!({ "usage": { "inputTokens": prompt, "outputTokens": output, "totalTokens": prompt.saturating_add(output) },
                "metrics": { "latencyMs": 1 } }),
        ),
    ]
}

impl Simulated for SimulatedConverse {
    fn base_url(&self, addr: SocketAddr) -> String {
        SimulatedBedrock.base_url(addr)
    }

    fn is_chat_path(&self, path: &str) -> bool {
        SimulatedBedrock.is_chat_path(path)
    }

    fn auth_header(&self, key: &str) -> (&'static str, String) {
        SimulatedBedrock.auth_header(key)
    }

    fn authorized(&self, key: &str, path: &str, headers: &HashMap<String, String>, body: &[u8]) -> bool {
        SimulatedBedrock.authorized(key, path, headers, body)
    }

    fn model(&self, path: &str, body: &Value) -> String {
        SimulatedBedrock.model(path, body)
    }

    fn call_id_prefix(&self) -> &'static str {
        "tooluse_mock"
    }

    /// Tools from `toolConfig`, results from the last user turn's
    /// `toolResult` blocks, images as `image` blocks; Converse asks no JSON.
    fn asked(&self, body: &Value) -> Asked {
        let choice = str_at(body, "/toolConfig/toolChoice/tool/name");
        let specs = array_at(body, "/toolConfig/tools").iter().filter_map(|tool| tool.get("toolSpec"));
        let tool: Option<Offered> = pick(specs, choice, "/name", &["/inputSchema/json"]);
        let last = array_at(body, "/messages").last().filter(|turn| str_at(turn, "/role") == Some("user"));
        let results = last.map_or(&[][..], |turn| array_at(turn, "/content"));
        let tool_results = results
            .iter()
            .filter_map(|block| block.get("toolResult"))
            .map(|result| array_at(result, "/content").iter().filter_map(|c| str_at(c, "/text")).collect())
            .collect();
        let images = array_at(body, "/messages")
            .iter()
            .map(|turn| array_at(turn, "/content").iter().filter(|block| block.get("image").is_some()).count())
            .sum();
        Asked { tool, tool_results, json: None, images }
    }

    fn content_type(&self) -> &'static str {
        SimulatedBedrock.content_type()
    }

    fn opening(&self, _model: &str, _thinking: bool, _cached: usize) -> Vec<WireEvent> {
        vec![converse("messageStart", json!({ "role": "assistant" }))]
    }

    fn reasoning(&self, _model: &str, text: &str) -> WireEvent {
        converse(
            "contentBlockDelta",
            json!({ "contentBlockIndex": 0, "delta": { "reasoningContent": { "text": text } } }),
        )
    }

    fn end_of_reasoning(&self) -> Vec<WireEvent> {
        vec![
            converse(
                "contentBlockDelta",
                json!({ "contentBlockIndex": 0, "delta": { "reasoningContent": { "signature": "c2lnbmF0dXJl" } } }),
            ),
            converse("contentBlockStop", json!({ "contentBlockIndex": 0 })),
        ]
    }

    fn text_in(&self, _model: &str, block: usize, text: &str) -> WireEvent {
        converse("contentBlockDelta", json!({ "contentBlockIndex": block, "delta": { "text": text } }))
    }

    fn tool_call(&self, _model: &str) -> Vec<WireEvent> {
        let arguments = ["{\"city\": \"Paris\"}".to_owned()];
        converse_call(1, &Call { id: "tooluse_mock", name: "get_weather", arguments: &arguments })
    }

    fn ending(&self, _model: &str, end: &Ending<'_>) -> Vec<WireEvent> {
        let Counts { output, reasoning, .. } = end.counts;
        let mut events = vec![converse("contentBlockStop", json!({ "contentBlockIndex": end.text_block }))];
        if let Some(call) = end.call {
            events.extend(converse_call(end.text_block + 1, &call));
        }
        let reason = if end.call.is_some() { "tool_use" } else { "end_turn" };
        events.extend(converse_end(reason, (output + reasoning) as u64));
        events
    }

    fn refusal(&self, _model: &str) -> Vec<WireEvent> {
        converse_end("guardrail_intervened", 0)
    }

    fn error_event(&self) -> WireEvent {
        SimulatedBedrock.error_event()
    }

    fn malformed(&self) -> WireEvent {
        let mut frame = converse("contentBlockDelta", json!({ "contentBlockIndex": 0, "delta": { "text": "broken" } }));
        if let Some(last) = frame.last_mut() {
            *last ^= 0xFF;
        }
        frame
    }

    fn error_body(&self, status: u16, message: &str) -> String {
        SimulatedBedrock.error_body(status, message)
    }

    fn context_length_message(&self) -> &'static str {
        SimulatedBedrock.context_length_message()
    }

    fn huge_line(&self, padding: &str) -> WireEvent {
        let mut payload = json!({ "role": "assistant" });
        payload["padding"] = json!(padding);
        let headers =
            [(":event-type", "messageStart"), (":content-type", "application/json"), (":message-type", "event")];
        frame(&headers, payload.to_string().as_bytes())
    }

    fn wrong_types(&self) -> WireEvent {
        converse("contentBlockDelta", json!({ "contentBlockIndex": "0", "delta": { "text": 42 } }))
    }

    fn overflowing_finish(&self, _model: &str) -> Vec<WireEvent> {
        let max = u64::MAX;
        vec![
            converse("contentBlockStop", json!({ "contentBlockIndex": 0 })),
            converse("messageStop", json!({ "stopReason": "end_turn" })),
            converse("metadata", json!({ "usage": { "inputTokens": max, "outputTokens": max, "totalTokens": max } })),
        ]
    }
}

/// The `authorization` the request at `path` should carry when signed with
/// `id` and `secret` for the region, time, headers and session token it
/// names: the same request signed again by the same signer.
fn resigned(id: &str, secret: &str, path: &str, headers: &HashMap<String, String>, body: &[u8]) -> Option<String> {
    let given = headers.get("authorization")?;
    let scope = given.split("Credential=").nth(1)?.split(',').next()?;
    let region = scope.split('/').nth(2)?;
    let signed = given.split("SignedHeaders=").nth(1)?.split(',').next()?;
    let time = amz_date(headers.get("x-amz-date")?)?;
    let mut request = http::Request::new(bytes::Bytes::copy_from_slice(body));
    *request.method_mut() = http::Method::POST;
    *request.uri_mut() = format!("http://{}{path}", headers.get("host")?).parse().ok()?;
    // The signer adds the host, the date and the token itself.
    for name in signed.split(';').filter(|name| !matches!(*name, "host" | "x-amz-date" | "x-amz-security-token")) {
        let value = http::HeaderValue::from_str(headers.get(name)?).ok()?;
        request.headers_mut().insert(http::HeaderName::from_bytes(name.as_bytes()).ok()?, value);
    }
    let signer = super::sign::SigV4 {
        access_key_id: crate::secret::Secret::new(id),
        secret_access_key: crate::secret::Secret::new(secret),
        session_token: headers.get("x-amz-security-token").map(crate::secret::Secret::new),
        region: region.to_owned(),
        source: "the simulated Bedrock",
    };
    signer.sign_at(&mut request, time).ok()?;
    request.headers().get("authorization")?.to_str().ok().map(str::to_owned)
}

/// `x-amz-date` (`20150830T123600Z`) as a time.
fn amz_date(text: &str) -> Option<SystemTime> {
    let digits = |range: std::ops::Range<usize>| text.get(range)?.parse::<i64>().ok();
    let (year, month, day) = (digits(0..4)?, digits(4..6)?, digits(6..8)?);
    let (hour, minute, second) = (digits(9..11)?, digits(11..13)?, digits(13..15)?);
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400;
    let day_of_year = (153 * (month + if month > 2 { -3 } else { 9 }) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    let days = era * 146_097 + day_of_era - 719_468;
    let seconds = days * 86_400 + hour * 3600 + minute * 60 + second;
    Some(UNIX_EPOCH + Duration::from_secs(u64::try_from(seconds).ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_amz_date_is_its_time() {
        assert_eq!(amz_date("20150830T123600Z"), Some(UNIX_EPOCH + Duration::from_secs(1_440_938_160)));
        assert_eq!(amz_date("20240229T000001Z"), Some(UNIX_EPOCH + Duration::from_secs(1_709_164_801)));
        assert_eq!(amz_date("2015-08-30"), None);
    }
}
