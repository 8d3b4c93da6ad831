//! The `baton` command: parse the CLI, load the config, serve.

mod demo;
mod keys_cli;

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use baton::AppState;
use baton::config::{self, Config};
use baton::mock::{Fault, MockProvider, Schedule};
use baton::providers::ProviderKind;
use clap::{Parser, Subcommand};
use tokio::signal::unix::{SignalKind, signal};
use tracing_subscriber::EnvFilter;

/// A streaming-first SSE proxy for LLM APIs that fails over before the first token.
#[derive(Parser)]
#[command(name = "baton", version, about)]
struct Cli {
    /// Log lines as human-readable text or as one JSON object each.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Run the proxy.
    Serve {
        /// The config file.
        #[arg(long, default_value = "baton.toml")]
        config: PathBuf,
        /// Listen here instead of the config's `listen`.
        #[arg(long)]
        listen: Option<SocketAddr>,
    },
    /// Run the proxy with a flaky and a healthy simulated provider: no keys needed.
    Demo {
        /// Where the proxy listens.
        #[arg(long, default_value = "127.0.0.1:8080")]
        listen: SocketAddr,
    },
    /// Run one fault-injecting simulated provider.
    Mock(MockArgs),
    /// Validate a config and print its routes, with every mistake and warning at once.
    Check {
        /// The config file.
        #[arg(long, default_value = "baton.toml")]
        config: PathBuf,
    },
    /// Run one drill now: a tiny request through a route with providers
    /// failed on purpose; exits non-zero unless another provider answers.
    Drill {
        /// The config file.
        #[arg(long, default_value = "baton.toml")]
        config: PathBuf,
        /// The route to drill.
        #[arg(long)]
        route: String,
        /// Providers to fail and how, as the `x-baton-drill` header takes
        /// them (`openai=http_5xx,claude=stall_first_token`); by default the
        /// route's first target fails with `http_5xx`.
        #[arg(long)]
        fail: Option<String>,
    },
    /// Create, list or revoke the client keys kept in the config's store.
    Keys {
        #[command(subcommand)]
        command: keys_cli::KeysCommand,
    },
    /// Write a commented starter config: three provider kinds, one route with fallbacks.
    Init {
        /// Where to write it.
        #[arg(long, default_value = "baton.toml")]
        out: PathBuf,
        /// Replace the file if it exists.
        #[arg(long)]
        force: bool,
    },
}

/// How long stopping waits for the last spans to reach the collector.
const TRACES_FLUSH_LIMIT: Duration = Duration::from_secs(5);
/// How long stopping waits for the last request rows to reach the store.
const RECORDS_DRAIN_LIMIT: Duration = Duration::from_secs(5);
/// How long `baton check` waits for the store to answer.
const CHECK_STORE_LIMIT: Duration = Duration::from_secs(5);

/// The starter config `baton init` writes.
const STARTER: &str = include_str!("starter.toml");

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

GET /__requests answers every request received so far, as a JSON array of {path, headers, body, fault}.";

#[derive(clap::Args)]
#[command(after_help = FAULT_HELP)]
struct MockArgs {
    /// The wire format: openai, anthropic or gemini.
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
    #[arg(long, conflicts_with = "fault_rate")]
    first: Option<u64>,
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
    ProviderKind::from_name(name)
        .ok_or_else(|| format!("unknown kind {name:?}; expected openai, openai-responses, anthropic or gemini"))
}

fn parse_fault(name: &str) -> Result<Fault, String> {
    Fault::from_name(name).ok_or_else(|| {
        let names: Vec<&str> = Fault::ALL.iter().map(|f| f.name()).collect();
        format!("unknown fault {name:?}; expected one of {}", names.join(", "))
    })
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let logs = tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")))
        .with_writer(std::io::stderr);
    match cli.log_format {
        LogFormat::Text => logs.with_ansi(std::io::stderr().is_terminal()).init(),
        LogFormat::Json => logs.json().flatten_event(true).with_current_span(false).with_span_list(false).init(),
    }
    baton::http::install_panic_hook();
    let result = match cli.command {
        Command::Serve { config, listen } => serve(&config, listen).await,
        Command::Demo { listen } => demo::run(listen).await,
        Command::Mock(args) => mock(args).await,
        Command::Check { config } => check(&config).await,
        Command::Drill { config, route, fail } => drill(&config, &route, fail.as_deref()).await,
        Command::Keys { command } => keys_cli::run(command).await,
        Command::Init { out, force } => init(&out, force),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("baton: {err}");
            ExitCode::FAILURE
        }
    }
}

type AnyError = Box<dyn std::error::Error>;

