//! OpenTelemetry traces as a collector receives them: an OTLP/HTTP receiver
//! started by the test decodes what baton exports, and the spans of a
//! failover carry the GenAI conventions' attributes and baton's own, under
//! the client's `traceparent`. With no endpoint, nothing is installed.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "a test fails by panicking")]

mod support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::post;
use baton::AppState;
use baton::mock::{Fault, MockHandle, MockProvider};
use opentelemetry_proto::tonic::collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse};
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::trace::v1::Span;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use opentelemetry_proto::tonic::trace::v1::status::StatusCode as SpanStatus;
use prost::Message;
use serde_json::{Value, json};
use support::{Baton, ChatConfig, Received, Spawned, config_file, read_response, run};

const HARD_LIMIT: Duration = Duration::from_secs(30);
/// How long flushing the last spans may take.
const FLUSH_LIMIT: Duration = Duration::from_secs(10);
const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN_ID: &str = "00f067aa0ba902b7";

/// A collector's OTLP/HTTP endpoint on `127.0.0.1:0`, keeping every span it is sent.
struct Receiver {
    base_url: String,
    got: Arc<Mutex<Vec<ExportTraceServiceRequest>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn accept(State(got): State<Arc<Mutex<Vec<ExportTraceServiceRequest>>>>, body: Bytes) -> impl IntoResponse {
    let request = ExportTraceServiceRequest::decode(body).expect("an OTLP protobuf export");
    got.lock().unwrap().push(request);
    let answer = ExportTraceServiceResponse::default().encode_to_vec();
    (StatusCode::OK, [(header::CONTENT_TYPE, "application/x-protobuf")], answer)
}

impl Receiver {
    async fn start() -> Receiver {
        let got = Arc::new(Mutex::new(Vec::new()));
        let app = Router::new().route("/v1/traces", post(accept)).with_state(Arc::clone(&got));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind receiver");
        let base_url = format!("http://{}", listener.local_addr().expect("receiver addr"));
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Receiver { base_url, got, task }
    }

