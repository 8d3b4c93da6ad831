//! After commit: the events already read, then the rest of the upstream stream
//! with an idle timeout between events, ending at the first failure.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures_util::{Stream, StreamExt, stream};

use super::Failure;
use crate::event::Event;
use crate::providers::EventStream;
use crate::resilience::ProviderHealth;

/// A committed answer's events. Dropping it drops the upstream connection.
pub type CommittedStream = Pin<Box<dyn Stream<Item = Result<Event, Failure>> + Send>>;

/// Replays `held` (the events up to the commit point), then relays `rest`,
/// failing with [`Failure::IdleTimeout`] when it goes silent for `idle`. A
/// failure after commit counts against the provider's breaker.
pub fn committed(held: Vec<Event>, rest: EventStream, idle: Duration, health: Arc<ProviderHealth>) -> CommittedStream {
    let relay = stream::unfold(Some(rest), move |rest| {
        let health = Arc::clone(&health);
        async move {
            let mut rest = rest?;
            let failure = match tokio::time::timeout(idle, rest.next()).await {
                Ok(Some(Ok(event))) => return Some((Ok(event), Some(rest))),
                Ok(None) => return None,
                Ok(Some(Err(err))) => Failure::Provider(err),
                Err(_) => Failure::IdleTimeout(idle.as_millis()),
            };
            health.breaker.record_failure();
            Some((Err(failure), None))
        }
    });
    Box::pin(stream::iter(held.into_iter().map(Ok)).chain(relay))
}

/// Reads a committed stream to its end, for answers that are sent whole.
pub async fn collect(mut events: CommittedStream) -> Result<Vec<Event>, Failure> {
    let mut all = Vec::new();
    while let Some(event) = events.next().await {
        all.push(event?);
    }
    Ok(all)
}
