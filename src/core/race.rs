//! One pass of the attempt loop over a route's candidates: which to try
//! next ([`Queue`]: the plan's order, then the last resort), the turns
//! running at once with their hedge clock ([`Race`]), and every failure
//! kept in order for the error.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use tokio::time::{Instant, sleep_until};

use super::turn::TargetRun;
use super::{AttemptRecord, ProxyError};
use crate::admission::SkipReason;
use crate::config::Target;
use crate::providers::ProviderError;

/// The candidates not tried yet.
pub(super) struct Queue {
    pending: std::collections::VecDeque<usize>,
    /// Skipped by a breaker or a cooldown, with when each is due back:
    /// tried, soonest first, once nothing else is left.
    last_resort: Vec<(Instant, usize)>,
    /// The pending candidates are the last resort's.
    forced: bool,
    /// After a context-length error, only a larger or undeclared window may help.
    needs_window_above: Option<u64>,
}

impl Queue {
    /// The candidates in `order`.
    pub(super) fn new(order: &[usize]) -> Self {
        Queue {
            pending: order.iter().copied().collect(),
            last_resort: Vec::new(),
            forced: false,
            needs_window_above: None,
        }
    }

    /// The next candidate that can hold the request, and whether it is a
    /// last resort; the last resort begins when the order is used up.
    pub(super) fn next(&mut self, targets: &[Target]) -> Option<(usize, bool)> {
        if self.pending.is_empty() && !self.forced && !self.last_resort.is_empty() {
            self.last_resort.sort_unstable();
            self.pending.extend(self.last_resort.drain(..).map(|(_, index)| index));
            self.forced = true;
        }
        let floor = self.needs_window_above;
        let fits = |index: &usize| {
            let window = targets.get(*index).and_then(|t| t.context_window);
            floor.is_none_or(|floor| window.is_none_or(|w| w > floor))
        };
        while let Some(index) = self.pending.pop_front() {
            if fits(&index) {
                return Some((index, self.forced));
            }
        }
        None
    }

    /// Whether a hedge could start another candidate now.
    pub(super) fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Whether the last resort is still to come.
    pub(super) fn has_last_resort(&self) -> bool {
        !self.forced && !self.last_resort.is_empty()
    }

    /// `index` was skipped and is due back at `until`.
    pub(super) fn skipped(&mut self, index: usize, until: Instant) {
        self.last_resort.push((until, index));
    }

    /// From now on only targets with a context window over `window`, or
    /// with none declared, fit.
    pub(super) fn need_window_above(&mut self, window: u64) {
        self.needs_window_above = Some(window);
    }
}

/// A turn of one target, running.
pub(super) type Turn<'a> = Pin<Box<dyn Future<Output = TargetRun> + Send + 'a>>;

/// The turns running at once (more than one only while hedging), and when
/// the latest started.
pub(super) struct Race<'a> {
    turns: FuturesUnordered<Turn<'a>>,
    last_start: Instant,
    /// The latest candidate started, a hedge's "from".
    pub(super) last_started: Option<usize>,
}

impl<'a> Race<'a> {
    pub(super) fn new() -> Self {
        Race { turns: FuturesUnordered::new(), last_start: Instant::now(), last_started: None }
    }

    /// Whether nothing is running.
    pub(super) fn is_idle(&self) -> bool {
        self.turns.is_empty()
    }

    /// Whether the latest turn has gone `hedge` without committing.
    pub(super) fn hedge_due(&self, hedge: Option<Duration>) -> bool {
        !self.is_idle() && hedge.is_some_and(|delay| super::later(self.last_start, delay) <= Instant::now())
    }

    /// Starts `turn` of candidate `index`.
    pub(super) fn start(&mut self, index: usize, turn: Turn<'a>) {
        self.turns.push(turn);
        self.last_start = Instant::now();
        self.last_started = Some(index);
    }

    /// The next turn to end, or `None` when `hedge` (if another candidate
    /// is waiting) or `deadline` comes first.
    pub(super) async fn next(&mut self, hedge: Option<Duration>, deadline: Option<Instant>) -> Option<TargetRun> {
        let hedge_at = hedge.map(|delay| super::later(self.last_start, delay));
        let wake_at = [hedge_at, deadline].into_iter().flatten().min();
        tokio::select! {
            Some(run) = self.turns.next() => Some(run),
            () = sleep_until(wake_at.unwrap_or_else(super::far_future)), if wake_at.is_some() => None,
        }
    }

    /// Drops every turn still running: their connections close.
    pub(super) fn stop(&mut self) {
        self.turns.clear();
    }
}

/// Every failure of a pass, in order.
#[derive(Default)]
pub(super) struct Failures {
    pub(super) records: Vec<AttemptRecord>,
}

impl Failures {
    /// Requests sent before the winner's, plus the winner's own.
    pub(super) fn attempts_with_winner(&self) -> u32 {
        let sent = self.records.iter().filter(|r| !r.failure.is_skip()).count();
        u32::try_from(sent.saturating_add(1)).unwrap_or(u32::MAX)
    }

    /// The pass is over without an answer. A provider's rejection of the
    /// request itself goes back to the client as it was; when every target
    /// was too small for it (declared so, or saying so), the client hears
    /// that its prompt fits no target.
    pub(super) fn into_error(mut self, fresh: bool) -> ProxyError {
        if fresh && let Some(last) = self.records.pop_if(|record| !record.failure.is_failover()) {
            return ProxyError::rejected(last);
        }
        // Every target passed over for the request itself: the client's to fix.
        let unsupported = |record: &AttemptRecord| matches!(record.failure, super::Failure::Unsupported(_));
        let too_small = |record: &AttemptRecord| {
            matches!(
                record.failure,
                super::Failure::Skipped(SkipReason::ContextWindow { .. })
                    | super::Failure::Provider(ProviderError::BadRequest { context_length: true, .. })
            )
        };
        if self.records.is_empty() || !self.records.iter().all(|record| unsupported(record) || too_small(record)) {
            return ProxyError::AllFailed(self.records);
        }
        if self.records.iter().any(unsupported) {
            ProxyError::unsupported(&self.records)
        } else {
            ProxyError::ContextLengthExceeded(self.records)
        }
    }
}