async fn serve(path: &std::path::Path, listen: Option<SocketAddr>) -> Result<(), AnyError> {
    let (mut config, warnings) = config::load_with_warnings(path)?;
    for warning in &warnings {
        tracing::warn!(warning = %warning, "config");
    }
    if let Some(listen) = listen {
        config.listen_on(listen);
    }
    if let Some(why) = config.access.open_relay(config.listen) {
        return Err(why.into());
    }
    let listener = bind(config.listen)?;
    serve_on(listener, config, Some(path.to_owned())).await
}

/// Binds `addr`, saying which address failed.
pub(crate) fn bind(addr: SocketAddr) -> Result<tokio::net::TcpListener, AnyError> {
    Ok(baton::http::server::bind(addr).map_err(|err| format!("cannot listen on {addr}: {err}"))?)
}

/// Serves the proxy on a bound listener, from a thread per core, until
/// SIGTERM or SIGINT, reloading the config file (if there is one) on SIGHUP.
pub(crate) async fn serve_on(
    listener: tokio::net::TcpListener,
    config: Config,
    path: Option<PathBuf>,
) -> Result<(), AnyError> {
    let workers = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    tracing::info!(listen = %listener.local_addr()?, routes = config.routes.len(), workers, "baton is serving");
    let grace = config.shutdown_grace;
    let mut state = AppState::new(config)?.with_traces()?.with_records().await.with_drills();
    if let Some(path) = path {
        state = state.with_config_path(path);
        tokio::spawn(reload_on_hangup(state.clone()));
    }
    let draining = state.clone();
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let listener = listener.into_std()?;
    let mut serving = tokio::task::spawn_blocking(move || baton::serve_threads(listener, state, workers, stopped));
    tokio::select! {
        served = &mut serving => {
            flush(&draining).await;
            return Ok(served??);
        }
        () = stop_requested() => {}
    }
    tracing::info!(
        grace_ms = u64::try_from(grace.as_millis()).unwrap_or(u64::MAX),
        "shutting down: no new connections; streams in flight may finish"
    );
    draining.drain(grace);
    let _ = stop.send(true);
    serving.await??;
    flush(&draining).await;
    tracing::info!("baton stopped");
    Ok(())
}

/// Writes the request rows and exports the spans still waiting before the process ends.
async fn flush(state: &AppState) {
    if let Some(records) = state.records()
        && !records.drain(RECORDS_DRAIN_LIMIT).await
    {
        tracing::warn!("request rows could not all be written before stopping");
    }
    if !state.flush_traces(TRACES_FLUSH_LIMIT).await {
        tracing::warn!("traces could not all be exported before stopping");
    }
}

