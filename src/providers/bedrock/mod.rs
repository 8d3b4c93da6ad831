//! Amazon Bedrock: Claude through `InvokeModelWithResponseStream`
//! (`POST /model/{id}/invoke-with-response-stream`) with the Messages body
//! as Bedrock takes it (`anthropic_version: "bedrock-2023-05-31"`, no
//! `model`, no `stream`, the client's betas as `anthropic_beta`), so a
//! Messages client reaches Claude on Bedrock on the same-dialect path. The
//! answer is AWS's event stream ([`frames`]), whose chunks are Anthropic's
//! events, read by the Anthropic decoder. Requests are signed with SigV4
//! ([`sign`]) or carry a Bedrock API key as a bearer token. Every other
//! model speaks Bedrock's Converse API ([`converse`]).

mod converse;
mod frames;
mod sign;
mod simulated;

use std::sync::Arc;

use bytes::Bytes;
use http::HeaderValue;
use http::header::{ACCEPT, AUTHORIZATION};

use super::anthropic::{Cloud, cloud_request, is_too_long, messages_decoder, messages_unsupported};
use super::simulate::Simulated;
use super::{Account, Adapter, Body, Decoder, Frames, ProviderError, Refusal, Settings, Upstream};
use crate::request::{ChatRequest, Field};
use crate::secret::Secret;

/// The content type of Bedrock's streamed answers.
const EVENT_STREAM: &str = "application/vnd.amazon.eventstream";

/// How Bedrock serves Claude's Messages API.
const BEDROCK: Cloud = Cloud { version: "bedrock-2023-05-31", stream_in_body: false, betas_in_body: true };

/// The Bedrock adapter.
pub struct Bedrock;

impl Adapter for Bedrock {
    fn request(&self, upstream: Upstream<'_>, req: &ChatRequest) -> Result<http::Request<Bytes>, ProviderError> {
        let url = upstream.url(&["/model/", &path_segment(upstream.model), "/invoke-with-response-stream"].concat());
        let bearer = upstream.bearer();
        let headers: Vec<_> = bearer.iter().map(|value| (AUTHORIZATION, value.as_str())).collect();
        let mut request = cloud_request(url, &headers, req, &BEDROCK)?;
        request.headers_mut().insert(ACCEPT, HeaderValue::from_static(EVENT_STREAM));
        Ok(request)
    }

    fn decoder(&self) -> Box<dyn Decoder> {
        messages_decoder()
    }

    fn simulated(&self) -> &'static dyn Simulated {
        &simulated::SimulatedBedrock
    }

    fn dialect(&self) -> Option<crate::request::ClientDialect> {
        Some(crate::request::ClientDialect::Messages)
    }

    /// `region` (the address is Bedrock's runtime there unless `base_url`
    /// says otherwise), and a Bedrock API key (`api_key`) or AWS keys: the
    /// config's `aws_*`, else the environment's `AWS_*`.
    fn configure(&self, settings: &Settings<'_>) -> Result<Account, Refusal> {
        settings.refuse_all_but(&["region", "aws_access_key_id", "aws_secret_access_key", "aws_session_token"])?;
        let region = settings.region.map(str::trim);
        if let Some(region) = region.filter(|region| !is_region(region)) {
            return Err(Refusal::new("region", format!("{region:?} is not an AWS region such as us-east-1")));
        }
        let base_url = match (settings.base_url, region) {
            (Some(base_url), _) => base_url.to_owned(),
            (None, Some(region)) => format!("https://bedrock-runtime.{region}.amazonaws.com"),
            (None, None) => return Err(Refusal::new("region", "is required: the AWS region, such as us-east-1")),
        };
        let account = Account::new(base_url);
        if settings.api_key.is_some() {
            if let Some(key) = [("aws_access_key_id", settings.aws_access_key_id.is_some())]
                .into_iter()
                .chain([("aws_secret_access_key", settings.aws_secret_access_key.is_some())])
                .find_map(|(key, set)| set.then_some(key))
            {
                return Err(Refusal::new(key, "is set beside api_key: give a Bedrock API key or AWS keys, not both"));
            }
            return Ok(account);
        }
        let Some(keys) = aws_keys(settings)? else {
            return if settings.secrets_optional {
                Ok(account)
            } else {
                Err(Refusal::new(
                    "aws_access_key_id",
                    "no credentials: set api_key (a Bedrock API key), aws_access_key_id and aws_secret_access_key, \
                     or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the environment",
                ))
            };
        };
        let Some(region) = region else {
            return Err(Refusal::new("region", "is required to sign requests with AWS keys"));
        };
        let signer = sign::SigV4 {
            access_key_id: keys.0,
            secret_access_key: keys.1,
            session_token: keys.2,
            region: region.to_owned(),
            source: keys.3,
        };
        Ok(account.with("region", region).with_credential(Arc::new(signer)))
    }

    fn content_type(&self) -> &'static str {
        EVENT_STREAM
    }

    fn frames(&self, body: Body, max_event_bytes: usize) -> Frames {
        frames::events(body, max_event_bytes)
    }

    /// Claude is reached through the Messages body; every other model
    /// through Bedrock's Converse API.
    fn for_model(&self, model: &str) -> Option<&'static dyn Adapter> {
        (!is_claude(model)).then_some(&converse::Converse as &'static dyn Adapter)
    }

    fn check_model(&self, model: &str) -> Result<(), String> {
        if model.trim().is_empty() || model.len() > 2048 {
            return Err("a Bedrock model id, inference profile or ARN is 1 to 2,048 characters".to_owned());
        }
        Ok(())
    }

    fn is_context_length(&self, message: &str) -> bool {
        is_too_long(message)
    }

    fn unsupported(&self, req: &ChatRequest) -> Vec<Field> {
        messages_unsupported(req)
    }
}

