//! The fault benchmark: every fault class of DESIGN.md §3 against simulated
//! providers, plus the breaker, hedging and flapping scenarios, reporting the
//! client's time to first token, success, leaked bytes and attempts per
//! provider. Run with `cargo bench --bench faults` (optionally `-- 100`
//! requests per scenario).

#![allow(clippy::print_stdout, clippy::expect_used, reason = "a benchmark reports on stdout and stops on setup errors")]

mod support;

use std::time::{Duration, Instant};

use baton::mock::{Fault, MockHandle, MockProvider, Schedule, refusing_addr, wire};
use serde_json::json;
use support::{ms, quantile, request};

const DEADLINE_MS: u64 = 200;
const SECONDARY_MS: u64 = 20;
/// A breaker that never opens, so every request meets the fault.
const NO_BREAKER: &str = "breaker = { failure_threshold = 1000000, window = 1000000 }";

struct Row {
    name: String,
    ttft: Vec<Duration>,
    ok: usize,
    total: usize,
    leaked: Option<usize>,
    primary: usize,
    secondary: usize,
    note: String,
}

impl Row {
    fn print(&self) {
        println!(
            "| {} | {} | {} | {:.0} % | {} | {} / {} | {} |",
            self.name,
            ms(quantile(&self.ttft, 0.5)),
            ms(quantile(&self.ttft, 0.95)),
            100.0 * self.ok as f64 / self.total.max(1) as f64,
            self.leaked.map_or("n/a".to_owned(), |bytes| bytes.to_string()),
            self.primary,
            self.secondary,
            self.note
        );
    }
}

fn secondary(marker: &str) -> MockProvider {
    MockProvider::openai().marker(marker).tokens(20).first_token_after(Duration::from_millis(SECONDARY_MS))
}

fn config(primary_url: &str, primary_extra: &str, secondary: &MockHandle, route_extra: &str) -> String {
    format!(
        "[[providers]]\nname = \"primary\"\nkind = \"anthropic\"\nbase_url = \"{primary_url}\"\n{primary_extra}\n\n\
         [[providers]]\nname = \"secondary\"\nkind = \"openai\"\nbase_url = \"{}\"\n\n\
         [[routes]]\nmodel = \"chat\"\nfirst_token_timeout_ms = {DEADLINE_MS}\nidle_timeout_ms = {DEADLINE_MS}\n{route_extra}\n\
         targets = [{{ provider = \"primary\", model = \"p\" }}, {{ provider = \"secondary\", model = \"s\" }}]\n",
        secondary.base_url()
    )
}

async fn run(name: &str, url: &str, requests: usize, marker: &str, expected: &str, leak_marker: Option<&str>) -> Row {
    let client = reqwest::Client::new();
    let body = json!({ "model": "chat", "stream": true, "messages": [{ "role": "user", "content": "hi" }] });
    let mut row = Row {
        name: name.to_owned(),
        ttft: Vec::new(),
        ok: 0,
        total: requests,
        leaked: None,
        primary: 0,
        secondary: 0,
        note: String::new(),
    };
    for _ in 0..requests {
        let outcome = request(&client, url, &body, marker).await;
        row.ttft.extend(outcome.first_token);
        let text: String = outcome
            .body
            .split("\n\n")
            .filter_map(|event| event.strip_prefix("data: "))
            .filter_map(|data| serde_json::from_str::<serde_json::Value>(data).ok())
            .filter_map(|chunk| chunk["choices"][0]["delta"]["content"].as_str().map(str::to_owned))
            .collect();
        if outcome.status == 200 && text == expected && outcome.body.trim_end().ends_with("data: [DONE]") {
            row.ok += 1;
        }
        if let Some(leak) = leak_marker {
            *row.leaked.get_or_insert(0) += outcome.body.matches(leak).count() * leak.len();
        }
    }
    row
}

/// The floor: the secondary alone, asked directly.
async fn baseline(requests: usize) -> Row {
    let good = secondary("good").spawn().await.expect("mock");
    let url = format!("{}/chat/completions", good.base_url());
    let mut row =
        run("baseline: the secondary alone, direct", &url, requests, "good", &good.provider().expected_text(), None)
            .await;
    row.secondary = good.requests().len();
    row.note = "no baton; the floor for every row below".to_owned();
    row
}

async fn fault_class(fault: Fault, requests: usize) -> Row {
    let good = secondary("good").spawn().await.expect("mock");
    let primary =
        MockProvider::anthropic().marker("leak").retry_after_secs(0).fault(fault).spawn().await.expect("mock");
    let primary_url = if fault == Fault::Refuse {
        format!("http://{}", refusing_addr().await.expect("port"))
    } else {
        primary.base_url()
    };
    let url = support::start_proxy(&config(&primary_url, NO_BREAKER, &good, "")).await;
    let mut row = run(fault.name(), &url, requests, "good", &good.provider().expected_text(), Some("leak")).await;
    row.primary = primary.requests().len();
    row.secondary = good.requests().len();
    if fault == Fault::Refuse {
        row.note = "nothing listens on the primary's port".to_owned();
    }
    row
}

