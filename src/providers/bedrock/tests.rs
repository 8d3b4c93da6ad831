use serde_json::{Value, json};

use super::*;
use crate::providers::ProviderKind;

/// Settings of a Bedrock provider: `region`, `api_key` and the config's
/// AWS keys as given, the environment `env`.
fn settings<'a>(
    region: Option<&'a str>,
    api_key: Option<&'a Secret>,
    keys: (Option<&'a Secret>, Option<&'a Secret>),
    env: &'a dyn Fn(&str) -> Option<String>,
) -> Settings<'a> {
    Settings {
        api_key,
        region,
        aws_access_key_id: keys.0,
        aws_secret_access_key: keys.1,
        ..Settings::bare(ProviderKind::Bedrock, env)
    }
}

fn no_env(_: &str) -> Option<String> {
    None
}

fn aws_env(name: &str) -> Option<String> {
    match name {
        "AWS_ACCESS_KEY_ID" => Some("AKIDENV".to_owned()),
        "AWS_SECRET_ACCESS_KEY" => Some("env-secret".to_owned()),
        _ => None,
    }
}

#[test]
fn credentials_come_from_the_key_the_config_s_keys_or_the_environment_in_that_order() {
    let key = Secret::new("bedrock-api-key");
    let (id, secret) = (Secret::new("AKIDCONFIG"), Secret::new("config-secret"));
    let bearer = Bedrock.configure(&settings(Some("us-east-1"), Some(&key), (None, None), &aws_env));
    let bearer = bearer.unwrap_or_else(|refusal| panic!("{refusal:?}"));
    assert!(bearer.credential.is_none(), "an API key is a bearer token: nothing to sign");
    assert_eq!(bearer.base_url, "https://bedrock-runtime.us-east-1.amazonaws.com");
    let config = Bedrock.configure(&settings(Some("eu-west-3"), None, (Some(&id), Some(&secret)), &aws_env));
    let source = config.ok().and_then(|account| account.credential.map(|credential| credential.source()));
    assert_eq!(source.as_deref(), Some("AWS SigV4, keys from the config"));
    let env = Bedrock.configure(&settings(Some("eu-west-3"), None, (None, None), &aws_env));
    let credential = env.ok().and_then(|account| account.credential);
    let source = credential.as_ref().map(|credential| credential.source());
    assert_eq!(source.as_deref(), Some("AWS SigV4, keys from the environment (AWS_ACCESS_KEY_ID)"));
    assert_eq!(credential.map(|credential| credential.secrets()), Some(vec!["env-secret".to_owned()]));
}

#[test]
fn a_missing_or_half_credential_or_region_is_refused_by_name() {
    let (id, secret, key) = (Secret::new("AKID"), Secret::new("s"), Secret::new("k"));
    let refused = |settings: Settings<'_>| Bedrock.configure(&settings).err().map(|refusal| refusal.key);
    assert_eq!(refused(settings(Some("us-east-1"), None, (None, None), &no_env)), Some("aws_access_key_id"));
    assert_eq!(refused(settings(Some("us-east-1"), None, (Some(&id), None), &no_env)), Some("aws_access_key_id"));
    assert_eq!(
        refused(settings(Some("us-east-1"), None, (None, Some(&secret)), &no_env)),
        Some("aws_secret_access_key")
    );
    assert_eq!(refused(settings(Some("us-east-1"), Some(&key), (Some(&id), None), &no_env)), Some("aws_access_key_id"));
    assert_eq!(refused(settings(None, Some(&key), (None, None), &no_env)), Some("region"));
    assert_eq!(refused(settings(Some("US East"), Some(&key), (None, None), &no_env)), Some("region"));
    let optional = Settings { secrets_optional: true, ..settings(Some("us-east-1"), None, (None, None), &no_env) };
    assert!(Bedrock.configure(&optional).is_ok(), "`baton keys` needs no provider's credentials");
}

#[test]
fn claude_speaks_messages_and_every_other_model_converse() {
    for model in [
        "anthropic.claude-sonnet-4-5-20250929-v1:0",
        "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
        "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-3-haiku-20240307-v1:0",
    ] {
        assert_eq!(Bedrock.check_model(model), Ok(()), "{model}");
        assert!(Bedrock.for_model(model).is_none(), "{model}: the Messages body");
    }
    for model in ["amazon.nova-pro-v1:0", "meta.llama3-70b-instruct-v1:0", "mistral.mistral-large-2407-v1:0"] {
        assert_eq!(Bedrock.check_model(model), Ok(()), "{model}");
        assert!(Bedrock.for_model(model).is_some(), "{model}: Converse");
    }
    assert!(Bedrock.check_model(" ").is_err());
}

