//! How often a log line about one thing may be written: once per interval
//! per subject (a kind of client fault, a path no endpoint has), for a
//! bounded number of subjects, so a flood of them is visible without
//! flooding the log.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// The most subjects remembered at once; past it, a new subject is not
/// logged until the interval of the oldest has passed.
const SUBJECTS: usize = 1024;

/// When each subject was last logged.
#[derive(Debug)]
pub(super) struct LogThrottle {
    every: Duration,
    logged: Mutex<HashMap<Box<str>, Instant>>,
}

impl LogThrottle {
    /// A subject logged at most once `every`.
    pub(super) fn new(every: Duration) -> Self {
        LogThrottle { every, logged: Mutex::new(HashMap::new()) }
    }

    /// Whether a line about `subject` at `now` is written: the first in its
    /// interval, while fewer than [`SUBJECTS`] subjects are remembered.
    pub(super) fn due(&self, subject: &str, now: Instant) -> bool {
        let mut logged = self.logged.lock().unwrap_or_else(PoisonError::into_inner);
        if logged.get(subject).is_some_and(|last| now.duration_since(*last) < self.every) {
            return false;
        }
        if logged.len() >= SUBJECTS && !logged.contains_key(subject) {
            logged.retain(|_, last| now.duration_since(*last) < self.every);
            if logged.len() >= SUBJECTS {
                return false;
            }
        }
        logged.insert(subject.into(), now);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_subject_is_logged_once_an_interval_and_a_flood_of_subjects_is_bounded() {
        const EVERY: Duration = Duration::from_secs(60);
        let knocks = LogThrottle::new(EVERY);
        let start = Instant::now();
        assert!(knocks.due("/chat/completions", start));
        assert!(!knocks.due("/chat/completions", start + Duration::from_secs(59)), "once a minute");
        assert!(knocks.due("/chat/completions", start + EVERY), "again after it");
        for n in 0..SUBJECTS {
            knocks.due(&format!("/random/{n}"), start + EVERY);
        }
        assert!(!knocks.due("/one/more", start + EVERY), "past the bound, counted but not logged");
        assert!(knocks.due("/one/more", start + EVERY * 2), "once the old minute has passed");
    }
}
