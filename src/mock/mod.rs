//! Fault-injecting simulated providers, speaking each provider's real wire
//! format over real TCP. The same code drives the tests, the benchmarks,
//! `baton demo` and `baton mock`.

mod answer;
mod ask;
mod chunked;
mod fault;
mod misbehave;
mod reading;
mod schema;
mod server;
pub mod wire;
mod words;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::providers::ProviderKind;

pub use fault::Fault;

/// How a provider continues a partial answer it finds in the request (its
/// own marker words, sent back by a gateway resuming a broken stream).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Continuation {
    /// Go on from the next word.
    Clean,
    /// Repeat this many of the last words first.
    RepeatLast(usize),
    /// Start the whole answer again.
    Restart,
}

/// Which requests get a fault.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Schedule {
    /// Every request.
    Always,
    /// The first N requests, then none: a provider that recovers.
    FirstRequests(u64),
    /// Every request after the first N: a provider that goes bad.
    AfterRequests(u64),
    /// Every request in the first span of time after the provider starts:
    /// an outage that ends.
    During(Duration),
    /// Each request with this probability, drawn from a seeded generator so a
    /// run can be repeated.
    Random {
        /// The chance of a fault, 0 to 1.
        probability: f64,
        /// The generator's seed.
        seed: u64,
    },
}

/// A simulated provider, configured with a builder and started with [`MockProvider::spawn`].
#[derive(Debug, Clone)]
pub struct MockProvider {
    kind: ProviderKind,
    marker: String,
    tokens: usize,
    first_token_after: Duration,
    gap: Duration,
    slow_first_token: Duration,
    tokens_before_fault: usize,
    faults: Vec<Fault>,
    schedule: Schedule,
    api_key: Option<String>,
    retry_after_secs: u64,
    retry_after_as_date: bool,
    continuation: Continuation,
    rejects_prefill: bool,
    tool_call: bool,
    nonce_words: bool,
    slim_records: bool,
    reasoning: usize,
    reasoning_gap: Duration,
    cached_tokens: usize,
    json_style: answer::JsonStyle,
}

impl MockProvider {
    /// A healthy provider of `kind` that answers 8 tokens of `marker` words at once.
    pub fn new(kind: ProviderKind) -> Self {
        MockProvider {
            kind,
            marker: kind.name().to_owned(),
            tokens: 8,
            first_token_after: Duration::ZERO,
            gap: Duration::ZERO,
            slow_first_token: Duration::from_secs(5),
            tokens_before_fault: 3,
            faults: Vec::new(),
            schedule: Schedule::Always,
            api_key: None,
            retry_after_secs: 1,
            retry_after_as_date: false,
            continuation: Continuation::Clean,
            rejects_prefill: false,
            tool_call: false,
            nonce_words: false,
            slim_records: false,
            reasoning: 0,
            reasoning_gap: Duration::ZERO,
            cached_tokens: 0,
            json_style: answer::JsonStyle::Valid,
        }
    }

    /// A simulated OpenAI.
    pub fn openai() -> Self {
        Self::new(ProviderKind::OpenAi)
    }

    /// A simulated OpenAI speaking its Responses API.
    pub fn openai_responses() -> Self {
        Self::new(ProviderKind::OpenAiResponses)
    }

    /// A simulated Anthropic.
    pub fn anthropic() -> Self {
        Self::new(ProviderKind::Anthropic)
    }

    /// A simulated Gemini.
    pub fn gemini() -> Self {
        Self::new(ProviderKind::Gemini)
    }

    /// The word its tokens are made of, so leaks name their source.
    pub fn marker(mut self, marker: &str) -> Self {
        self.marker = marker.to_owned();
        self
    }

    /// How many tokens a complete answer has.
    pub fn tokens(mut self, tokens: usize) -> Self {
        self.tokens = tokens;
        self
    }

    /// The delay from the request to the first token.
    pub fn first_token_after(mut self, delay: Duration) -> Self {
        self.first_token_after = delay;
        self
    }

