//! The chaos benchmark: N requests (100,000 by default, 50 at a time)
//! through a release `baton serve` in front of three simulated providers
//! (one of each kind) that fail a share of their requests at random —
//! pre-commit faults, with `--midstream` mid-stream faults under resume, with
//! `--misbehave` misbehaving bytes — while some clients go away mid-stream.
//! Every answer is checked word by word (each request names a nonce its
//! words carry), and the proxy's resident memory and descriptors are read
//! from /proc. `--flood` instead floods newline-less `data:` on a few streams
//! and reports the proxy's peak memory. Run with:
//!
//! ```sh
//! cargo build --release && cargo bench --bench chaos -- --requests 5000
//! ```
//!
//! It exits non-zero when a request hung, leaked, was truncated yet
//! presented as complete, or repeated a word, or when the proxy died.

#![allow(clippy::print_stdout, clippy::expect_used, reason = "a benchmark reports on stdout and stops on setup errors")]

mod client;
mod flood;
mod options;
mod proxy;
mod report;
mod verdict;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use baton::mock::{Continuation, MockHandle, MockProvider, Schedule};
use baton::providers::ProviderKind;
use client::Ask;
use options::Options;
use proxy::{Monitor, Proxy};
use verdict::Tally;

/// The share of requests after which the proxy counts as warmed up.
const WARM_UP_SHARE: f64 = 0.1;
/// How often progress goes to stderr.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);
/// After the load, before descriptors are counted: the client's connections close.
const AFTER_LOAD: Duration = Duration::from_secs(2);

/// The three providers: kind, upstream model, and how each continues a
/// partial answer (so resume meets a clean continuation, a repeat of the
/// last two words, and a restart from the beginning).
const PROVIDERS: [(ProviderKind, &str, Continuation); 3] = [
    (ProviderKind::OpenAi, "gpt-chaos", Continuation::Clean),
    (ProviderKind::Anthropic, "claude-chaos", Continuation::RepeatLast(2)),
    (ProviderKind::Gemini, "gemini-chaos", Continuation::Restart),
];

