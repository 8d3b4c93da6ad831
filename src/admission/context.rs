//! The context window a target declares: a request whose estimate — its
//! input plus the output it may ask for — the window cannot hold is skipped
//! (`context_window`) instead of sent only to be refused.

use tokio::time::Instant;

use super::{Candidate, Policy, Skip, SkipReason, Ticket};

/// Skips a target too small for the request.
pub struct ContextWindowPolicy;

impl Policy for ContextWindowPolicy {
    /// Not even a last resort passes: the provider could only refuse the
    /// request. The estimate walks the whole request, so it is made only
    /// for a target that declares a window.
    fn admit(&self, candidate: &Candidate<'_>) -> Result<Option<Box<dyn Ticket>>, Skip> {
        let Some(window) = candidate.context_window else { return Ok(None) };
        let needed = candidate.request.estimated_tokens();
        if needed <= window {
            return Ok(None);
        }
        Err(Skip { reason: SkipReason::ContextWindow { needed, window }, recovers_at: Instant::now() })
    }
}
