//! Google Vertex AI: Claude and Gemini in a Google Cloud project. Claude
//! goes through `…/publishers/anthropic/models/{model}:streamRawPredict`
//! with the Messages body as Vertex takes it (`anthropic_version:
//! "vertex-2023-10-16"`, no `model`, `stream: true`), so a Messages
//! client's request reaches it on the same-dialect path and the answer is
//! Anthropic's SSE; Gemini through `…/publishers/google/models/{model}:
//! streamGenerateContent?alt=sse` with the Gemini body and stream. Every
//! request carries an OAuth access token ([`token`]).

mod simulated;
mod token;

use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;

use super::anthropic::{Cloud, cloud_request, is_too_long, messages_decoder, messages_unsupported};
use super::gemini::{gemini_decoder, gemini_request, gemini_unsupported};
use super::simulate::Simulated;
use super::{Account, Adapter, Decoder, ProviderError, Refusal, Settings, Upstream};
use crate::request::{ChatRequest, ClientDialect, Field};

/// How Vertex serves Claude's Messages API.
const VERTEX: Cloud = Cloud { version: "vertex-2023-10-16", stream_in_body: true, betas_in_body: false };

/// The largest key file read.
const KEY_FILE_LIMIT: u64 = 64 * 1024;

/// What `credentials` says to take tokens from the metadata server.
pub const METADATA: &str = "metadata";

/// The Vertex AI adapter: Gemini's models, and Claude's through [`VertexClaude`].
pub struct Vertex;

/// Claude on Vertex AI.
pub struct VertexClaude;

/// Where the model `publisher` publishes lives in the provider's project
/// and region, `method` appended.
fn model_url(upstream: Upstream<'_>, publisher: &str, method: &str) -> String {
    let option = |name| upstream.account.option(name).unwrap_or_default();
    let path = [
        "/v1/projects/",
        option("project"),
        "/locations/",
        option("region"),
        "/publishers/",
        publisher,
        "/models/",
        upstream.model,
        method,
    ]
    .concat();
    upstream.url(&path)
}

impl Adapter for Vertex {
    fn request(&self, upstream: Upstream<'_>, req: &ChatRequest) -> Result<http::Request<Bytes>, ProviderError> {
        gemini_request(model_url(upstream, "google", ":streamGenerateContent?alt=sse"), &[], req)
    }

    fn decoder(&self) -> Box<dyn Decoder> {
        gemini_decoder()
    }

    fn simulated(&self) -> &'static dyn Simulated {
        &simulated::SimulatedVertex
    }

    fn for_model(&self, model: &str) -> Option<&'static dyn Adapter> {
        is_claude(model).then_some(&VertexClaude as &'static dyn Adapter)
    }

    /// `project` and `region` (the address is Vertex AI's for the region
    /// unless `base_url`, a host, says otherwise), and where tokens come
    /// from: `credentials_file` (else `GOOGLE_APPLICATION_CREDENTIALS`), a
    /// service account's key, or `credentials = "metadata"`.
    fn configure(&self, settings: &Settings<'_>) -> Result<Account, Refusal> {
        settings.refuse_all_but(&["region", "project", "credentials_file", "credentials"])?;
        if settings.api_key.is_some() {
            let message = "is not how Vertex AI is reached: it takes OAuth tokens, from credentials_file or credentials = \"metadata\"";
            return Err(Refusal::new("api_key", message));
        }
        let project = settings.project.map(str::trim).filter(|project| is_name(project));
        let project = project.ok_or_else(|| Refusal::new("project", "is required: the Google Cloud project's id"))?;
        let region = settings.region.map(str::trim).filter(|region| is_name(region));
        let region =
            region.ok_or_else(|| Refusal::new("region", "is required: a region such as us-east5, or global"))?;
        let base_url = match settings.base_url {
            Some(host) => host.trim_end_matches('/').to_owned(),
            None if region == "global" => "https://aiplatform.googleapis.com".to_owned(),
            None => format!("https://{region}-aiplatform.googleapis.com"),
        };
        let account = Account::new(base_url).with("project", project).with("region", region);
        let Some(source) = source(settings)? else {
            if settings.secrets_optional {
                return Ok(account);
            }
            let message = "no credentials: name a service account's key file, set GOOGLE_APPLICATION_CREDENTIALS, \
                           or give credentials = \"metadata\" on Google Cloud";
            return Err(Refusal::new("credentials_file", message));
        };
        let tokens = token::Tokens::new(source).map_err(|why| Refusal::new("credentials_file", why))?;
        Ok(account.with_credential(Arc::new(tokens)))
    }

    fn check_model(&self, model: &str) -> Result<(), String> {
        if is_name(model.split('@').next().unwrap_or_default()) {
            Ok(())
        } else {
            Err(format!(
                "{model:?} is not a Vertex AI model name such as gemini-2.5-flash or claude-sonnet-4-5@20250929"
            ))
        }
    }

    fn is_context_length(&self, message: &str) -> bool {
        super::gemini::is_too_long(message)
    }

    fn dialect(&self) -> Option<ClientDialect> {
        Some(ClientDialect::Gemini)
    }

    fn unsupported(&self, req: &ChatRequest) -> Vec<Field> {
        gemini_unsupported(req)
    }
}

