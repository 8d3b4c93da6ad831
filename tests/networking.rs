//! baton's own client on networks like real ones: a provider behind TLS
//! whose certificate comes from a private CA, trusted only through the
//! provider's `ca_file`; and egress through a forward proxy — `CONNECT`
//! tunnels for `https`, absolute-form requests for plain `http`, the
//! environment's `HTTPS_PROXY` / `NO_PROXY` read through an injected lookup,
//! per-provider overrides, and a proxy that refuses.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "a test fails by panicking")]

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use baton::mock::{MockHandle, MockProvider};
use baton::providers::ProviderKind;
use support::http_proxy::HttpProxy;
use support::tls::{TestCa, TlsFront};
use support::{Baton, ChatConfig, Proxy, Received, Spawned, chat_body, post_chat, post_with, run};

const HARD_LIMIT: Duration = Duration::from_secs(20);

/// A certificate authority named `ca`, a simulated OpenAI provider writing
/// `marker` words, and a TLS front for it whose certificate that CA signed.
async fn tls_provider(ca: &str, marker: &str) -> (TestCa, MockHandle, TlsFront) {
    let ca = TestCa::new(ca);
    let mock = MockProvider::openai().marker(marker).spawned().await;
    let front = TlsFront::start(&ca, mock.addr()).await;
    (ca, mock, front)
}

/// The healthy provider a failing one fails over to.
async fn backup() -> MockHandle {
    MockProvider::openai().marker("backup").spawned().await
}

/// baton serving `text`, with `env` as its environment.
async fn baton(text: &str, env: &[(&str, String)]) -> Proxy {
    let lookup = |name: &str| env.iter().find(|(key, _)| *key == name).map(|(_, value)| value.clone());
    let config = baton::config::parse(text, "test.toml", &lookup).expect("test config is valid");
    Proxy::serve(support::over_http(config).build()).await
}

/// A route "chat" over providers given as `(name, base_url, provider keys)`.
fn chat(providers: &[(&str, &str, &str)]) -> String {
    let config = providers.iter().fold(ChatConfig::new().deadlines(5000, 5000), |config, (name, url, keys)| {
        config.provider(name, ProviderKind::OpenAi, url).provider_keys(keys)
    });
    config.toml()
}

/// `ca_file = "<path>"` for `ca`, written to a file of the test's own.
fn trusting(ca: &TestCa, test: &str) -> String {
    format!("ca_file = {:?}", ca.write_pem(test, "ca.pem").display().to_string())
}

/// Asserts `received` is the whole answer of `mock`, ended by `[DONE]`.
fn assert_answered_by(received: &Received, mock: &MockHandle) {
    assert_eq!(received.status, 200, "{}", received.raw);
    assert_eq!(received.streamed_text(), mock.provider().expected_text(), "the exact text: {}", received.raw);
    assert!(received.saw_done(), "the stream ends with [DONE]: {}", received.raw);
}

#[test]
fn a_certificate_from_a_private_ca_is_refused_as_an_unknown_issuer_and_fails_over() {
    run(HARD_LIMIT, async {
        let (_ca, _mock, front) = tls_provider("unknown", "private").await;
        let backup = backup().await;
        let proxy =
            baton(&chat(&[("private", &front.base_url("127.0.0.1"), ""), ("backup", &backup.base_url(), "")]), &[])
                .await;
        let received = post_chat(&proxy, &chat_body(true)).await;
        assert_answered_by(&received, &backup);
        assert_eq!(received.header("x-baton-attempts"), "2", "the TLS failure failed over before commit");
        assert!(front.sessions().is_empty(), "no TLS session was completed with an untrusted certificate");

        let alone = baton(&chat(&[("private", &front.base_url("127.0.0.1"), "")]), &[]).await;
        let refused = post_chat(&alone, &chat_body(true)).await;
        assert_eq!(refused.status, 502, "{}", refused.raw);
        for words in ["connect", "UnknownIssuer", "ca_file"] {
            assert!(refused.raw.contains(words), "the attempt's error says {words:?}: {}", refused.raw);
        }
    });
}

#[test]
fn a_provider_whose_ca_is_in_its_ca_file_streams_its_answer() {
    run(HARD_LIMIT, async {
        let (ca, mock, front) = tls_provider("trusted", "trusted").await;
        let trust = trusting(&ca, "trusted-ca");
        let proxy = baton(&chat(&[("private", &front.base_url("localhost"), &trust)]), &[]).await;
        for _ in 0..2 {
            assert_answered_by(&post_chat(&proxy, &chat_body(true)).await, &mock);
        }
        assert_eq!(front.sessions(), vec![Some("localhost".to_owned())], "one session, reused, with the name as SNI");
    });
}

