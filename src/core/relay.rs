//! After commit: the events already read, then the rest of the upstream stream
//! with an idle timeout between events, ending at the first failure.

use std::pin::Pin;
use std::time::Duration;

use futures_util::{Stream, StreamExt, stream};

use super::Failure;
use crate::event::Event;
use crate::providers::EventStream;

/// A committed answer's events. Dropping it drops the upstream connection.
pub type CommittedStream = Pin<Box<dyn Stream<Item = Result<Event, Failure>> + Send>>;

/// Replays `held` (the events up to and including the first token), then relays
/// `rest`, failing with [`Failure::IdleTimeout`] when it goes silent for `idle`.
pub fn committed(held: Vec<Event>, rest: EventStream, idle: Duration) -> CommittedStream {
    let relay = stream::unfold(Some(rest), move |rest| async move {
        let mut rest = rest?;
        match tokio::time::timeout(idle, rest.next()).await {
            Ok(Some(Ok(event))) => Some((Ok(event), Some(rest))),
            Ok(Some(Err(err))) => Some((Err(Failure::Provider(err)), None)),
            Ok(None) => None,
            Err(_) => Some((Err(Failure::IdleTimeout(idle.as_millis())), None)),
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
