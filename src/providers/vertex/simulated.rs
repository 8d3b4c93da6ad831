//! How Vertex AI answers: Gemini's stream for Google's models, Anthropic's
//! for Claude, errors in Google's shape, and the OAuth token exchange of
//! the key file it hands out for itself (`token_uri` its own `/token`): an
//! assertion that is a JWT-bearer grant, RS256, for the cloud-platform
//! scope gets the simulated provider's key as its access token.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::OnceLock;

use aws_lc_rs::encoding::AsDer;
use aws_lc_rs::rsa::{KeyPair, KeySize};
use base64::Engine as _;
use serde_json::{Value, json};

use crate::providers::anthropic::simulated::SimulatedAnthropic;
use crate::providers::gemini::simulated::SimulatedGemini;
use crate::providers::simulate::{Asked, Ending, Simulated, WireEvent};

/// A simulated Vertex AI serving Gemini, and Claude through [`SimulatedVertexClaude`].
pub struct SimulatedVertex;

/// Claude on a simulated Vertex AI.
pub struct SimulatedVertexClaude;

/// The token exchange's path.
const TOKEN_PATH: &str = "/token";

/// The access token handed out when no key is required.
const OPEN_TOKEN: &str = "ya29.simulated";

/// The model in a Vertex path (`…/models/{model}:method`).
fn model_in(path: &str) -> String {
    path.split("/models/").nth(1).and_then(|rest| rest.split(':').next()).unwrap_or_default().to_owned()
}

/// A private key made once a process, for the key files handed out.
fn private_key_pem() -> &'static str {
    static PEM: OnceLock<String> = OnceLock::new();
    PEM.get_or_init(|| {
        let der = KeyPair::generate(KeySize::Rsa2048).ok().and_then(|pair| pair.as_der().ok());
        let body = der.map(|der| base64::engine::general_purpose::STANDARD.encode(der.as_ref())).unwrap_or_default();
        let lines: Vec<&str> = body.as_bytes().chunks(64).filter_map(|line| std::str::from_utf8(line).ok()).collect();
        format!("-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n", lines.join("\n"))
    })
}

/// A service account's key file for the simulated Vertex at `addr`,
/// written once beside the system's temporary files.
fn key_file(addr: SocketAddr) -> Option<PathBuf> {
    let path = std::env::temp_dir().join(format!("baton-simulated-vertex-{}-{}.json", std::process::id(), addr.port()));
    if path.exists() {
        return Some(path);
    }
    let key = json!({ "type": "service_account", "project_id": "baton-simulated",
        "private_key_id": "0000000000000000000000000000000000000000", "private_key": private_key_pem(),
        "client_email": "baton@baton-simulated.iam.gserviceaccount.com",
        "token_uri": format!("http://{addr}{TOKEN_PATH}") });
    std::fs::write(&path, key.to_string()).ok()?;
    Some(path)
}

/// Whether `form` is a JWT-bearer grant whose assertion is an RS256 JWT for
/// the cloud-platform scope, good for at most an hour.
fn is_grant(form: &str) -> bool {
    let field = |name: &str| form.split('&').find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='));
    if field("grant_type") != Some("urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer") {
        return false;
    }
    let Some(assertion) = field("assertion") else { return false };
    let part = |i: usize| -> Value {
        let segment = assertion.split('.').nth(i).unwrap_or_default();
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(segment).unwrap_or_default();
        serde_json::from_slice(&bytes).unwrap_or_default()
    };
    let (header, claims) = (part(0), part(1));
    let lifetime = claims["exp"].as_u64().unwrap_or(0).saturating_sub(claims["iat"].as_u64().unwrap_or(u64::MAX));
    assertion.split('.').count() == 3
        && header["alg"] == "RS256"
        && claims["scope"]
            .as_str()
            .is_some_and(|scope| scope.contains("https://www.googleapis.com/auth/cloud-platform"))
        && claims["iss"].as_str().is_some_and(|iss| !iss.is_empty())
        && (1..=3600).contains(&lifetime)
}

impl Simulated for SimulatedVertex {
    fn base_url(&self, addr: SocketAddr) -> String {
        format!("http://{addr}")
    }

    fn is_chat_path(&self, path: &str) -> bool {
        path.starts_with("/v1/projects/")
            && !model_in(path).is_empty()
            && ((path.contains("/publishers/anthropic/models/") && path.ends_with(":streamRawPredict"))
                || (path.contains("/publishers/google/models/")
                    && path.contains(":streamGenerateContent")
                    && path.contains("alt=sse")))
    }

    fn auth_header(&self, key: &str) -> (&'static str, String) {
        ("authorization", format!("Bearer {key}"))
    }

    fn model(&self, path: &str, _body: &Value) -> String {
        model_in(path)
    }

    /// Google's error shape, whichever model it is about.
    fn error_body(&self, status: u16, message: &str) -> String {
        SimulatedGemini.error_body(status, message)
    }

    fn config_keys(&self, addr: SocketAddr) -> String {
        let file = key_file(addr).map(|path| path.display().to_string()).unwrap_or_default();
        format!("project = \"baton-simulated\"\nregion = \"us-east5\"\ncredentials_file = {file:?}")
    }

