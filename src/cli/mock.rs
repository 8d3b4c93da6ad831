//! `baton mock`: one fault-injecting simulated provider, from a shell.

use std::net::SocketAddr;
use std::time::Duration;

use baton::mock::{Fault, MockProvider, Schedule};
use baton::providers::ProviderKind;

use super::AnyError;

/// What every fault class does, for `baton mock --help`.
const FAULT_HELP: &str = "Fault classes (--fault):
  refuse                 close the connection at once, without an answer
  http_5xx               answer 503 with a JSON error body
  http_429               answer 429 with Retry-After
  stall_headers          accept the request and never answer
  stall_first_token      send 200 and SSE headers, then nothing
  role_then_stall        send the pre-token events (role chunk, message_start, ping), then nothing
  close_before_token     send 200 and SSE headers, then close
  malformed              send an event no decoder can read
  error_event            send the provider's error event before any token
  slow_first_token       answer correctly, but late (after 5 s)
  midstream_stall        send a few tokens, then nothing
  midstream_close        send a few tokens, then end the body without the end marker
  midstream_malformed    send a few tokens, then an undecodable event
  midstream_error_event  send a few tokens, then the provider's error event
  not_sse                answer 200 with a JSON body instead of an event stream
  bad_request            answer 400: the request itself is wrong
  context_length         answer 400 in the provider's words for a prompt over its context window
  data_flood             write `data: ` and no newline, at full speed
  huge_line              write one 4 MiB line
  wrong_types            send JSON of the provider's shape with the wrong types
  overflow_usage         report usage counts of 2^64-1
  retry_after_overflow   answer 429 with Retry-After: 18446744073709551615
  stray_response         write a second whole response 20 ms after a complete one
  trailing_response      write a second whole response in the same write as the first
  content_filter         refuse before any token, as the provider's content filter does
  unauthorized           answer 401, as to an expired or revoked token
  token_throttled        answer the token exchange with 429 (vertex only); chat requests are answered

GET /__requests answers every request received so far, as a JSON array of {path, headers, body, fault}.";

/// What `baton mock` takes: the wire format, the answer's shape and pace, and the faults.
#[derive(clap::Args)]
#[command(after_help = FAULT_HELP)]
pub(crate) struct MockArgs {
    /// The wire format: openai, openai-responses, anthropic, gemini, azure, bedrock or vertex.
    #[arg(long, default_value = "openai", value_parser = parse_kind)]
    kind: ProviderKind,
    /// Where it listens.
    #[arg(long, default_value = "127.0.0.1:9001")]
    listen: SocketAddr,
    /// The word its tokens are made of.
    #[arg(long)]
    marker: Option<String>,
    /// Tokens per answer.
    #[arg(long, default_value_t = 20)]
    tokens: usize,
    /// Milliseconds to the first token.
    #[arg(long, default_value_t = 50)]
    first_token_ms: u64,
    /// Milliseconds between tokens.
    #[arg(long, default_value_t = 20)]
    gap_ms: u64,
    /// Fault classes to inject (repeat or comma-separate); one is drawn per faulty request.
    #[arg(long = "fault", value_delimiter = ',', value_parser = parse_fault)]
    faults: Vec<Fault>,
    /// The share of requests that get a fault, 0 to 1.
    #[arg(long, default_value_t = 1.0)]
    fault_rate: f64,
    /// Only the first N requests get a fault.
    #[arg(long, conflicts_with_all = ["fault_rate", "after"])]
    first: Option<u64>,
    /// Only the requests after the first N get a fault: a provider that goes bad.
    #[arg(long, conflicts_with = "fault_rate")]
    after: Option<u64>,
    /// The seed for drawing faults.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Require this API key.
    #[arg(long)]
    api_key: Option<String>,
    /// Reasoning deltas before each answer.
    #[arg(long, default_value_t = 0)]
    reasoning: usize,
    /// Prompt tokens each answer's usage reports as read from a cache.
    #[arg(long, default_value_t = 0)]
    cached_tokens: usize,
}

fn parse_kind(name: &str) -> Result<ProviderKind, String> {
    ProviderKind::from_name(name).ok_or_else(|| {
        let kinds: Vec<&str> = ProviderKind::ALL.iter().map(|kind| kind.name()).collect();
        format!("unknown kind {name:?}; expected one of {}", kinds.join(", "))
    })
}

fn parse_fault(name: &str) -> Result<Fault, String> {
    Fault::from_name(name).ok_or_else(|| {
        let names: Vec<&str> = Fault::ALL.iter().map(|f| f.name()).collect();
        format!("unknown fault {name:?}; expected one of {}", names.join(", "))
    })
}

/// Runs the simulated provider until Ctrl-C.
pub(crate) async fn run(args: MockArgs) -> Result<(), AnyError> {
    if args.faults.contains(&Fault::TokenThrottled) && args.kind.simulated().throttled_side_answer().is_none() {
        return Err(format!("token_throttled throttles a token exchange, and a {} provider has none", args.kind).into());
    }
    let schedule = match (args.first, args.after) {
        (Some(n), _) => Schedule::FirstRequests(n),
        (None, Some(n)) => Schedule::AfterRequests(n),
        (None, None) => Schedule::Random { probability: args.fault_rate.clamp(0.0, 1.0), seed: args.seed },
    };
    let mut provider = MockProvider::new(args.kind)
        .tokens(args.tokens)
        .first_token_after(Duration::from_millis(args.first_token_ms))
        .gap(Duration::from_millis(args.gap_ms))
        .faults(&args.faults)
        .schedule(schedule)
        .reasoning(args.reasoning)
        .reasoning_gap(Duration::from_millis(args.gap_ms))
        .cached_tokens(args.cached_tokens);
    if let Some(marker) = &args.marker {
        provider = provider.marker(marker);
    }
    if let Some(key) = &args.api_key {
        provider = provider.api_key(key);
    }
    let handle = provider.bind(args.listen).await.map_err(|err| format!("cannot listen on {}: {err}", args.listen))?;
    tracing::info!(kind = %args.kind, listen = %handle.addr(), base_url = %handle.base_url(), "simulated provider is serving");
    tokio::signal::ctrl_c().await?;
    Ok(())
}
