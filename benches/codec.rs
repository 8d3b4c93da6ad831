//! The relay's hot path, per provider kind: decode one upstream SSE event,
//! normalise it and re-encode it as an OpenAI chunk; and the same for a whole
//! 1,000-token answer from raw bytes. Then, per client dialect, the encoding
//! alone of a 1,000-token answer (Chat Completions, Anthropic Messages,
//! Gemini, Responses).
//! Reports time (criterion) and heap bytes and allocations per chunk (a
//! counting global allocator).
//! Run with `cargo bench --bench codec`.

#![allow(clippy::print_stdout, clippy::expect_used, reason = "a benchmark reports on stdout and stops on setup errors")]

use std::alloc::System;
use std::convert::Infallible;
use std::hint::black_box;
use std::sync::Arc;

use baton::dialect::Encoder;
use baton::dialect::anthropic::MessageEncoder;
use baton::dialect::gemini::GenerateEncoder;
use baton::dialect::openai::{Answer, ChunkEncoder};
use baton::dialect::responses::{self, ResponseEncoder};
use baton::event::Event;
use baton::mock::wire;
use baton::providers::{ProviderKind, SseEvent, driver};
use bytes::{Bytes, BytesMut};
use criterion::{Criterion, Throughput};
use futures_util::StreamExt;
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};

/// Counts every allocation, so a run can say what the code under test asked for.
#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const TOKENS: usize = 1000;

/// What is measured: each kind with a model of its default API, and the
/// clouds' other API (Claude on Bedrock and Vertex), as `kind/model`.
fn cases() -> Vec<(String, ProviderKind, &'static str)> {
    let mut cases: Vec<_> = ProviderKind::ALL.iter().map(|kind| (kind.name().to_owned(), *kind, "model-x")).collect();
    for (kind, model) in [(ProviderKind::Bedrock, "anthropic.claude-x"), (ProviderKind::Vertex, "claude-x")] {
        cases.push((format!("{kind}/{model}"), kind, model));
    }
    cases
}

/// One text event as the provider writes it for `model`, framed as the
/// relay receives it (an SSE event, or Bedrock's event-stream message made one).
fn text_event(runtime: &tokio::runtime::Runtime, kind: ProviderKind, model: &str) -> SseEvent {
    let raw = Bytes::from(wire::text(kind, model, " word42"));
    let body = Box::pin(futures_util::stream::iter([Ok::<_, String>(raw)]));
    let mut frames = kind.adapter_for(model).frames(body, 1 << 20);
    runtime.block_on(frames.next()).expect("one event").expect("it frames")
}

/// A whole answer's body as the provider writes it for `model`, one event per network chunk.
fn answer_body(kind: ProviderKind, model: &str) -> Arc<Vec<Bytes>> {
    let mut chunks: Vec<Bytes> = wire::preamble(kind, model).into_iter().map(Bytes::from).collect();
    chunks.extend((0..TOKENS).map(|i| Bytes::from(wire::text(kind, model, &wire::token("word", i)))));
    chunks.extend(wire::finish(kind, model, TOKENS).into_iter().map(Bytes::from));
    Arc::new(chunks)
}

/// Decodes and re-encodes one event; the caller's decoder keeps its state,
/// and its list of decoded events is reused as the relay reuses its own.
fn one_chunk(
    event: &SseEvent,
    decoder: &mut dyn baton::providers::Decoder,
    decoded: &mut Vec<Event>,
    encoder: &mut ChunkEncoder,
) -> usize {
    let mut written = 0;
    decoder.on_event(event, decoded).expect("decodes");
    for normalised in decoded.drain(..) {
        written += encoder.event(normalised).map_or(0, |bytes| bytes.len());
    }
    written
}

/// Relays a whole answer from raw bytes to encoded chunks, through `kind`'s
/// adapter for `model`.
async fn relay(kind: ProviderKind, model: &str, body: &Arc<Vec<Bytes>>) -> usize {
    let body = Arc::clone(body);
    let bytes = futures_util::stream::iter((0..body.len()).map(move |i| Ok::<_, Infallible>(body[i].clone())));
    let mut events = driver::decode_with(kind.adapter_for(model), bytes);
    let mut encoder = ChunkEncoder::new(Answer::new("model-x"), true);
    let mut written = 0;
    while let Some(event) = events.next().await {
        written += encoder.event(event.expect("decodes")).map_or(0, |bytes| bytes.len());
    }
    written + encoder.done().len()
}

