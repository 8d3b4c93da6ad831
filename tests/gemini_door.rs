//! What only the Gemini door does, over real loopback TCP: Google's paths
//! under `/v1beta/` and `/v1/`, the key where Google's clients put it, the
//! same-dialect path that sends a gemini-kind target the client's body as
//! sent, the translation for every other kind, `countTokens` and the model
//! list, Google's error shape on every error, and every fault before the
//! first token rescued through this door for every provider kind.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "a test fails by panicking")]

mod support;

use std::time::Duration;

use baton::mock::{Fault, MockProvider};
use baton::providers::ProviderKind;
use serde_json::{Value, json};
use support::{ChatConfig, Proxy, Received, Server, Spawned, mocks_toml, post_with, within};

const HARD_LIMIT: Duration = Duration::from_secs(60);

const STREAM: &str = "/v1beta/models/chat:streamGenerateContent?alt=sse";
const GENERATE: &str = "/v1/models/chat:generateContent";

/// A request as `google-genai` writes one.
fn gemini_body() -> Value {
    json!({
        "contents": [{ "role": "user", "parts": [{ "text": "say something" }] }],
        "systemInstruction": { "role": "user", "parts": [{ "text": "be brief" }] },
        "generationConfig": { "temperature": 0.5, "maxOutputTokens": 256, "topK": 40.0 },
    })
}

async fn post(server: &impl Server, path: &str, body: &Value) -> Received {
    post_with(server, path, body, &[("x-goog-api-key", "any")]).await
}

/// Each event of a Gemini stream: only `data: ` lines, each its own event.
fn events(got: &Received) -> Vec<Value> {
    assert!(got.raw.ends_with("\n\n"), "{}", got.raw);
    got.raw
        .split_terminator("\n\n")
        .map(|event| {
            let data = event.strip_prefix("data: ").unwrap_or_else(|| panic!("not a data line: {event:?}"));
            assert!(!data.contains('\n'), "one line an event: {event:?}");
            serde_json::from_str(data).unwrap_or_else(|err| panic!("{err}: {data}"))
        })
        .collect()
}

