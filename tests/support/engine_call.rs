//! The call the engine tests send: one user message, under a given id.
//! Included by path from the engine tests, which do without the rest of
//! the support module.

use std::sync::Arc;

use baton::core::Call;
use baton::event::{ChatRequest, Message, Role};

/// A call with `id` whose one user message is "tell me".
pub fn call_with_id(id: &str) -> Call {
    let request = ChatRequest { messages: vec![Message::text(Role::User, "tell me")], ..ChatRequest::default() };
    Call { id: Arc::from(id), request: Box::new(request), drills: Default::default(), trace: Default::default() }
}
