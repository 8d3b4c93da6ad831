//! What a logged body may not keep: the first [`BODY_CAP`] bytes only, and
//! nothing that is, or looks like, a key — the configured provider keys and
//! admin token by their text, client keys by their hash (the config may hold
//! only that), and words shaped like the common providers' keys.

use aws_lc_rs::constant_time::verify_slices_are_equal;
use aws_lc_rs::digest::{SHA256, digest};

use crate::config::Config;

/// The most bytes of a request body, or of an answer's text, a row keeps.
pub const BODY_CAP: usize = 16 * 1024;
/// What the request's task keeps beyond the cap, so a key that straddles
/// the cap is still whole when it is redacted.
pub const CAPTURE_MARGIN: usize = 512;
/// What a redacted key becomes.
const REDACTED: &str = "[redacted]";
/// The shortest word compared with the client keys' hashes.
const MIN_KEY_WORD: usize = 6;
/// Prefixes of the keys providers issue, each with the shortest such key.
const KEY_SHAPES: [(&str, usize); 8] =
    [("sk-", 20), ("sk_", 20), ("rk-", 20), ("AIza", 30), ("xai-", 20), ("gsk_", 20), ("ghp_", 20), ("hf_", 20)];

/// The secrets of one config, to take out of logged text.
#[derive(Debug, Default)]
pub struct Redactor {
    /// Provider keys and the admin token, as written.
    secrets: Vec<String>,
    /// SHA-256 of each client key.
    client_keys: Vec<[u8; 32]>,
}

impl Redactor {
    /// The secrets `config` holds.
    pub fn new(config: &Config) -> Self {
        let providers = config.providers.iter().filter_map(|p| p.api_key.as_ref());
        let mut secrets: Vec<String> = providers
            .chain(config.admin_token.as_ref())
            .map(|secret| secret.expose().to_owned())
            .filter(|secret| secret.len() >= 4)
            .collect();
        // Longest first, so a key that contains another is taken out whole.
        secrets.sort_by_key(|secret| std::cmp::Reverse(secret.len()));
        let client_keys = config.access.keys.keys().iter().map(|key| key.sha256).collect();
        Redactor { secrets, client_keys }
    }

    /// `text` without any key, cut to [`BODY_CAP`] bytes.
    pub fn redact(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for secret in &self.secrets {
            if out.contains(secret.as_str()) {
                out = out.replace(secret.as_str(), REDACTED);
            }
        }
        let out = self.redact_words(&out);
        cap(&out, BODY_CAP).to_owned()
    }

    /// Replaces each word (a run of letters, digits, `-` and `_`) that is a
    /// client key or is shaped like a provider's key.
    fn redact_words(&self, text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(start) = rest.find(is_key_char) {
            out.push_str(&rest[..start]);
            let word = &rest[start..];
            let end = word.find(|c: char| !is_key_char(c)).unwrap_or(word.len());
            let (word, after) = word.split_at(end);
            out.push_str(if self.is_key(word) { REDACTED } else { word });
            rest = after;
        }
        out.push_str(rest);
        out
    }

    fn is_key(&self, word: &str) -> bool {
        let shaped = KEY_SHAPES.iter().any(|(prefix, len)| word.len() >= *len && word.starts_with(prefix));
        shaped
            || (word.len() >= MIN_KEY_WORD && !self.client_keys.is_empty() && {
                let hash = digest(&SHA256, word.as_bytes());
                self.client_keys.iter().any(|key| verify_slices_are_equal(key, hash.as_ref()).is_ok())
            })
    }
}

fn is_key_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-' || c == '_'
}

/// The longest start of `text` of at most `limit` bytes that ends on a
/// character boundary.
pub fn cap(text: &str, limit: usize) -> &str {
    if text.len() <= limit {
        return text;
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn redactor() -> Redactor {
        let text = r#"
admin_token = "admin-token-0123456789"
[[keys]]
name = "web"
key = "client-secret-42"
[[providers]]
name = "p"
kind = "openai"
base_url = "http://127.0.0.1:1/v1"
api_key = "provider-key-abcdef"
[[routes]]
model = "chat"
targets = [{ provider = "p", model = "m" }]
"#;
        Redactor::new(&crate::config::parse(text, "t.toml", &|_| None).expect("valid"))
    }

    #[test]
    fn configured_keys_and_key_shaped_words_are_taken_out() {
        let text = "use provider-key-abcdef, admin-token-0123456789 and client-secret-42; also sk-proj-ABCDEFGHIJKLMNOPQRSTUV and AIzaSyA0123456789abcdefghijklmnopqrs";
        let out = redactor().redact(text);
        for secret in ["provider-key-abcdef", "admin-token-0123456789", "client-secret-42", "sk-proj-", "AIzaSy"] {
            assert!(!out.contains(secret), "{secret} left in {out:?}");
        }
        assert_eq!(out.matches(REDACTED).count(), 5, "{out}");
        assert!(out.starts_with("use [redacted], [redacted] and [redacted]; also"), "the rest stays: {out}");
    }

    #[test]
    fn ordinary_words_stay_and_the_text_is_capped_on_a_character() {
        let out = redactor().redact("sk-short is no key, nor is client-secret-4");
        assert_eq!(out, "sk-short is no key, nor is client-secret-4");
        let long = "é".repeat(BODY_CAP);
        let capped = redactor().redact(&long);
        assert!(capped.len() <= BODY_CAP && capped.len() > BODY_CAP - 2 && capped.chars().all(|c| c == 'é'));
    }
}