    fn for_model(&self, model: &str) -> Option<&'static dyn Simulated> {
        super::is_claude(model).then_some(&SimulatedVertexClaude as &'static dyn Simulated)
    }

    fn side_answer(&self, path: &str, body: &Value, key: Option<&str>) -> Option<(u16, String)> {
        if path != TOKEN_PATH {
            return None;
        }
        if !body.as_str().is_some_and(is_grant) {
            return Some((400, json!({ "error": "invalid_grant", "error_description": "Invalid JWT." }).to_string()));
        }
        let token = key.unwrap_or(OPEN_TOKEN);
        Some((200, json!({ "access_token": token, "expires_in": 3599, "token_type": "Bearer" }).to_string()))
    }

    /// Google's OAuth error for a throttled exchange.
    fn throttled_side_answer(&self) -> Option<String> {
        let error = json!({ "error": "rate_limit_exceeded", "error_description": "mock429 too many token requests" });
        Some(error.to_string())
    }

    fn turns(&self) -> (&'static str, &'static str) {
        SimulatedGemini.turns()
    }

    fn asked(&self, body: &Value) -> Asked {
        SimulatedGemini.asked(body)
    }

    fn opening(&self, model: &str, thinking: bool, cached: usize) -> Vec<WireEvent> {
        SimulatedGemini.opening(model, thinking, cached)
    }

    fn reasoning(&self, model: &str, text: &str) -> WireEvent {
        SimulatedGemini.reasoning(model, text)
    }

    fn text_in(&self, model: &str, block: usize, text: &str) -> WireEvent {
        SimulatedGemini.text_in(model, block, text)
    }

    fn tool_call(&self, model: &str) -> Vec<WireEvent> {
        SimulatedGemini.tool_call(model)
    }

    fn ending(&self, model: &str, end: &Ending<'_>) -> Vec<WireEvent> {
        SimulatedGemini.ending(model, end)
    }

    fn refusal(&self, model: &str) -> Vec<WireEvent> {
        SimulatedGemini.refusal(model)
    }

    fn error_event(&self) -> WireEvent {
        SimulatedGemini.error_event()
    }

    fn malformed(&self) -> WireEvent {
        SimulatedGemini.malformed()
    }

    fn context_length_message(&self) -> &'static str {
        SimulatedGemini.context_length_message()
    }

    fn huge_line(&self, padding: &str) -> WireEvent {
        SimulatedGemini.huge_line(padding)
    }

    fn wrong_types(&self) -> WireEvent {
        SimulatedGemini.wrong_types()
    }

    fn overflowing_finish(&self, model: &str) -> Vec<WireEvent> {
        SimulatedGemini.overflowing_finish(model)
    }
}

impl Simulated for SimulatedVertexClaude {
    fn base_url(&self, addr: SocketAddr) -> String {
        SimulatedVertex.base_url(addr)
    }

    fn is_chat_path(&self, path: &str) -> bool {
        SimulatedVertex.is_chat_path(path)
    }

    fn auth_header(&self, key: &str) -> (&'static str, String) {
        SimulatedVertex.auth_header(key)
    }

    fn model(&self, path: &str, body: &Value) -> String {
        SimulatedVertex.model(path, body)
    }

    fn error_body(&self, status: u16, message: &str) -> String {
        SimulatedVertex.error_body(status, message)
    }

    fn call_id_prefix(&self) -> &'static str {
        SimulatedAnthropic.call_id_prefix()
    }

    fn asked(&self, body: &Value) -> Asked {
        SimulatedAnthropic.asked(body)
    }

    fn opening(&self, model: &str, thinking: bool, cached: usize) -> Vec<WireEvent> {
        SimulatedAnthropic.opening(model, thinking, cached)
    }

    fn reasoning(&self, model: &str, text: &str) -> WireEvent {
        SimulatedAnthropic.reasoning(model, text)
    }

    fn end_of_reasoning(&self) -> Vec<WireEvent> {
        SimulatedAnthropic.end_of_reasoning()
    }

    fn text_in(&self, model: &str, block: usize, text: &str) -> WireEvent {
        SimulatedAnthropic.text_in(model, block, text)
    }

    fn tool_call(&self, model: &str) -> Vec<WireEvent> {
        SimulatedAnthropic.tool_call(model)
    }

    fn ending(&self, model: &str, end: &Ending<'_>) -> Vec<WireEvent> {
        SimulatedAnthropic.ending(model, end)
    }

    fn refusal(&self, model: &str) -> Vec<WireEvent> {
        SimulatedAnthropic.refusal(model)
    }

    fn error_event(&self) -> WireEvent {
        SimulatedAnthropic.error_event()
    }

    fn malformed(&self) -> WireEvent {
        SimulatedAnthropic.malformed()
    }

    fn context_length_message(&self) -> &'static str {
        SimulatedAnthropic.context_length_message()
    }

    fn huge_line(&self, padding: &str) -> WireEvent {
        SimulatedAnthropic.huge_line(padding)
    }

    fn wrong_types(&self) -> WireEvent {
        SimulatedAnthropic.wrong_types()
    }

    fn overflowing_finish(&self, model: &str) -> Vec<WireEvent> {
        SimulatedAnthropic.overflowing_finish(model)
    }
}
