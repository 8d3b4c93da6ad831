//! The simulated providers answer what real applications send: they call an
//! offered tool and answer its result, write JSON valid for a schema, count
//! the images they were shown, and think before answering — each in its own
//! wire format, checked through baton and, where baton would change the
//! answer, straight off the provider's stream.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "a test fails by panicking")]

mod support;

use std::time::{Duration, Instant};

use baton::mock::{MockHandle, MockProvider, RECORDS_PATH};
use baton::providers::ProviderKind;
use serde_json::{Value, json};
use support::{ChatConfig, Proxy, Received, Spawned, post_chat, run};

const HARD_LIMIT: Duration = Duration::from_secs(20);
/// A small PNG as a `data:` URL.
const PNG: &str = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

fn weather_tools() -> Value {
    json!([
        { "type": "function", "function": { "name": "get_weather", "description": "Weather for a city",
            "parameters": { "type": "object", "required": ["city"],
                "properties": { "city": { "type": "string" }, "unit": { "type": "string" } } } } },
        { "type": "function", "function": { "name": "get_time", "parameters": { "type": "object" } } },
    ])
}

fn ask(stream: bool, messages: Value) -> Value {
    json!({ "model": "chat", "stream": stream, "messages": messages })
}

/// A baton whose route "chat" has `provider` as its one target.
async fn through(provider: &MockHandle, route_keys: &str) -> Proxy {
    Proxy::start(&ChatConfig::new().keys(route_keys).mock("p", provider).toml()).await
}

/// A baton straight over a `kind` provider with its defaults.
async fn plain(kind: ProviderKind) -> (MockHandle, Proxy) {
    let provider = MockProvider::new(kind).spawned().await;
    let proxy = through(&provider, "").await;
    (provider, proxy)
}

/// A baton over a `kind` provider answering `tokens` words, and a streamed
/// request to it saying `prompt`, offered the weather tools.
async fn offering_tools(kind: ProviderKind, tokens: usize, prompt: &str) -> (MockHandle, Proxy, Value) {
    let provider = MockProvider::new(kind).tokens(tokens).spawned().await;
    let proxy = through(&provider, "").await;
    let mut body = ask(true, json!([{ "role": "user", "content": prompt }]));
    body["tools"] = weather_tools();
    (provider, proxy, body)
}

/// The tool calls a client assembles from a streamed answer's deltas: (id, name, arguments).
fn streamed_calls(got: &Received) -> Vec<(String, String, String)> {
    let mut calls: Vec<(String, String, String)> = Vec::new();
    for chunk in got.chunks() {
        for delta in chunk.pointer("/choices/0/delta/tool_calls").and_then(Value::as_array).into_iter().flatten() {
            let index = delta["index"].as_u64().expect("a call index") as usize;
            if calls.len() <= index {
                calls.resize(index + 1, Default::default());
            }
            let call = &mut calls[index];
            call.0.push_str(delta.pointer("/id").and_then(Value::as_str).unwrap_or_default());
            call.1.push_str(delta.pointer("/function/name").and_then(Value::as_str).unwrap_or_default());
            call.2.push_str(delta.pointer("/function/arguments").and_then(Value::as_str).unwrap_or_default());
        }
    }
    calls
}

fn finish_reason(got: &Received) -> String {
    let chunks = got.chunks();
    let mut reasons = chunks.iter().filter_map(|c| c.pointer("/choices/0/finish_reason")?.as_str().map(str::to_owned));
    reasons.next_back().unwrap_or_default()
}

fn content_chunks(got: &Received) -> usize {
    let contents = got.chunks();
    contents
        .iter()
        .filter(|c| c.pointer("/choices/0/delta/content").and_then(Value::as_str).is_some_and(|t| !t.is_empty()))
        .count()
}

