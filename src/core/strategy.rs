//! The order a request tries a route's targets in, by the route's
//! `strategy`: config order, fastest recent first token first, or a first
//! target drawn by weight. Only the order is decided here; skipping an
//! unhealthy target is admission's, and failover walks whatever order this gives.

use std::time::Duration;

use crate::config::{Route, Strategy, Target};
use crate::resilience::Health;

/// The targets of `route` in the order this request tries them, by its
/// strategy, taken afresh each time from `health`'s latency windows.
pub(super) fn order(route: &Route, health: &Health) -> Vec<usize> {
    match route.strategy {
        Strategy::Ordered => (0..route.targets.len()).collect(),
        Strategy::Fastest => {
            let provider_p95 = |target: &Target| health.provider(&target.provider.name).ttft_p95();
            let expected: Vec<Duration> =
                route.targets.iter().map(|target| provider_p95(target).unwrap_or(target.first_token_timeout)).collect();
            fastest(&expected)
        }
        Strategy::Weighted => {
            let weights: Vec<u32> = route.targets.iter().map(|target| target.weight).collect();
            let total: u64 = weights.iter().copied().map(u64::from).sum();
            weighted(&weights, fastrand::u64(..total.max(1)))
        }
    }
}

/// The targets by expected time to first token, lowest first: a provider's
/// recent p95, or, for one with too few samples, the target's own
/// first-token deadline (the slowest a measured answer can be), so measured
/// targets go before unmeasured ones, which get their samples when failed
/// over or hedged to. The sort is stable: ties keep config order.
fn fastest(expected: &[Duration]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..expected.len()).collect();
    order.sort_by_key(|index| expected.get(*index).copied());
    order
}

/// The target that `roll` (in `0..sum of weights`) lands on first, each
/// target owning a span of rolls as long as its weight; then the others in
/// config order.
fn weighted(weights: &[u32], roll: u64) -> Vec<usize> {
    let mut left = roll;
    let first = weights
        .iter()
        .position(|weight| {
            let weight = u64::from(*weight);
            let here = left < weight;
            left = left.saturating_sub(weight);
            here
        })
        .unwrap_or(0);
    std::iter::once(first).chain((0..weights.len()).filter(|index| *index != first)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_roll_lands_on_the_target_owning_it_and_the_rest_follow_in_config_order() {
        assert_eq!(weighted(&[3, 1], 0), [0, 1]);
        assert_eq!(weighted(&[3, 1], 2), [0, 1]);
        assert_eq!(weighted(&[3, 1], 3), [1, 0]);
        assert_eq!(weighted(&[1, 1, 1], 1), [1, 0, 2], "failover walks the rest in config order");
        assert_eq!(weighted(&[1, 1, 1], 2), [2, 0, 1]);
        assert_eq!(weighted(&[5], 4), [0]);
    }

    #[test]
    fn first_attempts_follow_the_weights_within_five_points_over_two_thousand_requests() {
        let mut rng = fastrand::Rng::with_seed(0x5eed);
        for weights in [[3u32, 1], [1, 1], [1, 9]] {
            let total: u64 = weights.iter().copied().map(u64::from).sum();
            let firsts = (0..2000).filter(|_| weighted(&weights, rng.u64(..total))[0] == 0).count();
            let share = firsts as f64 / 2000.0;
            let expected = f64::from(weights[0]) / total as f64;
            assert!((share - expected).abs() <= 0.05, "weights {weights:?}: target 0 first {share:.3}, not {expected}");
        }
    }

    #[test]
    fn the_fastest_go_first_and_ties_keep_config_order() {
        let ms = Duration::from_millis;
        assert_eq!(fastest(&[ms(300), ms(1000), ms(100), ms(500)]), [2, 0, 3, 1]);
        assert_eq!(fastest(&[ms(7), ms(7), ms(3)]), [2, 0, 1], "a tie keeps config order");
        assert_eq!(fastest(&[]), Vec::<usize>::new());
    }
}
