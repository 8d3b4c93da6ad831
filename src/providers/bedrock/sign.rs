//! Proving a Bedrock request: a SigV4 signature (service `bedrock`) over
//! the whole request, made by `aws-sigv4` with the account's access key,
//! secret and session token. (A Bedrock API key needs no signature: it
//! goes as a bearer token, as Anthropic's Bedrock SDK sends it.)

use std::time::SystemTime;

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use bytes::Bytes;

use crate::egress::Egress;
use crate::providers::{Authorizing, Credential, ProviderError};
use crate::secret::Secret;

/// The service name Bedrock's runtime is signed for.
const SERVICE: &str = "bedrock";

/// An AWS access key, its secret and its session token, and the region
/// they sign for.
pub(super) struct SigV4 {
    pub access_key_id: Secret,
    pub secret_access_key: Secret,
    pub session_token: Option<Secret>,
    pub region: String,
    /// Where the keys came from, for `baton check`.
    pub source: &'static str,
}

impl SigV4 {
    /// Signs `request` as of `time`: adds `x-amz-date`, `authorization`
    /// and, with a session token, `x-amz-security-token`. Every header the
    /// request carries is signed but the ones a hop may rewrite.
    pub(super) fn sign_at(&self, request: &mut http::Request<Bytes>, time: SystemTime) -> Result<(), ProviderError> {
        let failed = |err: &dyn std::fmt::Display| ProviderError::Request(format!("cannot sign it: {err}"));
        let identity = Credentials::new(
            self.access_key_id.expose(),
            self.secret_access_key.expose(),
            self.session_token.as_ref().map(|token| token.expose().to_owned()),
            None,
            "baton",
        )
        .into();
        let params = v4::SigningParams::builder()
            .identity(&identity)
            .region(&self.region)
            .name(SERVICE)
            .time(time)
            .settings(SigningSettings::default())
            .build()
            .map_err(|err| failed(&err))?
            .into();
        let uri = request.uri().to_string();
        let headers = request
            .headers()
            .iter()
            .filter(|(name, _)| !UNSIGNED.contains(&name.as_str()))
            .filter_map(|(name, value)| value.to_str().ok().map(|value| (name.as_str(), value)));
        let signable =
            SignableRequest::new(request.method().as_str(), uri, headers, SignableBody::Bytes(request.body()))
                .map_err(|err| failed(&err))?;
        let (instructions, _signature) = sign(signable, &params).map_err(|err| failed(&err))?.into_parts();
        instructions.apply_to_request_http1x(request);
        Ok(())
    }
}

/// Headers left out of the signature: a trace context a hop may replace.
const UNSIGNED: &[&str] = &["traceparent", "tracestate"];

impl Credential for SigV4 {
    fn authorize<'a>(&'a self, request: &'a mut http::Request<Bytes>, _egress: &'a Egress) -> Authorizing<'a> {
        let signed = self.sign_at(request, SystemTime::now());
        Box::pin(std::future::ready(signed))
    }

    fn source(&self) -> String {
        format!("AWS SigV4, keys from {}", self.source)
    }

    fn secrets(&self) -> Vec<String> {
        let mut secrets = vec![self.secret_access_key.expose().to_owned()];
        secrets.extend(self.session_token.as_ref().map(|token| token.expose().to_owned()));
        secrets
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;

    /// The request of [`signed`], with and without a session token, signed
    /// by botocore 1.44 (`SigV4Auth(credentials, "bedrock",
    /// "us-east-1").add_auth`) at the same time: an independent
    /// implementation's answer for the same bytes.
    #[test]
    fn a_request_is_signed_as_botocore_signs_it() {
        let (date, authorization, token) = signed(None);
        assert_eq!(date, "20150830T123600Z");
        assert_eq!(
            authorization,
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/bedrock/aws4_request, \
             SignedHeaders=content-type;host;x-amz-date, \
             Signature=f6dcdb4ebe71615893a654fd89804154ce97b14b613e03f9f74dfbe501692d63"
        );
        assert_eq!(token, None);
        let (_, authorization, token) = signed(Some("session-token-example"));
        assert_eq!(
            authorization,
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/bedrock/aws4_request, \
             SignedHeaders=content-type;host;x-amz-date;x-amz-security-token, \
             Signature=fc891699c99a7aa5bb648e88fb38286de73ede70afa47835b3df7d611c27a6d4"
        );
        assert_eq!(token.as_deref(), Some("session-token-example"));
    }

    /// A Bedrock request for a model id with a `:`, signed at
    /// 2015-08-30T12:36:00Z: its `x-amz-date`, `authorization` and
    /// `x-amz-security-token`.
    fn signed(session_token: Option<&str>) -> (String, String, Option<String>) {
        let signer = SigV4 {
            access_key_id: Secret::new("AKIDEXAMPLE"),
            secret_access_key: Secret::new("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"),
            session_token: session_token.map(Secret::new),
            region: "us-east-1".to_owned(),
            source: "the config",
        };
        let body = Bytes::from_static(
            br#"{"anthropic_version":"bedrock-2023-05-31","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}"#,
        );
        let mut request = http::Request::new(body);
        *request.method_mut() = http::Method::POST;
        *request.uri_mut() = http::Uri::from_static(
            "https://bedrock-runtime.us-east-1.amazonaws.com/model/anthropic.claude-3-haiku-20240307-v1%3A0/invoke-with-response-stream",
        );
        request.headers_mut().insert("content-type", http::HeaderValue::from_static("application/json"));
        request.headers_mut().insert(
            "traceparent",
            http::HeaderValue::from_static("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
        );
        let time = UNIX_EPOCH + Duration::from_secs(1_440_938_160);
        signer.sign_at(&mut request, time).unwrap_or_else(|err| panic!("{err}"));
        let header = |name: &str| request.headers().get(name).and_then(|value| value.to_str().ok()).map(str::to_owned);
        (
            header("x-amz-date").unwrap_or_default(),
            header("authorization").unwrap_or_default(),
            header("x-amz-security-token"),
        )
    }
}
