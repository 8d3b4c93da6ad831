//! Provider adapters: each folder is one kind of provider — its settings
//! and credential ([`account`]), its request, its framing, its decoder to
//! the shared vocabulary of [`crate::event`], and its simulated wire
//! ([`simulate`]); [`driver`] does the HTTP they share. Adding a kind is
//! one folder and its lines in [`ProviderKind`]'s registry.

mod account;
mod anthropic;
mod azure;
mod bedrock;
pub mod driver;
mod error;
mod first;
mod gemini;
mod openai;
#[cfg(test)]
mod samples;
#[cfg(any(test, feature = "test-support"))]
pub mod scripted;
mod shape;
pub mod simulate;
pub mod sse;
mod vertex;

use std::fmt;
use std::future::Future;
use std::pin::Pin;

use bytes::Bytes;
use futures_util::Stream;

pub use account::{Account, Authorizing, Credential, Refusal, Settings};
pub use error::{Class, ProviderError, Source};
pub use sse::SseEvent;

use crate::event::{ChatRequest, Event};
use crate::request::{ClientDialect, Field};

/// An answer's body as it is read, a failure to read it as its words.
pub type Body = Pin<Box<dyn Stream<Item = Result<Bytes, String>> + Send>>;

/// An answer's events as its kind frames them, before decoding.
pub type Frames = Pin<Box<dyn Stream<Item = Result<SseEvent, ProviderError>> + Send>>;

/// The one stream type every adapter produces and the core consumes.
pub type EventStream = Pin<Box<dyn Stream<Item = Result<Event, ProviderError>> + Send>>;

/// The wire dialects baton speaks upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProviderKind {
    /// OpenAI Chat Completions, and every server compatible with it.
    OpenAi,
    /// OpenAI's Responses API (`kind = "openai"`, `api = "responses"`).
    OpenAiResponses,
    /// Anthropic Messages.
    Anthropic,
    /// Google Gemini `streamGenerateContent`.
    Gemini,
    /// Azure OpenAI: Chat Completions at a deployment's address.
    Azure,
    /// Amazon Bedrock: Claude's Messages and other models' Converse, in AWS's event stream, signed.
    Bedrock,
    /// Google Vertex AI: Claude and Gemini in a Google Cloud project, with OAuth tokens.
    Vertex,
}

impl ProviderKind {
    /// Every kind, for help texts, the simulated providers and test matrices.
    pub const ALL: [ProviderKind; 7] = [
        ProviderKind::OpenAi,
        ProviderKind::OpenAiResponses,
        ProviderKind::Anthropic,
        ProviderKind::Gemini,
        ProviderKind::Azure,
        ProviderKind::Bedrock,
        ProviderKind::Vertex,
    ];

