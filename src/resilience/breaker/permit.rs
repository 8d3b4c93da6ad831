//! Leave to send one request through a breaker, settled once with the
//! attempt's outcome, or given back when dropped unsettled.

use std::sync::Arc;

use super::{Breaker, Phase};

/// Leave to send one request to the provider. A probe that is dropped
/// without an outcome (the client left, a hedge lost) frees the half-open
/// slot for the next request instead of deciding anything.
#[derive(Debug)]
pub struct Permit {
    pub(super) breaker: Arc<Breaker>,
    pub(super) probe: bool,
    /// Given past an open breaker because no candidate was left: it settles
    /// like a probe but holds no probe slot.
    pub(super) forced: bool,
    pub(super) settled: bool,
}

impl Permit {
    /// The provider answered: a probe's success closes the breaker.
    pub fn success(mut self) {
        self.settled = true;
        self.breaker.succeed(&mut self.breaker.lock(), self.probe || self.forced);
    }

    /// The provider failed: counts toward opening; a probe's failure re-opens.
    pub fn failure(mut self) {
        self.settled = true;
        self.breaker.fail(&mut self.breaker.lock(), self.probe || self.forced);
    }

    /// The attempt committed. A probe has shown the provider is back and
    /// closes the breaker now; any other permit is returned, to be settled
    /// when the answer ends (a long generation is not a failure, and a client
    /// that leaves settles nothing).
    pub fn commit(self) -> Option<Permit> {
        if self.probe || self.forced {
            self.success();
            None
        } else {
            Some(self)
        }
    }

    /// Whether this is the half-open probe.
    pub fn is_probe(&self) -> bool {
        self.probe
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        if self.probe && !self.settled {
            let mut state = self.breaker.lock();
            if matches!(state.phase, Phase::HalfOpen { probing: true }) {
                state.phase = Phase::HalfOpen { probing: false };
            }
        }
    }
}
