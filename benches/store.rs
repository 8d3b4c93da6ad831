//! How many request rows a second the store writes to SQLite, sustained:
//! rows shaped like a real request's go through the store's own queue and
//! writer into a file in a temporary directory, the producer keeping the
//! queue from overflowing (a dropped row would fail the run), and the rate
//! is rows over the time until the last is written. Run with
//! `cargo bench --bench store` (optionally `-- 500000` rows).

#![allow(
    clippy::print_stdout,
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "a benchmark reports on stdout and stops on setup errors"
)]

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use baton::event::{Tried, Usage};
use baton::store::{CountedSignals, QUEUE_ROWS, Records, RequestRow, now_ms};

/// The target the store must keep up with.
const TARGET_ROWS_PER_SEC: f64 = 10_000.0;

/// A row as a streamed, priced request that failed over once leaves it.
fn row(i: u64) -> RequestRow {
    let mut row = RequestRow::new(&format!("req_{i:016x}"), "openai_chat", now_ms());
    row.key = Some(if i.is_multiple_of(3) { "batch" } else { "web-app" }.to_owned());
    row.route = Some("chat".to_owned());
    row.model_asked = Some("chat".to_owned());
    row.provider = Some("openai".to_owned());
    row.model = Some("gpt-4o-mini".to_owned());
    row.attempts = if i.is_multiple_of(10) { 2 } else { 1 };
    if i.is_multiple_of(10) {
        let tried =
            Tried { provider: "gemini".into(), model: "gemini-2.5-flash".into(), class: "http_5xx", sent: true };
        row.tried = vec![tried];
    }
    row.ttft_ms = Some(180 + i % 50);
    row.duration_ms = 1200 + i % 400;
    let usage = Usage {
        input_tokens: Some(350),
        output_tokens: Some(120),
        cached_input_tokens: Some(0),
        reasoning_tokens: None,
    };
    row.usage = usage;
    row.cost_usd = Some(0.000_124_5);
    row.outcome = "ok".to_owned();
    row.status = 200;
    row.trace_id = Some(format!("{i:032x}"));
    row
}

fn main() {
    let rows: u64 = std::env::args().skip(1).find_map(|arg| arg.parse().ok()).unwrap_or(200_000);
    let dir = std::env::temp_dir().join(format!("baton-bench-store-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let text = format!(
        "[store]\npath = \"{}\"\n\n[[providers]]\nname = \"p\"\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:1/v1\"\n\n[[routes]]\nmodel = \"chat\"\ntargets = [{{ provider = \"p\", model = \"m\" }}]\n",
        dir.join("baton.db").display()
    );
    let config = baton::config::parse(&text, "bench.toml", &|_| None).expect("config");
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    let (elapsed, counts) = runtime.block_on(async {
        let counts = Arc::new(CountedSignals::default());
        let (records, started) = Records::start(&config, Arc::clone(&counts) as _).expect("store");
        assert!(started.first_open.await.expect("told"), "the database opens");
        let began = Instant::now();
        let window = u64::try_from(QUEUE_ROWS / 2).unwrap();
        for i in 0..rows {
            // Never more than half the queue ahead of the writer: nothing is dropped.
            while i.saturating_sub(counts.written.load(Ordering::Relaxed)) >= window {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            records.record(row(i));
        }
        assert!(records.drain(Duration::from_secs(60)).await, "the last rows are written");
        (began.elapsed(), counts)
    });
    let (written, dropped) = (counts.written.load(Ordering::Relaxed), counts.dropped.load(Ordering::Relaxed));
    let rate = written as f64 / elapsed.as_secs_f64();
    let size = std::fs::metadata(dir.join("baton.db")).map(|m| m.len()).unwrap_or(0)
        + std::fs::metadata(dir.join("baton.db-wal")).map(|m| m.len()).unwrap_or(0);
    println!(
        "store (sqlite, WAL, synchronous=NORMAL): {written} rows in {:.2} s = {rate:.0} rows/s sustained ({dropped} dropped, {:.0} bytes a row on disk)",
        elapsed.as_secs_f64(),
        size as f64 / written.max(1) as f64
    );
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!((written, dropped), (rows, 0), "every row written, none dropped");
    assert!(rate >= TARGET_ROWS_PER_SEC, "{rate:.0} rows/s is under the {TARGET_ROWS_PER_SEC} target");
}
