//! One attempt's way to its commit point, as a small pure state machine:
//! fed the attempt's events and the clock, it answers hold (until when),
//! commit, or fail with a class. Every deadline is computed here once, each
//! with the moment its clock starts:
//!
//! * **first token**: from the attempt's start (connect, headers and every
//!   event before the first token included) to the first content event;
//! * **idle**: from the last event, once the first token has come;
//! * **commit window**: from the first token, `commit_after_ms`, once
//!   `commit_after_tokens` content events are in.
//!
//! The request's own deadline is the attempt loop's, which bounds every
//! attempt, retry and wait of it together.

use std::time::Duration;

use tokio::time::Instant;

use super::Failure;
use crate::config::CommitWindow;
use crate::event::{Event, FinishReason};

/// The most answer bytes held back before commit: past it the attempt
/// commits, whatever its commit window, so a provider cannot make baton hold
/// an answer it has not sent yet.
pub(super) const MAX_HELD_BYTES: usize = 64 * 1024;

/// What the attempt does next.
#[derive(Debug, PartialEq)]
pub(super) enum Next {
    /// Keep reading; nothing is due before `wake_at`.
    Hold {
        /// When to look again if no event comes first.
        wake_at: Instant,
    },
    /// Send the answer: its first token came after `ttft`.
    Commit {
        /// From the attempt's start to its first token.
        ttft: Duration,
    },
    /// Give the attempt up.
    Fail(Failure),
}

/// How an attempt's reasoning counts on its way to commit.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct ReasoningRule {
    /// It goes to the client, so it commits like a token.
    pub streamed: bool,
    /// Before the first token, each reasoning delta restarts the
    /// first-token deadline: the model is thinking, not stalled.
    pub keeps_alive: bool,
}

/// One attempt's deadlines and what it has read so far.
#[derive(Debug)]
pub(super) struct CommitClock {
    started: Instant,
    reasoning: ReasoningRule,
    /// What the first-token deadline runs from: the start, or the latest
    /// reasoning delta when reasoning keeps the attempt alive.
    alive_since: Instant,
    first_token_timeout: Duration,
    idle: Duration,
    window: CommitWindow,
    first_token_at: Option<Instant>,
    last_event_at: Instant,
    tokens: u32,
    held_bytes: usize,
    finished: bool,
    /// A content filter ended the answer before any token, at this time.
    refused_at: Option<Instant>,
    /// Whether such a refusal fails the attempt rather than being its answer.
    fail_over_on_refusal: bool,
}

impl CommitClock {
    /// An attempt that started at `started`.
    pub(super) fn start(
        started: Instant,
        first_token_timeout: Duration,
        idle: Duration,
        window: CommitWindow,
        reasoning: ReasoningRule,
    ) -> Self {
        CommitClock {
            started,
            reasoning,
            alive_since: started,
            first_token_timeout,
            idle,
            window,
            first_token_at: None,
            last_event_at: started,
            tokens: 0,
            held_bytes: 0,
            finished: false,
            refused_at: None,
            fail_over_on_refusal: false,
        }
    }

    /// The clock with a content filter's refusal before any token failing
    /// the attempt (`fail_over_on_refusal`) instead of answering.
    pub(super) fn failing_over_on_refusal(mut self, fail_over: bool) -> Self {
        self.fail_over_on_refusal = fail_over;
        self
    }

    /// When the first token is due: opening the answer counts against it too.
    pub(super) fn first_token_deadline(&self) -> Instant {
        super::later(self.alive_since, self.first_token_timeout)
    }

    /// Whether `event` is held for the client: reasoning only when streamed.
    pub(super) fn keeps(&self, event: &Event) -> bool {
        self.reasoning.streamed || !event.is_reasoning()
    }

    /// The failure when the first token did not come in time.
    pub(super) fn first_token_timeout(&self) -> Failure {
        Failure::FirstTokenTimeout(self.first_token_timeout)
    }

