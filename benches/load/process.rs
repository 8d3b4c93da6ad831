//! What the benchmark reads of its processes from /proc: CPU seconds,
//! memory, a process's children, and this process's open descriptors.

use std::time::{Duration, Instant};

use super::{SETTLE_LIMIT, SETTLED_FDS};

/// CPU seconds (user + system) of `pids`, from /proc.
pub(super) fn cpu_seconds(pids: &[u32]) -> f64 {
    let ticks = 100.0;
    pids.iter()
        .filter_map(|pid| std::fs::read_to_string(format!("/proc/{pid}/stat")).ok())
        .map(|stat| {
            let fields: Vec<&str> =
                stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or("").split_whitespace().collect();
            let num = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
            (num(11) + num(12)) / ticks
        })
        .sum()
}

/// Resident memory of `pids` in bytes: now (`VmRSS`) or at its peak (`VmHWM`).
pub(super) fn memory(pids: &[u32], field: &str) -> u64 {
    pids.iter()
        .filter_map(|pid| std::fs::read_to_string(format!("/proc/{pid}/status")).ok())
        .filter_map(|status| {
            status
                .lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .sum::<u64>()
        * 1024
}

/// `pid` and every process whose parent it is (nginx's workers).
pub(super) fn with_children(pid: u32) -> Vec<u32> {
    let mut pids = vec![pid];
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let Ok(child) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
            let stat = std::fs::read_to_string(format!("/proc/{child}/stat")).unwrap_or_default();
            let parent = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                .and_then(|p| p.parse::<u32>().ok());
            if parent == Some(pid) {
                pids.push(child);
            }
        }
    }
    pids
}

/// Waits until `pids` use (almost) no CPU, so work a gateway still does for
/// the last run (streams to clients that left) does not weigh on the next,
/// and until this process is back to `fds` open descriptors: the last run's
/// connections, closing, must not use up the next run's file limit.
pub(super) async fn settle(pids: &[u32], fds: usize) {
    let started = Instant::now();
    while started.elapsed() < SETTLE_LIMIT {
        let before = cpu_seconds(pids);
        tokio::time::sleep(Duration::from_millis(500)).await;
        if cpu_seconds(pids) - before < 0.05 && open_fds() <= fds + SETTLED_FDS {
            return;
        }
    }
}

/// Descriptors this process has open.
pub(super) fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, Iterator::count)
}
