//! What each scheduled drill last did, for `GET /admin/status`: its route,
//! how often it runs, when it last ran on this replica and how that went.

use std::sync::{Mutex, PoisonError};

use serde_json::{Value, json};

use super::run::DrillRun;
use crate::config::Drill;
use crate::store::time::rfc3339;

/// One drill's record.
#[derive(Debug, Clone)]
struct Entry {
    route: String,
    every: String,
    fail: String,
    last: Option<DrillRun>,
    runs: u64,
    failures: u64,
    /// Its last run failed: the next pass is a recovery.
    failing: bool,
}

/// Every configured drill's record, in config order.
#[derive(Debug, Default)]
pub struct Board {
    entries: Mutex<Vec<Entry>>,
}

impl Board {
    /// An empty record for each of `drills`.
    pub fn new(drills: &[Drill]) -> Self {
        let entries = drills
            .iter()
            .map(|drill| Entry {
                route: drill.route.clone(),
                every: every(drill.every.as_secs()),
                fail: drill.fail_spec.clone(),
                last: None,
                runs: 0,
                failures: 0,
                failing: false,
            })
            .collect();
        Board { entries: Mutex::new(entries) }
    }

    /// Records how drill `index` went; whether it recovers (passed after a failure).
    pub fn record(&self, index: usize, run: &DrillRun) -> bool {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(entry) = entries.get_mut(index) else { return false };
        let recovered = run.passed && entry.failing;
        entry.failing = !run.passed;
        entry.runs = entry.runs.saturating_add(1);
        entry.failures = entry.failures.saturating_add(u64::from(!run.passed));
        entry.last = Some(run.clone());
        recovered
    }

    /// Each drill as `/admin/status` shows it: never an error's text.
    pub fn status(&self) -> Vec<Value> {
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries
            .iter()
            .map(|entry| {
                let last = entry.last.as_ref();
                json!({
                    "route": entry.route,
                    "every": entry.every,
                    "fail": entry.fail,
                    "runs": entry.runs,
                    "failures": entry.failures,
                    "last_run": last.map(|run| rfc3339(run.at_ms)),
                    "result": last.map(|run| if run.passed { "passed" } else { "failed" }),
                    "outcome": last.map(|run| run.outcome),
                    "answered_by": last.and_then(|run| run.answered_by.as_ref().map(|(provider, _)| provider)),
                    "model": last.and_then(|run| run.answered_by.as_ref().map(|(_, model)| model)),
                    "attempts": last.map(|run| run.attempts),
                    "ms": last.map(|run| u64::try_from(run.elapsed.as_millis()).unwrap_or(u64::MAX)),
                })
            })
            .collect()
    }
}

/// `every` as the config writes it: in the largest unit that divides it.
fn every(seconds: u64) -> String {
    match seconds {
        0 => "0s".to_owned(),
        s if s % 86_400 == 0 => format!("{}d", s / 86_400),
        s if s % 3600 == 0 => format!("{}h", s / 3600),
        s if s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}
