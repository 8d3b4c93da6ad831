//! What a cloud's credential adds to each request before it leaves: a
//! Bedrock request signed with SigV4, a Vertex AI request given the cached
//! OAuth token (the exchange done once beforehand, against the simulated
//! Vertex over loopback). The key header of the other kinds is one header
//! insert and is not measured.
//! Run with `cargo bench --bench authorize`.

#![allow(clippy::print_stdout, clippy::expect_used, reason = "a benchmark reports on stdout and stops on setup errors")]

use std::hint::black_box;
use std::path::PathBuf;
use std::sync::Arc;

use baton::egress::Egress;
use baton::mock::MockProvider;
use baton::providers::{Credential, ProviderKind, Settings};
use baton::secret::Secret;
use bytes::Bytes;
use criterion::Criterion;
use futures_util::FutureExt as _;

/// A Messages request of about 2 KB, as a chat turn with some history is.
fn request(url: &str) -> http::Request<Bytes> {
    let turns: Vec<serde_json::Value> = (0..12)
        .map(|i| serde_json::json!({ "role": if i % 2 == 0 { "user" } else { "assistant" }, "content": "a sentence of about one hundred and forty characters, as a turn of a conversation with an assistant tends to be, more or less" }))
        .collect();
    let body = serde_json::json!({ "anthropic_version": "bedrock-2023-05-31", "max_tokens": 1024, "messages": turns });
    http::Request::post(url)
        .header("content-type", "application/json")
        .header("accept", "application/vnd.amazon.eventstream")
        .body(Bytes::from(body.to_string()))
        .expect("a request")
}

/// The credential a `[[providers]]` entry of `kind` makes of `settings`.
fn credential(settings: &Settings<'_>) -> Arc<dyn Credential> {
    settings.kind.adapter().configure(settings).expect("configures").credential.expect("a credential")
}

fn main() {
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("a runtime");
    let egress = Egress::DIRECT;
    let mut criterion = Criterion::default().configure_from_args();

    let (access, secret, session) = (
        Secret::new("AKIDEXAMPLE"),
        Secret::new("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"),
        Secret::new("session-token"),
    );
    let mut bedrock = Settings::bare(ProviderKind::Bedrock, &|_| None);
    bedrock.region = Some("us-east-1");
    bedrock.aws_access_key_id = Some(&access);
    bedrock.aws_secret_access_key = Some(&secret);
    bedrock.aws_session_token = Some(&session);
    let sigv4 = credential(&bedrock);
    let url = "https://bedrock-runtime.us-east-1.amazonaws.com/model/anthropic.claude-sonnet-4-5-20250929-v1%3A0/invoke-with-response-stream";
    criterion.bench_function("authorize/bedrock_sigv4", |b| {
        b.iter_batched_ref(
            || request(url),
            |request| black_box(credential_now(&*sigv4, request, &egress)),
            criterion::BatchSize::SmallInput,
        );
    });

    let vertex = runtime.block_on(MockProvider::new(ProviderKind::Vertex).spawn()).expect("a simulated Vertex");
    let keys = ProviderKind::Vertex.simulated().config_keys(vertex.addr());
    let file = key_file(&keys);
    let mut settings = Settings::bare(ProviderKind::Vertex, &|_| None);
    settings.region = Some("us-east5");
    settings.project = Some("baton-simulated");
    settings.credentials_file = Some(&file);
    let tokens = credential(&settings);
    let url = format!(
        "{}/v1/projects/baton-simulated/locations/us-east5/publishers/anthropic/models/claude-sonnet-4-5:streamRawPredict",
        vertex.base_url()
    );
    // The one exchange, so what is measured is the cache.
    runtime.block_on(tokens.authorize(&mut request(&url), &egress)).expect("the exchange");
    criterion.bench_function("authorize/vertex_cached_token", |b| {
        b.iter_batched_ref(
            || request(&url),
            |request| black_box(credential_now(&*tokens, request, &egress)),
            criterion::BatchSize::SmallInput,
        );
    });
    assert_eq!(vertex.side_requests().len(), 1, "every measured request used the cached token");
    criterion.final_summary();
}

/// Authorizes `request` with `credential`, which must not wait: signing
/// does not, and a cached token is at hand.
fn credential_now(credential: &dyn Credential, request: &mut http::Request<Bytes>, egress: &Egress) -> bool {
    credential.authorize(request, egress).now_or_never().expect("ready at once").is_ok()
}

/// The `credentials_file` a simulated provider's config lines name.
fn key_file(keys: &str) -> PathBuf {
    let line = keys.lines().find(|line| line.starts_with("credentials_file")).expect("a key file");
    let quoted = line.split_once('=').expect("a value").1.trim();
    PathBuf::from(serde_json::from_str::<String>(quoted).expect("a quoted path"))
}
