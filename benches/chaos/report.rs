//! The chaos run's report: a table on stdout, the detail of anything
//! unclean or wrong on stderr.

use std::collections::BTreeMap;
use std::time::Duration;

use baton::mock::RecordedRequest;
use baton::providers::ProviderKind;

use super::options::Options;
use super::proxy::Health;
use super::verdict::Tally;

/// What was measured of the proxy around the load.
#[derive(Default)]
pub struct Figures {
    pub elapsed: Duration,
    pub rss_start: Option<u64>,
    /// After [`WARM_UP_SHARE`](super::WARM_UP_SHARE) of the requests.
    pub rss_warm: Option<u64>,
    pub rss_after_load: Option<u64>,
    pub rss_after_idle: Option<u64>,
    pub fds_start: Option<usize>,
    pub fds_after_load: Option<usize>,
    pub fds_after_idle: Option<usize>,
    pub health: Health,
    pub not_sent: usize,
    pub stopped: Option<String>,
    pub panics: usize,
    pub breaker_opens: usize,
    /// How the proxy ended when stopped.
    pub ending: String,
    pub providers: Vec<(ProviderKind, Vec<RecordedRequest>)>,
}

pub fn mib(bytes: u64) -> f64 {
    bytes as f64 / 1048576.0
}

fn mib_or(bytes: Option<u64>) -> String {
    bytes.map_or("n/a".to_owned(), |b| format!("{:.1} MiB", mib(b)))
}

fn count_or(count: Option<usize>) -> String {
    count.map_or("n/a".to_owned(), |c| c.to_string())
}

fn share(part: usize, whole: usize) -> String {
    format!("{part} ({:.2} %)", 100.0 * part as f64 / whole.max(1) as f64)
}

pub fn chaos(options: &Options, tally: &Tally, figures: &Figures) {
    let faults: Vec<&str> = options.fault_classes().iter().map(|f| f.name()).collect();
    println!(
        "\nchaos benchmark: {} requests, {} at a time, each provider failing {:.0} % of its requests with {}; \
         Retry-After {} s; resume {}; breakers {}; {:.0} % of clients disconnect mid-stream, {:.0} % not streamed; first-token deadline {} ms, \
         idle {} ms; {} words an answer; seed {}\n",
        options.requests,
        options.concurrency,
        options.fault_share * 100.0,
        faults.join(", "),
        options.retry_after_s,
        if options.midstream { "on" } else { "off" },
        if options.no_breakers { "never open" } else { "shipped defaults" },
        options.disconnect_share * 100.0,
        options.unstreamed_share * 100.0,
        options.first_token_ms,
        options.idle_ms,
        options.tokens,
        options.seed
    );
    let n = tally.requests;
    let statuses: Vec<String> =
        tally.before_commit.iter().map(|(status, count)| format!("{status}: {count}")).collect();
    let rows = [
        (
            "requests",
            format!(
                "{n} of {} ({:.0} s, {:.0}/s)",
                options.requests,
                figures.elapsed.as_secs_f64(),
                rate(n, figures.elapsed)
            ),
        ),
        ("answered (whole answer and [DONE], or a whole JSON body)", share(tally.answered, n)),
        (
            "clean errors before commit (JSON error, with a status)",
            format!("{} [{}]", share(tally.clean_before_commit(), n), statuses.join(", ")),
        ),
        ("clean errors after commit (SSE error event, no [DONE])", share(tally.after_commit, n)),
        ("client disconnects (on purpose, mid-stream)", share(tally.disconnected, n)),
        ("unclean endings (none of the above; reasons on stderr)", share(tally.unclean_total(), n)),
        ("**hung** (over the hard timeout)", share(tally.hung, n)),
        ("**leaked** (a word of another request or attempt)", share(tally.leaked, n)),
        ("**truncated presented as complete**", share(tally.truncated, n)),
        ("**duplicated** (a word twice)", share(tally.duplicated, n)),
        (
            "not sent (the run stopped early)",
            match &figures.stopped {
                Some(why) => format!("{} ({why})", figures.not_sent),
                None => figures.not_sent.to_string(),
            },
        ),
        (
            "proxy RSS at start / after warm-up (10 %)",
            format!("{} / {}", mib_or(figures.rss_start), mib_or(figures.rss_warm)),
        ),
        ("proxy RSS peak (VmHWM)", format!("{:.1} MiB", mib(figures.health.peak))),
        (
            "proxy RSS after the load / after idling",
            format!("{} / {}", mib_or(figures.rss_after_load), mib_or(figures.rss_after_idle)),
        ),
        ("growth after warm-up (end less warm-up)", growth(figures)),
        (
            "proxy descriptors at start / after the load / after idling",
            format!(
                "{} / {} / {}",
                count_or(figures.fds_start),
                count_or(figures.fds_after_load),
                count_or(figures.fds_after_idle)
            ),
        ),
        ("proxy", fate(figures)),
        ("panics / breaker openings in the proxy's log", format!("{} / {}", figures.panics, figures.breaker_opens)),
    ];
    println!("| measure | value |\n|---|---|");
    for (name, value) in rows {
        println!("| {name} | {value} |");
    }
    println!();
    providers(&figures.providers);
    details(tally);
}

fn rate(n: usize, elapsed: Duration) -> f64 {
    n as f64 / elapsed.as_secs_f64().max(1e-9)
}

fn growth(figures: &Figures) -> String {
    let end = figures.rss_after_idle.or(figures.rss_after_load);
    match (figures.rss_warm, end) {
        (Some(warm), Some(end)) => format!("{:+.1} MiB", mib(end) - mib(warm)),
        _ => "n/a".to_owned(),
    }
}

fn fate(figures: &Figures) -> String {
    let health = &figures.health;
    match (&health.killed, &health.exited) {
        (Some((rss, after)), _) => {
            format!("KILLED: its RSS reached {:.0} MiB after {:.1} s", mib(*rss), after.as_secs_f64())
        }
        (None, Some(status)) => format!("EXITED during the run ({status})"),
        (None, None) => format!("ran to the end; {}", figures.ending),
    }
}

/// Attempts each simulated provider saw, and the faults it injected.
fn providers(providers: &[(ProviderKind, Vec<RecordedRequest>)]) {
    println!("| provider | attempts | faults injected |\n|---|---|---|");
    for (kind, requests) in providers {
        let mut faults: BTreeMap<&str, usize> = BTreeMap::new();
        for fault in requests.iter().filter_map(|r| r.fault) {
            *faults.entry(fault.name()).or_default() += 1;
        }
        let listed: Vec<String> = faults.iter().map(|(name, count)| format!("{name} {count}")).collect();
        let injected: usize = faults.values().sum();
        println!("| {kind} | {} | {injected}: {} |", requests.len(), listed.join(", "));
    }
    println!();
}

fn details(tally: &Tally) {
    for (why, count) in &tally.unclean {
        eprintln!("unclean: {count} × {why}");
    }
    for (what, body) in &tally.examples {
        eprintln!("first {what} answer, as received (up to 1,500 characters):\n{body}\n");
    }
}