impl Adapter for VertexClaude {
    fn request(&self, upstream: Upstream<'_>, req: &ChatRequest) -> Result<http::Request<Bytes>, ProviderError> {
        cloud_request(model_url(upstream, "anthropic", ":streamRawPredict"), &[], req, &VERTEX)
    }

    fn decoder(&self) -> Box<dyn Decoder> {
        messages_decoder()
    }

    fn simulated(&self) -> &'static dyn Simulated {
        &simulated::SimulatedVertex
    }

    fn dialect(&self) -> Option<ClientDialect> {
        Some(ClientDialect::Messages)
    }

    fn is_context_length(&self, message: &str) -> bool {
        is_too_long(message)
    }

    fn unsupported(&self, req: &ChatRequest) -> Vec<Field> {
        messages_unsupported(req)
    }
}

/// Where tokens come from: the key file named or in the environment, the
/// metadata server, or nowhere yet.
fn source(settings: &Settings<'_>) -> Result<Option<token::Source>, Refusal> {
    match settings.credentials {
        Some(METADATA) if settings.credentials_file.is_some() => {
            return Err(Refusal::new("credentials", "is set beside credentials_file: give one of them"));
        }
        Some(METADATA) => {
            let host = (settings.env)("GCE_METADATA_HOST");
            return Ok(Some(token::Source::metadata(host.as_deref())));
        }
        Some(other) => {
            return Err(Refusal::new(
                "credentials",
                format!("{other:?} is not a source; the one there is is \"metadata\""),
            ));
        }
        None => {}
    }
    let from_env = (settings.env)("GOOGLE_APPLICATION_CREDENTIALS").filter(|path| !path.is_empty());
    let path = match (settings.credentials_file, &from_env) {
        (Some(path), _) => path.to_path_buf(),
        (None, Some(path)) => Path::new(path).to_path_buf(),
        (None, None) => return Ok(None),
    };
    let shown = path.display().to_string();
    let text = read_capped(&path).map_err(|why| Refusal::new("credentials_file", format!("{shown}: {why}")))?;
    token::Source::service_account(&text, &shown).map(Some).map_err(|why| Refusal::new("credentials_file", why))
}

/// The file's text, if it is no larger than [`KEY_FILE_LIMIT`].
fn read_capped(path: &Path) -> Result<String, String> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|err| format!("cannot read it: {err}"))?;
    let mut text = String::new();
    file.take(KEY_FILE_LIMIT + 1).read_to_string(&mut text).map_err(|err| format!("cannot read it: {err}"))?;
    if text.len() as u64 > KEY_FILE_LIMIT {
        return Err(format!("larger than {KEY_FILE_LIMIT} bytes: not a key file"));
    }
    Ok(text)
}

/// Whether `name` is one Google Cloud's paths can carry as it is:
/// letters, digits, `-`, `.`, `_` and `@`.
fn is_name(name: &str) -> bool {
    !name.is_empty()
        && name.bytes().all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'@'))
}

/// Whether a Vertex model is Claude's.
fn is_claude(model: &str) -> bool {
    model.starts_with("claude")
}

#[cfg(test)]
mod tests;