    /// Every span received so far, with its resource's `service.name`.
    fn spans(&self) -> Vec<(String, Span)> {
        let got = self.got.lock().unwrap();
        let mut spans = Vec::new();
        for resource_spans in got.iter().flat_map(|request| &request.resource_spans) {
            let attributes = resource_spans.resource.as_ref().map(|r| r.attributes.clone()).unwrap_or_default();
            let service = attributes.iter().find(|kv| kv.key == "service.name").map(|kv| text(kv.value.as_ref()));
            for scope in &resource_spans.scope_spans {
                spans.extend(scope.spans.iter().map(|span| (service.clone().unwrap_or_default(), span.clone())));
            }
        }
        spans
    }
}

fn text(value: Option<&opentelemetry_proto::tonic::common::v1::AnyValue>) -> String {
    match value.and_then(|v| v.value.as_ref()) {
        Some(Any::StringValue(s)) => s.clone(),
        Some(Any::IntValue(n)) => n.to_string(),
        Some(Any::DoubleValue(x)) => x.to_string(),
        Some(Any::BoolValue(b)) => b.to_string(),
        other => format!("{other:?}"),
    }
}

/// A span's attributes by name, each as text.
/// Asserts each `(key, value)` of `expected` among `attrs`, naming `what` they belong to.
fn assert_attributes(attrs: &HashMap<String, String>, expected: &[(&str, &str)], what: &str) {
    for &(key, value) in expected {
        assert_eq!(attrs.get(key).map(String::as_str), Some(value), "{what}'s {key}: {attrs:#?}");
    }
}

fn attributes(span: &Span) -> HashMap<String, String> {
    span.attributes.iter().map(|kv| (kv.key.clone(), text(kv.value.as_ref()))).collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A primary that answers 503 and a healthy secondary, with `top` above them.
fn failover_config(primary: &MockHandle, secondary: &MockHandle, top: &str) -> String {
    let route = ChatConfig::new().top(top).mock("primary", primary).model("claude-sim");
    route.mock("secondary", secondary).model("gpt-sim").toml()
}

/// Streams one answer with usage, continuing the client's trace.
async fn traced_chat(url: &str) -> Received {
    let body = json!({
        "model": "chat", "stream": true, "stream_options": { "include_usage": true },
        "messages": [{ "role": "user", "content": "say something" }],
    });
    read_response(traced_post(url, &body).await, std::time::Instant::now()).await
}

/// Posts `body` as a chat request in the client's trace.
async fn traced_post(url: &str, body: &Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{url}/v1/chat/completions"))
        .header("traceparent", format!("00-{TRACE_ID}-{CLIENT_SPAN_ID}-01"))
        .json(body)
        .send()
        .await
        .expect("baton answers")
}

/// The usage chunk's `(prompt_tokens, completion_tokens)`.
fn reported_usage(received: &Received) -> (String, String) {
    let usage = received.chunks().into_iter().find_map(|chunk| chunk.get("usage").cloned()).expect("a usage chunk");
    let count = |key: &str| usage.get(key).and_then(Value::as_u64).expect("a token count").to_string();
    (count("prompt_tokens"), count("completion_tokens"))
}

async fn serve(state: AppState) -> (String, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
    let url = format!("http://{}", listener.local_addr().expect("proxy addr"));
    (url, tokio::spawn(async move { drop(baton::serve(listener, state).await) }))
}

#[test]
fn a_failover_arrives_as_a_request_span_over_two_attempt_spans_in_the_clients_trace() {
    run(HARD_LIMIT, async {
        let receiver = Receiver::start().await;
        let primary = MockProvider::anthropic().fault(Fault::Http5xx).spawned().await;
        let secondary = MockProvider::openai().tokens(6).spawned().await;
        let top = format!("[telemetry]\notlp_endpoint = \"{}\"\nservice_name = \"baton-test\"", receiver.base_url);
        let config = baton::config::parse(&failover_config(&primary, &secondary, &top), "t.toml", &|_| None).unwrap();
        let state = support::over_http(config).build().with_traces().unwrap();
        assert!(state.tracer().is_some(), "an endpoint in the config installs a tracer");
        let (url, server) = serve(state.clone()).await;

        let received = traced_chat(&url).await;
        assert_eq!(received.status, 200);
        assert_eq!(received.header("x-baton-provider"), "secondary", "the secondary answered after the primary's 503");
        let (input_tokens, output_tokens) = reported_usage(&received);
        assert!(state.flush_traces(FLUSH_LIMIT).await, "the last spans were exported within {FLUSH_LIMIT:?}");
        server.abort();

        let spans = receiver.spans();
        assert_eq!(spans.len(), 3, "one request span and two attempt spans: {spans:#?}");
        assert!(spans.iter().all(|(service, _)| service == "baton-test"), "every span names the service");
        let spans: Vec<Span> = spans.into_iter().map(|(_, span)| span).collect();
        assert!(spans.iter().all(|span| hex(&span.trace_id) == TRACE_ID), "every span is in the client's trace");

        let request = spans.iter().find(|span| span.kind == SpanKind::Server as i32).expect("a server span");
        assert_eq!(request.name, "chat chat", "named for the model the client asked for");
        assert_eq!(hex(&request.parent_span_id), CLIENT_SPAN_ID, "the request span continues the client's span");
        let attrs = attributes(request);
        let expected = [
            ("gen_ai.operation.name", "chat"),
            ("gen_ai.request.model", "chat"),
            ("gen_ai.response.model", "gpt-sim"),
            ("gen_ai.provider.name", "openai"),
            ("gen_ai.usage.input_tokens", input_tokens.as_str()),
            ("gen_ai.usage.output_tokens", output_tokens.as_str()),
            ("baton.route", "chat"),
            ("baton.provider", "secondary"),
            ("baton.outcome", "ok"),
            ("baton.attempts", "2"),
            ("baton.fallback_count", "1"),
        ];
        assert_attributes(&attrs, &expected, "request span");
        let ttft: f64 = attrs["gen_ai.response.time_to_first_chunk"].parse().unwrap();
        assert!(ttft > 0.0 && ttft < HARD_LIMIT.as_secs_f64(), "a time to first token in seconds: {ttft}");
        assert_ne!(request.status.as_ref().map(|s| s.code), Some(SpanStatus::Error as i32), "an answered request");

        let mut attempts: Vec<&Span> = spans.iter().filter(|span| span.kind == SpanKind::Client as i32).collect();
        attempts.sort_by_key(|span| span.start_time_unix_nano);
        assert_eq!(attempts.len(), 2, "one client span per attempt");
        for attempt in &attempts {
            assert_eq!(attempt.parent_span_id, request.span_id, "each attempt is a child of the request span");
        }

        let (failed, answered) = (attempts[0], attempts[1]);
        // Each provider was sent its attempt's context, so a provider that traces continues the trace.
        for (mock, span) in [(&primary, failed), (&secondary, answered)] {
            let sent =
                mock.requests().first().and_then(|r| r.headers.get("traceparent").cloned()).expect("a traceparent");
            assert_eq!(sent, format!("00-{TRACE_ID}-{}-01", hex(&span.span_id)), "the attempt's own span, sampled");
        }
        assert_eq!(failed.name, "chat claude-sim");
        let attrs = attributes(failed);
        let expected = [
            ("gen_ai.operation.name", "chat"),
            ("gen_ai.provider.name", "anthropic"),
            ("gen_ai.request.model", "claude-sim"),
            ("baton.provider", "primary"),
            ("baton.outcome", "failed"),
            ("baton.failure_class", "http_5xx"),
            ("error.type", "http_5xx"),
            ("baton.retry", "0"),
            ("baton.breaker_state", "closed"),
        ];
        assert_attributes(&attrs, &expected, "failed attempt");
        assert_eq!(
            failed.status.as_ref().map(|s| s.code),
            Some(SpanStatus::Error as i32),
            "a failed attempt is an error"
        );

        assert_eq!(answered.name, "chat gpt-sim");
        let attrs = attributes(answered);
        let expected = [
            ("gen_ai.provider.name", "openai"),
            ("gen_ai.request.model", "gpt-sim"),
            ("gen_ai.response.model", "gpt-sim"),
            ("gen_ai.usage.input_tokens", input_tokens.as_str()),
            ("gen_ai.usage.output_tokens", output_tokens.as_str()),
            ("baton.provider", "secondary"),
            ("baton.outcome", "committed"),
            ("baton.breaker_state", "closed"),
        ];
        assert_attributes(&attrs, &expected, "answering attempt");
        assert!(attrs.contains_key("gen_ai.response.time_to_first_chunk"), "the attempt's time to first token");
        assert!(!attrs.contains_key("baton.failure_class"), "the answering attempt did not fail");
    });
}

/// A state exporting to `receiver`, for `routes`.
fn traced_state(receiver: &Receiver, routes: ChatConfig) -> AppState {
    let top = format!("[telemetry]\notlp_endpoint = \"{}\"", receiver.base_url);
    let config = baton::config::parse(&routes.top(&top).toml(), "t.toml", &|_| None).unwrap();
    support::over_http(config).build().with_traces().unwrap()
}

#[test]
fn a_hedge_that_lost_the_race_still_has_its_attempt_span_as_abandoned() {
    run(HARD_LIMIT, async {
        let receiver = Receiver::start().await;
        let slow = MockProvider::anthropic().first_token_after(Duration::from_secs(3)).spawned().await;
        let fast = MockProvider::openai().spawned().await;
        let routes = ChatConfig::new()
            .keys("first_token_timeout_ms = 10000\nhedge_after_ms = 100")
            .mock("slow", &slow)
            .mock("fast", &fast);
        let state = traced_state(&receiver, routes);
        let (url, server) = serve(state.clone()).await;
        let received = traced_chat(&url).await;
        assert_eq!(received.header("x-baton-provider"), "fast", "the hedge won");
        assert!(state.flush_traces(FLUSH_LIMIT).await);
        server.abort();

        let spans: Vec<Span> = receiver.spans().into_iter().map(|(_, span)| span).collect();
        let request = spans.iter().find(|span| span.kind == SpanKind::Server as i32).expect("a request span");
        let attempts: Vec<&Span> = spans.iter().filter(|span| span.kind == SpanKind::Client as i32).collect();
        assert_eq!(attempts.len(), 2, "both requests sent have a span: {spans:#?}");
        let outcome = |provider: &str| {
            let span = attempts.iter().find(|span| attributes(span)["baton.provider"] == provider).expect("its span");
            assert_eq!(span.parent_span_id, request.span_id, "under the request span");
            let error = span.status.as_ref().is_some_and(|s| s.code == SpanStatus::Error as i32);
            (attributes(span)["baton.outcome"].clone(), error)
        };
        assert_eq!(outcome("slow"), ("abandoned".to_owned(), false), "the loser was dropped, not failed");
        assert_eq!(outcome("fast"), ("committed".to_owned(), false));
    });
}

#[test]
fn a_request_refused_before_it_reaches_a_route_has_a_span_saying_why() {
    run(HARD_LIMIT, async {
        let receiver = Receiver::start().await;
        let provider = MockProvider::openai().spawned().await;
        let state = traced_state(&receiver, ChatConfig::new().mock("p", &provider));
        let (url, server) = serve(state.clone()).await;
        let body = json!({ "model": "no-such-route", "messages": [{ "role": "user", "content": "hi" }] });
        assert_eq!(traced_post(&url, &body).await.status(), 404);
        assert!(state.flush_traces(FLUSH_LIMIT).await);
        server.abort();

        let spans: Vec<Span> = receiver.spans().into_iter().map(|(_, span)| span).collect();
        assert_eq!(spans.len(), 1, "one span, the request's: {spans:#?}");
        let span = &spans[0];
        assert_eq!((span.kind, span.name.as_str()), (SpanKind::Server as i32, "chat"));
        assert_eq!(hex(&span.trace_id), TRACE_ID, "in the client's trace");
        assert_eq!(hex(&span.parent_span_id), CLIENT_SPAN_ID);
        let attrs = attributes(span);
        assert_eq!(attrs["error.type"], "model_not_found", "{attrs:#?}");
        assert_eq!(attrs["http.response.status_code"], "404");
        assert_eq!(span.status.as_ref().map(|s| s.code), Some(SpanStatus::Error as i32));
        assert!(provider.requests().is_empty());
    });
}

#[test]
fn without_an_endpoint_no_tracer_is_installed_and_requests_are_served_as_before() {
    run(HARD_LIMIT, async {
        let receiver = Receiver::start().await;
        let primary = MockProvider::anthropic().fault(Fault::Http5xx).spawned().await;
        let secondary = MockProvider::openai().spawned().await;
        let config = baton::config::parse(&failover_config(&primary, &secondary, ""), "t.toml", &|_| None).unwrap();
        let state = support::over_http(config).build().with_traces().unwrap();
        assert!(state.tracer().is_none(), "no endpoint: no tracer");
        let (url, server) = serve(state.clone()).await;
        let received = traced_chat(&url).await;
        assert_eq!(received.status, 200);
        assert_eq!(received.header("x-baton-provider"), "secondary");
        assert!(state.flush_traces(FLUSH_LIMIT).await, "nothing to flush");
        server.abort();
        assert!(receiver.spans().is_empty(), "nothing was exported");
        let sent = secondary.requests().first().map(|r| r.headers.contains_key("traceparent"));
        assert_eq!(sent, Some(false), "untraced, no trace context goes upstream");
    });
}

#[test]
fn the_binary_exports_to_otel_exporter_otlp_endpoint_and_flushes_on_sigterm() {
    run(HARD_LIMIT, async {
        let receiver = Receiver::start().await;
        let primary = MockProvider::anthropic().fault(Fault::Http5xx).spawned().await;
        let secondary = MockProvider::openai().spawned().await;
        let text = failover_config(&primary, &secondary, "listen = \"127.0.0.1:0\"");
        let path = config_file("traces-env", &text);
        let baton = Baton::serve(&path).env("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.base_url).start().await;
        let received = traced_chat(&baton.url("")).await;
        assert_eq!(received.status, 200);
        baton.signal("TERM");
        let status = baton.exit_within(FLUSH_LIMIT).await;
        assert!(status.success(), "baton stops cleanly: {status:?}");
        let spans = receiver.spans();
        assert_eq!(spans.len(), 3, "the spans were exported before the process ended: {spans:#?}");
        assert!(spans.iter().all(|(service, _)| service == "baton"), "the default service name");
    });
}

#[test]
fn check_says_where_traces_go_when_the_environment_turns_them_on() {
    let text = ChatConfig::new().provider("p", baton::providers::ProviderKind::OpenAi, "http://127.0.0.1:9/v1").toml();
    let path = config_file("traces-check", &text);
    let check = |env: &[(&str, &str)]| {
        let mut command = Baton::once(&["check", "--config"]);
        command.arg(&path).env_remove("OTEL_EXPORTER_OTLP_ENDPOINT").env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
        let out = command.envs(env.iter().copied()).output().expect("check runs");
        assert!(out.status.success(), "check succeeds: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let on = check(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"), ("OTEL_SERVICE_NAME", "gw")]);
    assert!(on.contains("traces: to http://collector:4318/v1/traces as service \"gw\""), "{on}");
    let off = check(&[]);
    assert!(!off.contains("traces:"), "no endpoint, no traces: {off}");
}
