//! The simulated providers' HTTP/1.1 server, on raw TCP so every fault can be
//! written exactly: a reset, headers then silence, a body cut mid-event.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::tcp::{ReadHalf, WriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use super::answer::Answer;
use super::chunked::{Chunked, Next, wait_peer_closed};
use super::reading::read_request;
use super::words::Words;
use super::{Fault, MockProvider, RECORDS_PATH, RecordedRequest, Schedule, misbehave, wire};
use crate::providers::simulate::Simulated;

pub(super) struct Shared {
    pub started: tokio::time::Instant,
    pub provider: MockProvider,
    pub rng: Mutex<fastrand::Rng>,
    pub requests: Mutex<Vec<RecordedRequest>>,
    /// The requests answered beside the chat ones (Vertex's token exchanges).
    pub side_requests: Mutex<Vec<RecordedRequest>>,
    pub closed: watch::Sender<u64>,
}

impl Shared {
    fn next_fault(&self, index: usize) -> Option<Fault> {
        let faults = &self.provider.faults;
        if faults.is_empty() {
            return None;
        }
        let mut rng = self.rng.lock().ok()?;
        let fires = match self.provider.schedule {
            Schedule::Always => true,
            Schedule::FirstRequests(n) => (index as u64) < n,
            Schedule::AfterRequests(n) => (index as u64) >= n,
            Schedule::During(span) => self.started.elapsed() < span,
            Schedule::Random { probability, .. } => rng.f64() < probability,
        };
        fires.then(|| faults[rng.usize(..faults.len())])
    }
}

pub(super) async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let Ok((socket, _)) = listener.accept().await else { continue };
        let _ = socket.set_nodelay(true);
        tokio::spawn(connection(socket, Arc::clone(&shared)));
    }
}

/// Serves requests on one connection until the client closes it or a fault ends it.
async fn connection(mut socket: TcpStream, shared: Arc<Shared>) {
    let mut buffer = Vec::new();
    loop {
        let Some((request, raw_body)) = read_request(&mut socket, &mut buffer).await else { return };
        if request.path == RECORDS_PATH {
            if write_records(&mut socket, &shared).await.is_err() {
                return;
            }
            continue;
        }
        let sim = shared.provider.kind.simulated();
        if let Some((status, body)) = sim.side_answer(&request.path, &request.body, shared.provider.api_key.as_deref())
        {
            let fault = {
                let Ok(mut side) = shared.side_requests.lock() else { return };
                let fault = shared.next_fault(side.len()).filter(|fault| *fault == Fault::TokenThrottled);
                side.push(record(&shared.provider, &request, fault));
                fault
            };
            let (status, body) = match fault.and_then(|_| sim.throttled_side_answer()) {
                Some(throttled) => (429, throttled),
                None => (status, body),
            };
            if write_json(&mut socket, status, &body).await.is_err() {
                return;
            }
            continue;
        }
        let fault = {
            let Ok(mut requests) = shared.requests.lock() else { return };
            let fault = shared.next_fault(requests.len());
            requests.push(record(&shared.provider, &request, fault));
            fault
        };
        let (mut reader, mut writer) = socket.split();
        let exchange = Exchange { shared: &shared, request: &request, raw_body: &raw_body, writer: &mut writer };
        match exchange.respond(fault, &mut reader).await {
            Ok(Next::KeepAlive) if fault == Some(Fault::StrayResponse) => {
                match misbehave::write_stray(socket, stray(&shared.provider, &request, "stray")).await {
                    Ok(back) => socket = back,
                    Err(_) => return,
                }
            }
            Ok(Next::KeepAlive) => {}
            Ok(Next::Close) | Err(_) => return,
            Ok(Next::PeerClosed) => {
                shared.closed.send_modify(|count| *count += 1);
                return;
            }
        }
    }
}

/// A whole JSON answer of `status`.
async fn write_json(socket: &mut TcpStream, status: u16, body: &str) -> std::io::Result<()> {
    let reason = if status < 300 { "OK" } else { "Error" };
    let head = format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    socket.write_all(format!("{head}{body}").as_bytes()).await
}

/// Answers `GET /__requests`: every request recorded so far, as JSON.
async fn write_records(socket: &mut TcpStream, shared: &Shared) -> std::io::Result<()> {
    let records: Vec<serde_json::Value> =
        shared.requests.lock().map(|r| r.iter().map(RecordedRequest::to_json).collect()).unwrap_or_default();
    let side: Vec<serde_json::Value> =
        shared.side_requests.lock().map(|r| r.iter().map(RecordedRequest::to_json).collect()).unwrap_or_default();
    let records: Vec<serde_json::Value> = records.into_iter().chain(side).collect();
    let body = serde_json::Value::Array(records).to_string();
    let head = format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n", body.len());
    socket.write_all(format!("{head}{body}").as_bytes()).await
}

