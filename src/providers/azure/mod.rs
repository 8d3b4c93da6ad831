//! Azure OpenAI: OpenAI's Chat Completions at a deployment's address —
//! `POST {base_url}/openai/deployments/{deployment}/chat/completions?api-version=…`
//! with the key in `api-key` — read by the OpenAI decoder, which already
//! reads Azure's differences: a first chunk with no `choices` (its
//! `prompt_filter_results`), `content_filter_results` on chunks, and
//! `finish_reason: "content_filter"`, passed on as the answer's end.

mod simulated;

use bytes::Bytes;
use http::HeaderName;

use super::openai::{chat_decoder, chat_request, chat_unsupported, is_too_long};
use super::simulate::Simulated;
use super::{Account, Adapter, Decoder, ProviderError, Refusal, Settings, Upstream};
use crate::request::{ChatRequest, Field};

/// The `api-version` asked for when the config names none: the newest
/// generally available dated version.
pub const DEFAULT_API_VERSION: &str = "2024-10-21";

/// The header Azure reads the key from.
const API_KEY: HeaderName = HeaderName::from_static("api-key");

/// The Azure OpenAI adapter.
pub struct Azure;

impl Adapter for Azure {
    fn request(&self, upstream: Upstream<'_>, req: &ChatRequest) -> Result<http::Request<Bytes>, ProviderError> {
        let version = upstream.account.option("api_version").unwrap_or(DEFAULT_API_VERSION);
        let path = ["/openai/deployments/", upstream.model, "/chat/completions?api-version=", version].concat();
        let headers: Vec<_> = upstream.api_key.iter().map(|key| (API_KEY, *key)).collect();
        chat_request(upstream.url(&path), &headers, upstream.model, req)
    }

    fn decoder(&self) -> Box<dyn Decoder> {
        chat_decoder()
    }

    fn simulated(&self) -> &'static dyn Simulated {
        &simulated::SimulatedAzure
    }

    fn dialect(&self) -> Option<crate::request::ClientDialect> {
        Some(crate::request::ClientDialect::ChatCompletions)
    }

    /// A resource's address (`https://my-resource.openai.azure.com`, no
    /// `/openai`), its key, and `api_version`.
    fn configure(&self, settings: &Settings<'_>) -> Result<Account, Refusal> {
        settings.refuse_all_but(&["api_version"])?;
        let base_url = settings.base_url.ok_or_else(|| {
            Refusal::new(
                "base_url",
                "is required: the resource's address, such as https://my-resource.openai.azure.com",
            )
        })?;
        if base_url.trim_end_matches('/').ends_with("/openai") {
            let message = "ends in /openai, which baton adds itself: give the resource's address alone";
            return Err(Refusal::new("base_url", message));
        }
        let version = settings.api_version.unwrap_or(DEFAULT_API_VERSION);
        let valid = !version.is_empty()
            && version.bytes().all(|byte| byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'.');
        if !valid {
            return Err(Refusal::new("api_version", format!("{version:?} is not an api-version such as 2024-10-21")));
        }
        Ok(Account::new(base_url.to_owned()).with("api_version", version))
    }

    fn is_context_length(&self, message: &str) -> bool {
        is_too_long(message)
    }

    fn unsupported(&self, req: &ChatRequest) -> Vec<Field> {
        chat_unsupported(req)
    }
}

#[cfg(test)]
mod tests;