#[test]
fn trust_in_a_ca_is_for_its_provider_only_and_never_lent_through_the_pool() {
    run(HARD_LIMIT, async {
        let (ca, mock, front) = tls_provider("scoped", "scoped").await;
        let url = front.base_url("127.0.0.1");
        let trust = trusting(&ca, "scoped-ca");
        // Two providers at one origin, one trusting the CA: each has a route of its own.
        let text = format!(
            "{}\n{}",
            chat(&[("trusting", &url, &trust)]),
            chat(&[("plain", &url, "")]).replace("[[routes]]\nmodel = \"chat\"", "[[routes]]\nmodel = \"other\"")
        );
        let proxy = baton(&text, &[]).await;
        assert_answered_by(&post_chat(&proxy, &chat_body(true)).await, &mock);
        let other =
            serde_json::json!({ "model": "other", "stream": true, "messages": [{ "role": "user", "content": "hi" }] });
        let refused = post_with(&proxy, support::CHAT, &other, &[]).await;
        assert_eq!(
            refused.status, 502,
            "the idle trusted connection is not lent to the other provider: {}",
            refused.raw
        );
        assert!(refused.raw.contains("UnknownIssuer"), "{}", refused.raw);
    });
}

#[test]
fn a_tls_provider_is_reached_through_a_connect_tunnel_that_is_reused() {
    run(HARD_LIMIT, async {
        let (ca, mock, front) = tls_provider("tunnel", "tunnelled").await;
        let egress = HttpProxy::start().await;
        let keys = format!("{}\nproxy = \"{}\"", trusting(&ca, "tunnel-ca"), egress.url(None));
        let proxy = baton(&chat(&[("private", &front.base_url("127.0.0.1"), &keys)]), &[]).await;
        for _ in 0..2 {
            assert_answered_by(&post_chat(&proxy, &chat_body(true)).await, &mock);
        }
        let port = front.addr.port();
        assert_eq!(egress.request_lines(), vec![format!("CONNECT 127.0.0.1:{port} HTTP/1.1")], "one tunnel for both");
        let sent = &egress.seen()[0].sent;
        assert_eq!(sent.first(), Some(&0x16), "the tunnel starts with a TLS handshake record");
        let text = String::from_utf8_lossy(sent);
        assert!(
            !text.contains("chat/completions") && !text.contains("say something"),
            "no plaintext crossed the proxy"
        );
        assert_eq!(front.sessions().len(), 1, "the TLS session ran end to end, once");
    });
}

#[test]
fn through_a_proxy_the_server_name_and_certificate_are_the_providers() {
    run(HARD_LIMIT, async {
        let (ca, mock, front) = tls_provider("sni", "named").await;
        let egress = HttpProxy::start().await;
        let env = [("HTTPS_PROXY", egress.url(None))];
        let proxy = baton(&chat(&[("private", &front.base_url("localhost"), &trusting(&ca, "sni-ca"))]), &env).await;
        assert_answered_by(&post_chat(&proxy, &chat_body(true)).await, &mock);
        let port = front.addr.port();
        assert_eq!(egress.request_lines(), vec![format!("CONNECT localhost:{port} HTTP/1.1")], "HTTPS_PROXY applies");
        assert_eq!(front.sessions(), vec![Some("localhost".to_owned())], "the provider's name went as SNI");
    });
}

#[test]
fn no_proxy_sends_its_hosts_direct() {
    run(HARD_LIMIT, async {
        let mock = MockProvider::openai().marker("direct").spawned().await;
        let egress = HttpProxy::start().await;
        for no_proxy in ["127.0.0.1", "localhost,127.0.0.0/8", "*", "[::1],127.0.0.1:{port}"] {
            let no_proxy = no_proxy.replace("{port}", &mock.addr().port().to_string());
            let env = [("http_proxy", egress.url(None)), ("NO_PROXY", no_proxy.clone())];
            let proxy = baton(&chat(&[("direct", &mock.base_url(), "")]), &env).await;
            assert_answered_by(&post_chat(&proxy, &chat_body(true)).await, &mock);
            assert!(egress.seen().is_empty(), "NO_PROXY={no_proxy} sent the request direct");
        }
    });
}

