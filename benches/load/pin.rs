//! `BATON_BENCH_PIN=1`: the gateway under test on a core of its own (the
//! last), and the load generator, the simulated providers and the TLS
//! front on the others. On a machine as small as this one they all share
//! the cores otherwise, and a gateway's added first token at a thousand
//! streams is then as much the contention of the processes that measure it
//! as the gateway's own work. Cores are set with util-linux's `taskset`.

use std::ffi::OsStr;
use std::sync::OnceLock;

use tokio::process::Command;

/// The core the gateways run on, once [`pin_self`] has put everything
/// else on the others; unset when pinning was not asked for or failed, so
/// nothing is pinned on one side only.
static GATEWAY_CORE: OnceLock<String> = OnceLock::new();

/// When `BATON_BENCH_PIN=1` and there are at least two cores: pins this
/// process to every core but the last, so every thread and process it
/// starts from now on runs there unless started with [`command`], which
/// puts it on the last. Call it before any other thread starts.
pub(super) fn pin_self() {
    if std::env::var("BATON_BENCH_PIN").as_deref() != Ok("1") {
        return;
    }
    let count = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    if count < 2 {
        eprintln!("BATON_BENCH_PIN: one core only; nothing is pinned");
        return;
    }
    let (gateway, rest) = ((count - 1).to_string(), format!("0-{}", count - 2));
    let pid = std::process::id().to_string();
    let pinned = std::process::Command::new("taskset")
        .args(["-a", "-p", "-c", &rest, &pid])
        .stdout(std::process::Stdio::null())
        .status();
    match pinned {
        Ok(status) if status.success() => {
            eprintln!("pinned: the gateways on core {gateway}, the rest on {rest}");
            let _ = GATEWAY_CORE.set(gateway);
        }
        _ => eprintln!("BATON_BENCH_PIN: taskset failed; nothing is pinned"),
    }
}

/// A command that runs `program` as a gateway: on the gateway's core when
/// pinning, as is otherwise. A process it starts (nginx's workers) stays
/// on that core.
pub(super) fn command(program: impl AsRef<OsStr>) -> Command {
    match GATEWAY_CORE.get() {
        Some(gateway) => {
            let mut command = Command::new("taskset");
            command.args(["-c", gateway]).arg(program);
            command
        }
        None => Command::new(program),
    }
}

/// nginx's `worker_processes` for the gateway: one per core it may use, as
/// baton's workers are. nginx 1.22's `auto` counts every core online,
/// whatever the process may run on.
pub(super) fn nginx_workers() -> &'static str {
    if GATEWAY_CORE.get().is_some() { "1" } else { "auto" }
}