/// A whole response no request asked for, in words foreign to every
/// request, marked `label` (`stray`, `trailing`).
fn stray(provider: &MockProvider, request: &RecordedRequest, label: &str) -> Vec<u8> {
    let words = Words::stray(provider, request, label);
    let model = model_of(provider, request);
    misbehave::stray_response(provider.kind, &model, provider.tokens, |i| words.token(i))
}

/// What is kept of a request: all of it, or with `slim_records` only its path and fault.
fn record(provider: &MockProvider, request: &RecordedRequest, fault: Option<Fault>) -> RecordedRequest {
    if provider.slim_records {
        RecordedRequest { path: request.path.clone(), headers: HashMap::new(), body: serde_json::Value::Null, fault }
    } else {
        RecordedRequest { fault, ..request.clone() }
    }
}

struct Exchange<'a, 'w> {
    shared: &'a Shared,
    request: &'a RecordedRequest,
    /// The request's body as sent, for a signature over it.
    raw_body: &'a [u8],
    writer: &'a mut WriteHalf<'w>,
}

impl Exchange<'_, '_> {
    async fn respond(mut self, fault: Option<Fault>, reader: &mut ReadHalf<'_>) -> std::io::Result<Next> {
        let provider = &self.shared.provider;
        let sim = wire::of_request(provider.kind, self.request);
        let counts = sim.is_count_path(&self.request.path);
        if !sim.is_chat_path(&self.request.path) && !counts {
            let message = format!("no route for {}", self.request.path);
            return self.json_response(404, "Not Found", &message, &[]).await;
        }
        if let Some(key) = &provider.api_key
            && !sim.authorized(key, &self.request.path, &self.request.headers, self.raw_body)
        {
            return self.json_response(401, "Unauthorized", "invalid api key", &[]).await;
        }
        if counts {
            let body = sim.token_count(&self.request.body);
            let head =
                format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n", body.len());
            self.writer.write_all(format!("{head}{body}").as_bytes()).await?;
            return Ok(Next::KeepAlive);
        }
        let wait = Duration::from_secs(provider.retry_after_secs);
        let retry_after = if provider.retry_after_as_date {
            httpdate::fmt_http_date(std::time::SystemTime::now() + wait)
        } else {
            wait.as_secs().to_string()
        };
        match fault {
            Some(Fault::Refuse) => Ok(Next::Close),
            Some(Fault::Http5xx) => {
                self.json_response(503, "Service Unavailable", "mock5xx the service is overloaded", &[]).await
            }
            Some(Fault::Http429) => {
                let millis = (provider.retry_after_secs.saturating_mul(1000)).to_string();
                let mut headers = vec![("retry-after", retry_after.as_str())];
                if sim.retry_after_ms() {
                    headers.push(("retry-after-ms", &millis));
                }
                self.json_response(429, "Too Many Requests", "mock429 rate limit reached", &headers).await
            }
            Some(Fault::RetryAfterOverflow) => {
                let header = [("retry-after", misbehave::RETRY_AFTER_OVERFLOW)];
                self.json_response(429, "Too Many Requests", "mock429 rate limit reached", &header).await
            }
            Some(Fault::NotSse) => self.json_response(200, "OK", "mockjson a whole answer, not a stream", &[]).await,
            Some(Fault::Unauthorized) => {
                self.json_response(401, "Unauthorized", "mock401 the credential is expired or revoked", &[]).await
            }
            Some(Fault::BadRequest) => {
                self.json_response(400, "Bad Request", "mockbad temperature must be at most 2", &[]).await
            }
            Some(Fault::ContextLength) => {
                self.json_response(400, "Bad Request", sim.context_length_message(), &[]).await
            }
            Some(Fault::StallHeaders) => Ok(wait_peer_closed(reader).await),
            _ if provider.rejects_prefill && ends_with_assistant(sim, self.request) => {
                let message = "This model does not support assistant message prefill. The conversation must end with a user message.";
                self.json_response(400, "Bad Request", message, &[]).await
            }
            _ => self.stream(fault, reader).await,
        }
    }