#[test]
fn each_provider_calls_the_first_offered_tool_in_its_own_wire_format() {
    run(HARD_LIMIT, async {
        for kind in ProviderKind::ALL {
            let (provider, proxy, mut body) = offering_tools(kind, 2, "weather in Paris?").await;
            let got = post_chat(&proxy, &body).await;
            assert_eq!(got.status, 200, "{kind}: {}", got.raw);
            let calls = streamed_calls(&got);
            assert_eq!(calls.len(), 1, "{kind}: one call: {}", got.raw);
            let (id, name, arguments) = &calls[0];
            assert!(!id.is_empty(), "{kind}: the call has an id");
            assert_eq!(name, "get_weather", "{kind}: the first offered tool");
            assert_eq!(serde_json::from_str::<Value>(arguments).unwrap(), json!({ "city": "Paris" }), "{kind}");
            assert_eq!(finish_reason(&got), "tool_calls", "{kind}");
            assert_eq!(got.streamed_text(), provider.provider().expected_text(), "{kind}: the words before the call");

            body["stream"] = json!(false);
            let whole = post_chat(&proxy, &body).await.json();
            assert_eq!(whole["choices"][0]["finish_reason"], "tool_calls", "{kind}: {whole}");
            let call = &whole["choices"][0]["message"]["tool_calls"][0];
            assert_eq!(call["function"]["name"], "get_weather", "{kind}: {whole}");
            let arguments: Value = serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
            assert_eq!(arguments, json!({ "city": "Paris" }), "{kind}");
            assert_eq!(provider.requests().len(), 2, "{kind}: both requests reached the provider");
        }
    });
}

#[test]
fn a_named_tool_is_called_and_none_turns_calls_off() {
    run(HARD_LIMIT, async {
        for kind in ProviderKind::ALL {
            let (_provider, proxy, mut body) = offering_tools(kind, 1, "what time is it?").await;
            body["tool_choice"] = json!({ "type": "function", "function": { "name": "get_time" } });
            let named = streamed_calls(&post_chat(&proxy, &body).await);
            assert_eq!(named.iter().map(|c| c.1.as_str()).collect::<Vec<_>>(), ["get_time"], "{kind}");
            assert_eq!(named[0].2, "{}", "{kind}: a tool without properties gets an empty object");
            body["tool_choice"] = json!("none");
            let none = post_chat(&proxy, &body).await;
            assert!(streamed_calls(&none).is_empty(), "{kind}: no call under tool_choice none: {}", none.raw);
            assert_eq!(finish_reason(&none), "stop", "{kind}");
        }
    });
}

fn tool_round_trip(stream: bool) -> Value {
    let mut body = ask(
        stream,
        json!([
            { "role": "user", "content": "weather in Paris?" },
            { "role": "assistant", "content": null, "tool_calls": [{ "id": "call_1", "type": "function",
                "function": { "name": "get_weather", "arguments": "{\"city\":\"Paris\"}" } }] },
            { "role": "tool", "tool_call_id": "call_1", "content": "18C and sunny" },
        ]),
    );
    body["tools"] = weather_tools();
    body
}

#[test]
fn a_tool_result_is_answered_with_its_content() {
    run(HARD_LIMIT, async {
        for kind in ProviderKind::ALL {
            let (provider, proxy) = plain(kind).await;
            let got = post_chat(&proxy, &tool_round_trip(true)).await;
            assert_eq!(got.streamed_text(), "the tool said: 18C and sunny", "{kind}: {}", got.raw);
            assert!(content_chunks(&got) > 1, "{kind}: the answer is streamed in pieces");
            assert!(streamed_calls(&got).is_empty(), "{kind}: no second call after the result");
            assert_eq!(finish_reason(&got), "stop", "{kind}");
            let whole = post_chat(&proxy, &tool_round_trip(false)).await.json();
            assert_eq!(whole["choices"][0]["message"]["content"], "the tool said: 18C and sunny", "{kind}");

            let received = provider.requests().pop().unwrap().body;
            let result = match kind {
                ProviderKind::OpenAi | ProviderKind::Azure => received["messages"][2].clone(),
                ProviderKind::OpenAiResponses => received["input"][2].clone(),
                ProviderKind::Anthropic | ProviderKind::Bedrock => received["messages"][2]["content"][0].clone(),
                ProviderKind::Gemini | ProviderKind::Vertex => received["contents"][2]["parts"][0].clone(),
            };
            let expected = match kind {
                ProviderKind::OpenAi | ProviderKind::Azure => {
                    json!({ "role": "tool", "tool_call_id": "call_1", "content": "18C and sunny" })
                }
                ProviderKind::OpenAiResponses => {
                    json!({ "type": "function_call_output", "call_id": "call_1", "output": "18C and sunny" })
                }
                ProviderKind::Anthropic | ProviderKind::Bedrock => {
                    json!({ "type": "tool_result", "tool_use_id": "call_1",
                    "content": [{ "type": "text", "text": "18C and sunny" }] })
                }
                ProviderKind::Gemini | ProviderKind::Vertex => {
                    json!({ "functionResponse": { "name": "get_weather", "response": { "output": "18C and sunny" } } })
                }
            };
            assert_eq!(result, expected, "{kind}: the result in the provider's own shape");
        }
    });
}

