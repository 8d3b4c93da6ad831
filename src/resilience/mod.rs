//! What baton remembers about each provider across requests: its breaker,
//! a rate-limit cooldown, and its recent times to first token.

pub mod backoff;
pub mod breaker;
mod health;
pub mod outage;
pub mod window;

pub use breaker::{Breaker, BreakerState, Permit};
pub use health::{Health, ProviderHealth};
pub use window::{MinuteWindow, Tally};