#[test]
fn a_plain_http_provider_goes_through_the_proxy_in_absolute_form() {
    run(HARD_LIMIT, async {
        let mock = MockProvider::openai().marker("plain").spawned().await;
        let egress = HttpProxy::start().await;
        let env = [("HTTP_PROXY", egress.url(Some("corp:s3cret")))];
        let proxy = baton(&chat(&[("plain", &mock.base_url(), "")]), &env).await;
        assert_answered_by(&post_chat(&proxy, &chat_body(true)).await, &mock);
        let seen = egress.seen();
        let addr = mock.addr();
        assert_eq!(seen.len(), 1, "{seen:?}");
        assert_eq!(seen[0].request_line, format!("POST http://{addr}/v1/chat/completions HTTP/1.1"));
        assert_eq!(seen[0].authorization.as_deref(), Some("Basic Y29ycDpzM2NyZXQ="), "the URL's credentials");
    });
}

#[test]
fn a_provider_s_own_proxy_setting_overrides_the_environment() {
    run(HARD_LIMIT, async {
        let (ca, mock, front) = tls_provider("override", "override").await;
        let chosen = HttpProxy::start().await;
        let ignored = HttpProxy::refusing("403 Forbidden").await;
        let env = [("HTTPS_PROXY", ignored.url(None))];
        let trust = trusting(&ca, "override-ca");
        let url = front.base_url("127.0.0.1");
        let own = format!("{trust}\nproxy = \"{}\"", chosen.url(None));
        let proxy = baton(&chat(&[("own", &url, &own)]), &env).await;
        assert_answered_by(&post_chat(&proxy, &chat_body(true)).await, &mock);
        assert_eq!(chosen.seen().len(), 1, "the provider's proxy carried it");

        let none = format!("{trust}\nproxy = \"none\"");
        let direct = baton(&chat(&[("direct", &url, &none)]), &env).await;
        assert_answered_by(&post_chat(&direct, &chat_body(true)).await, &mock);
        assert!(ignored.seen().is_empty(), "the environment's proxy was never asked");
    });
}

/// Everything this test process has logged so far, at every level. One
/// subscriber for the whole process: a thread's own would miss the lines
/// of callsites another test's thread registered first.
fn logs() -> String {
    static SINK: std::sync::OnceLock<Arc<Mutex<Vec<u8>>>> = std::sync::OnceLock::new();
    let sink = SINK.get_or_init(|| {
        let sink = Arc::new(Mutex::new(Vec::new()));
        let lines = Arc::clone(&sink);
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || LogWriter(Arc::clone(&lines)))
            .with_ansi(false)
            .with_max_level(tracing::Level::TRACE)
            .finish();
        tracing::subscriber::set_global_default(subscriber).expect("the only subscriber");
        sink
    });
    String::from_utf8_lossy(&sink.lock().expect("log")).into_owned()
}