    /// The delay between tokens.
    pub fn gap(mut self, gap: Duration) -> Self {
        self.gap = gap;
        self
    }

    /// How much later than usual the first token comes under [`Fault::SlowFirstToken`].
    pub fn slow_first_token(mut self, delay: Duration) -> Self {
        self.slow_first_token = delay;
        self
    }

    /// How many tokens come before a mid-stream fault.
    pub fn tokens_before_fault(mut self, tokens: usize) -> Self {
        self.tokens_before_fault = tokens;
        self
    }

    /// Injects `fault` on every request (see [`MockProvider::schedule`]).
    pub fn fault(self, fault: Fault) -> Self {
        self.faults(&[fault])
    }

    /// Injects one of `faults`, drawn at random, on scheduled requests.
    pub fn faults(mut self, faults: &[Fault]) -> Self {
        self.faults = faults.to_vec();
        self
    }

    /// Which requests get a fault.
    pub fn schedule(mut self, schedule: Schedule) -> Self {
        self.schedule = schedule;
        self
    }

    /// Requires this key, in the provider's own header, answering 401 without it.
    pub fn api_key(mut self, key: &str) -> Self {
        self.api_key = Some(key.to_owned());
        self
    }

    /// The `Retry-After` seconds of a 429.
    pub fn retry_after_secs(mut self, secs: u64) -> Self {
        self.retry_after_secs = secs;
        self
    }

    /// Sends `Retry-After` as an HTTP date instead of seconds.
    pub fn retry_after_as_date(mut self) -> Self {
        self.retry_after_as_date = true;
        self
    }

    /// How it continues a partial answer found in the request.
    pub fn continuation(mut self, continuation: Continuation) -> Self {
        self.continuation = continuation;
        self
    }

    /// Answers 400 to a conversation that ends with an assistant message, as
    /// several current models do.
    pub fn rejects_prefill(mut self) -> Self {
        self.rejects_prefill = true;
        self
    }

    /// Calls a tool (`get_weather`) before its text, whatever the request
    /// offers; without it, a request that offers tools gets its text
    /// followed by a call to the first (or named) one, and a conversation
    /// that ends with tool results gets an answer quoting them.
    pub fn tool_call(mut self) -> Self {
        self.tool_call = true;
        self
    }

    /// Writes each answer in words that name the request they answer: for a
    /// request whose body holds `nonce=<letters and digits>`, word `i` is
    /// `<nonce>.<marker>.<i>`. A partial answer of that nonce found in the
    /// request (a gateway resuming a broken stream, whoever wrote it) is
    /// continued from its next word, and a [`Continuation`] that repeats
    /// repeats its words as they were written, so a correct splice yields
    /// every word of one nonce once, in order.
    pub fn nonce_words(mut self) -> Self {
        self.nonce_words = true;
        self
    }

    /// Records only the path and the fault of each request (no headers or
    /// body), so a long benchmark run does not hold every request it served.
    pub fn slim_records(mut self) -> Self {
        self.slim_records = true;
        self
    }

    /// Streams `deltas` reasoning deltas before the answer (Anthropic
    /// `thinking`, Gemini `thought` parts, OpenAI-compatible
    /// `reasoning_content`), each after [`MockProvider::reasoning_gap`], and
    /// reports them as reasoning tokens: for deadlines that reasoning keeps alive.
    pub fn reasoning(mut self, deltas: usize) -> Self {
        self.reasoning = deltas;
        self
    }

    /// The delay before each reasoning delta.
    pub fn reasoning_gap(mut self, gap: Duration) -> Self {
        self.reasoning_gap = gap;
        self
    }

    /// Reports this many of the prompt's tokens as read from a cache, in
    /// the provider's own usage field.
    pub fn cached_tokens(mut self, tokens: usize) -> Self {
        self.cached_tokens = tokens;
        self
    }

    /// Writes JSON answers inside a Markdown ```` ```json ```` fence, as
    /// models often do when asked for JSON in the prompt.
    pub fn json_fenced(mut self) -> Self {
        self.json_style = answer::JsonStyle::Fenced;
        self
    }