    /// The name used on the command line, in metrics and on the page; a
    /// config file writes `openai-responses` as `kind = "openai"` with
    /// `api = "responses"`.
    pub fn name(self) -> &'static str {
        match self {
            ProviderKind::OpenAi => "openai",
            ProviderKind::OpenAiResponses => "openai-responses",
            ProviderKind::Anthropic => "anthropic",
            ProviderKind::Gemini => "gemini",
            ProviderKind::Azure => "azure",
            ProviderKind::Bedrock => "bedrock",
            ProviderKind::Vertex => "vertex",
        }
    }

    /// Parses a command-line name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.name() == name)
    }

    /// Parses a config file's `kind` (the Responses API is chosen by `api`).
    pub fn from_config_kind(name: &str) -> Option<Self> {
        Self::ALL.into_iter().filter(|kind| *kind != ProviderKind::OpenAiResponses).find(|kind| kind.name() == name)
    }

    /// Every `kind` a config file may write.
    pub fn config_kinds() -> Vec<&'static str> {
        Self::ALL.into_iter().filter(|kind| *kind != ProviderKind::OpenAiResponses).map(ProviderKind::name).collect()
    }

    /// How a `[[providers]]` entry of this kind says so: its `kind`, and
    /// for the Responses API its `api`.
    pub fn config_keys(self) -> &'static str {
        match self {
            ProviderKind::OpenAi => "kind = \"openai\"",
            ProviderKind::OpenAiResponses => "kind = \"openai\"\napi = \"responses\"",
            ProviderKind::Anthropic => "kind = \"anthropic\"",
            ProviderKind::Gemini => "kind = \"gemini\"",
            ProviderKind::Azure => "kind = \"azure\"",
            ProviderKind::Bedrock => "kind = \"bedrock\"",
            ProviderKind::Vertex => "kind = \"vertex\"",
        }
    }

    /// The client dialect `model` of this kind speaks natively, whose
    /// requests it takes as sent.
    pub fn dialect_for(self, model: &str) -> Option<ClientDialect> {
        self.adapter_for(model).dialect()
    }

    /// The adapter that serves `model`: the kind's own, or, for a kind
    /// whose models speak different APIs, the one `model` speaks.
    pub fn adapter_for(self, model: &str) -> &'static dyn Adapter {
        let adapter = self.adapter();
        adapter.for_model(model).unwrap_or(adapter)
    }

    /// How a simulated provider of this kind reads and writes, for the mock.
    pub fn simulated(self) -> &'static dyn simulate::Simulated {
        self.adapter().simulated()
    }

    /// The registry: the adapter that speaks this dialect.
    pub fn adapter(self) -> &'static dyn Adapter {
        match self {
            ProviderKind::OpenAi => &openai::OpenAi,
            ProviderKind::OpenAiResponses => &openai::responses::OpenAiResponses,
            ProviderKind::Anthropic => &anthropic::Anthropic,
            ProviderKind::Gemini => &gemini::Gemini,
            ProviderKind::Azure => &azure::Azure,
            ProviderKind::Bedrock => &bedrock::Bedrock,
            ProviderKind::Vertex => &vertex::Vertex,
        }
    }
}

impl fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Where one attempt goes: the provider's address and key and the model to ask for.
#[derive(Clone, Copy)]
pub struct Upstream<'a> {
    /// The provider's base URL, as configured (each kind's convention is in `docs/configuration.md`).
    pub base_url: &'a str,
    /// What the provider's kind made of its settings: options and credential.
    pub account: &'a Account,
    /// The gateway's key for this provider, if it needs one.
    pub api_key: Option<&'a str>,
    /// The provider's model name.
    pub model: &'a str,
    /// The largest SSE event read from the answer; a larger one fails it.
    pub max_event_bytes: usize,
    /// The attempt's W3C trace context, sent as `traceparent` when the
    /// request is traced, so a provider that traces continues the trace.
    pub traceparent: Option<&'a str>,
    /// How connections to the provider leave: its proxy and extra trust.
    pub egress: &'a crate::egress::Egress,
}

impl Upstream<'_> {
    /// The address of `path` (`/chat/completions`) under the base URL.
    /// Joined rather than formatted: every attempt makes one.
    pub fn url(&self, path: &str) -> String {
        [self.base_url.trim_end_matches('/'), path].concat()
    }

    /// The key as an `Authorization` bearer value, if there is a key.
    pub fn bearer(&self) -> Option<String> {
        self.api_key.map(|key| ["Bearer ", key].concat())
    }
}

/// What opening an answer comes to: its events, or why there are none.
pub type Opening<'a> = Pin<Box<dyn Future<Output = Result<EventStream, ProviderError>> + Send + 'a>>;

/// What asking a provider to count a request's input tokens comes to.
pub type Counting<'a> = Pin<Box<dyn Future<Output = Result<u64, ProviderError>> + Send + 'a>>;

