//! The clouds' credentials through baton, against the simulated clouds: a
//! token the provider no longer takes is dropped and another fetched,
//! rather than offered until it expires.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "a test fails by panicking")]

mod support;

use std::time::Duration;

use baton::mock::{Fault, MockProvider, Schedule};
use baton::providers::ProviderKind;
use support::{ChatConfig, Proxy, Spawned, chat_body, post_chat, run};

const HARD_LIMIT: Duration = Duration::from_secs(20);

#[test]
fn a_rejected_token_is_fetched_again_for_the_next_request() {
    run(HARD_LIMIT, async {
        let vertex = MockProvider::new(ProviderKind::Vertex)
            .api_key("ya29.issued")
            .fault(Fault::Unauthorized)
            .schedule(Schedule::FirstRequests(1))
            .spawned()
            .await;
        let spare = MockProvider::openai().marker("spare").spawned().await;
        let config = ChatConfig::new().mock("vertex", &vertex).mock("spare", &spare);
        let proxy = Proxy::start(&config.toml()).await;

        let first = post_chat(&proxy, &chat_body(true)).await;
        assert_eq!(first.status, 200, "{}", first.raw);
        assert_eq!(first.header("x-baton-provider"), "spare", "a 401 fails over");
        assert_eq!(vertex.side_requests().len(), 1, "one exchange so far");

        let second = post_chat(&proxy, &chat_body(true)).await;
        assert_eq!(second.header("x-baton-provider"), "vertex", "{}", second.raw);
        assert_eq!(second.streamed_text(), vertex.provider().expected_text());
        assert_eq!(vertex.side_requests().len(), 2, "the refused token was dropped and another fetched");
        let authorization = vertex.requests().last().map(|r| r.headers["authorization"].clone()).unwrap_or_default();
        assert_eq!(authorization, "Bearer ya29.issued");
    });
}
