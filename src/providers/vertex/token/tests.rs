//! The token cache against a token endpoint on loopback that counts its
//! exchanges and answers as each test needs.

use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::*;

/// A key file of a service account made for these tests alone, its
/// `token_uri` pointed at `token_uri`.
fn key_file(token_uri: &str) -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/vertex/test-only-service-account.json");
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut key: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    key["token_uri"] = serde_json::json!(token_uri);
    key.to_string()
}

/// How the endpoint answers.
#[derive(Clone, Copy)]
enum Answers {
    /// Tokens `token-1`, `token-2`… living this many seconds, after a delay.
    Tokens { expires_in: u64, delay_ms: u64 },
    /// 400 `invalid_grant`, echoing the assertion in its description.
    Refused,
    /// Never a byte.
    Hang,
}

/// A token endpoint; the number of exchanges it has seen, and every
/// request's head and body.
struct Endpoint {
    url: String,
    exchanges: Arc<AtomicUsize>,
    heads: Arc<Mutex<Vec<String>>>,
    bodies: Arc<Mutex<Vec<String>>>,
}

async fn endpoint(answers: Answers) -> Endpoint {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
    let url = format!("http://{}/token", listener.local_addr().expect("an address"));
    let exchanges = Arc::new(AtomicUsize::new(0));
    let (heads, bodies) = (Arc::new(Mutex::new(Vec::new())), Arc::new(Mutex::new(Vec::new())));
    let (count, kept, kept_heads) = (Arc::clone(&exchanges), Arc::clone(&bodies), Arc::clone(&heads));
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else { return };
            let (count, kept, kept_heads) = (Arc::clone(&count), Arc::clone(&kept), Arc::clone(&kept_heads));
            tokio::spawn(async move {
                let mut buffer = Vec::new();
                loop {
                    let mut chunk = [0u8; 4096];
                    let Ok(n) = socket.read(&mut chunk).await else { return };
                    if n == 0 {
                        return;
                    }
                    buffer.extend_from_slice(&chunk[..n]);
                    let mut headers = [httparse::EMPTY_HEADER; 32];
                    let mut request = httparse::Request::new(&mut headers);
                    let Ok(httparse::Status::Complete(head)) = request.parse(&buffer) else { continue };
                    let length = request
                        .headers
                        .iter()
                        .find(|h| h.name.eq_ignore_ascii_case("content-length"))
                        .and_then(|h| std::str::from_utf8(h.value).ok()?.parse::<usize>().ok())
                        .unwrap_or(0);
                    if buffer.len() < head + length {
                        continue;
                    }
                    let body = String::from_utf8_lossy(&buffer[head..head + length]).into_owned();
                    if let Ok(mut heads) = kept_heads.lock() {
                        heads.push(String::from_utf8_lossy(&buffer[..head]).to_ascii_lowercase());
                    }
                    buffer.drain(..head + length);
                    let n = count.fetch_add(1, Ordering::SeqCst) + 1;
                    if let Ok(mut bodies) = kept.lock() {
                        bodies.push(body.clone());
                    }
                    let (status, answer) = match answers {
                        Answers::Tokens { expires_in, delay_ms } => {
                            tokio::time::sleep(Duration::from_millis(delay_ms)).await;
                            let answer = serde_json::json!({ "access_token": format!("token-{n}"),
                                "expires_in": expires_in, "token_type": "Bearer" });
                            ("200 OK", answer.to_string())
                        }
                        Answers::Refused => {
                            let answer = serde_json::json!({ "error": "invalid_grant",
                                "error_description": format!("bad assertion {body}") });
                            ("400 Bad Request", answer.to_string())
                        }
                        Answers::Hang => {
                            tokio::time::sleep(Duration::from_secs(3600)).await;
                            return;
                        }
                    };
                    let response = format!(
                        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{answer}",
                        answer.len()
                    );
                    if socket.write_all(response.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    Endpoint { url, exchanges, heads, bodies }
}

fn tokens(endpoint: &Endpoint, timeout: Duration) -> Tokens {
    let source = Source::service_account(&key_file(&endpoint.url), "sa.json").unwrap_or_else(|why| panic!("{why}"));
    Tokens::with_timeout(source, timeout).unwrap_or_else(|why| panic!("{why}"))
}

/// Bounds every test: a hung cache must fail the test, not hang it.
async fn within<T>(work: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(20), work).await.expect("the test finished in time")
}

#[tokio::test]
async fn concurrent_requests_on_a_cold_cache_share_one_exchange_and_later_ones_none() {
    within(async {
        let endpoint = endpoint(Answers::Tokens { expires_in: 3600, delay_ms: 200 }).await;
        let tokens = Arc::new(tokens(&endpoint, EXCHANGE_TIMEOUT));
        let asks: Vec<_> = (0..20)
            .map(|_| {
                let tokens = Arc::clone(&tokens);
                tokio::spawn(async move { tokens.token(&Egress::DIRECT).await.map(|t| t.expose().to_owned()) })
            })
            .collect();
        for ask in asks {
            assert_eq!(ask.await.ok().and_then(Result::ok).as_deref(), Some("token-1"));
        }
        assert_eq!(endpoint.exchanges.load(Ordering::SeqCst), 1, "one exchange for twenty requests");
        for _ in 0..5 {
            assert_eq!(
                tokens.token(&Egress::DIRECT).await.ok().map(|t| t.expose().to_owned()).as_deref(),
                Some("token-1")
            );
        }
        assert_eq!(endpoint.exchanges.load(Ordering::SeqCst), 1, "a cached token needs no exchange");
    })
    .await;
}

#[tokio::test]
async fn the_assertion_is_a_jwt_bearer_grant_signed_rs256_for_the_cloud_platform_scope() {
    within(async {
        let endpoint = endpoint(Answers::Tokens { expires_in: 3600, delay_ms: 0 }).await;
        let tokens = tokens(&endpoint, EXCHANGE_TIMEOUT);
        let mut request = http::Request::new(Bytes::new());
        tokens.authorize(&mut request, &Egress::DIRECT).await.unwrap_or_else(|err| panic!("{err}"));
        assert_eq!(request.headers().get("authorization").and_then(|v| v.to_str().ok()), Some("Bearer token-1"));
        let body = endpoint.bodies.lock().ok().and_then(|bodies| bodies.first().cloned()).unwrap_or_default();
        let assertion = body
            .strip_prefix("grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=")
            .unwrap_or_else(|| panic!("a JWT-bearer grant: {body}"));
        let part = |i: usize| -> serde_json::Value {
            let segment = assertion.split('.').nth(i).unwrap_or_default();
            let bytes =
                base64::Engine::decode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, segment).unwrap_or_default();
            serde_json::from_slice(&bytes).unwrap_or_default()
        };
        let (header, claims) = (part(0), part(1));
        assert_eq!(
            (header["alg"].as_str(), header["kid"].as_str()),
            (Some("RS256"), Some("0123456789abcdef0123456789abcdef01234567"))
        );
        assert_eq!(claims["iss"], "baton-test@baton-test.iam.gserviceaccount.com");
        assert_eq!(claims["scope"], SCOPE);
        assert_eq!(claims["aud"].as_str(), Some(endpoint.url.as_str()), "the key file's token_uri");
        let lifetime = claims["exp"].as_u64().unwrap_or(0).saturating_sub(claims["iat"].as_u64().unwrap_or(u64::MAX));
        assert_eq!(lifetime, 3600);
        // The signature verifies with the key's public half.
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/vertex/test-only-service-account.json");
        let key: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap_or_default()).unwrap_or_default();
        let pem = key["private_key"].as_str().unwrap_or_default();
        let der: String = pem.lines().filter(|line| !line.starts_with("-----")).collect();
        let der = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, der).unwrap_or_default();
        let pair = aws_lc_rs::rsa::KeyPair::from_pkcs8(&der).expect("the test key");
        let public = aws_lc_rs::signature::KeyPair::public_key(&pair).as_ref().to_vec();
        let (signed, signature) = assertion.rsplit_once('.').unwrap_or_default();
        let signature =
            base64::Engine::decode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, signature).unwrap_or_default();
        let verifier =
            aws_lc_rs::signature::UnparsedPublicKey::new(&aws_lc_rs::signature::RSA_PKCS1_2048_8192_SHA256, public);
        assert!(verifier.verify(signed.as_bytes(), &signature).is_ok(), "signed with the service account's key");
    })
    .await;
}

