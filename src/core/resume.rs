//! Mid-stream resume: when a committed stream breaks, another candidate is
//! asked to continue the answer, and its words are spliced into the same
//! client stream, so the client ends up with one complete answer.

use std::collections::VecDeque;
use std::sync::Arc;

use futures_util::{StreamExt, stream};
use tokio::time::Instant;

use super::ask::Ask;
use super::budget::RetryBudget;
use super::pass;
use super::plan::Plan;
use super::rules::Rules;
use super::splice::Splice;
use super::{Call, CommittedStream, Engine, Failure, Winner};
use crate::config::Route;
use crate::event::{Event, Usage};

/// What a broken stream is continued with: the request, its route (the
/// targets and `max_resumes`), the route's views and retry budget, and the
/// request's deadline, if the route sets one.
pub(super) struct Continuation {
    /// The engine the continuation runs on.
    pub engine: Engine,
    /// The route, held for as long as the stream lives.
    pub route: Arc<Route>,
    /// The route's views, as the request took them.
    pub rules: Rules,
    /// The route's retry budget: a continuation's retries draw on it too.
    pub budget: Arc<RetryBudget>,
    /// The client's request.
    pub call: Call,
    /// The request's deadline, when the route sets `request_timeout_ms`.
    pub deadline: Option<Instant>,
}

/// Wraps `first`, the winner's committed stream, so that a failure is
/// resumed by the route's other targets, at most `max_resumes` times and
/// within the request deadline. Answers with tool calls are not resumed.
pub(super) fn resumable(from: Continuation, winner: &Winner, first: CommittedStream) -> CommittedStream {
    let state = Resuming {
        resumes_left: from.route.max_resumes,
        from,
        current: first,
        current_target: winner.target,
        text: String::new(),
        too_long: false,
        tool_calls: false,
        splice: None,
        usage_before: Usage::default(),
        usage_now: Usage::default(),
        queue: VecDeque::new(),
        ended: false,
    };
    Box::pin(stream::unfold(state, Resuming::next))
}

struct Resuming {
    from: Continuation,
    current: CommittedStream,
    current_target: usize,
    /// The text the client has been sent.
    text: String,
    /// The answer outgrew `max_answer_bytes`: no copy is kept, no resume made.
    too_long: bool,
    tool_calls: bool,
    resumes_left: u32,
    splice: Option<Splice>,
    /// Usage of the attempts that broke, added to the current one's.
    usage_before: Usage,
    usage_now: Usage,
    queue: VecDeque<Event>,
    ended: bool,
}

impl Resuming {
    async fn next(mut self) -> Option<(Result<Event, Failure>, Self)> {
        loop {
            if let Some(event) = self.queue.pop_front() {
                return Some((Ok(event), self));
            }
            if self.ended {
                return None;
            }
            match self.current.next().await {
                Some(Ok(event)) => self.accept(event),
                None => {
                    self.flush_splice();
                    self.ended = true;
                }
                Some(Err(failure)) => {
                    if let Err(failure) = self.resume(failure).await {
                        self.ended = true;
                        return Some((Err(failure), self));
                    }
                }
            }
        }
    }

    fn accept(&mut self, event: Event) {
        match event {
            Event::Text(text) => {
                let text = match &mut self.splice {
                    Some(splice) => splice.push(&text),
                    None => Some(text),
                };
                if let Some(text) = text {
                    self.send_text(text);
                }
            }
            Event::Usage(usage) => {
                self.usage_now.merge(usage);
                self.queue.push_back(Event::Usage(self.usage_before.plus(self.usage_now)));
            }
            other => {
                self.tool_calls |= matches!(other, Event::ToolCall(_));
                self.flush_splice();
                self.queue.push_back(other);
            }
        }
    }

    /// Sends `text` on and keeps a copy to resume from, up to
    /// `max_answer_bytes`: an answer longer than that is relayed to its end
    /// but no longer resumed, so its copy stops growing.
    fn send_text(&mut self, text: String) {
        if !self.too_long {
            if self.text.len().saturating_add(text.len()) <= self.from.rules.max_answer_bytes {
                self.text.push_str(&text);
            } else {
                self.too_long = true;
                self.text = String::new();
            }
        }
        self.queue.push_back(Event::Text(text));
    }

    fn flush_splice(&mut self) {
        if let Some(text) = self.splice.as_mut().and_then(Splice::flush) {
            self.send_text(text);
        }
    }

    /// Starts a continuation after `failure`, or says why there is none.
    async fn resume(&mut self, failure: Failure) -> Result<(), Failure> {
        let from = &self.from;
        let out_of_time = from.deadline.is_some_and(|deadline| deadline <= Instant::now());
        if self.tool_calls || self.too_long || self.resumes_left == 0 || out_of_time {
            return Err(failure);
        }
        self.resumes_left -= 1;
        self.flush_splice();
        let from = &self.from;
        let targets = from.route.targets.len();
        let order = (1..targets).map(|step| (self.current_target + step) % targets).collect();
        tracing::info!(
            request_id = %from.call.id,
            route = %from.route.model,
            failure_class = failure.kind(),
            sent_chars = self.text.len(),
            "resuming a broken stream"
        );
        let plan = Plan {
            id: &from.call.id,
            trace: &from.call.trace,
            route: &from.route.model,
            targets: &from.route.targets,
            rules: from.rules,
            budget: &from.budget,
            ask: Ask::Resume { original: &from.call.request, partial: &self.text },
            drills: &from.call.drills,
            order,
            deadline: from.deadline,
            after: Some((self.current_target, failure.kind())),
        };
        match pass::run(&from.engine, plan, |events| async move { Ok(events) }).await {
            Ok((winner, events)) => {
                tracing::info!(request_id = %self.from.call.id, provider = %winner.provider, "resumed");
                self.current = events;
                self.current_target = winner.target;
                self.splice = Some(Splice::new(&self.text));
                self.usage_before = self.usage_before.plus(self.usage_now);
                self.usage_now = Usage::default();
                Ok(())
            }
            Err(err) => Err(Failure::Unresumed { broke: Box::new(failure), why: err.to_string() }),
        }
    }
}
