//! Starting a simulated provider in one step, so a test names only what is
//! special about it, and waiting for it to see its connection dropped.

use std::future::Future;
use std::time::Duration;

use baton::mock::{MockHandle, MockProvider};

/// Starts a `MockProvider` builder on a free loopback port.
pub trait Spawned {
    /// The running provider; fails the test if it cannot start.
    fn spawned(self) -> impl Future<Output = MockHandle>;
}

impl Spawned for MockProvider {
    async fn spawned(self) -> MockHandle {
        self.spawn().await.expect("the simulated provider starts")
    }
}

/// Whether the client closes more than `seen` of `mock`'s answers early
/// within `limit`: the signal that an upstream attempt was dropped.
pub async fn closes_early_within(mock: &MockHandle, seen: u64, limit: Duration) -> bool {
    tokio::time::timeout(limit, mock.wait_closed_early(seen)).await.is_ok()
}