#[tokio::test]
async fn a_token_due_for_refresh_still_serves_while_the_next_is_fetched_beside() {
    within(async {
        // Two seconds of life: due for refresh after one (half of it).
        let endpoint = endpoint(Answers::Tokens { expires_in: 2, delay_ms: 300 }).await;
        let tokens = tokens(&endpoint, EXCHANGE_TIMEOUT);
        let first = tokens.token(&Egress::DIRECT).await.ok().map(|t| t.expose().to_owned());
        assert_eq!(first.as_deref(), Some("token-1"));
        tokio::time::sleep(Duration::from_millis(1200)).await;
        let started = std::time::Instant::now();
        let due = tokens.token(&Egress::DIRECT).await.ok().map(|t| t.expose().to_owned());
        assert_eq!(due.as_deref(), Some("token-1"), "the old token, still good, serves at once");
        assert!(
            started.elapsed() < Duration::from_millis(250),
            "no wait for the 300 ms exchange: {:?}",
            started.elapsed()
        );
        let mut next = None;
        for _ in 0..50 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            next = tokens.token(&Egress::DIRECT).await.ok().map(|t| t.expose().to_owned());
            if next.as_deref() == Some("token-2") {
                break;
            }
        }
        assert_eq!(next.as_deref(), Some("token-2"), "the refreshed token replaces it");
        assert_eq!(endpoint.exchanges.load(Ordering::SeqCst), 2, "one refresh, not one a request");
    })
    .await;
}

