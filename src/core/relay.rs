//! After commit: the events already read, then the rest of the upstream stream
//! with an idle timeout between events, ending at the first failure.

use std::pin::Pin;
use std::time::Duration;

use futures_util::{Stream, StreamExt, stream};
use tokio::time::{Instant, Sleep};

use super::Failure;
use crate::admission::{Settlement, Tickets};
use crate::event::{Event, Usage};
use crate::providers::EventStream;

/// A committed answer's events. Dropping it drops the upstream connection.
pub type CommittedStream = Pin<Box<dyn Stream<Item = Result<Event, Failure>> + Send>>;

/// Replays `held` (the events up to the commit point), then relays `rest`,
/// failing with [`Failure::IdleTimeout`] when it goes silent for `idle`;
/// reasoning is relayed only when the route streams it.
/// One idle timer serves the whole stream, and an event does not touch it:
/// the event's time is noted, and when the timer fires before the silence
/// since the last event is long enough, it is set again for that. A paced
/// stream so costs a clock read an event, not a timer operation, and each
/// event is asked of the provider's stream once.
pub(super) fn committed(
    held: Vec<Event>,
    rest: EventStream,
    idle: Duration,
    tickets: Tickets,
    stream_reasoning: bool,
) -> CommittedStream {
    let mut usage = Usage::default();
    held.iter().for_each(|event| usage_of(event, &mut usage));
    let relay = stream::unfold(
        Some((rest, tickets, usage, None::<Pin<Box<Sleep>>>, Instant::now())),
        move |state| async move {
            let (mut rest, tickets, mut usage, mut timer, mut last) = state?;
            loop {
                let armed = timer.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(super::later(last, idle))));
                let next = tokio::select! {
                    biased;
                    next = rest.next() => Ok(next),
                    () = armed.as_mut() => {
                        // The timer was set for an earlier silence: events came
                        // since, so the silence to time is the one since the last.
                        let due = super::later(last, idle);
                        if Instant::now() < due {
                            armed.as_mut().reset(due);
                            continue;
                        }
                        Err(())
                    }
                };
                let failure = match next {
                    Ok(Some(Ok(event))) => {
                        last = Instant::now();
                        // Reasoning the client does not see still proves the stream alive.
                        if event.is_reasoning() && !stream_reasoning {
                            continue;
                        }
                        usage_of(&event, &mut usage);
                        return Some((Ok(event), Some((rest, tickets, usage, timer, last))));
                    }
                    Ok(None) => {
                        tickets.settle(Settlement::Completed(usage));
                        return None;
                    }
                    Ok(Some(Err(err))) => Failure::Provider(err),
                    Err(()) => Failure::IdleTimeout(idle),
                };
                tickets.settle(Settlement::Broke(failure.class()));
                return Some((Err(failure), None));
            }
        },
    );
    Box::pin(stream::iter(held.into_iter().map(Ok)).chain(relay))
}

fn usage_of(event: &Event, usage: &mut Usage) {
    if let Event::Usage(later) = event {
        usage.merge(*later);
    }
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
    tokio::time::timeout_at(deadline, read).await.unwrap_or(Err(Failure::RequestTimeout(timeout)))
}
