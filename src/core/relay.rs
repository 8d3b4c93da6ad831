//! After commit: the events already read, then the rest of the upstream stream
//! with an idle timeout between events, ending at the first failure.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures_util::{FutureExt, Stream, StreamExt, stream};
use tokio::time::{Instant, Sleep};

use super::Failure;
use crate::event::Event;
use crate::providers::EventStream;
use crate::resilience::{Breaker, Permit};

/// A committed answer's events. Dropping it drops the upstream connection.
pub type CommittedStream = Pin<Box<dyn Stream<Item = Result<Event, Failure>> + Send>>;

/// How a committed answer's end reaches the provider's breaker: a complete
/// answer is a success, a broken one a failure, and one the client abandoned
/// (the stream dropped before its end) nothing at all.
pub(super) struct StreamOutcome {
    permit: Option<Permit>,
    breaker: Option<Arc<Breaker>>,
}

impl StreamOutcome {
    /// `permit` is what is left to settle after commit (a probe settles at commit).
    pub(super) fn new(permit: Option<Permit>, breaker: Arc<Breaker>) -> Self {
        StreamOutcome { permit, breaker: Some(breaker) }
    }

    /// An answer whose end says nothing about the provider (a drill's).
    pub(super) fn unrecorded() -> Self {
        StreamOutcome { permit: None, breaker: None }
    }

    fn complete(self) {
        if let Some(permit) = self.permit {
            permit.success();
        }
    }

    fn failed(self) {
        match (self.permit, self.breaker) {
            (Some(permit), _) => permit.failure(),
            (None, Some(breaker)) => breaker.record_failure(),
            (None, None) => {}
        }
    }
}

/// Replays `held` (the events up to the commit point), then relays `rest`,
/// failing with [`Failure::IdleTimeout`] when it goes silent for `idle`.
/// One idle timer serves the whole stream: moving its deadline later touches
/// no timer wheel, where a fresh timeout per event would register and cancel
/// one each time.
pub(super) fn committed(
    held: Vec<Event>,
    rest: EventStream,
    idle: Duration,
    outcome: StreamOutcome,
) -> CommittedStream {
    let relay = stream::unfold(Some((rest, outcome, None::<Pin<Box<Sleep>>>)), move |state| async move {
        let (mut rest, outcome, mut timer) = state?;
        // An event that is already there needs no idle timer.
        let next = match rest.next().now_or_never() {
            Some(ready) => Ok(ready),
            None => {
                let deadline = super::later(Instant::now(), idle);
                let timer: &mut Pin<Box<Sleep>> = match &mut timer {
                    Some(timer) => {
                        timer.as_mut().reset(deadline);
                        timer
                    }
                    None => timer.insert(Box::pin(tokio::time::sleep_until(deadline))),
                };
                tokio::select! {
                    biased;
                    next = rest.next() => Ok(next),
                    () = timer => Err(()),
                }
            }
        };
        let failure = match next {
            Ok(Some(Ok(event))) => return Some((Ok(event), Some((rest, outcome, timer)))),
            Ok(None) => {
                outcome.complete();
                return None;
            }
            Ok(Some(Err(err))) => Failure::Provider(err),
            Err(()) => Failure::IdleTimeout(idle.as_millis()),
        };
        outcome.failed();
        Some((Err(failure), None))
    });
    Box::pin(stream::iter(held.into_iter().map(Ok)).chain(relay))
}

/// Reads a committed stream to its end, for answers that are sent whole:
/// by `deadline` (the request's, whose length is `timeout`), and no larger
/// than `max_bytes` of text and tool calls.
pub async fn collect(
    mut events: CommittedStream,
    deadline: Instant,
    timeout: Duration,
    max_bytes: usize,
) -> Result<Vec<Event>, Failure> {
    let read = async {
        let (mut all, mut bytes) = (Vec::new(), 0usize);
        while let Some(event) = events.next().await {
            let event = event?;
            bytes = bytes.saturating_add(event.answer_bytes());
            if bytes > max_bytes {
                return Err(Failure::AnswerTooLarge(max_bytes));
            }
            all.push(event);
        }
        Ok(all)
    };
    tokio::time::timeout_at(deadline, read).await.unwrap_or(Err(Failure::RequestTimeout(timeout.as_millis())))
}
