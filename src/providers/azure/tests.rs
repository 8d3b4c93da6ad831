use super::*;

fn settings<'a>(
    base_url: Option<&'a str>,
    api_version: Option<&'a str>,
    region: Option<&'a str>,
    env: &'a dyn Fn(&str) -> Option<String>,
) -> Settings<'a> {
    Settings { base_url, api_version, region, ..Settings::bare(crate::providers::ProviderKind::Azure, env) }
}

fn no_env(_: &str) -> Option<String> {
    None
}

#[test]
fn a_request_goes_to_the_deployment_with_the_api_version_and_the_key_in_api_key() {
    let account = Azure
        .configure(&settings(Some("https://res.openai.azure.com/"), Some("2025-04-01-preview"), None, &no_env))
        .unwrap_or_else(|refusal| panic!("{refusal:?}"));
    let req = crate::providers::samples::asking(serde_json::json!({}));
    let upstream = Upstream {
        base_url: &account.base_url,
        account: &account,
        api_key: Some("azure-key"),
        model: "gpt-4o-prod",
        max_event_bytes: 1 << 20,
        traceparent: None,
        egress: &crate::egress::Egress::DIRECT,
    };
    let request = Azure.request(upstream, &req).unwrap_or_else(|err| panic!("{err}"));
    assert_eq!(
        request.uri(),
        "https://res.openai.azure.com/openai/deployments/gpt-4o-prod/chat/completions?api-version=2025-04-01-preview"
    );
    assert_eq!(request.headers().get("api-key").and_then(|v| v.to_str().ok()), Some("azure-key"));
    assert!(request.headers().get("authorization").is_none(), "the key goes in api-key only");
    let body: serde_json::Value = serde_json::from_slice(request.body()).unwrap_or_default();
    assert_eq!((body["model"].as_str(), body["stream"].as_bool()), (Some("gpt-4o-prod"), Some(true)));
}

#[test]
fn the_api_version_defaults_and_a_bad_setting_is_refused_by_name() {
    let account = Azure.configure(&settings(Some("https://r.openai.azure.com"), None, None, &no_env));
    assert_eq!(account.ok().and_then(|a| a.option("api_version").map(str::to_owned)).as_deref(), Some("2024-10-21"));
    let refused = |base, version, region| Azure.configure(&settings(base, version, region, &no_env)).err();
    assert_eq!(refused(None, None, None).map(|r| r.key), Some("base_url"));
    assert_eq!(refused(Some("https://r.openai.azure.com/openai"), None, None).map(|r| r.key), Some("base_url"));
    assert_eq!(refused(Some("https://r.openai.azure.com"), Some("2024 10"), None).map(|r| r.key), Some("api_version"));
    let region = refused(Some("https://r.openai.azure.com"), None, Some("eastus"));
    assert_eq!(
        region,
        Some(Refusal::new("region", "is not a setting of an azure provider")),
        "a key that means nothing to the kind is pointed out"
    );
}
