//! After commit: the events already read, then the rest of the upstream stream
//! with an idle timeout between events, ending at the first failure.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use futures_util::{Stream, StreamExt};
use tokio::time::{Instant, Sleep};

use super::Failure;
use crate::admission::{Settlement, Tickets};
use crate::clock::later;
use crate::event::{Event, Usage};
use crate::providers::EventStream;

/// A committed answer's events. Dropping it drops the upstream connection.
pub type CommittedStream = Pin<Box<dyn Stream<Item = Result<Event, Failure>> + Send>>;

/// Replays `held` (the events up to the commit point), then relays `rest`,
/// failing with [`Failure::IdleTimeout`] when it goes silent for `idle`;
/// reasoning is relayed only when the route streams it.
pub(super) fn committed(
    held: Vec<Event>,
    rest: EventStream,
    idle: Duration,
    tickets: Tickets,
    stream_reasoning: bool,
) -> CommittedStream {
    let mut usage = Usage::default();
    held.iter().for_each(|event| usage_of(event, &mut usage));
    Box::pin(Committed {
        held: held.into_iter(),
        rest,
        idle,
        tickets: Some(tickets),
        usage,
        timer: None,
        last: Instant::now(),
        stream_reasoning,
    })
}

/// A committed answer on its way: the held events, then the provider's.
/// One idle timer serves the whole stream, and an event does not touch it:
/// the event's time is noted, and when the timer fires before the silence
/// since the last event is long enough, it is set again for that. A paced
/// stream so costs a clock read an event, not a timer operation, and each
/// event is asked of the provider's stream once.
struct Committed {
    held: std::vec::IntoIter<Event>,
    rest: EventStream,
    idle: Duration,
    /// The attempt's tickets, until the stream ends and settles them.
    tickets: Option<Tickets>,
    usage: Usage,
    /// The idle timer, from the first time the provider had nothing ready.
    timer: Option<Pin<Box<Sleep>>>,
    /// When the provider's last event came.
    last: Instant,
    stream_reasoning: bool,
}

impl Committed {
    /// Ends the stream, settling its tickets as `how`.
    fn settle(&mut self, how: Settlement) {
        if let Some(tickets) = self.tickets.take() {
            tickets.settle(how);
        }
    }
}

impl Stream for Committed {
    type Item = Result<Event, Failure>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        if let Some(event) = this.held.next() {
            return Poll::Ready(Some(Ok(event)));
        }
        if this.tickets.is_none() {
            return Poll::Ready(None);
        }
        loop {
            let failure = match this.rest.poll_next_unpin(cx) {
                Poll::Ready(Some(Ok(event))) => {
                    this.last = Instant::now();
                    // Reasoning the client does not see still proves the stream alive.
                    if event.is_reasoning() && !this.stream_reasoning {
                        continue;
                    }
                    usage_of(&event, &mut this.usage);
                    return Poll::Ready(Some(Ok(event)));
                }
                Poll::Ready(None) => {
                    let usage = this.usage;
                    this.settle(Settlement::Completed(usage));
                    return Poll::Ready(None);
                }
                Poll::Ready(Some(Err(err))) => Failure::Provider(err),
                Poll::Pending => {
                    let (last, idle) = (this.last, this.idle);
                    let armed = this.timer.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(later(last, idle))));
                    ready!(armed.as_mut().poll(cx));
                    // The timer was set for an earlier silence: events came
                    // since, so the silence to time is the one since the last.
                    let due = later(last, idle);
                    if Instant::now() < due {
                        armed.as_mut().reset(due);
                        continue;
                    }
                    Failure::IdleTimeout(idle)
                }
            };
            this.settle(Settlement::Broke(failure.class()));
            return Poll::Ready(Some(Err(failure)));
        }
    }
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