    async fn json_response(
        &mut self,
        status: u16,
        reason: &str,
        message: &str,
        extra: &[(&str, &str)],
    ) -> std::io::Result<Next> {
        let body = wire::of_request(self.shared.provider.kind, self.request).error_body(status, message);
        let mut head = format!(
            "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n",
            body.len()
        );
        for (name, value) in extra {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        head.push_str(&body);
        self.writer.write_all(head.as_bytes()).await?;
        Ok(Next::KeepAlive)
    }

    async fn stream(&mut self, fault: Option<Fault>, reader: &mut ReadHalf<'_>) -> std::io::Result<Next> {
        let provider = &self.shared.provider;
        let model = model_of(provider, self.request);
        let sim = wire::of_model(provider.kind, &model);
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: {}\r\ncache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n",
            sim.content_type()
        );
        self.writer.write_all(head.as_bytes()).await?;
        let trailer = (fault == Some(Fault::TrailingResponse)).then(|| stray(provider, self.request, "trailing"));
        let mut out = Chunked { writer: self.writer, reader, trailer };
        if let Some(next) = out.before_opening(fault).await? {
            return Ok(next);
        }
        let answer = Answer::for_request(provider, self.request);
        for event in sim.opening(&model, answer.reasoning > 0, provider.cached_tokens) {
            out.send(&event).await?;
        }
        if fault == Some(Fault::ContentFilter) {
            for event in sim.refusal(&model) {
                out.send(&event).await?;
            }
            out.end().await?;
            return Ok(Next::KeepAlive);
        }
        let words = Words::for_request(provider, self.request);
        let start = words.start;
        let cut_short = fault.is_some_and(Fault::cuts_short);
        if let Some(next) = out.after_opening(fault, sim).await? {
            return Ok(next);
        }
        let tokens =
            if cut_short { (start + provider.tokens_before_fault).min(provider.tokens) } else { provider.tokens };
        if provider.tool_call {
            for event in sim.tool_call(&model) {
                out.send(&event).await?;
            }
        }
        if fault == Some(Fault::HugeLine) {
            out.send(&misbehave::huge_line(sim)).await?;
        }
        if out.think(sim, &model, answer.reasoning, provider.reasoning_gap).await? {
            return Ok(Next::PeerClosed);
        }
        let mut first_delay = provider.first_token_after;
        if fault == Some(Fault::SlowFirstToken) {
            first_delay += provider.slow_first_token;
        }
        let lead =
            answer.lead.iter().take(if cut_short && !answer.words { provider.tokens_before_fault } else { usize::MAX });
        let said = words.replay.iter().filter(|_| answer.words).cloned();
        let marker_words = (start..tokens).filter(|_| answer.words).map(|i| words.token(i));
        let text_block = usize::from(answer.reasoning > 0);
        let event = |token: &str| sim.text_in(&model, text_block, token);
        let tokens = lead.cloned().chain(said).chain(marker_words);
        let Some(count) = out.say(tokens, (first_delay, provider.gap), event).await? else {
            return Ok(Next::PeerClosed);
        };
        let replayed = if answer.words { words.replay.len() } else { 0 };
        let call =
            answer.call.as_ref().map(|call| wire::Call { id: &call.id, name: &call.name, arguments: &call.arguments });
        let counts = wire::Counts {
            output: count.saturating_sub(replayed),
            reasoning: answer.reasoning,
            cached: provider.cached_tokens,
        };
        end_of_answer(&mut out, fault, sim, &model, &wire::Ending { text_block, call, counts }).await
    }
}

/// After the tokens: the mid-stream fault, or the events that end a complete answer.
async fn end_of_answer(
    out: &mut Chunked<'_, '_, '_>,
    fault: Option<Fault>,
    sim: &dyn Simulated,
    model: &str,
    ending: &wire::Ending<'_>,
) -> std::io::Result<Next> {
    match fault {
        Some(Fault::MidstreamStall) => Ok(wait_peer_closed(out.reader).await),
        Some(Fault::MidstreamClose) => {
            out.end().await?;
            Ok(Next::Close)
        }
        Some(Fault::MidstreamMalformed) => {
            out.send(&sim.malformed()).await?;
            Ok(wait_peer_closed(out.reader).await)
        }
        Some(Fault::MidstreamErrorEvent) => {
            out.send(&sim.error_event()).await?;
            out.end().await?;
            Ok(Next::Close)
        }
        _ => {
            let finish = if fault == Some(Fault::OverflowUsage) {
                sim.overflowing_finish(model)
            } else {
                sim.ending(model, ending)
            };
            for event in finish {
                out.send(&event).await?;
            }
            out.end().await?;
            Ok(Next::KeepAlive)
        }
    }
}

/// Whether the conversation ends with the model's own words (a prefill).
fn ends_with_assistant(sim: &dyn Simulated, request: &RecordedRequest) -> bool {
    let (list, model_role) = sim.turns();
    let last = request.body.get(list).and_then(|messages| messages.as_array()).and_then(|messages| messages.last());
    last.and_then(|message| message.get("role")).and_then(|role| role.as_str()) == Some(model_role)
}

/// The model the request asks for, where the provider's kind says it.
fn model_of(provider: &MockProvider, request: &RecordedRequest) -> String {
    provider.kind.simulated().model(&request.path, &request.body)
}