fn forecast_schema() -> Value {
    json!({ "type": "object", "additionalProperties": false,
        "required": ["city", "days", "rain", "tags", "unit", "at"],
        "properties": {
            "city": { "type": "string" }, "days": { "type": "integer" }, "rain": { "type": "boolean" },
            "tags": { "type": "array", "items": { "type": "string" } }, "unit": { "type": "string", "enum": ["c", "f"] },
            "at": { "type": "object", "required": ["lat"], "properties": { "lat": { "type": "number" } } },
            "note": { "type": "string" } } })
}

#[test]
fn json_answers_are_valid_for_the_schema_and_streamed_in_fragments() {
    run(HARD_LIMIT, async {
        for kind in ProviderKind::ALL {
            let (provider, proxy) = plain(kind).await;
            let mut body = ask(true, json!([{ "role": "user", "content": "the forecast" }]));
            body["response_format"] =
                json!({ "type": "json_schema", "json_schema": { "name": "forecast", "schema": forecast_schema() } });
            let got = post_chat(&proxy, &body).await;
            let answer: Value = serde_json::from_str(&got.streamed_text()).expect("the answer is JSON");
            let expected =
                json!({ "city": "x", "days": 1, "rain": true, "tags": [], "unit": "c", "at": { "lat": 1.0 } });
            assert_eq!(answer, expected, "{kind}: every required property, of its type");
            assert!(content_chunks(&got) >= 3, "{kind}: streamed in fragments: {}", got.raw);
            let received = provider.requests().pop().unwrap().body;
            let asked = match kind {
                ProviderKind::OpenAi | ProviderKind::Azure => {
                    received["response_format"]["json_schema"]["schema"].clone()
                }
                ProviderKind::OpenAiResponses => received["text"]["format"]["schema"].clone(),
                ProviderKind::Anthropic | ProviderKind::Bedrock => {
                    received["output_config"]["format"]["schema"].clone()
                }
                ProviderKind::Gemini | ProviderKind::Vertex => {
                    received["generationConfig"]["responseJsonSchema"].clone()
                }
            };
            assert_eq!(asked, forecast_schema(), "{kind}: the schema reached the provider");

            body["response_format"] = json!({ "type": "json_object" });
            let object = post_chat(&proxy, &body).await;
            let answer: Value = serde_json::from_str(&object.streamed_text()).expect("json_object is JSON");
            assert_eq!(answer, json!({ "answer": kind.name() }), "{kind}");
        }
    });
}

/// The text of a streamed answer read straight off the simulated provider.
async fn direct_text(provider: &MockHandle, body: &Value) -> (String, Vec<Value>) {
    let url = match provider.provider_kind() {
        ProviderKind::OpenAi => format!("{}/chat/completions", provider.base_url()),
        ProviderKind::OpenAiResponses => format!("{}/responses", provider.base_url()),
        ProviderKind::Anthropic => format!("{}/v1/messages", provider.base_url()),
        ProviderKind::Gemini => format!("{}/v1beta/models/m:streamGenerateContent?alt=sse", provider.base_url()),
        ProviderKind::Azure => {
            format!("{}/openai/deployments/m/chat/completions?api-version=2024-10-21", provider.base_url())
        }
        ProviderKind::Bedrock => format!("{}/model/anthropic.m/invoke-with-response-stream", provider.base_url()),
        ProviderKind::Vertex => format!(
            "{}/v1/projects/p/locations/r/publishers/google/models/m:streamGenerateContent?alt=sse",
            provider.base_url()
        ),
    };
    let raw = reqwest::Client::new().post(url).json(body).send().await.unwrap().text().await.unwrap();
    let events: Vec<Value> = raw
        .split("\n\n")
        .filter_map(|event| event.lines().find_map(|line| line.strip_prefix("data: ")))
        .filter_map(|data| serde_json::from_str(data).ok())
        .collect();
    let text = events
        .iter()
        .filter_map(|e| {
            e.pointer("/choices/0/delta/content")
                .or_else(|| e.pointer("/delta/text"))
                .or_else(|| e.pointer("/candidates/0/content/parts/0/text"))
                .and_then(Value::as_str)
        })
        .collect();
    (text, events)
}