/// The access key, secret, session token and where they came from: the
/// config's, else the environment's, else none.
type Keys = (Secret, Secret, Option<Secret>, &'static str);

/// The AWS keys `settings` name: both of the config's or none of them,
/// else both of the environment's.
fn aws_keys(settings: &Settings<'_>) -> Result<Option<Keys>, Refusal> {
    match (settings.aws_access_key_id, settings.aws_secret_access_key) {
        (Some(id), Some(secret)) => {
            return Ok(Some((id.clone(), secret.clone(), settings.aws_session_token.cloned(), "the config")));
        }
        (Some(_), None) => return Err(Refusal::new("aws_access_key_id", "needs aws_secret_access_key beside it")),
        (None, Some(_)) => return Err(Refusal::new("aws_secret_access_key", "needs aws_access_key_id beside it")),
        (None, None) => {}
    }
    if let Some(key) = settings.aws_session_token.map(|_| "aws_session_token") {
        return Err(Refusal::new(key, "needs aws_access_key_id and aws_secret_access_key beside it"));
    }
    let env = |name: &str| (settings.env)(name).filter(|value| !value.is_empty());
    match (env("AWS_ACCESS_KEY_ID"), env("AWS_SECRET_ACCESS_KEY")) {
        (Some(id), Some(secret)) => {
            let token = env("AWS_SESSION_TOKEN").map(Secret::new);
            Ok(Some((Secret::new(id), Secret::new(secret), token, "the environment (AWS_ACCESS_KEY_ID)")))
        }
        _ => Ok(None),
    }
}

/// Whether `region` reads as an AWS region: lowercase words and digits
/// joined by dashes.
fn is_region(region: &str) -> bool {
    !region.is_empty()
        && region.contains('-')
        && region.bytes().all(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'-')
}

/// Whether a Bedrock model id or inference profile is Claude's:
/// `anthropic.…`, a profile such as `us.anthropic.…`, or an ARN naming one.
fn is_claude(model: &str) -> bool {
    let name = model.rsplit('/').next().unwrap_or(model);
    name.starts_with("anthropic.") || name.split_once('.').is_some_and(|(_, rest)| rest.starts_with("anthropic."))
}

/// `model` as one path segment, percent-encoded as the AWS SDKs encode a
/// label: everything but letters, digits and `-._~`, so `:` is `%3A` and
/// an ARN's `/` is `%2F`.
fn path_segment(model: &str) -> String {
    let mut out = String::with_capacity(model.len() + 8);
    for byte in model.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests;
