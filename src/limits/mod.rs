//! The limit algorithms, pure: a GCRA for rates per minute and sliding
//! windows for spend. They know nothing of keys, providers, budgets as
//! configured or where their state is kept, so the policies that admit
//! requests and the stores that share state across replicas both stand
//! on them. Time comes in as an argument; the only rule they use for it
//! is the clock's.

mod gcra;
mod spend;
mod window;

pub use gcra::Gcra;
pub use spend::{Spend, SpendWindow, add_usd};
pub use window::BudgetWindow;