#[test]
fn json_comes_fenced_or_invalid_when_asked_to() {
    run(HARD_LIMIT, async {
        let body = json!({ "model": "m", "stream": true, "messages": [{ "role": "user", "content": "the forecast" }],
            "response_format": { "type": "json_schema", "json_schema": { "name": "f", "schema": forecast_schema() } } });
        let fenced = MockProvider::openai().json_fenced().spawned().await;
        let (text, _) = direct_text(&fenced, &body).await;
        let inner = text.strip_prefix("```json\n").and_then(|t| t.strip_suffix("\n```")).expect("a json fence");
        assert_eq!(serde_json::from_str::<Value>(inner).unwrap()["unit"], "c", "valid JSON inside the fence");
        let invalid = MockProvider::openai().json_invalid().spawned().await;
        let (text, _) = direct_text(&invalid, &body).await;
        assert!(text.starts_with("{\"") && serde_json::from_str::<Value>(&text).is_err(), "not JSON: {text}");
    });
}

#[test]
fn images_are_accepted_and_counted_in_each_format() {
    run(HARD_LIMIT, async {
        for kind in ProviderKind::ALL {
            let provider = MockProvider::new(kind).tokens(2).spawned().await;
            let proxy = through(&provider, "").await;
            let image = json!({ "type": "image_url", "image_url": { "url": PNG } });
            let parts = json!([{ "type": "text", "text": "what are these?" }, image, image]);
            let got = post_chat(&proxy, &ask(true, json!([{ "role": "user", "content": parts }]))).await;
            let expected = format!("saw 2 images. {}", provider.provider().expected_text());
            assert_eq!(got.streamed_text(), expected, "{kind}: {}", got.raw);
            let received = provider.requests().pop().unwrap().body;
            let sent = match kind {
                ProviderKind::OpenAi | ProviderKind::Azure => received["messages"][0]["content"][1].clone(),
                ProviderKind::OpenAiResponses => received["input"][0]["content"][1].clone(),
                ProviderKind::Anthropic | ProviderKind::Bedrock => received["messages"][0]["content"][1].clone(),
                ProviderKind::Gemini | ProviderKind::Vertex => received["contents"][0]["parts"][1].clone(),
            };
            let data = PNG.split_once(',').unwrap().1;
            let expected = match kind {
                ProviderKind::OpenAi | ProviderKind::Azure => image.clone(),
                ProviderKind::OpenAiResponses => json!({ "type": "input_image", "image_url": PNG }),
                ProviderKind::Anthropic | ProviderKind::Bedrock => {
                    json!({ "type": "image", "source": { "type": "base64", "media_type": "image/png", "data": data } })
                }
                ProviderKind::Gemini | ProviderKind::Vertex => {
                    json!({ "inlineData": { "mimeType": "image/png", "data": data } })
                }
            };
            assert_eq!(sent, expected, "{kind}: the image in the provider's own shape");
        }
        let provider = MockProvider::anthropic().tokens(1).spawned().await;
        let proxy = through(&provider, "").await;
        let by_url = json!([{ "type": "image_url", "image_url": { "url": "https://example.com/cat.png" } }]);
        let got = post_chat(&proxy, &ask(true, json!([{ "role": "user", "content": by_url }]))).await;
        assert_eq!(got.streamed_text(), "saw 1 image. anthropic0", "an image by URL counts too");
    });
}