#[tokio::test]
async fn a_refused_or_hung_exchange_fails_the_attempt_as_auth_without_the_assertion() {
    within(async {
        let refused = endpoint(Answers::Refused).await;
        let err = tokens(&refused, EXCHANGE_TIMEOUT).token(&Egress::DIRECT).await.err();
        assert_eq!(err.as_ref().map(ProviderError::kind), Some("auth"));
        let text = err.map(|err| err.to_string()).unwrap_or_default();
        assert!(text.contains("400") && text.contains("invalid_grant"), "{text}");
        assert!(!text.contains("assertion") && !text.contains("eyJ"), "the endpoint's echo is not kept: {text}");
        let hung = endpoint(Answers::Hang).await;
        let started = std::time::Instant::now();
        let err = tokens(&hung, Duration::from_millis(300)).token(&Egress::DIRECT).await.err();
        assert_eq!(err.as_ref().map(ProviderError::kind), Some("auth"));
        assert!(started.elapsed() < Duration::from_secs(5), "bounded: {:?}", started.elapsed());
    })
    .await;
}

#[tokio::test]
async fn the_metadata_server_is_asked_with_its_flavor_header() {
    within(async {
        let endpoint = endpoint(Answers::Tokens { expires_in: 3600, delay_ms: 0 }).await;
        let host = endpoint.url.trim_start_matches("http://").trim_end_matches("/token").to_owned();
        let tokens = Tokens::new(Source::metadata(Some(&host))).unwrap_or_else(|why| panic!("{why}"));
        let token = tokens.token(&Egress::DIRECT).await.ok().map(|token| token.expose().to_owned());
        assert_eq!(token.as_deref(), Some("token-1"));
        let head = endpoint.heads.lock().ok().and_then(|heads| heads.first().cloned()).unwrap_or_default();
        assert!(head.starts_with("get /computemetadata/v1/instance/service-accounts/default/token "), "{head}");
        assert!(head.contains("metadata-flavor: google"), "{head}");
    })
    .await;
}

#[test]
fn a_bad_key_file_is_named_without_quoting_it() {
    let not_json = Source::service_account("{\"private_key\": \"-----BEGIN PRIVATE KEY-----\nMIIE", "sa.json").err();
    assert!(
        not_json.as_deref().is_some_and(|why| why.starts_with("sa.json is not") && !why.contains("MIIE")),
        "{not_json:?}"
    );
    let missing = Source::service_account("{\"type\": \"service_account\"}", "sa.json").err().unwrap_or_default();
    assert!(missing.contains("missing field"), "{missing}");
    let user = key_file("https://oauth2.googleapis.com/token").replace("service_account", "authorized_user");
    let not_a_service_account = Source::service_account(&user, "sa.json").err().unwrap_or_default();
    assert!(not_a_service_account.contains("authorized_user"), "{not_a_service_account}");
    let bad_key = key_file("https://oauth2.googleapis.com/token").replace("MII", "XYZ");
    let bad = Source::service_account(&bad_key, "sa.json").err().unwrap_or_default();
    assert!(bad.contains("private_key") && !bad.contains("XYZ"), "{bad}");
}