/// The seam below the core: how it opens one attempt's event stream. The
/// HTTP client and its pool implement it ([`driver::HttpOpener`]); drills
/// and tests stand in for a provider by implementing it too.
pub trait Opener: Send + Sync {
    /// Sends `request` to `upstream` in `kind`'s dialect and returns its
    /// answer as events. Failures before the stream starts come back here,
    /// failures in it as items; dropping the stream cancels the request.
    fn open<'a>(&'a self, kind: ProviderKind, upstream: Upstream<'a>, request: &'a ChatRequest) -> Opening<'a>;

    /// Asks `upstream` how many input tokens `request` comes to, where
    /// `kind` can say ([`Adapter::count_request`]); a stand-in that cannot
    /// says so, and the caller estimates instead.
    fn count_tokens<'a>(
        &'a self,
        kind: ProviderKind,
        upstream: Upstream<'a>,
        request: &'a ChatRequest,
    ) -> Counting<'a> {
        let _ = (kind, upstream, request);
        Box::pin(async { Err(ProviderError::Request("this provider counts no tokens".into())) })
    }
}

/// The translation one provider needs, and nothing else: the HTTP exchange
/// itself is shared in [`driver`].
pub trait Adapter: Send + Sync {
    /// Builds the streaming request for `req` to `upstream`, with an absolute URL.
    fn request(&self, upstream: Upstream<'_>, req: &ChatRequest) -> Result<http::Request<Bytes>, ProviderError>;

    /// A fresh decoder for one response stream.
    fn decoder(&self) -> Box<dyn Decoder>;

    /// The kind's simulated provider, for `baton mock` and the tests.
    fn simulated(&self) -> &'static dyn simulate::Simulated;

    /// The client dialect whose requests this adapter takes as sent.
    fn dialect(&self) -> Option<ClientDialect> {
        None
    }

    /// The adapter that serves `model`, for a kind whose models speak
    /// different APIs (Vertex AI: Claude's Messages, Gemini's own);
    /// `None` when this one serves every model.
    fn for_model(&self, model: &str) -> Option<&'static dyn Adapter> {
        let _ = model;
        None
    }

    /// What the kind makes of a provider's settings, or the setting it
    /// refuses. Most kinds take a `base_url` and an optional key, nothing else.
    fn configure(&self, settings: &Settings<'_>) -> Result<Account, Refusal> {
        settings.plain()
    }

    /// Why `model` cannot be asked of this kind, for a target that names
    /// it: a config error, not a failure at the first request.
    fn check_model(&self, model: &str) -> Result<(), String> {
        let _ = model;
        Ok(())
    }

    /// The content type of a streamed answer.
    fn content_type(&self) -> &'static str {
        "text/event-stream"
    }

    /// The answer's body as events for [`Adapter::decoder`]: SSE, or what a
    /// kind that frames otherwise makes of its frames. An event larger than
    /// `max_event_bytes` fails the stream.
    fn frames(&self, body: Body, max_event_bytes: usize) -> Frames {
        Box::pin(sse::events(body, max_event_bytes))
    }

    /// Whether an error response's body says the prompt does not fit the
    /// context window, in the provider's own words.
    fn is_context_length(&self, body: &str) -> bool;

    /// The request that asks the provider to count `req`'s input tokens
    /// (Anthropic's `count_tokens`), for a kind that can; `None` otherwise.
    fn count_request(
        &self,
        upstream: Upstream<'_>,
        req: &ChatRequest,
    ) -> Option<Result<http::Request<Bytes>, ProviderError>> {
        let _ = (upstream, req);
        None
    }

    /// The fields of `req` this provider cannot honour: a target of it is
    /// skipped before anything is sent (`unsupported`), or, where the route
    /// says so, they are dropped. Nothing is left out silently.
    fn unsupported(&self, req: &ChatRequest) -> Vec<Field>;
}

/// Turns one provider's SSE events into [`Event`]s: a plain state machine, so it
/// can be tested on recorded transcripts without any I/O.
pub trait Decoder: Send {
    /// Decodes one SSE event onto the end of `out`; keep-alives and
    /// role-only or empty deltas push nothing. `out` is the caller's, reused
    /// from event to event, so decoding allocates no list per event. A
    /// decoder that fails pushes nothing.
    fn on_event(&mut self, sse: &SseEvent, out: &mut Vec<Event>) -> Result<(), ProviderError>;

    /// Whether the provider's final event has arrived and nothing more will follow.
    fn is_done(&self) -> bool;

    /// Called when the body ends: reports truncation if the end marker never came.
    fn finish(&self) -> Result<(), ProviderError>;
}
