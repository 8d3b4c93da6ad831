//! The OAuth access token Vertex AI takes, fetched once for all requests:
//! from a service account's key (a JWT signed RS256 with its private key,
//! exchanged at the key file's `token_uri`) or from the GCE/GKE metadata
//! server. The token is cached and refreshed ahead of its expiry, by the
//! smaller of 5 minutes and half its lifetime: a request never waits while
//! the cached token is still good (the refresh runs beside it), and on a
//! cold or expired cache concurrent requests wait for one exchange, not
//! one each. A failed or hung exchange fails the attempt as `auth`.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use futures_util::StreamExt;
use http::header::{AUTHORIZATION, CONTENT_TYPE};
use http::{HeaderValue, Method};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::egress::{Client, Egress};
use crate::providers::{Authorizing, Credential, ProviderError};
use crate::secret::Secret;

/// The scope every Vertex AI call needs.
const SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";

/// How long an assertion is good for: Google's most.
const ASSERTION_LIFETIME: u64 = 3600;

/// The longest an exchange may take before it fails the attempt.
const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(10);

/// The most of a token endpoint's answer read.
const ANSWER_LIMIT: usize = 64 * 1024;

/// How far ahead of its expiry a token is refreshed, at most.
const REFRESH_AHEAD: Duration = Duration::from_secs(300);

/// The JWT-bearer grant's name, form-encoded.
const JWT_GRANT: &str = "urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer";

/// Where tokens come from.
pub(super) enum Source {
    /// A service account's key file.
    ServiceAccount {
        email: String,
        key_id: Option<String>,
        key: EncodingKey,
        token_uri: String,
        /// The file it was read from, for `baton check`.
        file: String,
    },
    /// The metadata server of the machine baton runs on.
    Metadata {
        /// The token's address on it.
        url: String,
    },
}

/// A service account's key file, the fields read.
#[derive(Deserialize)]
struct KeyFile {
    #[serde(rename = "type")]
    kind: Option<String>,
    client_email: String,
    private_key: String,
    private_key_id: Option<String>,
    token_uri: String,
}

impl Source {
    /// The service account of the key file `text` (read from `file`), or
    /// why it is not one; the message never holds the key.
    pub(super) fn service_account(text: &str, file: &str) -> Result<Source, String> {
        let key: KeyFile = serde_json::from_str(text).map_err(|err| {
            // A missing field is named; any other error only placed, as it may quote the file.
            let why = if err.to_string().starts_with("missing field") {
                err.to_string()
            } else {
                format!("not JSON of the expected shape at line {}, column {}", err.line(), err.column())
            };
            format!("{file} is not a service-account key file: {why}")
        })?;
        if key.kind.as_deref().is_some_and(|kind| kind != "service_account") {
            return Err(format!(
                "{file} is a {:?} credential, not a service account's key",
                key.kind.unwrap_or_default()
            ));
        }
        let private = EncodingKey::from_rsa_pem(key.private_key.as_bytes())
            .map_err(|_| format!("{file}: its private_key is not an RSA private key in PEM"))?;
        if !(key.token_uri.starts_with("https://") || key.token_uri.starts_with("http://")) {
            return Err(format!("{file}: its token_uri is not an http(s) URL"));
        }
        Ok(Source::ServiceAccount {
            email: key.client_email,
            key_id: key.private_key_id,
            key: private,
            token_uri: key.token_uri,
            file: file.to_owned(),
        })
    }

    /// The metadata server at `host` (`GCE_METADATA_HOST`, else Google's name for it).
    pub(super) fn metadata(host: Option<&str>) -> Source {
        let host = host.filter(|host| !host.is_empty()).unwrap_or("metadata.google.internal");
        let url = format!("http://{host}/computeMetadata/v1/instance/service-accounts/default/token");
        Source::Metadata { url }
    }

    fn describe(&self) -> String {
        match self {
            Source::ServiceAccount { email, file, .. } => format!("service account {email} (key file {file})"),
            Source::Metadata { url } => format!("the metadata server ({url})"),
        }
    }