struct LogWriter(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for LogWriter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("log").extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_proxy_that_refuses_the_tunnel_fails_over_naming_the_proxy_but_never_its_credentials() {
    run(HARD_LIMIT, async {
        let (ca, _mock, front) = tls_provider("refused", "refused").await;
        let backup = backup().await;
        let egress = HttpProxy::refusing("407 Proxy Authentication Required").await;
        let keys = format!("{}\nproxy = \"{}\"", trusting(&ca, "refused-ca"), egress.url(Some("alice:hunter2")));
        let url = front.base_url("127.0.0.1");
        logs();
        let proxy = baton(&chat(&[("corp", &url, &keys), ("backup", &backup.base_url(), "")]), &[]).await;
        let failed_over = post_chat(&proxy, &chat_body(true)).await;
        let proxy = baton(&chat(&[("corp", &url, &keys)]), &[]).await;
        let alone = post_chat(&proxy, &chat_body(true)).await;
        let logs = logs();
        assert_answered_by(&failed_over, &backup);
        assert_eq!(failed_over.header("x-baton-attempts"), "2", "the refused tunnel failed over");
        let basic = "Basic YWxpY2U6aHVudGVyMg==";
        assert_eq!(egress.seen()[0].authorization.as_deref(), Some(basic), "the credentials went to the proxy");
        assert_eq!(alone.status, 502, "{}", alone.raw);
        let named = format!("the proxy {} answered CONNECT 127.0.0.1:{} with 407", egress.url(None), front.addr.port());
        assert!(alone.raw.contains(&named), "the error names the proxy and its answer: {}", alone.raw);
        assert!(alone.raw.contains("connect"), "classed as a connect failure: {}", alone.raw);
        assert!(logs.contains(&named), "the attempt's log line names the proxy: {logs}");
        for secret in ["hunter2", "alice", "YWxpY2U6aHVudGVyMg"] {
            assert!(!alone.raw.contains(secret) && !logs.contains(secret), "{secret:?} leaked: {}\n{logs}", alone.raw);
        }
    });
}

#[test]
fn a_proxy_that_cannot_be_reached_fails_over_as_a_refused_connection() {
    run(HARD_LIMIT, async {
        let gone = baton::mock::refusing_addr().await.expect("a free port");
        let mock = MockProvider::openai().marker("behind").spawned().await;
        let backup = backup().await;
        let keys = format!("proxy = \"http://{gone}\"");
        let proxy = baton(&chat(&[("corp", &mock.base_url(), &keys), ("backup", &backup.base_url(), "")]), &[]).await;
        assert_answered_by(&post_chat(&proxy, &chat_body(true)).await, &backup);
        let alone = baton(&chat(&[("corp", &mock.base_url(), &keys)]), &[]).await;
        let refused = post_chat(&alone, &chat_body(true)).await;
        assert_eq!(refused.status, 502, "{}", refused.raw);
        assert!(refused.raw.contains(&format!("cannot reach the proxy http://{gone}")), "{}", refused.raw);
        assert!(mock.requests().is_empty(), "nothing reached the provider behind the proxy");
    });
}

#[test]
fn a_plain_http_request_the_proxy_answers_with_407_fails_over_as_a_connect_failure() {
    run(HARD_LIMIT, async {
        let mock = MockProvider::openai().marker("behind").spawned().await;
        let backup = backup().await;
        let egress = HttpProxy::refusing("407 Proxy Authentication Required").await;
        let keys = format!("proxy = \"{}\"", egress.url(Some("bob:pa55")));
        let alone = baton(&chat(&[("corp", &mock.base_url(), &keys)]), &[]).await;
        let refused = post_chat(&alone, &chat_body(true)).await;
        assert_eq!(refused.status, 502, "the proxy's 407 is not the provider's answer: {}", refused.raw);
        let named = format!("the proxy {} answered 407", egress.url(None));
        assert!(refused.raw.contains(&named) && refused.raw.contains("connect"), "{}", refused.raw);
        assert!(!refused.raw.contains("pa55") && !refused.raw.contains("bob"), "{}", refused.raw);
        let proxy = baton(&chat(&[("corp", &mock.base_url(), &keys), ("backup", &backup.base_url(), "")]), &[]).await;
        assert_answered_by(&post_chat(&proxy, &chat_body(true)).await, &backup);
        assert!(mock.requests().is_empty(), "nothing reached the provider behind the proxy");
    });
}

#[test]
fn ssl_cert_file_sets_the_roots_of_the_whole_process() {
    run(HARD_LIMIT, async {
        let (ca, mock, front) = tls_provider("process", "process").await;
        let text = format!("[store]\nbackend = \"none\"\n\n{}", chat(&[("private", &front.base_url("127.0.0.1"), "")]));
        let config = support::config_file("ssl-cert-file", &text);
        let roots = ca.write_pem("ssl-cert-file-roots", "roots.pem");
        let baton = Baton::serve(&config).env("SSL_CERT_FILE", roots.to_str().expect("utf-8")).start().await;
        assert_answered_by(&post_chat(&baton, &chat_body(true)).await, &mock);
    });
}

#[test]
fn baton_check_names_each_provider_s_proxy_and_trust_without_credentials() {
    let ca = TestCa::new("check");
    let trust = trusting(&ca, "check-ca");
    let text = format!("[store]\nbackend = \"none\"\n\n{}", chat(&[("corp", "https://api.example.com/v1", &trust)]));
    let config = support::config_file("check-egress", &text);
    let output = Baton::once(&["check", "--config", config.to_str().expect("utf-8")])
        .env("HTTPS_PROXY", "http://alice:hunter2@corp.example:3128")
        .output()
        .expect("baton check runs");
    let printed = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{printed}{}", String::from_utf8_lossy(&output.stderr));
    let expected = "provider \"corp\": through the proxy http://corp.example:3128 (with credentials), trusting 1 more certificate beside the system's";
    assert!(printed.contains(expected), "{printed}");
    assert!(!printed.contains("hunter2") && !printed.contains("alice"), "{printed}");
}