async fn resumed(fault: Fault, requests: usize) -> Row {
    let breaks = MockProvider::anthropic()
        .marker("story")
        .tokens(20)
        .fault(fault)
        .tokens_before_fault(5)
        .spawn()
        .await
        .expect("mock");
    let continues = secondary("story").spawn().await.expect("mock");
    let url =
        support::start_proxy(&config(&breaks.base_url(), NO_BREAKER, &continues, "on_midstream_failure = \"resume\""))
            .await;
    let mut row =
        run(&format!("{} (resume)", fault.name()), &url, requests, "story0", &wire::answer_text("story", 20), None)
            .await;
    row.primary = breaks.requests().len();
    row.secondary = continues.requests().len();
    row.note = "5 tokens, then the fault; success = the whole answer once, one [DONE]".to_owned();
    row
}

async fn breaker() -> Row {
    let good = secondary("good").spawn().await.expect("mock");
    let stalls = MockProvider::anthropic().marker("leak").fault(Fault::StallFirstToken).spawn().await.expect("mock");
    let url = support::start_proxy(&config(
        &stalls.base_url(),
        "breaker = { failure_threshold = 3, cooldown_ms = 30000 }",
        &good,
        "",
    ))
    .await;
    let mut row =
        run("breaker: 30 requests, primary stalls", &url, 30, "good", &good.provider().expected_text(), Some("leak"))
            .await;
    let after_open: Vec<Duration> = row.ttft.iter().skip(3).copied().collect();
    row.note = format!(
        "after the breaker opened: p50 {} ms, p95 {} ms",
        ms(quantile(&after_open, 0.5)),
        ms(quantile(&after_open, 0.95))
    );
    row.primary = stalls.requests().len();
    row.secondary = good.requests().len();
    row
}

async fn hedging(requests: usize) -> Row {
    let good = secondary("good").spawn().await.expect("mock");
    let stalls = MockProvider::anthropic().marker("leak").fault(Fault::StallFirstToken).spawn().await.expect("mock");
    let url = support::start_proxy(&config(&stalls.base_url(), NO_BREAKER, &good, "hedge_after_ms = 50")).await;
    let mut row = run(
        "hedging: primary stalls, hedge after 50 ms",
        &url,
        requests,
        "good",
        &good.provider().expected_text(),
        Some("leak"),
    )
    .await;
    row.primary = stalls.requests().len();
    row.secondary = good.requests().len();
    row
}

async fn flapping() -> Row {
    let outage = Duration::from_secs(2);
    let good = secondary("good").spawn().await.expect("mock");
    let flaps = MockProvider::anthropic()
        .marker("flap")
        .first_token_after(Duration::from_millis(SECONDARY_MS))
        .fault(Fault::Http5xx)
        .schedule(Schedule::During(outage))
        .spawn()
        .await
        .expect("mock");
    let started = Instant::now();
    let url = support::start_proxy(&config(
        &flaps.base_url(),
        "breaker = { failure_threshold = 3, cooldown_ms = 500 }",
        &good,
        "",
    ))
    .await;
    let client = reqwest::Client::new();
    let body = json!({ "model": "chat", "stream": true, "messages": [{ "role": "user", "content": "hi" }] });
    let mut row = Row {
        name: "flapping: primary 503 for 2 s, then healthy".to_owned(),
        ttft: Vec::new(),
        ok: 0,
        total: 0,
        leaked: None,
        primary: 0,
        secondary: 0,
        note: String::new(),
    };
    let mut back_after = None;
    while started.elapsed() < outage * 2 {
        let outcome = request(&client, &url, &body, "\"content\"").await;
        row.total += 1;
        row.ttft.extend(outcome.first_token);
        if outcome.status == 200 && outcome.body.trim_end().ends_with("data: [DONE]") {
            row.ok += 1;
        }
        if outcome.provider == "primary" && back_after.is_none() && started.elapsed() > outage {
            back_after = Some(started.elapsed() - outage);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let during = flaps.requests().iter().filter(|r| r.fault.is_some()).count();
    row.primary = flaps.requests().len();
    row.secondary = good.requests().len();
    row.note = format!(
        "primary attempts during the outage: {during}; traffic back on the primary {} ms after it recovered",
        back_after.map_or("never".to_owned(), ms)
    );
    row
}

fn main() {
    let requests: usize = std::env::args().skip(1).find_map(|arg| arg.parse().ok()).unwrap_or(50);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    runtime.block_on(async {
        println!(
            "fault benchmark: first-token deadline {DEADLINE_MS} ms, secondary's first token {SECONDARY_MS} ms, \
             {requests} sequential streamed requests per fault class (ms)\n"
        );
        println!("| scenario | TTFT p50 | TTFT p95 | success | leaked bytes | attempts primary / secondary | notes |");
        println!("|---|---|---|---|---|---|---|");
        baseline(requests).await.print();
        for fault in Fault::PRE_COMMIT {
            fault_class(fault, requests).await.print();
        }
        for fault in [Fault::MidstreamStall, Fault::MidstreamClose] {
            resumed(fault, requests).await.print();
        }
        breaker().await.print();
        hedging(requests).await.print();
        flapping().await.print();
    });
}