    /// The request that asks for a token.
    fn request(&self) -> Result<http::Request<Bytes>, String> {
        let (method, url, body, content_type) = match self {
            Source::ServiceAccount { email, key_id, key, token_uri, .. } => {
                let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|since| since.as_secs()).unwrap_or(0);
                let claims =
                    Claims { iss: email, scope: SCOPE, aud: token_uri, iat: now, exp: now + ASSERTION_LIFETIME };
                let header = Header { kid: key_id.clone(), ..Header::new(Algorithm::RS256) };
                let assertion =
                    jsonwebtoken::encode(&header, &claims, key).map_err(|_| "cannot sign the assertion".to_owned())?;
                let body = format!("grant_type={JWT_GRANT}&assertion={assertion}");
                (Method::POST, token_uri.as_str(), body, Some("application/x-www-form-urlencoded"))
            }
            Source::Metadata { url } => (Method::GET, url.as_str(), String::new(), None),
        };
        let uri = http::Uri::try_from(url).map_err(|_| "the token address is not a URL".to_owned())?;
        let mut request = http::Request::new(Bytes::from(body));
        *request.method_mut() = method;
        *request.uri_mut() = uri;
        if let Some(content_type) = content_type {
            request.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
        }
        if matches!(self, Source::Metadata { .. }) {
            request.headers_mut().insert("metadata-flavor", HeaderValue::from_static("Google"));
        }
        Ok(request)
    }
}

/// The JWT's claims.
#[derive(Serialize)]
struct Claims<'a> {
    iss: &'a str,
    scope: &'a str,
    aud: &'a str,
    iat: u64,
    exp: u64,
}

/// A token endpoint's answer.
#[derive(Deserialize)]
struct Answer {
    access_token: String,
    /// Seconds; some servers send it as a string.
    expires_in: Option<serde_json::Value>,
}

/// A token and when it is to be replaced and when it stops working.
#[derive(Clone)]
struct Token {
    value: Secret,
    refresh_at: Instant,
    expires_at: Instant,
}

/// The cached token of one provider, and how to get the next.
pub(super) struct Tokens {
    shared: Arc<Shared>,
}

struct Shared {
    source: Source,
    client: Client,
    current: Mutex<Option<Token>>,
    /// Held while an exchange runs: one at a time.
    exchanging: Arc<tokio::sync::Mutex<()>>,
    timeout: Duration,
}

impl Tokens {
    /// Tokens from `source`, fetched over a client of their own.
    pub(super) fn new(source: Source) -> Result<Tokens, String> {
        Self::with_timeout(source, EXCHANGE_TIMEOUT)
    }

    fn with_timeout(source: Source, timeout: Duration) -> Result<Tokens, String> {
        let client = Client::new(2, Duration::from_secs(60)).map_err(|err| err.to_string())?;
        let shared = Shared {
            source,
            client,
            current: Mutex::new(None),
            exchanging: Arc::new(tokio::sync::Mutex::new(())),
            timeout,
        };
        Ok(Tokens { shared: Arc::new(shared) })
    }

    /// A good token: the cached one (refreshed beside the request once it
    /// is due), or, with none good, the one a single exchange brings.
    pub(super) async fn token(&self, egress: &Egress) -> Result<Secret, ProviderError> {
        let now = Instant::now();
        if let Some(token) = self.shared.cached().filter(|token| now < token.expires_at) {
            if now >= token.refresh_at {
                self.refresh_beside(egress);
            }
            return Ok(token.value);
        }
        let _one = self.shared.exchanging.lock().await;
        // Another request's exchange may have brought one meanwhile.
        if let Some(token) = self.shared.cached().filter(|token| Instant::now() < token.refresh_at) {
            return Ok(token.value);
        }
        self.shared.exchange(egress).await
    }

