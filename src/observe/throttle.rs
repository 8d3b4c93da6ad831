//! Requests for endpoints baton does not have: a client knocking on the
//! wrong door (a path without `/v1`, a wrong method, a WebSocket upgrade).
//! Each is counted by method, and logged once per path and minute, so an
//! operator sees who is misconfigured without a flood of random paths
//! flooding the log or the metrics (the path is never a label).

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How often one path is logged at most.
const EVERY: Duration = Duration::from_secs(60);

/// The most paths remembered at once; past it, a new path is counted but
/// not logged until the minute of the oldest has passed.
const PATHS: usize = 1024;

/// When each path was last logged.
#[derive(Debug, Default)]
pub(super) struct Knocks {
    logged: Mutex<HashMap<Box<str>, Instant>>,
}

impl Knocks {
    /// Whether a knock on `path` at `now` is logged: the first in a minute
    /// for that path, while fewer than [`PATHS`] paths are remembered.
    pub(super) fn due(&self, path: &str, now: Instant) -> bool {
        let mut logged = self.logged.lock().unwrap_or_else(PoisonError::into_inner);
        if logged.get(path).is_some_and(|last| now.duration_since(*last) < EVERY) {
            return false;
        }
        if logged.len() >= PATHS && !logged.contains_key(path) {
            logged.retain(|_, last| now.duration_since(*last) < EVERY);
            if logged.len() >= PATHS {
                return false;
            }
        }
        logged.insert(path.into(), now);
        true
    }
}

/// A method as a bounded label: one HTTP defines, else `other`.
pub(super) fn method_label(method: &http::Method) -> &'static str {
    const KNOWN: [&str; 9] = ["GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"];
    KNOWN.into_iter().find(|known| *known == method.as_str()).unwrap_or("other")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_is_logged_once_a_minute_and_a_flood_of_paths_is_bounded() {
        let knocks = Knocks::default();
        let start = Instant::now();
        assert!(knocks.due("/chat/completions", start));
        assert!(!knocks.due("/chat/completions", start + Duration::from_secs(59)), "once a minute");
        assert!(knocks.due("/chat/completions", start + EVERY), "again after it");
        for n in 0..PATHS {
            knocks.due(&format!("/random/{n}"), start + EVERY);
        }
        assert!(!knocks.due("/one/more", start + EVERY), "past the bound, counted but not logged");
        assert!(knocks.due("/one/more", start + EVERY * 2), "once the old minute has passed");
        assert_eq!(method_label(&http::Method::GET), "GET");
        assert_eq!(method_label(&http::Method::from_bytes(b"BREW").unwrap_or_default()), "other");
    }
}
