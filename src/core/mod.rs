//! The attempt loop: try a route's targets in order, commit to the first that
//! produces a token before its deadline, and keep every failure for the error.
//! Nothing here knows HTTP on the client side or any provider's wire format.

mod failure;
mod relay;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use tokio::time::{Instant, timeout_at};

pub use failure::{AttemptRecord, Failure, ProxyError};
pub use relay::CommittedStream;

use crate::config::{Provider, Route, Target};
use crate::event::{ChatRequest, Event};
use crate::providers::{EventStream, ProviderError, Upstream, driver};

/// Sends requests upstream through one shared connection pool.
#[derive(Clone)]
pub struct Engine {
    http: reqwest::Client,
}

/// Which provider answered, and after how many attempts.
#[derive(Debug, Clone)]
pub struct Winner {
    /// The provider that answered.
    pub provider: Arc<Provider>,
    /// The upstream model that answered.
    pub model: String,
    /// Attempts made, the winner included.
    pub attempts: u32,
}

/// A streamed answer that has committed: its first token is in hand.
pub struct Committed {
    /// Who is answering.
    pub winner: Winner,
    /// The answer's events, the first token first.
    pub events: CommittedStream,
}

/// A whole answer, read to its end before anything is sent.
pub struct Completed {
    /// Who answered.
    pub winner: Winner,
    /// Every event of the answer.
    pub events: Vec<Event>,
}

impl Engine {
    /// An engine with its own connection pool. Deadlines are the core's, so the
    /// client has no timeouts of its own and never follows redirects.
    pub fn new() -> Result<Self, reqwest::Error> {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .tcp_nodelay(true)
            .pool_idle_timeout(Duration::from_secs(60))
            .build()?;
        Ok(Engine { http })
    }

    /// Streams `req` from the first target of `route` that commits.
    pub async fn stream(&self, route: &Route, req: &ChatRequest) -> Result<Committed, ProxyError> {
        let (winner, events) = self.run(route, req, |events| async move { Ok(events) }).await?;
        Ok(Committed { winner, events })
    }

    /// Reads a whole answer to `req` from the first target of `route` that
    /// completes one; a failure anywhere before the end moves on.
    pub async fn complete(&self, route: &Route, req: &ChatRequest) -> Result<Completed, ProxyError> {
        let (winner, events) = self.run(route, req, relay::collect).await?;
        Ok(Completed { winner, events })
    }

    /// Tries the targets in order until one commits and `finish` accepts its
    /// stream; every failure before that is recorded and moves on, except a
    /// request the provider rejected as the client's mistake.
    async fn run<T, F, Fut>(&self, route: &Route, req: &ChatRequest, finish: F) -> Result<(Winner, T), ProxyError>
    where
        F: Fn(CommittedStream) -> Fut,
        Fut: Future<Output = Result<T, Failure>>,
    {
        let mut failed: Vec<AttemptRecord> = Vec::new();
        let mut needs_window_above: Option<u64> = None;
        for target in &route.targets {
            if needs_window_above.is_some_and(|floor| target.context_window.is_none_or(|w| w <= floor)) {
                continue;
            }
            let attempt = u32::try_from(failed.len() + 1).unwrap_or(u32::MAX);
            let started = Instant::now();
            let outcome = match self.attempt(target, req, started, route.first_token_timeout).await {
                Ok((held, rest)) => finish(relay::committed(held, rest, route.idle_timeout)).await,
                Err(failure) => Err(failure),
            };
            let elapsed = started.elapsed();
            let latency_ms = u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX);
            let (provider, model) = (&target.provider.name, &target.model);
            let failure = match outcome {
                Ok(answer) => {
                    tracing::info!(%provider, %model, attempt, outcome = "committed", latency_ms, "attempt");
                    let winner =
                        Winner { provider: Arc::clone(&target.provider), model: model.clone(), attempts: attempt };
                    return Ok((winner, answer));
                }
                Err(failure) => failure,
            };
            tracing::info!(%provider, %model, attempt, outcome = "failed", failure_class = failure.kind(), latency_ms, error = %failure, "attempt");
            let record = AttemptRecord { provider: provider.clone(), model: model.clone(), failure, elapsed };
            if let Failure::Provider(ProviderError::BadRequest { context_length, .. }) = &record.failure {
                match target.context_window.filter(|_| *context_length) {
                    Some(window) => needs_window_above = Some(window),
                    None => return Err(ProxyError::rejected(record)),
                }
            }
            failed.push(record);
        }
        // A context-length error that no later target had the window for goes back to the client.
        if let Some(last) = failed.pop_if(|record| !record.failure.is_failover()) {
            return Err(ProxyError::rejected(last));
        }
        Err(ProxyError::AllFailed(failed))
    }

    /// Opens one attempt and reads up to its first token, all within
    /// `first_token_timeout` of `started`: one absolute deadline covers connect,
    /// headers and every event before the first token.
    /// Returns the events read so far (the first token last) and the rest.
    async fn attempt(
        &self,
        target: &Target,
        req: &ChatRequest,
        started: Instant,
        first_token_timeout: Duration,
    ) -> Result<(Vec<Event>, EventStream), Failure> {
        let upstream = Upstream {
            base_url: &target.provider.base_url,
            api_key: target.provider.api_key.as_ref().map(|key| key.expose()),
            model: &target.model,
        };
        let first_token = async {
            let mut events = driver::open(&self.http, target.provider.kind, upstream, req).await?;
            let mut held = Vec::new();
            while let Some(event) = events.next().await {
                let event = event?;
                let is_content = event.is_content();
                held.push(event);
                if is_content {
                    return Ok((held, events));
                }
            }
            Err(Failure::Empty)
        };
        timeout_at(started + first_token_timeout, first_token)
            .await
            .map_err(|_| Failure::FirstTokenTimeout(first_token_timeout.as_millis()))?
    }
}
