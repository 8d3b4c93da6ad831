//! `BATON_BENCH_PIN=1`: the gateway under test on a core of its own (the
//! last), and the load generator, the simulated providers and the TLS
//! front on the others. On a machine as small as this one they all share
//! the cores otherwise, and a gateway's added first token at a thousand
//! streams is then as much the contention of the processes that measure it
//! as the gateway's own work. Cores are set with util-linux's `taskset`.

use std::ffi::OsStr;
use std::sync::OnceLock;

use tokio::process::Command;

/// The cores the gateways run on and the ones everything else runs on,
/// when pinning is asked for and there are at least two cores. Counted
/// once, before [`pin_self`] narrows what this process may use.
fn cores() -> Option<(String, String)> {
    static CORES: OnceLock<Option<(String, String)>> = OnceLock::new();
    CORES
        .get_or_init(|| {
            if std::env::var("BATON_BENCH_PIN").as_deref() != Ok("1") {
                return None;
            }
            let count = std::thread::available_parallelism().ok()?.get();
            (count >= 2).then(|| ((count - 1).to_string(), format!("0-{}", count - 2)))
        })
        .clone()
}

/// Pins this process to the cores that are not the gateway's, so every
/// thread and process it starts from now on runs there unless started
/// with [`command`]. Call it before any other thread starts.
pub(super) fn pin_self() {
    let Some((gateway, rest)) = cores() else { return };
    let pid = std::process::id().to_string();
    let pinned = std::process::Command::new("taskset")
        .args(["-a", "-p", "-c", &rest, &pid])
        .stdout(std::process::Stdio::null())
        .status();
    match pinned {
        Ok(status) if status.success() => eprintln!("pinned: the gateways on core {gateway}, the rest on {rest}"),
        _ => eprintln!("BATON_BENCH_PIN: taskset failed; nothing is pinned"),
    }
}

/// A command that runs `program` as a gateway: on the gateway's core when
/// pinning, as is otherwise. A process it starts (nginx's workers) stays
/// on that core.
pub(super) fn command(program: impl AsRef<OsStr>) -> Command {
    match cores() {
        Some((gateway, _)) => {
            let mut command = Command::new("taskset");
            command.args(["-c", &gateway]).arg(program);
            command
        }
        None => Command::new(program),
    }
}

/// nginx's `worker_processes` for the gateway: one per core it may use, as
/// baton's workers are. nginx 1.22's `auto` counts every core online,
/// whatever the process may run on.
pub(super) fn nginx_workers() -> &'static str {
    if cores().is_some() { "1" } else { "auto" }
}