/// The answer text of Gemini responses, thoughts left out.
fn text_of(responses: &[Value]) -> String {
    responses
        .iter()
        .flat_map(|response| response["candidates"][0]["content"]["parts"].as_array().cloned().unwrap_or_default())
        .filter(|part| part["thought"] != true)
        .filter_map(|part| part["text"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn another_kind_answers_in_gemini_s_shape_streamed_and_whole_under_both_versions() {
    within(HARD_LIMIT, async {
        let openai = MockProvider::openai().marker("gpt").spawned().await;
        let proxy = Proxy::start(&mocks_toml(&[("gpt", &openai)], 1000, 1000)).await;

        let streamed = post(&proxy, STREAM, &gemini_body()).await;
        assert_eq!(streamed.status, 200, "{}", streamed.raw);
        assert_eq!(streamed.header("content-type"), "text/event-stream");
        let chunks = events(&streamed);
        assert_eq!(text_of(&chunks), openai.provider().expected_text());
        let last = chunks.last().unwrap();
        assert_eq!(last["candidates"][0]["finishReason"], "STOP", "{last}");
        assert!(last["usageMetadata"]["totalTokenCount"].as_u64().unwrap() > 0, "{last}");
        assert!(chunks.iter().all(|chunk| chunk["responseId"] == chunks[0]["responseId"]));

        for path in [GENERATE, "/v1beta/models/chat:generateContent"] {
            let whole = post(&proxy, path, &gemini_body()).await;
            assert_eq!(whole.status, 200, "{path}: {}", whole.raw);
            let body = whole.json();
            assert_eq!(text_of(std::slice::from_ref(&body)), openai.provider().expected_text(), "{path}");
            assert_eq!(body["candidates"][0]["content"]["role"], "model");
        }

        let sent = openai.requests().pop().unwrap().body;
        assert_eq!(sent["temperature"], 0.5, "{sent}");
        assert_eq!(sent["max_tokens"], 256, "{sent}");
        assert_eq!(sent["messages"][0], json!({ "role": "system", "content": "be brief" }), "{sent}");
    })
    .await;
}

#[tokio::test]
async fn a_gemini_target_gets_the_client_s_body_as_sent() {
    within(HARD_LIMIT, async {
        let gemini = MockProvider::gemini().marker("native").spawned().await;
        let proxy = Proxy::start(&mocks_toml(&[("gem", &gemini)], 1000, 1000)).await;
        let mut body = gemini_body();
        body["safetySettings"] = json!([{ "category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE" }]);
        body["contents"] = json!([
            { "role": "user", "parts": [{ "text": "list the files" }] },
            { "role": "model", "parts": [{ "functionCall": { "name": "ls", "args": {} }, "thoughtSignature": "c2ln" }] },
            { "role": "user", "parts": [{ "functionResponse": { "name": "ls", "response": { "output": "README.md" } } }] },
        ]);
        body["x_field_from_the_future"] = json!([1, 2]);
        let got = post(&proxy, STREAM, &body).await;
        assert_eq!(got.status, 200, "{}", got.raw);
        assert!(!text_of(&events(&got)).is_empty());
        let sent = gemini.requests().pop().unwrap();
        assert_eq!(sent.body, body, "the body goes as it came");
        assert!(sent.path.contains(":streamGenerateContent"), "{}", sent.path);
    })
    .await;
}

#[tokio::test]
async fn a_function_call_goes_back_whole_and_its_result_comes_back_translated() {
    within(HARD_LIMIT, async {
        let openai = MockProvider::openai().tool_call().spawned().await;
        let proxy = Proxy::start(&mocks_toml(&[("gpt", &openai)], 1000, 1000)).await;
        let mut body = gemini_body();
        body["tools"] = json!([{ "functionDeclarations": [{ "name": "get_weather", "description": "the weather",
            "parameters": { "type": "OBJECT", "properties": { "city": { "type": "STRING" } }, "required": ["city"] } }] }]);
        body["toolConfig"] = json!({ "functionCallingConfig": { "mode": "ANY", "allowedFunctionNames": ["get_weather"] } });
        let got = post(&proxy, STREAM, &body).await;
        assert_eq!(got.status, 200, "{}", got.raw);
        let chunks = events(&got);
        let last = chunks.last().unwrap();
        let call = &last["candidates"][0]["content"]["parts"][0]["functionCall"];
        assert_eq!(call["name"], "get_weather", "{last}");
        assert!(call["args"].is_object(), "arguments go back as an object: {call}");
        let sent = openai.requests().pop().unwrap().body;
        assert_eq!(sent["tools"][0]["function"]["parameters"]["type"], "object", "{sent}");
        assert_eq!(sent["tool_choice"], json!({ "type": "function", "function": { "name": "get_weather" } }));

        // The call and its result sent back, as the Gemini CLI does (an id it made up).
        let mut body = gemini_body();
        body["contents"] = json!([
            { "role": "user", "parts": [{ "text": "weather in Paris?" }] },
            { "role": "model", "parts": [{ "functionCall": { "id": "cli_1", "name": "get_weather", "args": { "city": "Paris" } } }] },
            { "role": "user", "parts": [{ "functionResponse": { "id": "cli_1", "name": "get_weather", "response": { "output": "sunny" } } }] },
        ]);
        let got = post(&proxy, GENERATE, &body).await;
        assert_eq!(got.status, 200, "{}", got.raw);
        let sent = openai.requests().pop().unwrap().body;
        let messages = sent["messages"].as_array().unwrap();
        let tool = messages.iter().find(|m| m["role"] == "tool").expect("a tool message");
        assert_eq!(tool["content"], "sunny");
        assert_eq!(tool["tool_call_id"], "cli_1");
    })
    .await;
}

#[tokio::test]
async fn errors_are_google_s_shape_and_the_key_is_read_where_google_s_clients_put_it() {
    within(HARD_LIMIT, async {
        let openai = MockProvider::openai().spawned().await;
        let config = ChatConfig::new().top("[[keys]]\nname = \"app\"\nkey = \"sk-gemini-client\"").mock("gpt", &openai);
        let proxy = Proxy::start(&config.toml()).await;
        let error_of = |got: &Received| -> (u64, String) {
            let error = &got.json()["error"];
            assert!(error["code"].is_u64(), "an integer code: {}", got.raw);
            assert_eq!(error["code"].as_u64(), Some(u64::from(got.status)), "{}", got.raw);
            (error["code"].as_u64().unwrap(), error["status"].as_str().unwrap_or_default().to_owned())
        };

        let missing = post_with(&proxy, GENERATE, &gemini_body(), &[]).await;
        assert_eq!(error_of(&missing), (401, "UNAUTHENTICATED".to_owned()));
        let wrong = post_with(&proxy, GENERATE, &gemini_body(), &[("x-goog-api-key", "sk-wrong")]).await;
        assert_eq!(error_of(&wrong).0, 401);
        let header = post_with(&proxy, GENERATE, &gemini_body(), &[("x-goog-api-key", "sk-gemini-client")]).await;
        assert_eq!(header.status, 200, "{}", header.raw);
        let query = post_with(&proxy, &format!("{GENERATE}?key=sk-gemini-client"), &gemini_body(), &[]).await;
        assert_eq!(query.status, 200, "{}", query.raw);

        let key = [("x-goog-api-key", "sk-gemini-client")];
        let unknown = post_with(&proxy, "/v1beta/models/nope:generateContent", &gemini_body(), &key).await;
        assert_eq!(error_of(&unknown), (404, "NOT_FOUND".to_owned()));
        let method = post_with(&proxy, "/v1beta/models/chat:embedContent", &gemini_body(), &key).await;
        assert_eq!(error_of(&method), (404, "NOT_FOUND".to_owned()));
        let bad = post_with(&proxy, GENERATE, &json!({ "contents": [] }), &key).await;
        assert_eq!(error_of(&bad), (400, "INVALID_ARGUMENT".to_owned()));
        let no_sse = post_with(&proxy, "/v1beta/models/chat:streamGenerateContent", &gemini_body(), &key).await;
        let (_, status) = error_of(&no_sse);
        assert_eq!(status, "INVALID_ARGUMENT");
        assert!(no_sse.raw.contains("alt=sse"), "{}", no_sse.raw);
    })
    .await;
}

#[tokio::test]
async fn a_failure_after_the_first_token_ends_with_google_s_error_alone() {
    within(HARD_LIMIT, async {
        let failing = MockProvider::openai().fault(Fault::MidstreamErrorEvent).spawned().await;
        let proxy = Proxy::start(&mocks_toml(&[("gpt", &failing)], 1000, 1000)).await;
        let got = post(&proxy, STREAM, &gemini_body()).await;
        assert_eq!(got.status, 200, "{}", got.raw);
        let chunks = events(&got);
        let last = chunks.last().unwrap();
        assert_eq!(last.as_object().map(|o| o.len()), Some(1), "the error alone: {last}");
        assert!(last["error"]["code"].is_u64(), "{last}");
        assert!(!got.raw.contains("finishReason"), "a cut answer is never finished: {}", got.raw);
    })
    .await;
}

#[tokio::test]
async fn count_tokens_and_the_model_list_answer_in_google_s_shape() {
    within(HARD_LIMIT, async {
        let openai = MockProvider::openai().spawned().await;
        let proxy = Proxy::start(&mocks_toml(&[("gpt", &openai)], 1000, 1000)).await;
        let counted =
            post(&proxy, "/v1beta/models/chat:countTokens", &json!({ "contents": gemini_body()["contents"] })).await;
        assert_eq!(counted.status, 200, "{}", counted.raw);
        assert!(counted.json()["totalTokens"].as_u64().unwrap() > 0, "{}", counted.raw);
        assert_eq!(counted.header("x-baton-provider"), "estimate");

        let client = reqwest::Client::new();
        for path in ["/v1beta/models", "/v1/models"] {
            let list: Value =
                client.get(proxy.url(path)).header("x-goog-api-key", "any").send().await.unwrap().json().await.unwrap();
            assert_eq!(list["models"][0]["name"], "models/chat", "{path}: {list}");
            assert!(list.get("nextPageToken").is_none(), "one page: {list}");
        }
        let one: Value = client.get(proxy.url("/v1beta/models/chat")).send().await.unwrap().json().await.unwrap();
        assert_eq!(one["name"], "models/chat");
        let openai_list: Value = client.get(proxy.url("/v1/models")).send().await.unwrap().json().await.unwrap();
        assert_eq!(openai_list["object"], "list", "OpenAI's clients still get OpenAI's list");
    })
    .await;
}

#[tokio::test]
async fn every_fault_before_the_first_token_is_rescued_through_this_door_for_every_kind() {
    within(HARD_LIMIT, async {
        for kind in ProviderKind::ALL {
            let checks = Fault::PRE_COMMIT.into_iter().map(|fault| async move {
                let failing = MockProvider::new(kind).fault(fault).spawned().await;
                let spare = MockProvider::openai().marker("spare").spawned().await;
                let proxy = Proxy::start(&mocks_toml(&[("failing", &failing), ("spare", &spare)], 300, 300)).await;
                for (path, stream) in [(STREAM, true), (GENERATE, false)] {
                    let got = post(&proxy, path, &gemini_body()).await;
                    assert_eq!(got.status, 200, "{kind} {}: {}", fault.name(), got.raw);
                    assert_eq!(got.header("x-baton-provider"), "spare", "{kind} {}", fault.name());
                    let text = if stream { text_of(&events(&got)) } else { text_of(&[got.json()]) };
                    assert_eq!(text, spare.provider().expected_text(), "{kind} {}: no leaked byte", fault.name());
                }
            });
            futures_util::future::join_all(checks).await;
        }
    })
    .await;
}

#[tokio::test]
async fn the_gemini_cli_s_thinking_and_sampling_are_named_as_it_wrote_them_and_dropped_on_request() {
    within(HARD_LIMIT, async {
        let claude = MockProvider::anthropic().spawned().await;
        let mut body = gemini_body();
        // What the Gemini CLI sends to a Gemini 3 model.
        body["generationConfig"] = json!({ "temperature": 1, "topP": 0.95, "topK": 64,
            "thinkingConfig": { "includeThoughts": true, "thinkingLevel": "HIGH" } });
        let route = |keys: &str| ChatConfig::new().keys(keys).mock("claude", &claude).deadlines(1000, 1000).toml();

        // With the defaults, thinking and the sampling Anthropic takes beside it
        // (temperature 1, top_p 0.95) go; the top-k cut it refuses is left out.
        let defaults = Proxy::start(&route("")).await;
        let got = post(&defaults, STREAM, &body).await;
        assert_eq!(got.status, 200, "{}", got.raw);
        assert_eq!(got.header("x-baton-dropped-params"), "generationConfig.topK");
        let sent = claude.requests().pop().unwrap().body;
        assert!(sent["thinking"]["budget_tokens"].is_u64(), "thinking kept: {sent}");
        assert_eq!((sent["temperature"].as_f64(), sent["top_p"].as_f64()), (Some(1.0), Some(0.95)), "{sent}");
        assert!(sent.get("top_k").is_none(), "{sent}");

        let strict = Proxy::start(&route("unsupported_params = \"refuse\"")).await;
        let refused = post(&strict, STREAM, &body).await;
        assert_eq!(refused.status, 400, "{}", refused.raw);
        let message = refused.json()["error"]["message"].as_str().unwrap_or_default().to_owned();
        assert!(message.contains("generationConfig.topK"), "named as the CLI wrote it: {message}");

        // A temperature Anthropic refuses beside thinking is refused by name,
        // or, with "drop", the thinking goes and the temperature stays.
        body["generationConfig"]["temperature"] = json!(0.5);
        let asked = claude.requests().len();
        let refused = post(&defaults, STREAM, &body).await;
        assert_eq!(refused.status, 400, "{}", refused.raw);
        let message = refused.json()["error"]["message"].as_str().unwrap_or_default().to_owned();
        for named in ["generationConfig.thinkingConfig.thinkingLevel", "generationConfig.temperature"] {
            assert!(message.contains(named), "names {named}: {message}");
        }
        assert_eq!(claude.requests().len(), asked, "a refused request reaches no target");

        let dropping = Proxy::start(&route("unsupported_params = \"drop\"")).await;
        let got = post(&dropping, STREAM, &body).await;
        assert_eq!(got.status, 200, "{}", got.raw);
        let dropped = got.header("x-baton-dropped-params");
        assert!(
            dropped.starts_with(
                "generationConfig.thinkingConfig.thinkingLevel (together with generationConfig.temperature)"
            ),
            "{dropped}"
        );
        let sent = claude.requests().pop().unwrap().body;
        assert!(sent.get("thinking").is_none(), "{sent}");
        assert_eq!(sent["temperature"], 0.5, "{sent}");
    })
    .await;
}
