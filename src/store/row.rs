//! One row of the request log as a request leaves it: who asked, what was
//! tried, who answered, what it cost and how it ended. Built on the
//! request's task from what it already knows; everything that costs time
//! (JSON, redaction) happens on the writer's.

use crate::event::{Tried, Usage};

/// A request, as the request log keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestRow {
    /// The request id: the client's `x-request-id`, or the one baton made.
    pub id: String,
    /// When the request arrived, in Unix milliseconds.
    pub time_ms: i64,
    /// The client key's name, when the request presented a valid one.
    pub key: Option<String>,
    /// The API the client spoke (`openai_chat`, `anthropic_messages`, `openai_responses`, `gemini`).
    pub dialect: &'static str,
    /// The route that served it (after a budget's downgrade), once known.
    pub route: Option<String>,
    /// The `model` the client asked for, once the body was read.
    pub model_asked: Option<String>,
    /// The provider that answered, if one did.
    pub provider: Option<String>,
    /// The upstream model that answered, if one did.
    pub model: Option<String>,
    /// Requests sent upstream, the winner's included.
    pub attempts: u32,
    /// Every attempt that did not answer, in order.
    pub tried: Vec<Tried>,
    /// From arrival to the first token going out, when one did.
    pub ttft_ms: Option<u64>,
    /// From arrival to the end.
    pub duration_ms: u64,
    /// The usage the provider reported.
    pub usage: Usage,
    /// What it cost: the usage at the answering target's price.
    pub cost_usd: Option<f64>,
    /// How it ended: `ok`, a failure class, an error code.
    pub outcome: String,
    /// The HTTP status the client got.
    pub status: u16,
    /// The W3C trace it belongs to, when it has one.
    pub trace_id: Option<String>,
    /// The start of the request body (`log_bodies` only), redacted before it is written.
    pub request_body: Option<String>,
    /// The start of the answer's text (`log_bodies` only), redacted before it is written.
    pub answer_text: Option<String>,
}

impl RequestRow {
    /// A row for request `id`, arriving now in `dialect`, with nothing else known yet.
    pub fn new(id: &str, dialect: &'static str, time_ms: i64) -> Self {
        RequestRow {
            id: id.to_owned(),
            time_ms,
            key: None,
            dialect,
            route: None,
            model_asked: None,
            provider: None,
            model: None,
            attempts: 0,
            tried: Vec::new(),
            ttft_ms: None,
            duration_ms: 0,
            usage: Usage::default(),
            cost_usd: None,
            outcome: String::new(),
            status: 0,
            trace_id: None,
            request_body: None,
            answer_text: None,
        }
    }

    /// Each attempt that did not answer, then the winner's, as the JSON
    /// the `attempt_log` column holds.
    pub(super) fn attempt_log(&self) -> String {
        let tried = self.tried.iter().map(|tried| Attempt {
            provider: &tried.provider,
            model: &tried.model,
            class: tried.class,
            sent: tried.sent,
        });
        let winner = self.provider.as_deref().zip(self.model.as_deref());
        let winner = winner.map(|(provider, model)| Attempt { provider, model, class: "committed", sent: true });
        let log: Vec<Attempt<'_>> = tried.chain(winner).collect();
        serde_json::to_string(&log).unwrap_or_else(|_| "[]".to_owned())
    }
}

/// One attempt as the `attempt_log` column writes it, borrowed from the row.
#[derive(serde::Serialize)]
struct Attempt<'a> {
    provider: &'a str,
    model: &'a str,
    class: &'a str,
    sent: bool,
}

/// The time now in Unix milliseconds (0 for a clock before 1970).
pub fn now_ms() -> i64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
}