    /// Starts an exchange beside the requests, unless one runs.
    fn refresh_beside(&self, egress: &Egress) {
        let Ok(one) = Arc::clone(&self.shared.exchanging).try_lock_owned() else { return };
        let (shared, egress) = (Arc::clone(&self.shared), egress.clone());
        tokio::spawn(async move {
            // A failed refresh leaves the old token to serve until it expires.
            let _ = shared.exchange(&egress).await;
            drop(one);
        });
    }
}

impl Shared {
    fn cached(&self) -> Option<Token> {
        self.current.lock().ok().and_then(|current| current.clone())
    }

    /// One exchange, its token cached.
    async fn exchange(&self, egress: &Egress) -> Result<Secret, ProviderError> {
        let fetched = tokio::time::timeout(self.timeout, self.fetch(egress)).await;
        let token = match fetched {
            Ok(token) => token,
            Err(_) => Err(format!("the token exchange took longer than {} ms", self.timeout.as_millis())),
        }
        .map_err(|why| ProviderError::Credential(format!("{}: {why}", self.source.describe())))?;
        let value = token.value.clone();
        if let Ok(mut current) = self.current.lock() {
            *current = Some(token);
        }
        Ok(value)
    }

    async fn fetch(&self, egress: &Egress) -> Result<Token, String> {
        let request = self.source.request()?;
        let started = Instant::now();
        let response = self.client.send_via(request, egress).await.map_err(|err| err.to_string())?;
        let status = response.status();
        let mut body = Vec::new();
        let mut chunks = response.into_body();
        while let Some(chunk) = chunks.next().await {
            body.extend_from_slice(&chunk.map_err(|err| err.to_string())?);
            if body.len() > ANSWER_LIMIT {
                return Err("the token endpoint's answer is too large".to_owned());
            }
        }
        if !status.is_success() {
            // RFC 6749's `error` names the fault; its description may echo the assertion.
            let error = serde_json::from_slice::<serde_json::Value>(&body)
                .ok()
                .and_then(|body| body.get("error").and_then(|error| error.as_str().map(str::to_owned)));
            return Err(format!(
                "the token endpoint answered {}{}",
                status.as_u16(),
                error.map(|e| format!(" ({e})")).unwrap_or_default()
            ));
        }
        let answer: Answer =
            serde_json::from_slice(&body).map_err(|_| "the token endpoint's answer has no access_token".to_owned())?;
        if answer.access_token.is_empty() || HeaderValue::from_str(&answer.access_token).is_err() {
            return Err("the token endpoint's access_token cannot be sent".to_owned());
        }
        let seconds = match &answer.expires_in {
            Some(serde_json::Value::Number(n)) => n.as_u64(),
            Some(serde_json::Value::String(s)) => s.parse().ok(),
            _ => None,
        }
        .unwrap_or(3600)
        .max(1);
        let lifetime = Duration::from_secs(seconds);
        let ahead = REFRESH_AHEAD.min(lifetime / 2);
        Ok(Token {
            value: Secret::new(answer.access_token),
            refresh_at: started + lifetime - ahead,
            expires_at: started + lifetime,
        })
    }
}

impl Credential for Tokens {
    fn authorize<'a>(&'a self, request: &'a mut http::Request<Bytes>, egress: &'a Egress) -> Authorizing<'a> {
        Box::pin(async move {
            let token = self.token(egress).await?;
            let value = HeaderValue::from_str(&["Bearer ", token.expose()].concat())
                .map_err(|_| ProviderError::Credential("the access token cannot be sent".to_owned()))?;
            request.headers_mut().insert(AUTHORIZATION, value);
            Ok(())
        })
    }

    fn source(&self) -> String {
        format!("OAuth tokens from {}", self.shared.source.describe())
    }

    fn secrets(&self) -> Vec<String> {
        self.shared.cached().map(|token| token.value.expose().to_owned()).into_iter().collect()
    }

    fn rejected(&self) {
        if let Ok(mut current) = self.shared.current.lock() {
            *current = None;
        }
    }
}

#[cfg(test)]
mod tests;
