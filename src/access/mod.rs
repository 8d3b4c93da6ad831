//! Who may call: client keys, compared in constant time against SHA-256
//! hashes (so a config may hold no secret at all), each with the routes it
//! may use. baton holds the operator's provider keys, so with any
//! `[[keys]]` configured every `/v1` request must present one.

use aws_lc_rs::constant_time::verify_slices_are_equal;
use aws_lc_rs::digest::{SHA256, digest};
use http::HeaderMap;
use http::header::AUTHORIZATION;

/// The key scheduled drills are charged to: no client key may take its name,
/// so a drill's spend is never a client's.
pub const DRILL_KEY: &str = "drill";

/// The header some SDKs (Anthropic's) send the key in instead of `Authorization`.
pub const API_KEY_HEADER: &str = "x-api-key";

/// One client key: a name for logs and metrics, the hash of its secret,
/// and the routes it may use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientKey {
    /// Shown in logs, metrics and the status page; never the secret.
    pub name: String,
    /// SHA-256 of the secret.
    pub sha256: [u8; 32],
    /// The routes this key may use, by route name (an alias in the config
    /// is resolved to its route's name at load); `None` means every route.
    pub routes: Option<Vec<String>>,
    /// Requests per minute this key may send (GCRA: a burst of up to this many).
    pub rpm: Option<u64>,
    /// Tokens per minute this key may use, estimated before and settled after.
    pub tpm: Option<u64>,
}

impl ClientKey {
    /// The SHA-256 of `secret`, as a config's `key_sha256` holds it.
    pub fn hash(secret: &str) -> [u8; 32] {
        let mut out = [0u8; 32];
        out.copy_from_slice(digest(&SHA256, secret.as_bytes()).as_ref());
        out
    }

    /// Whether this key may use the route named `route` (its name, not
    /// the alias a client sent: every name of a route is allowed alike).
    pub fn allows(&self, route: &str) -> bool {
        self.routes.as_ref().is_none_or(|routes| routes.iter().any(|r| r == route))
    }
}

/// Why a request may not go on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Denied {
    /// No key was presented.
    Missing,
    /// The key presented is none of the configured ones.
    Unknown,
    /// The key may not use this route.
    Route {
        /// The key's name.
        key: String,
        /// The route asked for.
        route: String,
    },
}

impl Denied {
    /// The HTTP status: 401 for no or a wrong key, 403 for a route the key may not use.
    pub fn status(&self) -> u16 {
        match self {
            Denied::Missing | Denied::Unknown => 401,
            Denied::Route { .. } => 403,
        }
    }

    /// What the client is told; never the key it sent.
    pub fn message(&self) -> String {
        match self {
            Denied::Missing => {
                format!("this gateway needs an API key: send Authorization: Bearer <key> or {API_KEY_HEADER}")
            }
            Denied::Unknown => "the API key is not valid for this gateway".to_owned(),
            Denied::Route { key, route } => format!("the API key {key:?} may not use model {route:?}"),
        }
    }
}

/// The keys in force: the config's, and those the store holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientKeys {
    keys: Vec<ClientKey>,
    /// A key is needed even while there is none: a gateway open to the
    /// network whose keys come from the store refuses everyone until one is made.
    closed: bool,
}

impl ClientKeys {
    /// These keys.
    pub fn new(keys: Vec<ClientKey>) -> Self {
        ClientKeys { keys, closed: false }
    }

    /// The same keys, with a key required even while there is none.
    pub fn closed(mut self) -> Self {
        self.closed = true;
        self
    }

    /// These keys and `more` (the store's), as closed as these.
    pub fn extended(&self, more: impl IntoIterator<Item = ClientKey>) -> Self {
        ClientKeys { keys: self.keys.iter().cloned().chain(more).collect(), closed: self.closed }
    }

    /// Whether a key is needed: any key exists, or the gateway is closed
    /// until one does. Then every `/v1` request needs one.
    pub fn required(&self) -> bool {
        self.closed || !self.keys.is_empty()
    }