    /// Writes JSON answers one character short, so they do not parse: for
    /// checks of structured answers.
    pub fn json_invalid(mut self) -> Self {
        self.json_style = answer::JsonStyle::Invalid;
        self
    }

    /// The text a healthy answer carries.
    pub fn expected_text(&self) -> String {
        wire::answer_text(&self.marker, self.tokens)
    }

    /// Starts serving on a free loopback port.
    pub async fn spawn(self) -> std::io::Result<MockHandle> {
        self.bind(SocketAddr::from(([127, 0, 0, 1], 0))).await
    }

    /// Starts serving on `addr`.
    pub async fn bind(self, addr: SocketAddr) -> std::io::Result<MockHandle> {
        let listener = crate::http::server::bind(addr)?;
        let addr = listener.local_addr()?;
        let (closed_tx, closed) = watch::channel(0);
        let shared = Arc::new(server::Shared {
            started: tokio::time::Instant::now(),
            rng: Mutex::new(fastrand::Rng::with_seed(match self.schedule {
                Schedule::Random { seed, .. } => seed,
                _ => 0,
            })),
            provider: self,
            requests: Mutex::new(Vec::new()),
            side_requests: Mutex::new(Vec::new()),
            closed: closed_tx,
        });
        let task = tokio::spawn(server::accept_loop(listener, Arc::clone(&shared)));
        Ok(MockHandle { addr, shared, closed, task })
    }
}

/// A request a simulated provider received, for tests to check translation.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    /// Path and query.
    pub path: String,
    /// Headers, names lowercased.
    pub headers: HashMap<String, String>,
    /// The JSON body (`null` when it was not JSON).
    pub body: serde_json::Value,
    /// The fault injected into the answer, if any.
    pub fault: Option<Fault>,
}

impl RecordedRequest {
    /// The request as JSON, for `GET /__requests` on a running `baton mock`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "path": self.path,
            "headers": self.headers,
            "body": self.body,
            "fault": self.fault.map(Fault::name),
        })
    }
}

/// Where a simulated provider answers with every request it recorded, as a
/// JSON array (the chat requests in order, then those it answered beside
/// them, such as Vertex's token exchanges), so a test driving it from
/// outside the process can check what it received.
pub const RECORDS_PATH: &str = "/__requests";

/// A running simulated provider; dropping it stops accepting connections.
pub struct MockHandle {
    addr: SocketAddr,
    shared: Arc<server::Shared>,
    closed: watch::Receiver<u64>,
    task: tokio::task::JoinHandle<()>,
}

impl MockHandle {
    /// The listening address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The base URL to configure, following the kind's SDK convention.
    pub fn base_url(&self) -> String {
        self.shared.provider.kind.simulated().base_url(self.addr)
    }

    /// The provider's configuration.
    pub fn provider(&self) -> &MockProvider {
        &self.shared.provider
    }

    /// The wire format it speaks.
    pub fn provider_kind(&self) -> ProviderKind {
        self.shared.provider.kind
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.requests.lock().map(|r| r.clone()).unwrap_or_default()
    }

    /// Every request answered beside the chat ones: Vertex's token exchanges.
    pub fn side_requests(&self) -> Vec<RecordedRequest> {
        self.shared.side_requests.lock().map(|r| r.clone()).unwrap_or_default()
    }

    /// How many times the client closed a connection while an answer was
    /// still being written or withheld.
    pub fn closed_early(&self) -> u64 {
        *self.closed.borrow()
    }

    /// Waits until the client has closed more than `seen` answers early.
    pub async fn wait_closed_early(&self, seen: u64) {
        let mut closed = self.closed.clone();
        let _ = closed.wait_for(|count| *count > seen).await;
    }
}

impl Drop for MockHandle {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A loopback address where nothing listens, for the `refuse` class.
pub async fn refusing_addr() -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
    listener.local_addr()
}
