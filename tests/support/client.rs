//! The client side of a test: requests to whatever serves baton's API, and
//! exactly what came back — whole, or a chunk at a time.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::StreamExt;
use serde_json::{Value, json};

use super::{Baton, Proxy};

/// The chat endpoint every dialect test talks to.
pub const CHAT: &str = "/v1/chat/completions";

/// What serves baton's API on loopback: the in-process proxy, the binary, or
/// a bare address.
pub trait Server {
    fn addr(&self) -> SocketAddr;

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr())
    }
}

impl Server for Proxy {
    fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Server for Baton {
    fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Server for SocketAddr {
    fn addr(&self) -> SocketAddr {
        *self
    }
}

/// A chat request body for route "chat".
pub fn chat_body(stream: bool) -> Value {
    json!({ "model": "chat", "stream": stream, "messages": [{ "role": "user", "content": "say something" }] })
}

/// Everything a client got back from one request.
#[derive(Debug)]
pub struct Received {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    /// The body exactly as received.
    pub raw: String,
    /// From sending the request to the first byte of the body.
    pub first_byte: Duration,
    /// From sending the request to the end of the body.
    pub total: Duration,
}

impl Received {
    pub fn header(&self, name: &str) -> &str {
        self.headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("")
    }

    /// The `data:` payloads of an SSE body, in order.
    pub fn data_events(&self) -> Vec<String> {
        self.raw
            .split("\n\n")
            .filter_map(|event| event.lines().find_map(|line| line.strip_prefix("data: ")).map(str::to_owned))
            .collect()
    }

    /// Each named SSE event of the body (Anthropic's, the Responses API's),
    /// as (name, data).
    pub fn named_events(&self) -> Vec<(String, Value)> {
        self.raw
            .split_terminator("\n\n")
            .filter_map(|event| {
                let mut lines = event.lines();
                let name = lines.next()?.strip_prefix("event: ")?.to_owned();
                let data = serde_json::from_str(lines.next()?.strip_prefix("data: ")?).ok()?;
                Some((name, data))
            })
            .collect()
    }

    /// The text a client assembles from the chunks' `delta.content`.
    pub fn streamed_text(&self) -> String {
        self.chunks()
            .iter()
            .filter_map(|chunk| chunk.pointer("/choices/0/delta/content").and_then(Value::as_str).map(str::to_owned))
            .collect()
    }

    /// Every JSON chunk of an SSE body (not `[DONE]`).
    pub fn chunks(&self) -> Vec<Value> {
        self.data_events()
            .iter()
            .filter(|data| *data != "[DONE]")
            .filter_map(|data| serde_json::from_str(data).ok())
            .collect()
    }

    pub fn saw_done(&self) -> bool {
        self.data_events().iter().any(|data| data == "[DONE]")
    }

    /// The error event of a failed stream, if one came.
    pub fn error_event(&self) -> Option<Value> {
        self.chunks().into_iter().find(|chunk| chunk.get("error").is_some())
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.raw).unwrap_or(Value::Null)
    }
}

/// Posts `body` to the chat endpoint and reads the whole answer.
pub async fn post_chat(server: &impl Server, body: &Value) -> Received {
    post_raw(server, CHAT, body.to_string().into_bytes(), "application/json").await
}

/// Posts `body` to `path` with `headers` besides its content type, and
/// reads the whole answer.
pub async fn post_with(server: &impl Server, path: &str, body: &Value, headers: &[(&str, &str)]) -> Received {
    let mut request = reqwest::Client::new().post(server.url(path)).header("content-type", "application/json");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let started = Instant::now();
    read_response(request.body(body.to_string()).send().await.expect("the proxy answers"), started).await
}

/// Posts raw bytes to `path` and reads the whole answer.
pub async fn post_raw(server: &impl Server, path: &str, body: Vec<u8>, content_type: &str) -> Received {
    let client = reqwest::Client::new();
    let started = Instant::now();
    let response = client
        .post(server.url(path))
        .header("content-type", content_type)
        .body(body)
        .send()
        .await
        .expect("the proxy answers");
    read_response(response, started).await
}

pub async fn read_response(response: reqwest::Response, started: Instant) -> Received {
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let mut body = response.bytes_stream();
    let mut raw = Vec::new();
    let mut first_byte = None;
    while let Some(chunk) = body.next().await {
        let Ok(chunk) = chunk else { break };
        first_byte.get_or_insert_with(|| started.elapsed());
        raw.extend_from_slice(&chunk);
    }
    let total = started.elapsed();
    Received {
        status,
        headers,
        raw: String::from_utf8(raw).expect("the proxy sends utf-8"),
        first_byte: first_byte.unwrap_or(total),
        total,
    }
}

/// The Prometheus text of `/metrics`.
pub async fn metrics(server: &impl Server) -> String {
    reqwest::get(server.url("/metrics")).await.expect("metrics").text().await.expect("text")
}

/// A sample of `name` with every label of `labels` in Prometheus text.
pub fn sample_with(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    text.lines().filter(|line| line.starts_with(&format!("{name}{{"))).find_map(|line| {
        let (series, value) = line.rsplit_once(' ')?;
        labels.iter().all(|(k, v)| series.contains(&format!("{k}=\"{v}\""))).then(|| value.parse().ok())?
    })
}

/// Posts `body` to the chat endpoint and returns the answer once its head
/// has come, its body unread; dropping it is the client going away.
pub async fn open_chat(server: &impl Server, body: &Value) -> reqwest::Response {
    reqwest::Client::new().post(server.url(CHAT)).json(body).send().await.expect("the proxy answers")
}

/// The first chunk of an answer's body.
pub async fn first_chunk(response: &mut reqwest::Response) -> Bytes {
    response.chunk().await.expect("chunk reads").expect("a first chunk")
}

/// A client that reads the first chunk of a streamed chat answer, then goes away.
pub async fn leave_after_first_chunk(server: &impl Server) {
    first_chunk(&mut open_chat(server, &chat_body(true)).await).await;
}

/// `GET path`, with the admin token when given, as (status, body).
pub async fn admin_get(server: &impl Server, path: &str, token: Option<&str>) -> (u16, Value) {
    let mut request = reqwest::Client::new().get(server.url(path));
    if let Some(token) = token {
        request = request.header("x-baton-admin-token", token);
    }
    let response = request.send().await.expect("the proxy answers");
    (response.status().as_u16(), response.json().await.unwrap_or(Value::Null))
}