/// Encodes a whole 1,000-token answer in a dialect, a text event at a
/// time into a buffer the relay reuses, then its end: what one answer costs
/// each client dialect, the accumulation a dialect's final events need included.
fn encode_answer<E: Encoder>(mut encoder: E, out: &mut BytesMut) -> usize {
    let mut written = 0;
    for i in 0..TOKENS {
        encoder.write_event(Event::Text(wire::token(" word", i)), out);
        written += out.len();
        out.clear();
    }
    encoder.write_event(Event::Finish(baton::event::FinishReason::Stop), out);
    encoder.write_done(out);
    written += out.len();
    out.clear();
    written
}

/// Allocations and bytes allocated per run of `work`.
fn counted<T>(runs: u64, mut work: impl FnMut() -> T) -> (f64, f64) {
    let region = Region::new(GLOBAL);
    for _ in 0..runs {
        black_box(work());
    }
    let stats = region.change();
    let allocations = (stats.allocations + stats.reallocations) as f64 / runs as f64;
    (allocations, (stats.bytes_allocated + stats.bytes_reallocated.max(0) as usize) as f64 / runs as f64)
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
    println!("heap use on the relay's hot path, per text chunk");
    println!(
        "| provider | allocations per chunk | bytes allocated per chunk | allocations per chunk, 1,000-token relay | bytes per chunk, 1,000-token relay |"
    );
    println!("|---|---|---|---|---|");
    for (name, kind, model) in cases() {
        let event = text_event(&runtime, kind, model);
        let mut decoder = kind.adapter_for(model).decoder();
        let mut encoder = ChunkEncoder::new(Answer::new("model-x"), false);
        let mut decoded = Vec::new();
        one_chunk(&event, decoder.as_mut(), &mut decoded, &mut encoder);
        let (chunk_allocations, chunk_bytes) =
            counted(10_000, || one_chunk(&event, decoder.as_mut(), &mut decoded, &mut encoder));
        let body = answer_body(kind, model);
        let (relay_allocations, relay_bytes) = counted(20, || runtime.block_on(relay(kind, model, &body)));
        println!(
            "| {name} | {chunk_allocations:.1} | {chunk_bytes:.0} | {:.1} | {:.0} |",
            relay_allocations / TOKENS as f64,
            relay_bytes / TOKENS as f64
        );
    }
    println!();

    let mut criterion = Criterion::default().configure_from_args();
    let mut chunk = criterion.benchmark_group("chunk");
    chunk.throughput(Throughput::Elements(1));
    for (name, kind, model) in cases() {
        let event = text_event(&runtime, kind, model);
        let mut decoder = kind.adapter_for(model).decoder();
        let mut encoder = ChunkEncoder::new(Answer::new("model-x"), false);
        let mut decoded = Vec::new();
        chunk.bench_function(name, |b| {
            b.iter(|| one_chunk(black_box(&event), decoder.as_mut(), &mut decoded, &mut encoder))
        });
    }
    chunk.finish();
    let mut whole = criterion.benchmark_group("relay_1000_tokens");
    whole.throughput(Throughput::Elements(TOKENS as u64));
    for (name, kind, model) in cases() {
        let body = answer_body(kind, model);
        whole.bench_function(name, |b| b.iter(|| runtime.block_on(relay(kind, model, black_box(&body)))));
    }
    whole.finish();
    let mut encode = criterion.benchmark_group("encode_1000_tokens");
    encode.throughput(Throughput::Elements(TOKENS as u64));
    let mut out = BytesMut::with_capacity(16 * 1024);
    encode.bench_function("chat_completions", |b| {
        b.iter(|| encode_answer(ChunkEncoder::new(Answer::new("model-x"), true), &mut out))
    });
    encode.bench_function("anthropic_messages", |b| {
        b.iter(|| encode_answer(MessageEncoder::new("msg_1", "model-x"), &mut out))
    });
    encode.bench_function("gemini", |b| b.iter(|| encode_answer(GenerateEncoder::new("model-x", "r1"), &mut out)));
    encode.bench_function("responses", |b| {
        let options = || responses::Options::default();
        b.iter(|| encode_answer(ResponseEncoder::new("model-x", options()), &mut out))
    });
    encode.finish();
    criterion.final_summary();
}