    /// `event` arrived at `now`.
    pub(super) fn event(&mut self, event: &Event, now: Instant) {
        self.last_event_at = now;
        if matches!(event, Event::Finish(FinishReason::ContentFilter)) && self.first_token_at.is_none() {
            self.refused_at = Some(now);
        }
        let reasoning = event.is_reasoning();
        if reasoning && self.reasoning.keeps_alive && self.first_token_at.is_none() {
            self.alive_since = now;
        }
        if event.is_content() || (reasoning && self.reasoning.streamed) {
            self.tokens = self.tokens.saturating_add(1);
            self.first_token_at.get_or_insert(now);
        }
        if self.keeps(event) {
            self.held_bytes = self.held_bytes.saturating_add(event.answer_bytes());
        }
        self.finished |= matches!(event, Event::Finish(_));
    }

    /// Whether a content filter refused before any token on a route that
    /// fails over on refusals (otherwise the refusal, a finish, is the answer).
    fn refused(&self) -> bool {
        self.fail_over_on_refusal && self.refused_at.is_some()
    }

    /// The stream ended cleanly: it commits, with its time to first
    /// token, if it said anything.
    pub(super) fn ended(&self) -> Result<Duration, Failure> {
        if self.refused() {
            return Err(Failure::RefusedByFilter);
        }
        self.first_token_at.map(|at| at - self.started).ok_or(Failure::Empty)
    }