fn main() {
    let options = match Options::parse(std::env::args().skip(1)) {
        Ok(options) => options,
        Err(why) => {
            eprintln!("{why}\nusage: {}", options::USAGE);
            std::process::exit(2);
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    let passed = runtime.block_on(async {
        let bin = proxy::binary();
        if let Some(warning) = proxy::staleness(&bin) {
            eprintln!("warning: {warning}");
        }
        let dir = scratch_dir();
        let passed =
            if options.flood { flood::run(&options, &bin, &dir).await } else { chaos(&options, &bin, &dir).await };
        eprintln!("config and proxy log: {}", dir.display());
        passed
    });
    runtime.shutdown_timeout(Duration::from_secs(1));
    std::process::exit(i32::from(!passed));
}

/// A fresh temp dir for the config and the proxy's log.
fn scratch_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("baton-chaos-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// Starts the three simulated providers.
async fn providers(options: &Options) -> Vec<MockHandle> {
    let faults = options.fault_classes();
    let mut mocks = Vec::new();
    for (k, (kind, _, continuation)) in PROVIDERS.into_iter().enumerate() {
        let provider = MockProvider::new(kind)
            .nonce_words()
            .slim_records()
            .tokens(options.tokens)
            .gap(Duration::from_millis(options.gap_ms))
            .continuation(continuation)
            .retry_after_secs(options.retry_after_s)
            .faults(&faults)
            .schedule(Schedule::Random { probability: options.fault_share, seed: options.seed * 31 + k as u64 });
        mocks.push(provider.spawn().await.expect("simulated provider"));
    }
    mocks
}

/// The shipped defaults but for the deadlines (and resume with `--midstream`,
/// breakers that never open with `--no-breakers`).
fn config(options: &Options, mocks: &[MockHandle]) -> String {
    let mut text = String::from("listen = \"127.0.0.1:0\"\n\n");
    let mut targets = Vec::new();
    for ((kind, model, _), mock) in PROVIDERS.iter().zip(mocks) {
        text.push_str(&format!(
            "[[providers]]\nname = \"{kind}\"\nkind = \"{kind}\"\nbase_url = \"{}\"\n",
            mock.base_url()
        ));
        if options.no_breakers {
            text.push_str("breaker = { failure_threshold = 1000000, window = 1000000 }\n");
        }
        text.push('\n');
        targets.push(format!("{{ provider = \"{kind}\", model = \"{model}\" }}"));
    }
    text.push_str(&format!(
        "[[routes]]\nmodel = \"chaos\"\nfirst_token_timeout_ms = {}\nidle_timeout_ms = {}\n",
        options.first_token_ms, options.idle_ms
    ));
    if options.midstream {
        text.push_str("on_midstream_failure = \"resume\"\n");
    }
    text.push_str(&format!("targets = [{}]\n", targets.join(", ")));
    text
}

async fn chaos(options: &Options, bin: &Path, dir: &Path) -> bool {
    let mocks = providers(options).await;
    let proxy = match proxy::start(bin, dir, &config(options, &mocks)).await {
        Ok(proxy) => proxy,
        Err(why) => {
            eprintln!("{why}");
            return false;
        }
    };
    let monitor = proxy.monitor(options.rss_limit());
    let mut figures = report::Figures { fds_start: proxy.fds(), rss_start: proxy.rss(), ..Default::default() };
    let started = Instant::now();
    let load = drive(options, &proxy, &monitor).await;
    figures.elapsed = started.elapsed();
    tokio::time::sleep(AFTER_LOAD).await;
    figures.fds_after_load = proxy.fds();
    figures.rss_after_load = proxy.rss();
    if options.settle_s > 0 && !monitor.down() {
        eprintln!("load done; idle for {} s before the last descriptor count", options.settle_s);
        tokio::time::sleep(Duration::from_secs(options.settle_s)).await;
        figures.fds_after_idle = proxy.fds();
        figures.rss_after_idle = proxy.rss();
    }
    figures.health = monitor.health();
    figures.rss_warm = load.warm_rss;
    figures.not_sent = load.not_sent;
    figures.stopped = load.stopped;
    figures.panics = proxy.log_lines("panicked");
    figures.breaker_opens = proxy.log_lines("breaker_open provider");
    drop(monitor);
    figures.ending = proxy.stop().await;
    figures.providers = mocks.iter().map(|mock| (mock.provider_kind(), mock.requests())).collect();
    report::chaos(options, &load.tally, &figures);
    load.tally.wrong() == 0 && figures.health.killed.is_none() && figures.health.exited.is_none()
}

/// What the load left.
struct Load {
    tally: Tally,
    warm_rss: Option<u64>,
    not_sent: usize,
    stopped: Option<String>,
}

/// The state the workers share.
struct Drive {
    next: AtomicUsize,
    done: AtomicUsize,
    tally: Mutex<Tally>,
    warm_rss: Mutex<Option<u64>>,
    stopped: Mutex<Option<String>>,
}

impl Drive {
    fn tally<T>(&self, read: impl FnOnce(&mut Tally) -> T) -> T {
        read(&mut self.tally.lock().unwrap_or_else(PoisonError::into_inner))
    }

    fn stop(&self, why: String) {
        self.stopped.lock().unwrap_or_else(PoisonError::into_inner).get_or_insert(why);
    }

    fn is_stopped(&self) -> bool {
        self.stopped.lock().unwrap_or_else(PoisonError::into_inner).is_some()
    }
}

/// Sends every request, `concurrency` at a time, until all are done or the
/// run stops (the proxy went down, or too many requests hung).
async fn drive(options: &Options, proxy: &Proxy, monitor: &Monitor) -> Load {
    let client =
        reqwest::Client::builder().tcp_nodelay(true).connect_timeout(Duration::from_secs(5)).build().expect("client");
    let state = Drive {
        next: AtomicUsize::new(0),
        done: AtomicUsize::new(0),
        tally: Mutex::new(Tally::default()),
        warm_rss: Mutex::new(None),
        stopped: Mutex::new(None),
    };
    let warm_at = ((options.requests as f64 * WARM_UP_SHARE) as usize).max(1);
    let worker = || async {
        while !state.is_stopped() {
            let index = state.next.fetch_add(1, Ordering::Relaxed);
            if index >= options.requests {
                return;
            }
            let ask = Ask::new(index, options.seed, options.unstreamed_share, options.disconnect_share);
            let received = client::send(&client, &proxy.url, &ask, options.request_timeout).await;
            let verdict = verdict::judge(&ask, &received, options.tokens);
            let hung = state.tally(|tally| {
                tally.add(verdict, &received);
                tally.hung
            });
            if state.done.fetch_add(1, Ordering::Relaxed) + 1 == warm_at {
                *state.warm_rss.lock().unwrap_or_else(PoisonError::into_inner) = proxy.rss();
            }
            if monitor.down() {
                state.stop("the proxy went down".to_owned());
            } else if hung >= options.max_hung {
                state.stop(format!("{hung} requests hung"));
            }
        }
    };
    let progress = progress(options, &state, monitor);
    let workers = futures_util::future::join_all((0..options.concurrency).map(|_| worker()));
    tokio::select! {
        _ = workers => {}
        () = progress => {}
    }
    let done = state.done.load(Ordering::Relaxed);
    let tally = state.tally.into_inner().unwrap_or_else(PoisonError::into_inner);
    let warm_rss = state.warm_rss.into_inner().unwrap_or_else(PoisonError::into_inner);
    let stopped = state.stopped.into_inner().unwrap_or_else(PoisonError::into_inner);
    Load { tally, warm_rss, not_sent: options.requests.saturating_sub(done), stopped }
}

/// Reports progress on stderr every [`PROGRESS_EVERY`]; never ends.
async fn progress(options: &Options, state: &Drive, monitor: &Monitor) {
    let started = Instant::now();
    loop {
        tokio::time::sleep(PROGRESS_EVERY).await;
        let done = state.done.load(Ordering::Relaxed);
        let line = state.tally(|t| {
            format!(
                "answered {}, errors {} before / {} after commit, hung {}, leaked {}, truncated {}, duplicated {}, unclean {}",
                t.answered,
                t.clean_before_commit(),
                t.after_commit,
                t.hung,
                t.leaked,
                t.truncated,
                t.duplicated,
                t.unclean_total()
            )
        });
        let health = monitor.health();
        eprintln!(
            "[{:>5.0} s] {done}/{} at {:.0}/s; {line}; proxy RSS {:.1} MiB",
            started.elapsed().as_secs_f64(),
            options.requests,
            done as f64 / started.elapsed().as_secs_f64(),
            report::mib(health.last)
        );
    }
}
