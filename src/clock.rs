//! Time arithmetic with one rule: an instant plus a wait never overflows
//! and never wraps round to "now". A wait too long to represent is a time
//! far enough off to mean never, so a deadline or a recovery time computed
//! from a huge config value or a provider's header stays in the future.
//! Everything that adds a wait to an [`Instant`] goes through here; the
//! lint configuration refuses `checked_add` on instants anywhere else.

use std::time::Duration;

use tokio::time::Instant;

/// Thirty years: later than any deadline baton keeps, and small enough to
/// add to any instant a running process sees.
const NEVER: Duration = Duration::from_secs(86_400 * 365 * 30);

/// A year: what [`far_future`] waits, a sleep that is never meant to end.
const A_YEAR: Duration = Duration::from_secs(86_400 * 365);

/// `at + wait`, or a time far enough to mean never when that cannot be
/// represented: waits come from config values, providers' headers and
/// other replicas, any of which may be absurd.
#[expect(clippy::disallowed_methods, reason = "the one place instants are added to")]
pub fn later(at: Instant, wait: Duration) -> Instant {
    at.checked_add(wait).or_else(|| at.checked_add(NEVER)).unwrap_or(at)
}

/// A time a year from now: the deadline of a sleep that only another
/// branch of a `select!` should end.
pub fn far_future() -> Instant {
    later(Instant::now(), A_YEAR)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn an_ordinary_wait_is_added_as_is() {
        let now = Instant::now();
        assert_eq!(later(now, Duration::from_secs(5)), now + Duration::from_secs(5));
        assert_eq!(later(now, Duration::ZERO), now);
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_too_long_to_represent_saturates_to_the_far_future_never_to_now() {
        let now = Instant::now();
        let never = later(now, Duration::MAX);
        assert!(never > now, "an overflowing wait must not come back as now");
        assert!(never >= later(now, NEVER), "it lands at least thirty years out");
        assert!(later(never, Duration::MAX) >= never, "and adding to it again never goes back");
    }

    #[tokio::test(start_paused = true)]
    async fn the_far_future_is_a_year_off() {
        assert_eq!(far_future().duration_since(Instant::now()), A_YEAR);
    }
}
