//! The breaker on paused time: opening, the one probe, and the cluster's say.

use super::*;

fn breaker() -> Arc<Breaker> {
    Breaker::new("p", BreakerSettings { cooldown: Duration::from_secs(10), ..BreakerSettings::default() })
}

fn fail_once(breaker: &Arc<Breaker>) {
    breaker.try_acquire().map(Permit::failure).unwrap_or_else(|| panic!("expected a permit"));
}

#[tokio::test(start_paused = true)]
async fn opens_after_consecutive_failures_and_probes_after_cooldown() {
    let breaker = breaker();
    fail_once(&breaker);
    fail_once(&breaker);
    assert_eq!(breaker.state(), BreakerState::Closed, "two failures are not yet three");
    fail_once(&breaker);
    assert_eq!(breaker.state(), BreakerState::Open);
    assert!(breaker.try_acquire().is_none(), "an open breaker skips the provider");

    tokio::time::advance(Duration::from_secs(10)).await;
    assert_eq!(breaker.state(), BreakerState::HalfOpen);
    let probe = breaker.try_acquire().expect("one probe");
    assert!(probe.is_probe());
    assert!(breaker.try_acquire().is_none(), "exactly one probe while half-open");
    probe.success();
    assert_eq!(breaker.state(), BreakerState::Closed);
    assert!(breaker.try_acquire().is_some_and(|p| !p.is_probe()));
}

#[tokio::test(start_paused = true)]
async fn a_failed_probe_reopens_for_another_cooldown() {
    let breaker = breaker();
    (0..3).for_each(|_| fail_once(&breaker));
    tokio::time::advance(Duration::from_secs(10)).await;
    breaker.try_acquire().expect("probe").failure();
    assert_eq!(breaker.state(), BreakerState::Open);
    tokio::time::advance(Duration::from_secs(9)).await;
    assert!(breaker.try_acquire().is_none(), "still cooling down");
    tokio::time::advance(Duration::from_secs(1)).await;
    assert!(breaker.try_acquire().is_some_and(|p| p.is_probe()));
}

#[tokio::test(start_paused = true)]
async fn a_dropped_probe_frees_the_slot_without_deciding() {
    let breaker = breaker();
    (0..3).for_each(|_| fail_once(&breaker));
    tokio::time::advance(Duration::from_secs(10)).await;
    drop(breaker.try_acquire().expect("probe"));
    assert_eq!(breaker.state(), BreakerState::HalfOpen);
    assert!(breaker.try_acquire().is_some_and(|p| p.is_probe()), "the next request probes");
}

#[tokio::test(start_paused = true)]
async fn a_success_resets_the_consecutive_count() {
    let breaker = breaker();
    for _ in 0..5 {
        fail_once(&breaker);
        fail_once(&breaker);
        breaker.try_acquire().expect("closed").success();
    }
    assert_eq!(breaker.state(), BreakerState::Closed, "never three in a row, and 10 of 15 is under the window");
}

#[tokio::test(start_paused = true)]
async fn a_high_failure_rate_over_the_window_opens() {
    let breaker = breaker();
    for _ in 0..10 {
        breaker.try_acquire().expect("closed").success();
        fail_once(&breaker);
    }
    assert_eq!(breaker.state(), BreakerState::Open, "10 failures in the last 20 attempts is 50 %");
}

#[tokio::test(start_paused = true)]
async fn a_forced_permit_decides_like_a_probe_without_taking_its_slot() {
    let breaker = breaker();
    (0..3).for_each(|_| fail_once(&breaker));
    assert_eq!(breaker.recovers_at(), Instant::now() + Duration::from_secs(10));
    breaker.force_acquire().failure();
    assert_eq!(breaker.state(), BreakerState::Open, "a forced failure while open keeps it open");
    assert_eq!(breaker.recovers_at(), Instant::now() + Duration::from_secs(10), "and the cooldown as it was");
    tokio::time::advance(Duration::from_secs(10)).await;
    let probe = breaker.try_acquire().expect("the probe");
    drop(breaker.force_acquire());
    assert!(breaker.try_acquire().is_none(), "a dropped forced permit leaves the probe's slot taken");
    drop(probe);
    breaker.force_acquire().failure();
    assert_eq!(breaker.state(), BreakerState::Open, "a forced failure while half-open re-opens");
    assert!(breaker.force_acquire().commit().is_none(), "a forced attempt settles at commit");
    assert_eq!(breaker.state(), BreakerState::Closed, "and its success closes the breaker");
}

#[tokio::test(start_paused = true)]
async fn failures_recorded_after_commit_count_too() {
    let breaker = breaker();
    (0..3).for_each(|_| breaker.record_failure());
    assert_eq!(breaker.state(), BreakerState::Open);
}

#[tokio::test(start_paused = true)]
async fn it_counts_the_openings_and_closings_it_decided_itself() {
    let breaker = breaker();
    breaker.force_acquire().success();
    assert_eq!(breaker.decided(), Decided::default(), "a success while closed closes nothing");
    (0..3).for_each(|_| fail_once(&breaker));
    assert_eq!(breaker.decided(), Decided { opened: 1, closed: 0 });
    tokio::time::advance(Duration::from_secs(10)).await;
    breaker.try_acquire().expect("probe").failure();
    assert_eq!(breaker.decided(), Decided { opened: 2, closed: 0 }, "a failed probe re-opens");
    tokio::time::advance(Duration::from_secs(10)).await;
    breaker.try_acquire().expect("probe").success();
    assert_eq!(breaker.decided(), Decided { opened: 2, closed: 1 });
    breaker.open_remotely(Duration::from_secs(5));
    breaker.close_remotely();
    assert_eq!(breaker.decided(), Decided { opened: 2, closed: 1 }, "another replica's decisions are its own to tell");
}