/// Resolves at the first SIGTERM or SIGINT.
async fn stop_requested() {
    let mut terminate = match signal(SignalKind::terminate()) {
        Ok(terminate) => terminate,
        Err(err) => {
            tracing::warn!(error = %err, "cannot watch SIGTERM; only Ctrl-C stops baton");
            return tokio::signal::ctrl_c().await.unwrap_or_default();
        }
    };
    tokio::select! {
        _ = terminate.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

/// Reloads the config on every SIGHUP; a bad config is logged and ignored.
async fn reload_on_hangup(state: AppState) {
    let Ok(mut hangups) = signal(SignalKind::hangup()) else { return };
    while hangups.recv().await.is_some() {
        if let Err(err) = state.reload() {
            tracing::error!(error = %err, "config reload refused; the running config stays");
        }
    }
}

async fn mock(args: MockArgs) -> Result<(), AnyError> {
    let schedule = match args.first {
        Some(n) => Schedule::FirstRequests(n),
        None => Schedule::Random { probability: args.fault_rate.clamp(0.0, 1.0), seed: args.seed },
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

/// Runs one drill of `route` now and says how it went; an error unless a
/// provider that was not failed answered. The route's `[[drills]]` entry,
/// when it has one, gives what `--fail` does not.
#[expect(clippy::print_stdout, reason = "a drill prints how it went")]
async fn drill(path: &std::path::Path, route: &str, fail: Option<&str>) -> Result<(), AnyError> {
    let config = config::load(path)?;
    let route = config.route(route).ok_or_else(|| format!("no route {route:?} in {}", path.display()))?;
    let configured = config.drills.iter().find(|drill| drill.route == route.model);
    let drill = match (configured, fail) {
        (Some(configured), None) => configured.clone(),
        (configured, fail) => {
            let mut drill = config::Drill::of(route, fail, Duration::ZERO).map_err(|err| format!("--fail: {err}"))?;
            if let Some(configured) = configured {
                (drill.prompt, drill.max_tokens) = (configured.prompt.clone(), configured.max_tokens);
            }
            drill
        }
    };
    let engine = baton::core::Engine::new(&config)?;
    let ran =
        baton::ops::drills::run::run(&engine, route, &drill, baton::ops::drills::run::request(&drill), None).await;
    let (spec, elapsed_ms) = (&drill.fail_spec, ran.elapsed.as_millis());
    match (&ran.answered_by, ran.passed) {
        (Some((provider, model)), true) => {
            println!(
                "drill of {:?} ({spec}): answered by {provider} ({model}) after {} attempts in {elapsed_ms} ms",
                route.model, ran.attempts
            );
            Ok(())
        }
        (Some((provider, _)), false) => {
            Err(format!("drill of {:?} ({spec}): answered by the failed {provider}", route.model).into())
        }
        (None, _) => Err(format!(
            "drill of {:?} ({spec}) failed after {elapsed_ms} ms: {}: {}",
            route.model,
            ran.outcome,
            ran.error.as_deref().unwrap_or("no answer")
        )
        .into()),
    }
}

#[expect(clippy::print_stdout, reason = "check prints its report")]
async fn check(path: &std::path::Path) -> Result<(), AnyError> {
    let (config, warnings) = config::load_with_warnings(path)?;
    for warning in &warnings {
        println!("warning: {warning}");
    }
    println!("{}: ok, listening on {}", path.display(), config.listen);
    if let Some(telemetry) = &config.telemetry {
        println!("traces: to {} as service {:?}", telemetry.traces_endpoint, telemetry.service_name);
    }
    for webhook in &config.alerts {
        let signed = if webhook.secret.is_some() { ", signed" } else { "" };
        println!("alerts: to {} ({} events{signed})", webhook.host, webhook.events.len());
    }
    for drill in &config.drills {
        println!("drill: route {:?} every {} s, failing {:?}", drill.route, drill.every.as_secs(), drill.fail_spec);
    }
    println!("{}", tokio::time::timeout(CHECK_STORE_LIMIT, store_report(&config.store)).await.unwrap_or_else(|_| {
        format!("store: {}: unreachable (no answer within {CHECK_STORE_LIMIT:?}); baton serves anyway and keeps no rows until it answers", config.store.backend_name())
    }));
    for route in &config.routes {
        let aliases: String = route.aliases.iter().map(|alias| format!(", also {alias:?}")).collect();
        let idle = route.idle_timeout.as_millis();
        println!("route {:?} (idle {idle} ms) strategy {}{aliases}", route.model, route.strategy.as_str());
        for (i, target) in route.targets.iter().enumerate() {
            let provider = &target.provider;
            let weight = match route.strategy {
                config::Strategy::Weighted => format!(", weight {}", target.weight),
                _ => String::new(),
            };
            let window = target.context_window.map(|w| format!(", context window {w}")).unwrap_or_default();
            println!(
                "  {}. {} ({}, {}) model {}, first token {} ms, {} retries{weight}{window}",
                i + 1,
                provider.name,
                provider.kind,
                provider.base_url,
                target.model,
                target.first_token_timeout.as_millis(),
                target.retries
            );
        }
    }
    for provider in &config.providers {
        if let Some(egress) = provider.egress.describe() {
            println!("provider {:?}: {egress}", provider.name);
        }
    }
    Ok(())
}

/// One line on the store: where it is, whether it answers, and whether
/// its schema is this build's. Nothing is created or migrated.
async fn store_report(store: &config::StoreConfig) -> String {
    use baton::store::Db;
    let place = match &store.backend {
        config::StoreBackend::None => return "store: none (backend = \"none\"): no request log is kept".to_owned(),
        config::StoreBackend::Sqlite { path } if !path.exists() => {
            return format!("store: sqlite {}: not created yet; baton serve creates it", path.display());
        }
        config::StoreBackend::Sqlite { path } => format!("sqlite {}", path.display()),
        config::StoreBackend::Postgres { .. } => "postgres".to_owned(),
    };
    let schema = match Db::connect_only(&store.backend).await {
        Ok(db) => {
            let schema = db.schema().await;
            db.close().await;
            schema
        }
        Err(err) => Err(err),
    };
    match schema {
        Ok(version) if version.is_current() => {
            format!("store: {place}: reachable, schema current (version {})", version.applied)
        }
        Ok(version) => format!(
            "store: {place}: reachable, schema at version {} of {}: baton serve migrates it",
            version.applied, version.embedded
        ),
        Err(err) => format!("store: {place}: unreachable ({err}); baton serve keeps no rows until it answers"),
    }
}

#[expect(clippy::print_stdout, reason = "init says what it wrote and what is next")]
fn init(out: &std::path::Path, force: bool) -> Result<(), AnyError> {
    if out.exists() && !force {
        return Err(format!("{} exists; pass --force to replace it", out.display()).into());
    }
    std::fs::write(out, STARTER).map_err(|err| format!("cannot write {}: {err}", out.display()))?;
    println!(
        "wrote {}: three providers (OpenAI, Anthropic, Gemini) and route \"chat\" trying them in order.",
        out.display()
    );
    println!(
        "Set OPENAI_API_KEY, ANTHROPIC_API_KEY and GEMINI_API_KEY (or remove the providers you do not use), then:"
    );
    println!("  baton check --config {0}\n  baton serve --config {0}", out.display());
    Ok(())
}
