//! The flood scenario: the route's first provider answers every request
//! with `data: ` and then bytes without a newline, as fast as the proxy reads
//! them, on `--flood-streams` streams at once for `--flood-s` seconds; a
//! healthy second provider answers whatever the proxy fails over. It reports
//! the proxy's peak resident memory (the goal: under 100 MiB), and kills the
//! proxy once it passes `--rss-limit-mb`.

use std::path::Path;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use baton::mock::{Fault, MockProvider};

use super::client::{self, Ask};
use super::options::Options;
use super::proxy::Health;
use super::report::mib;
use super::verdict::{self, Tally};

/// The peak resident memory a proxy should stay under while flooded.
const GOAL_MIB: f64 = 100.0;
/// Every request reaches the flooding provider: this run measures memory,
/// not the breaker.
const NO_BREAKER: &str = "breaker = { failure_threshold = 1000000, window = 1000000 }";

/// Runs the scenario and prints its table; true if the goal was met.
pub async fn run(options: &Options, bin: &Path, dir: &Path) -> bool {
    let flooder = MockProvider::openai().marker("flood").fault(Fault::DataFlood).slim_records();
    let flooder = flooder.spawn().await.expect("flooding provider");
    let healthy = MockProvider::anthropic().nonce_words().slim_records().tokens(options.tokens);
    let healthy = healthy.spawn().await.expect("healthy provider");
    // A first-token deadline as long as the run: a proxy without a cap on
    // an event's size keeps reading the flood for all of it.
    let deadline_ms = options.flood_s * 1000;
    let config = format!(
        "listen = \"127.0.0.1:0\"\n\n\
         [[providers]]\nname = \"flood\"\nkind = \"openai\"\nbase_url = \"{}\"\n{NO_BREAKER}\n\n\
         [[providers]]\nname = \"healthy\"\nkind = \"anthropic\"\nbase_url = \"{}\"\n\n\
         [[routes]]\nmodel = \"chaos\"\nfirst_token_timeout_ms = {deadline_ms}\nidle_timeout_ms = {}\n\
         targets = [{{ provider = \"flood\", model = \"m\" }}, {{ provider = \"healthy\", model = \"m\" }}]\n",
        flooder.base_url(),
        healthy.base_url(),
        options.idle_ms
    );
    let proxy = match super::proxy::start(bin, dir, &config).await {
        Ok(proxy) => proxy,
        Err(why) => {
            eprintln!("{why}");
            return false;
        }
    };
    let rss_start = proxy.rss().unwrap_or(0);
    let monitor = proxy.monitor(options.rss_limit());
    let client = reqwest::Client::new();
    let tally = Mutex::new(Tally::default());
    let started = Instant::now();
    let until = started + Duration::from_secs(options.flood_s);
    let request_timeout = Duration::from_secs(options.flood_s + 10);
    let worker = |stream: usize| {
        let (client, proxy, monitor, tally) = (&client, &proxy, &monitor, &tally);
        async move {
            let mut round = 0;
            while Instant::now() < until && !monitor.down() {
                let ask = Ask { nonce: format!("f{stream:03}r{round:06}"), stream: true, disconnect: false };
                let received = client::send(client, &proxy.url, &ask, request_timeout).await;
                let verdict = verdict::judge(&ask, &received, options.tokens);
                tally.lock().unwrap_or_else(PoisonError::into_inner).add(verdict, &received);
                round += 1;
            }
        }
    };
    eprintln!("flooding {} streams for {} s", options.flood_streams, options.flood_s);
    futures_util::future::join_all((0..options.flood_streams).map(worker)).await;
    let elapsed = started.elapsed();
    let health = monitor.health();
    drop(monitor);
    let ending = proxy.stop().await;
    let tally = tally.into_inner().unwrap_or_else(PoisonError::into_inner);
    let met = health.killed.is_none() && health.exited.is_none() && mib(health.peak) < GOAL_MIB;
    let flooded = Flooded { tally, health, rss_start, elapsed, ending, met };
    print(options, &flooded);
    met && flooded.tally.wrong() == 0
}

/// What the flood did.
struct Flooded {
    tally: Tally,
    health: Health,
    rss_start: u64,
    elapsed: Duration,
    /// How the proxy ended when stopped.
    ending: String,
    /// Whether the goal was met.
    met: bool,
}

fn print(options: &Options, flooded: &Flooded) {
    let Flooded { tally, health, rss_start, elapsed, ending, met } = flooded;
    let (rss_start, met) = (*rss_start, *met);
    println!(
        "\nflood: {} streams at once from a provider writing `data: ` and no newline at full speed, for {} s \
         (first-token deadline as long); proxy killed past {} MiB\n",
        options.flood_streams, options.flood_s, options.rss_limit_mb
    );
    let fate = match (&health.killed, &health.exited) {
        (Some((rss, after)), _) => format!("KILLED: RSS {:.0} MiB after {:.1} s", mib(*rss), after.as_secs_f64()),
        (None, Some(status)) => format!("EXITED ({status})"),
        (None, None) => format!("ran to the end; {ending}"),
    };
    let statuses: Vec<String> = tally.before_commit.iter().map(|(s, c)| format!("{s}: {c}")).collect();
    let rows = [
        ("requests finished", format!("{} in {:.1} s", tally.requests, elapsed.as_secs_f64())),
        ("answered (by the healthy provider, after failing over)", tally.answered.to_string()),
        ("clean errors before commit", format!("{} [{}]", tally.clean_before_commit(), statuses.join(", "))),
        ("unclean endings", tally.unclean_total().to_string()),
        (
            "hung / leaked / truncated as complete / duplicated",
            format!("{} / {} / {} / {}", tally.hung, tally.leaked, tally.truncated, tally.duplicated),
        ),
        ("proxy RSS at start", format!("{:.1} MiB", mib(rss_start))),
        (
            "**proxy RSS peak** (VmHWM)",
            format!(
                "{:.1} MiB (goal: under {GOAL_MIB:.0} MiB: {})",
                mib(health.peak),
                if met { "met" } else { "NOT met" }
            ),
        ),
        ("proxy", fate),
    ];
    println!("| measure | value |\n|---|---|");
    for (name, value) in rows {
        println!("| {name} | {value} |");
    }
    for (why, count) in &tally.unclean {
        eprintln!("unclean: {count} × {why}");
    }
}