    /// The configured keys, for names on the status page.
    pub fn keys(&self) -> &[ClientKey] {
        &self.keys
    }

    /// The key `headers` present, when keys are required: every
    /// configured hash is compared, in constant time, so timing tells
    /// nothing about which key or how much of it matched.
    pub fn identify(&self, headers: &HeaderMap) -> Result<Option<&ClientKey>, Denied> {
        self.identify_presented(presented_key(headers))
    }

    /// The key `presented`, found where the request's dialect puts it (see
    /// [`ClientKeys::identify`]).
    pub fn identify_presented(&self, presented: Option<&str>) -> Result<Option<&ClientKey>, Denied> {
        if !self.required() {
            return Ok(None);
        }
        let presented = presented.map(str::trim).filter(|key| !key.is_empty()).ok_or(Denied::Missing)?;
        let hash = ClientKey::hash(presented);
        let mut found = None;
        for key in &self.keys {
            if verify_slices_are_equal(&key.sha256, &hash).is_ok() {
                found = Some(key);
            }
        }
        found.map(Some).ok_or(Denied::Unknown)
    }
}

/// A SHA-256 written as 64 hexadecimal digits (a config's `key_sha256`,
/// the store's column), or `None` for anything else.
pub fn parse_sha256(hex: &str) -> Option<[u8; 32]> {
    let hex = hex.trim();
    if hex.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (byte, pair) in out.iter_mut().zip(hex.as_bytes().chunks(2)) {
        *byte = u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok()?;
    }
    Some(out)
}

/// The key in `Authorization: Bearer <key>` or `x-api-key: <key>`: where
/// the OpenAI and Anthropic SDKs send it.
pub fn presented_key(headers: &HeaderMap) -> Option<&str> {
    let bearer = headers
        .get(AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer ").or_else(|| value.strip_prefix("bearer ")));
    let key = bearer.or_else(|| headers.get(API_KEY_HEADER).and_then(|value| value.to_str().ok()))?;
    let key = key.trim();
    (!key.is_empty()).then_some(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys() -> ClientKeys {
        ClientKeys::new(vec![
            ClientKey { name: "web".into(), sha256: ClientKey::hash("sk-web"), routes: None, rpm: None, tpm: None },
            ClientKey {
                name: "batch".into(),
                sha256: ClientKey::hash("sk-batch"),
                routes: Some(vec!["cheap".into()]),
                rpm: None,
                tpm: None,
            },
        ])
    }

    fn headers(name: &str, value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(
            http::HeaderName::from_bytes(name.as_bytes()).unwrap_or(AUTHORIZATION),
            value.parse().unwrap_or_else(|_| http::HeaderValue::from_static("x")),
        );
        headers
    }

    #[test]
    fn a_key_is_found_by_its_hash_in_either_header() {
        let keys = keys();
        let web = keys.identify(&headers("authorization", "Bearer sk-web")).map(|k| k.map(|k| k.name.clone()));
        assert_eq!(web, Ok(Some("web".to_owned())));
        let batch = keys.identify(&headers("x-api-key", "sk-batch")).map(|k| k.map(|k| k.name.clone()));
        assert_eq!(batch, Ok(Some("batch".to_owned())));
    }

    #[test]
    fn a_missing_or_wrong_key_is_refused_and_a_route_checked() {
        let keys = keys();
        assert_eq!(keys.identify(&HeaderMap::new()), Err(Denied::Missing));
        assert_eq!(keys.identify(&headers("authorization", "Bearer sk-nope")), Err(Denied::Unknown));
        assert_eq!(keys.identify(&headers("authorization", "Basic sk-web")), Err(Denied::Missing));
        let batch = &keys.keys()[1];
        assert!(batch.allows("cheap") && !batch.allows("chat"));
        assert!(keys.keys()[0].allows("anything"));
        assert_eq!(Denied::Unknown.status(), 401);
    }

    #[test]
    fn without_keys_nobody_is_asked_for_one() {
        assert_eq!(ClientKeys::default().identify(&HeaderMap::new()), Ok(None));
    }
}
