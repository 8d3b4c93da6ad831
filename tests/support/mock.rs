//! Starting a simulated provider in one step, so a test names only what is
//! special about it.

use std::future::Future;

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