    /// What is due at `now`.
    pub(super) fn at(&self, now: Instant) -> Next {
        if self.refused() {
            return Next::Fail(Failure::RefusedByFilter);
        }
        let Some(first_token_at) = self.first_token_at else {
            let deadline = self.first_token_deadline();
            return if now >= deadline {
                Next::Fail(self.first_token_timeout())
            } else {
                Next::Hold { wake_at: deadline }
            };
        };
        let commit = Next::Commit { ttft: first_token_at - self.started };
        if self.finished || self.held_bytes >= MAX_HELD_BYTES {
            return commit;
        }
        let enough_tokens = self.tokens >= self.window.tokens;
        let commit_at = super::later(first_token_at, self.window.after);
        if enough_tokens && now >= commit_at {
            return commit;
        }
        let idle_at = super::later(self.last_event_at, self.idle);
        if now >= idle_at {
            return Next::Fail(Failure::IdleTimeout(self.idle));
        }
        Next::Hold { wake_at: if enough_tokens { commit_at.min(idle_at) } else { idle_at } }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn clock(tokens: u32, after: Duration) -> (CommitClock, Instant) {
        let start = Instant::now();
        let window = CommitWindow { tokens, after };
        (CommitClock::start(start, 500 * MS, 200 * MS, window, ReasoningRule::default()), start)
    }

    fn text(word: &str) -> Event {
        Event::Text(word.to_owned())
    }

    #[test]
    fn a_content_filter_s_refusal_before_any_token_is_the_answer_unless_the_route_fails_over() {
        let (mut plain, start) = clock(1, Duration::ZERO);
        plain.event(&Event::Finish(FinishReason::ContentFilter), start + 40 * MS);
        assert_eq!(plain.at(start + 40 * MS), Next::Commit { ttft: 40 * MS }, "the refusal is passed on at once");
        assert_eq!(plain.ended(), Ok(40 * MS));
        let (strict, start) = clock(1, Duration::ZERO);
        let mut strict = strict.failing_over_on_refusal(true);
        strict.event(&Event::Finish(FinishReason::ContentFilter), start + 40 * MS);
        assert_eq!(strict.at(start + 40 * MS), Next::Fail(Failure::RefusedByFilter));
        assert_eq!(strict.ended(), Err(Failure::RefusedByFilter));
        let (late, start) = clock(1, Duration::ZERO);
        let mut late = late.failing_over_on_refusal(true);
        late.event(&text("partial"), start + 10 * MS);
        late.event(&Event::Finish(FinishReason::ContentFilter), start + 20 * MS);
        assert_eq!(late.at(start + 20 * MS), Next::Commit { ttft: 10 * MS }, "after a token it is the answer's end");
    }

    #[test]
    fn nothing_but_waiting_until_the_first_token_deadline() {
        let (mut clock, start) = clock(1, Duration::ZERO);
        assert_eq!(clock.at(start), Next::Hold { wake_at: start + 500 * MS });
        clock.event(&Event::Text(String::new()), start + 100 * MS);
        assert_eq!(clock.at(start + 499 * MS), Next::Hold { wake_at: start + 500 * MS }, "an empty delta is no token");
        assert!(matches!(clock.at(start + 500 * MS), Next::Fail(Failure::FirstTokenTimeout(t)) if t == 500 * MS));
    }

    #[test]
    fn the_first_token_commits_at_once_without_a_window() {
        let (mut clock, start) = clock(1, Duration::ZERO);
        clock.event(&text("hi"), start + 30 * MS);
        assert_eq!(clock.at(start + 30 * MS), Next::Commit { ttft: 30 * MS });
    }

    #[test]
    fn a_window_holds_tokens_and_time_and_the_idle_clock_runs_from_the_last_event() {
        let (mut clock, start) = clock(3, 100 * MS);
        clock.event(&text("a"), start + 10 * MS);
        assert_eq!(clock.at(start + 10 * MS), Next::Hold { wake_at: start + 210 * MS }, "idle from the last event");
        clock.event(&text("b"), start + 20 * MS);
        clock.event(&text("c"), start + 30 * MS);
        assert_eq!(clock.at(start + 30 * MS), Next::Hold { wake_at: start + 110 * MS }, "the window's time left");
        assert_eq!(clock.at(start + 110 * MS), Next::Commit { ttft: 10 * MS });
    }

    #[test]
    fn silence_inside_the_window_fails_at_the_idle_timeout() {
        let (mut clock, start) = clock(5, Duration::ZERO);
        clock.event(&text("a"), start + 10 * MS);
        assert!(matches!(clock.at(start + 210 * MS), Next::Fail(Failure::IdleTimeout(t)) if t == 200 * MS));
    }

    #[test]
    fn a_finish_or_a_full_hold_commits_whatever_the_window() {
        let (mut clock, start) = clock(10, Duration::from_secs(60));
        clock.event(&text("a"), start);
        clock.event(&Event::Finish(crate::event::FinishReason::Stop), start + MS);
        assert_eq!(clock.at(start + MS), Next::Commit { ttft: Duration::ZERO });
        let (mut clock, start) = self::clock(10, Duration::from_secs(60));
        clock.event(&Event::Text("x".repeat(MAX_HELD_BYTES)), start);
        assert_eq!(clock.at(start), Next::Commit { ttft: Duration::ZERO });
    }

    #[test]
    fn reasoning_is_no_first_token_but_may_keep_the_attempt_alive() {
        let start = Instant::now();
        let window = CommitWindow { tokens: 1, after: Duration::ZERO };
        let thinking = Event::Reasoning("hmm".into());
        let mut plain = CommitClock::start(start, 500 * MS, 200 * MS, window, ReasoningRule::default());
        plain.event(&thinking, start + 400 * MS);
        assert!(!plain.keeps(&thinking), "reasoning the client does not see is not held");
        assert!(matches!(plain.at(start + 500 * MS), Next::Fail(Failure::FirstTokenTimeout(_))));
        let alive = ReasoningRule { keeps_alive: true, streamed: false };
        let mut thinker = CommitClock::start(start, 500 * MS, 200 * MS, window, alive);
        thinker.event(&thinking, start + 400 * MS);
        assert_eq!(thinker.at(start + 500 * MS), Next::Hold { wake_at: start + 900 * MS }, "measured from the thought");
        assert!(matches!(thinker.at(start + 900 * MS), Next::Fail(Failure::FirstTokenTimeout(_))));
        let mut streamed =
            CommitClock::start(start, 500 * MS, 200 * MS, window, ReasoningRule { streamed: true, keeps_alive: false });
        streamed.event(&thinking, start + 40 * MS);
        assert_eq!(streamed.at(start + 40 * MS), Next::Commit { ttft: 40 * MS }, "streamed reasoning commits");
    }

    #[test]
    fn an_end_commits_only_what_said_something() {
        let (mut clock, start) = clock(3, Duration::ZERO);
        assert_eq!(clock.ended(), Err(Failure::Empty));
        clock.event(&text("a"), start + 5 * MS);
        assert_eq!(clock.ended(), Ok(5 * MS));
    }
}