#[test]
fn reasoning_comes_before_the_answer_and_usage_counts_it_and_the_cache() {
    run(HARD_LIMIT, async {
        for kind in ProviderKind::ALL {
            let provider = MockProvider::new(kind).tokens(3).reasoning(3).cached_tokens(4).spawned().await;
            let proxy = through(&provider, "stream_reasoning = true").await;
            let mut body = ask(true, json!([{ "role": "user", "content": "think first" }]));
            body["stream_options"] = json!({ "include_usage": true });
            let got = post_chat(&proxy, &body).await;
            let deltas: Vec<String> = got
                .chunks()
                .iter()
                .filter_map(|c| {
                    c.pointer("/choices/0/delta/reasoning_content").and_then(Value::as_str).map(str::to_owned)
                })
                .collect();
            assert_eq!(deltas.concat(), "think0 think1 think2", "{kind}: three reasoning deltas: {}", got.raw);
            let first_reasoning = got.raw.find("reasoning_content").unwrap();
            let first_text = got.raw.find("\"content\":\"").unwrap();
            assert!(first_reasoning < first_text, "{kind}: reasoning before the answer");
            assert_eq!(got.streamed_text(), provider.provider().expected_text(), "{kind}");
            let usage = got.chunks().last().unwrap()["usage"].clone();
            // Anthropic's usage counts thinking among the output without breaking it out.
            let anthropic = matches!(kind, ProviderKind::Anthropic | ProviderKind::Bedrock);
            let reasoning = if anthropic { Value::Null } else { json!(3) };
            assert_eq!(usage["completion_tokens_details"]["reasoning_tokens"], reasoning, "{kind}: {usage}");
            assert_eq!(usage["prompt_tokens_details"]["cached_tokens"], 4, "{kind}: {usage}");
            assert_eq!((usage["prompt_tokens"].clone(), usage["completion_tokens"].clone()), (json!(10), json!(6)));
        }
    });
}

#[test]
fn reasoning_deltas_wait_their_gap() {
    run(HARD_LIMIT, async {
        let gap = Duration::from_millis(60);
        let provider = MockProvider::gemini().tokens(1).reasoning(3).reasoning_gap(gap).spawned().await;
        let started = Instant::now();
        let (text, events) = direct_text(&provider, &json!({ "contents": [] })).await;
        assert!(started.elapsed() >= gap * 3, "three gaps before the answer: {:?}", started.elapsed());
        let thoughts =
            events.iter().filter(|e| e.pointer("/candidates/0/content/parts/0/thought") == Some(&json!(true)));
        assert_eq!(thoughts.count(), 3, "thought parts");
        assert_eq!(text, "think0 think1 think2gemini0", "a client that ignores `thought` reads them as text");
        let usage = &events.last().unwrap()["usageMetadata"];
        assert_eq!((usage["thoughtsTokenCount"].clone(), usage["candidatesTokenCount"].clone()), (json!(3), json!(1)));
    });
}

#[test]
fn a_forced_tool_call_still_comes_before_the_text() {
    run(HARD_LIMIT, async {
        let provider = MockProvider::anthropic().tool_call().tokens(2).spawned().await;
        let (text, events) =
            direct_text(&provider, &json!({ "messages": [{ "role": "user", "content": "hi" }] })).await;
        let tool_at = events.iter().position(|e| e.pointer("/content_block/type") == Some(&json!("tool_use"))).unwrap();
        let text_at = events.iter().position(|e| e.pointer("/delta/text").is_some()).unwrap();
        assert!(tool_at < text_at, "the call before the text");
        assert_eq!(events[tool_at]["content_block"]["name"], "get_weather");
        assert_eq!(text, "anthropic0 anthropic1");
    });
}

#[test]
fn recorded_requests_are_served_as_json() {
    run(HARD_LIMIT, async {
        let provider = MockProvider::openai().tokens(1).spawned().await;
        let body = json!({ "model": "m", "stream": true, "messages": [{ "role": "user", "content": "nonce=r1" }] });
        direct_text(&provider, &body).await;
        let url = format!("http://{}{RECORDS_PATH}", provider.addr());
        let records: Value = reqwest::get(&url).await.unwrap().json().await.unwrap();
        let records = records.as_array().expect("an array");
        assert_eq!(records.len(), 1, "the chat request, not the look-up itself: {records:?}");
        assert_eq!(records[0]["path"], "/v1/chat/completions");
        assert_eq!(records[0]["body"], body);
        assert_eq!(records[0]["fault"], Value::Null);
        assert_eq!(provider.requests().len(), 1, "looking does not record");
    });
}
