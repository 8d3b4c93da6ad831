//! The chaos benchmark's flags, with the defaults a plain
//! `cargo bench --bench chaos` runs.

use std::time::Duration;

use baton::mock::Fault;

/// What `--midstream` adds.
pub const MIDSTREAM: [Fault; 4] =
    [Fault::MidstreamStall, Fault::MidstreamClose, Fault::MidstreamMalformed, Fault::MidstreamErrorEvent];

/// What `--misbehave` adds.
pub const MISBEHAVE: [Fault; 7] = [
    Fault::DataFlood,
    Fault::HugeLine,
    Fault::WrongTypes,
    Fault::OverflowUsage,
    Fault::RetryAfterOverflow,
    Fault::StrayResponse,
    Fault::TrailingResponse,
];

pub const USAGE: &str = "cargo bench --bench chaos -- [--requests N] [--concurrency C] [--fault-share F] \
[--midstream] [--misbehave] [--no-breakers] [--retry-after-s S] [--faults a,b,...] [--disconnect-share D] [--unstreamed-share U] \
[--first-token-ms MS] [--idle-ms MS] [--tokens N] [--gap-ms MS] [--request-timeout-s S] [--seed N] \
[--rss-limit-mb MB] [--settle-s S] [--max-hung N] [--flood [--flood-streams N] [--flood-s S]]";

pub struct Options {
    pub requests: usize,
    pub concurrency: usize,
    /// Each provider's share of requests that get a fault.
    pub fault_share: f64,
    /// Mid-stream faults too, and the route resumes.
    pub midstream: bool,
    pub misbehave: bool,
    /// Breakers that never open, instead of the shipped defaults, so every
    /// request meets the faults.
    pub no_breakers: bool,
    /// The `Retry-After` of an `http_429`.
    pub retry_after_s: u64,
    /// The classes drawn, when given instead of the modes' lists.
    pub faults: Option<Vec<Fault>>,
    pub disconnect_share: f64,
    pub unstreamed_share: f64,
    pub first_token_ms: u64,
    pub idle_ms: u64,
    /// Words in a whole answer.
    pub tokens: usize,
    pub gap_ms: u64,
    pub request_timeout: Duration,
    pub seed: u64,
    pub rss_limit_mb: u64,
    /// Idle time after the load before the last descriptor count.
    pub settle_s: u64,
    /// The run stops once this many requests have hung.
    pub max_hung: usize,
    pub flood: bool,
    pub flood_streams: usize,
    pub flood_s: u64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            requests: 100_000,
            concurrency: 50,
            fault_share: 0.3,
            midstream: false,
            misbehave: false,
            no_breakers: false,
            retry_after_s: 1,
            faults: None,
            disconnect_share: 0.05,
            unstreamed_share: 0.1,
            first_token_ms: 300,
            idle_ms: 500,
            tokens: 16,
            gap_ms: 2,
            request_timeout: Duration::from_secs(30),
            seed: 1,
            rss_limit_mb: 2048,
            settle_s: 65,
            max_hung: 100,
            flood: false,
            flood_streams: 10,
            flood_s: 10,
        }
    }
}

impl Options {
    /// Parses the command line (cargo's own `--bench` is ignored).
    pub fn parse(args: impl Iterator<Item = String>) -> Result<Self, String> {
        let mut options = Options::default();
        let mut args = args;
        while let Some(flag) = args.next() {
            let mut value = || args.next().ok_or_else(|| format!("{flag} needs a value"));
            match flag.as_str() {
                "--bench" => {}
                "--midstream" => options.midstream = true,
                "--misbehave" => options.misbehave = true,
                "--flood" => options.flood = true,
                "--no-breakers" => options.no_breakers = true,
                "--requests" => options.requests = number(&flag, &value()?)?,
                "--concurrency" => options.concurrency = number::<usize>(&flag, &value()?)?.max(1),
                "--fault-share" => options.fault_share = share(&flag, &value()?)?,
                "--disconnect-share" => options.disconnect_share = share(&flag, &value()?)?,
                "--unstreamed-share" => options.unstreamed_share = share(&flag, &value()?)?,
                "--faults" => options.faults = Some(faults(&value()?)?),
                "--first-token-ms" => options.first_token_ms = number(&flag, &value()?)?,
                "--idle-ms" => options.idle_ms = number(&flag, &value()?)?,
                "--tokens" => options.tokens = number::<usize>(&flag, &value()?)?.max(1),
                "--gap-ms" => options.gap_ms = number(&flag, &value()?)?,
                "--request-timeout-s" => options.request_timeout = Duration::from_secs(number(&flag, &value()?)?),
                "--retry-after-s" => options.retry_after_s = number(&flag, &value()?)?,
                "--seed" => options.seed = number(&flag, &value()?)?,
                "--rss-limit-mb" => options.rss_limit_mb = number(&flag, &value()?)?,
                "--settle-s" => options.settle_s = number(&flag, &value()?)?,
                "--max-hung" => options.max_hung = number(&flag, &value()?)?,
                "--flood-streams" => options.flood_streams = number::<usize>(&flag, &value()?)?.max(1),
                "--flood-s" => options.flood_s = number::<u64>(&flag, &value()?)?.max(1),
                other => return Err(format!("unknown flag {other:?}")),
            }
        }
        Ok(options)
    }

    /// The classes each provider draws from.
    pub fn fault_classes(&self) -> Vec<Fault> {
        if let Some(faults) = &self.faults {
            return faults.clone();
        }
        // Every pre-commit class that is not the client's fault, and `not_sse`
        // (`bad_request` and `context_length` are answered with the client's error by design).
        let mut faults = Fault::PRE_COMMIT.to_vec();
        faults.push(Fault::NotSse);
        if self.midstream {
            faults.extend(MIDSTREAM);
        }
        if self.misbehave {
            faults.extend(MISBEHAVE);
        }
        faults
    }

    pub fn rss_limit(&self) -> u64 {
        self.rss_limit_mb * 1024 * 1024
    }
}

fn number<T: std::str::FromStr>(flag: &str, value: &str) -> Result<T, String> {
    value.parse().map_err(|_| format!("{flag}: {value:?} is not a number"))
}

fn share(flag: &str, value: &str) -> Result<f64, String> {
    let share: f64 = number(flag, value)?;
    (0.0..=1.0).contains(&share).then_some(share).ok_or_else(|| format!("{flag}: {value} is not between 0 and 1"))
}

fn faults(list: &str) -> Result<Vec<Fault>, String> {
    list.split(',')
        .map(|name| Fault::from_name(name.trim()).ok_or_else(|| format!("--faults: unknown fault class {name:?}")))
        .collect()
}
