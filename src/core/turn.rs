//! One target's turn: the request worded for the target, the pipeline's
//! attempts, and retries of the failures worth retrying while the route's
//! retry budget allows. Every failure is recorded, in order.

use std::time::Duration;

use tokio::time::{Instant, sleep};

use super::ask::Asked;
use super::attempt::{Attempt, Opened};
use super::plan::Plan;
use super::{AttemptRecord, Engine, Failure};
use crate::config::UnsupportedParams;
use crate::providers::ProviderError;
use crate::request::Field;

/// How one target's turn ended: what failed along the way, and the opened
/// attempt if one committed.
pub(super) struct TargetRun {
    /// The target's position in the route.
    pub index: usize,
    /// Every failed try, in order.
    pub failures: Vec<AttemptRecord>,
    /// The attempt that committed, if any.
    pub opened: Option<Opened>,
    /// When the turn was skipped by a skip the last resort goes past (an
    /// open breaker, a cooldown), when the provider is due back: the last
    /// resort tries the soonest first.
    pub skipped_until: Option<Instant>,
}

/// Gives target `index` of `plan` its turn, retrying it as the route and
/// target allow and the route's retry budget has room. A rejected prefill
/// continuation is tried again at once as an instruction, without spending
/// a retry. A `forced` turn goes past an open breaker or a cooldown: the
/// route has no other candidate.
pub(super) async fn run(engine: &Engine, plan: &Plan<'_>, index: usize, forced: bool) -> TargetRun {
    let mut run = TargetRun { index, failures: Vec::new(), opened: None, skipped_until: None };
    let Some(target) = plan.targets.get(index) else { return run };
    let health = engine.health.provider(&target.provider.name);
    let (mut request, mut prefilled) = plan.ask.request_for(target);
    let unsupported = target.provider.kind.adapter_for(&target.model).unsupported(&request);
    let refused: Vec<Field> = match plan.rules.surface.unsupported_params {
        UnsupportedParams::Refuse => unsupported.clone(),
        UnsupportedParams::DropSafe => {
            unsupported.iter().filter(|field| !request.dialect.safe_to_drop(field)).cloned().collect()
        }
        UnsupportedParams::Drop => Vec::new(),
    };
    if !refused.is_empty() {
        let failure = Failure::Unsupported(refused);
        engine.pipeline.report(&Attempt::new(plan, target, &health, 0, forced), Err(&failure), None);
        run.failures.push(AttemptRecord::of(target, failure, Duration::ZERO));
        return run;
    }
    if !unsupported.is_empty() {
        request = Asked::Owned(Box::new(request.without(&unsupported)));
    }
    let mut retry = 0;
    loop {
        let attempt = Attempt::new(plan, target, &health, retry, forced);
        let mut failure = match engine.pipeline.attempt(&attempt, &request, &plan.rules).await {
            Ok(mut opened) => {
                opened.dropped = unsupported;
                run.opened = Some(opened);
                return run;
            }
            Err((failure, skipped_until)) => {
                run.skipped_until = skipped_until;
                failure
            }
        };
        let prefill_rejected = prefilled && matches!(failure, Failure::Provider(ProviderError::BadRequest { .. }));
        let wait = plan.rules.retry.wait(&mut failure, retry, target.retries, &health);
        run.failures.push(AttemptRecord::of(target, failure, attempt.started.elapsed()));
        if prefill_rejected && !plan.ask.is_fresh() {
            request = plan.ask.instruction(target);
            prefilled = false;
            continue;
        }
        match wait {
            Some(wait) if plan.budget.withdraw() => sleep(wait).await,
            Some(_) => {
                engine.metrics.retry_budget_exhausted(plan.route, "retry");
                return run;
            }
            None => return run,
        }
        retry += 1;
    }
}
