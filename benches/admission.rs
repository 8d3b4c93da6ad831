//! Request admission: what the gate costs per request with 100 client keys,
//! each with `rpm`, `tpm` and an hourly and daily budget, three
//! `[[budgets]]` (global, route, key) and a per-request cost cap on a route
//! of two priced targets — admit, then settle with usage and cost, as a
//! request does, each request from the next key. The budget is 20 µs.
//! Run with `cargo bench --bench admission`.

#![allow(clippy::expect_used, reason = "a benchmark stops on setup errors")]

use std::hint::black_box;
use std::sync::Arc;

use baton::admission::RequestGate;
use baton::config::{self, Config};
use baton::event::{ChatRequest, Message, Role, Usage};
use baton::observe::{Ended, Metrics, Settle};
use criterion::{Criterion, Throughput};

const KEYS: usize = 100;

fn config() -> Config {
    let mut text = String::from(
        "max_usd_per_request = 5.0\n\
         [[providers]]\nname = \"a\"\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:1/v1\"\n\n\
         [[providers]]\nname = \"b\"\nkind = \"anthropic\"\nbase_url = \"http://127.0.0.1:2\"\n\n\
         [[routes]]\nmodel = \"chat\"\ntargets = [\n\
           { provider = \"a\", model = \"x\", price = { input_per_mtok = 0.30, output_per_mtok = 2.50 } },\n\
           { provider = \"b\", model = \"y\", price = { input_per_mtok = 0.15, output_per_mtok = 0.60 } },\n]\n\n\
         [[routes]]\nmodel = \"cheap\"\ntargets = [{ provider = \"a\", model = \"z\" }]\n\n\
         [[budgets]]\nscope = \"global\"\nwindow = \"1h\"\nusd = 1000000.0\naction = \"downgrade\"\ndowngrade_to = \"cheap\"\n\n\
         [[budgets]]\nscope = \"route:chat\"\nwindow = \"1d\"\nusd = 1000000.0\naction = \"warn\"\n\n\
         [[budgets]]\nscope = \"key:key-7\"\nwindow = \"1m\"\nusd = 1000000.0\n\n",
    );
    for i in 0..KEYS {
        text.push_str(&format!(
            "[[keys]]\nname = \"key-{i}\"\nkey_sha256 = \"{i:064x}\"\nrpm = 100000000\ntpm = 1000000000\n\
             budget = {{ usd_per_hour = 1000000.0, usd_per_day = 10000000.0 }}\n\n"
        ));
    }
    config::parse(&text, "bench.toml", &|_| None).expect("bench config")
}

fn main() {
    let config = config();
    let gate = RequestGate::new(Arc::new(Metrics::new()));
    let route = Arc::clone(config.route("chat").expect("route"));
    let keys = config.access.keys.keys();
    let content = "Summarise the following paragraph in one sentence. ".repeat(20);
    let request = ChatRequest {
        messages: vec![Message::text(Role::User, content)],
        max_tokens: Some(512),
        ..ChatRequest::default()
    };
    let usage = Usage { input_tokens: Some(260), output_tokens: Some(120), ..Usage::default() };
    let mut next = 0usize;
    let mut criterion = Criterion::default().configure_from_args();
    let mut group = criterion.benchmark_group("admission");
    group.throughput(Throughput::Elements(1));
    group.bench_function("admit_and_settle_100_keys", |b| {
        b.iter(|| {
            let key = &keys[next % KEYS];
            next = next.wrapping_add(1);
            let admitted = gate.admit(&config, Some(key), &route, black_box(&request)).expect("admitted");
            let ended = Ended {
                key: Some(&key.name),
                route: &admitted.route.model,
                provider: Some("a"),
                usage,
                committed: true,
                cost_usd: Some(0.0004),
            };
            Box::new(admitted.ticket).settle(&ended);
        })
    });
    group.finish();
    criterion.final_summary();
}