#[test]
fn converse_gets_bedrock_s_own_body() {
    let account = Account::new("https://bedrock-runtime.us-east-1.amazonaws.com".to_owned());
    let req = crate::providers::samples::parsed(json!({ "max_tokens": 64, "temperature": 0.2, "stop": ["END"],
        "tools": [{ "type": "function", "function": { "name": "get_weather", "description": "Weather",
            "parameters": { "type": "object", "properties": { "city": { "type": "string" } } } } }],
        "tool_choice": "required",
        "messages": [
            { "role": "system", "content": "be brief" },
            { "role": "user", "content": "weather in Paris?" },
            { "role": "assistant", "content": null, "tool_calls": [{ "id": "call_1", "type": "function",
                "function": { "name": "get_weather", "arguments": "{\"city\":\"Paris\"}" } }] },
            { "role": "tool", "tool_call_id": "call_1", "content": "18C" },
            { "role": "user", "content": "and tomorrow?" } ] }));
    let converse = ProviderKind::Bedrock.adapter_for("amazon.nova-pro-v1:0");
    assert_eq!(converse.unsupported(&req), Vec::new());
    let request =
        converse.request(upstream(&account, "amazon.nova-pro-v1:0"), &req).unwrap_or_else(|err| panic!("{err}"));
    assert_eq!(
        request.uri(),
        "https://bedrock-runtime.us-east-1.amazonaws.com/model/amazon.nova-pro-v1%3A0/converse-stream"
    );
    let sent: Value = serde_json::from_slice(request.body()).unwrap_or_default();
    let expected = json!({
        "messages": [
            { "role": "user", "content": [{ "text": "weather in Paris?" }] },
            { "role": "assistant", "content": [{ "toolUse": { "toolUseId": "call_1", "name": "get_weather",
                "input": { "city": "Paris" } } }] },
            { "role": "user", "content": [
                { "toolResult": { "toolUseId": "call_1", "content": [{ "text": "18C" }], "status": "success" } },
                { "text": "and tomorrow?" } ] } ],
        "system": [{ "text": "be brief" }],
        "inferenceConfig": { "maxTokens": 64, "temperature": 0.2, "stopSequences": ["END"] },
        "toolConfig": { "tools": [{ "toolSpec": { "name": "get_weather", "description": "Weather",
            "inputSchema": { "json": { "type": "object", "properties": { "city": { "type": "string" } } } } } }],
            "toolChoice": { "any": {} } } });
    assert_eq!(sent, expected);
    let asking = crate::providers::samples::asking(json!({ "response_format": { "type": "json_object" }, "top_k": 5 }));
    let refused: Vec<String> = converse.unsupported(&asking).iter().map(ToString::to_string).collect();
    assert!(refused.iter().any(|field| field.contains("response_format")), "{refused:?}");
}

fn upstream<'a>(account: &'a Account, model: &'a str) -> Upstream<'a> {
    Upstream {
        base_url: &account.base_url,
        account,
        api_key: None,
        model,
        max_event_bytes: 1 << 20,
        traceparent: None,
        egress: &crate::egress::Egress::DIRECT,
    }
}

fn messages_request(body: Value, headers: &[(&'static str, &'static str)]) -> ChatRequest {
    let mut map = http::HeaderMap::new();
    for (name, value) in headers {
        map.insert(*name, HeaderValue::from_static(value));
    }
    let parsed = <crate::dialect::anthropic::AnthropicMessages as crate::dialect::Dialect>::parse(
        Bytes::from(body.to_string()),
        &crate::dialect::test_support::head("/v1/messages", map),
    );
    parsed.unwrap_or_else(|err| panic!("parses: {}", err.message())).request
}

#[test]
fn a_messages_client_s_body_goes_as_sent_but_for_model_stream_version_and_betas() {
    let account = Account::new("https://bedrock-runtime.us-east-1.amazonaws.com".to_owned());
    let client = json!({ "model": "claude", "max_tokens": 64, "stream": true,
        "system": [{ "type": "text", "text": "be brief", "cache_control": { "type": "ephemeral" } }],
        "messages": [{ "role": "user", "content": "hi" }], "x_future": { "a": 1 } });
    let req = messages_request(
        client.clone(),
        &[("anthropic-version", "2023-06-01"), ("anthropic-beta", "interleaved-thinking-2025-05-14, context-1m")],
    );
    let model = "us.anthropic.claude-sonnet-4-5-20250929-v1:0";
    let request = Bedrock.request(upstream(&account, model), &req).unwrap_or_else(|err| panic!("{err}"));
    assert_eq!(
        request.uri(),
        "https://bedrock-runtime.us-east-1.amazonaws.com/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/invoke-with-response-stream"
    );
    let sent: Value = serde_json::from_slice(request.body()).unwrap_or_default();
    let mut expected = client;
    let fields = expected.as_object_mut().map(|fields| {
        fields.remove("model");
        fields.remove("stream");
        fields.insert("anthropic_version".into(), json!("bedrock-2023-05-31"));
        fields.insert("anthropic_beta".into(), json!(["interleaved-thinking-2025-05-14", "context-1m"]));
    });
    assert!(fields.is_some());
    assert_eq!(sent, expected);
    let header = |name: &str| request.headers().get(name).and_then(|value| value.to_str().ok());
    assert_eq!(header("accept"), Some(EVENT_STREAM));
    assert_eq!((header("anthropic-version"), header("anthropic-beta")), (None, None), "both are in the body");
}

#[test]
fn another_dialect_s_request_is_translated_without_model_or_stream() {
    let account = Account::new("http://127.0.0.1:9".to_owned());
    let req = crate::providers::samples::asking(json!({ "max_tokens": 32 }));
    let request = Bedrock.request(upstream(&account, "anthropic.claude-3-haiku-20240307-v1:0"), &req);
    let request = request.unwrap_or_else(|err| panic!("{err}"));
    let sent: Value = serde_json::from_slice(request.body()).unwrap_or_default();
    assert_eq!(sent["anthropic_version"], "bedrock-2023-05-31");
    assert_eq!(sent["max_tokens"], 32);
    assert_eq!(sent["messages"], json!([{ "role": "user", "content": "hi" }]));
    assert!(sent.get("model").is_none() && sent.get("stream").is_none(), "{sent}");
}
