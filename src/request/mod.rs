//! The normalised chat request: a whole conversation — text and image
//! parts, the assistant's tool calls and their results — with the
//! generation settings every provider has an equivalent for. A dialect
//! parses its wire format into it and each adapter translates it into its
//! provider's body; a field an adapter cannot honour is named by
//! [`crate::providers::Adapter::unsupported`], never dropped silently.
//!
//! It speaks no dialect: the settings every dialect has are typed, what a
//! dialect carries that baton does not translate is kept tagged with the
//! dialect it came in ([`ChatRequest::dialect`]), and a refusal names a
//! field in the client's own words ([`ChatRequest::field`]).

mod chat;
mod dialect;
mod field;
mod key;
mod message;
mod tools;

pub use chat::{ChatRequest, DEFAULT_OUTPUT_RESERVE, LimitField};
pub use dialect::{ClientDialect, Native, ReasoningShown, Setting};
pub use field::{Field, asks_nothing};
pub use key::Key;
pub use message::{Image, InlineImage, Message, Part, Role, ToolCall};
pub use tools::{FREEFORM_INPUT, JsonSchema, ResponseFormat, Tool, ToolChoice};

#[cfg(test)]
mod tests;
