use std::path::Path;

use serde_json::{Value, json};

use super::*;
use crate::providers::ProviderKind;
use crate::secret::Secret;

fn settings<'a>(
    project: Option<&'a str>,
    region: Option<&'a str>,
    credentials: (Option<&'a Path>, Option<&'a str>),
    env: &'a dyn Fn(&str) -> Option<String>,
) -> Settings<'a> {
    Settings {
        region,
        project,
        credentials_file: credentials.0,
        credentials: credentials.1,
        ..Settings::bare(ProviderKind::Vertex, env)
    }
}

fn no_env(_: &str) -> Option<String> {
    None
}

const KEY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/vertex/test-only-service-account.json");

fn account(model: &str) -> (Account, String) {
    let key = Path::new(KEY);
    let account = Vertex.configure(&settings(Some("my-project"), Some("us-east5"), (Some(key), None), &no_env));
    (account.unwrap_or_else(|refusal| panic!("{refusal:?}")), model.to_owned())
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

#[test]
fn claude_goes_to_stream_raw_predict_with_vertex_s_version_and_gemini_to_its_own_stream() {
    let (account, model) = account("claude-sonnet-4-5@20250929");
    assert_eq!(account.base_url, "https://us-east5-aiplatform.googleapis.com");
    let req = crate::providers::samples::asking(json!({ "max_tokens": 32 }));
    let claude = ProviderKind::Vertex.adapter_for(&model);
    assert_eq!(claude.dialect(), Some(ClientDialect::Messages), "Claude speaks Messages");
    let request = claude.request(upstream(&account, &model), &req).unwrap_or_else(|err| panic!("{err}"));
    assert_eq!(
        request.uri(),
        "https://us-east5-aiplatform.googleapis.com/v1/projects/my-project/locations/us-east5/publishers/anthropic/models/claude-sonnet-4-5@20250929:streamRawPredict"
    );
    let sent: Value = serde_json::from_slice(request.body()).unwrap_or_default();
    assert_eq!((sent["anthropic_version"].as_str(), sent["stream"].as_bool()), (Some("vertex-2023-10-16"), Some(true)));
    assert!(sent.get("model").is_none(), "{sent}");
    let gemini = ProviderKind::Vertex.adapter_for("gemini-2.5-flash");
    assert_eq!(gemini.dialect(), Some(ClientDialect::Gemini), "a Gemini client's body goes to Vertex's Gemini as sent");
    let request = gemini.request(upstream(&account, "gemini-2.5-flash"), &req).unwrap_or_else(|err| panic!("{err}"));
    assert_eq!(
        request.uri(),
        "https://us-east5-aiplatform.googleapis.com/v1/projects/my-project/locations/us-east5/publishers/google/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    );
    let sent: Value = serde_json::from_slice(request.body()).unwrap_or_default();
    assert!(sent.get("contents").is_some(), "the Gemini body: {sent}");
    assert!(request.headers().get("x-goog-api-key").is_none());
}

#[test]
fn the_global_region_is_vertex_s_global_address_and_the_source_is_named() {
    let key = Path::new(KEY);
    let account = Vertex.configure(&settings(Some("p"), Some("global"), (Some(key), None), &no_env));
    let account = account.unwrap_or_else(|refusal| panic!("{refusal:?}"));
    assert_eq!(account.base_url, "https://aiplatform.googleapis.com");
    let source = account.credential.map(|credential| credential.source()).unwrap_or_default();
    assert!(source.contains("baton-test@baton-test.iam.gserviceaccount.com"), "{source}");
    let env = |name: &str| (name == "GCE_METADATA_HOST").then(|| "127.0.0.1:9".to_owned());
    let metadata = Vertex.configure(&settings(Some("p"), Some("us-east5"), (None, Some("metadata")), &env));
    let source = metadata.ok().and_then(|account| account.credential).map(|credential| credential.source());
    assert_eq!(
        source.as_deref(),
        Some(
            "OAuth tokens from the metadata server (http://127.0.0.1:9/computeMetadata/v1/instance/service-accounts/default/token)"
        )
    );
    let from_env = |name: &str| (name == "GOOGLE_APPLICATION_CREDENTIALS").then(|| KEY.to_owned());
    assert!(Vertex.configure(&settings(Some("p"), Some("us-east5"), (None, None), &from_env)).is_ok());
}

#[test]
fn missing_or_wrong_settings_are_refused_by_name() {
    let key = Path::new(KEY);
    let refused = |settings: Settings<'_>| Vertex.configure(&settings).err().map(|refusal| refusal.key);
    assert_eq!(refused(settings(None, Some("us-east5"), (Some(key), None), &no_env)), Some("project"));
    assert_eq!(refused(settings(Some("p"), None, (Some(key), None), &no_env)), Some("region"));
    assert_eq!(refused(settings(Some("p"), Some("us-east5"), (None, None), &no_env)), Some("credentials_file"));
    assert_eq!(refused(settings(Some("p"), Some("us-east5"), (None, Some("adc")), &no_env)), Some("credentials"));
    let missing = Path::new("/nonexistent/sa.json");
    assert_eq!(
        refused(settings(Some("p"), Some("us-east5"), (Some(missing), None), &no_env)),
        Some("credentials_file")
    );
    let keyed = Secret::new("k");
    let with_key =
        Settings { api_key: Some(&keyed), ..settings(Some("p"), Some("us-east5"), (Some(key), None), &no_env) };
    assert_eq!(refused(with_key), Some("api_key"));
    let optional = Settings { secrets_optional: true, ..settings(Some("p"), Some("us-east5"), (None, None), &no_env) };
    assert!(Vertex.configure(&optional).is_ok(), "`baton keys` needs no provider's credentials");
}
