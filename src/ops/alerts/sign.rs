//! The signature a webhook can check an alert by: HMAC-SHA256 of the exact
//! body bytes under the `[[alerts]]` secret, sent as
//! `x-baton-signature: sha256=<64 lowercase hex digits>` (the form GitHub's
//! webhooks use), so a receiver knows the alert came from this baton.

use aws_lc_rs::hmac;

use crate::config::Secret;

/// The header the signature travels in.
pub const SIGNATURE_HEADER: &str = "x-baton-signature";

/// `sha256=<hex>` of `body` under `secret`.
pub fn signature(secret: &Secret, body: &[u8]) -> String {
    let key = hmac::Key::new(hmac::HMAC_SHA256, secret.expose().as_bytes());
    format!("sha256={}", hex(hmac::sign(&key, body).as_ref()))
}

/// Whether `header` is the signature of `body` under `secret`, compared in
/// constant time: what a receiver written in Rust would do.
pub fn verify(secret: &Secret, body: &[u8], header: &str) -> bool {
    let Some(digits) = header.strip_prefix("sha256=") else { return false };
    let Some(tag) = unhex(digits) else { return false };
    let key = hmac::Key::new(hmac::HMAC_SHA256, secret.expose().as_bytes());
    hmac::verify(&key, body, &tag).is_ok()
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        out.push(char::from(DIGITS[usize::from(byte >> 4)]));
        out.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
    out
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    let digit = |b: u8| char::from(b).to_digit(16).and_then(|d| u8::try_from(d).ok());
    text.as_bytes().chunks(2).map(|pair| Some(digit(pair[0])? << 4 | digit(pair[1])?)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signature_is_rfc_4231_hmac_sha256_in_hex() {
        // RFC 4231, test case 2.
        let secret = Secret::new("Jefe");
        let signed = signature(&secret, b"what do ya want for nothing?");
        assert_eq!(signed, "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
        assert!(verify(&secret, b"what do ya want for nothing?", &signed));
        assert!(!verify(&secret, b"what do ya want for nothing!", &signed), "another body");
        assert!(!verify(&Secret::new("jefe"), b"what do ya want for nothing?", &signed), "another secret");
        assert!(!verify(&secret, b"x", "sha1=00") && !verify(&secret, b"x", "sha256=zz"));
    }
}
