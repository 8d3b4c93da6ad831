//! The `baton` command: parse the command line, set up logging, and run
//! the subcommand asked for (each in its module under `cli/`).

mod cli;

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
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
    Mock(cli::mock::MockArgs),
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
        command: cli::keys::KeysCommand,
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

/// Log lines queued for stderr at most: a burst this large waits for the
/// writer instead of growing memory without bound.
const LOG_LINES_QUEUED: usize = 16 * 1024;

/// Where log lines go: a thread of their own writes them to stderr, so a
/// worker that logs never waits on a slow reader of stderr (a pipe, a
/// container's log collector) while it holds other clients' streams.
/// Nothing is dropped: past [`LOG_LINES_QUEUED`] a logger waits. The
/// guard writes out what is queued when it is dropped.
fn log_writer() -> (tracing_appender::non_blocking::NonBlocking, tracing_appender::non_blocking::WorkerGuard) {
    tracing_appender::non_blocking::NonBlockingBuilder::default()
        .buffered_lines_limit(LOG_LINES_QUEUED)
        .lossy(false)
        .thread_name("baton-logs")
        .finish(std::io::BufWriter::new(std::io::stderr()))
}

/// jemalloc, not glibc's allocator: a request's allocations cost about a
/// sixth fewer instructions and a held stream less memory (measured in
/// docs/performance.md); where it does not build, the system's.
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let (writer, flushed) = log_writer();
    let logs = tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")))
        .with_writer(writer);
    match cli.log_format {
        LogFormat::Text if std::io::stderr().is_terminal() => logs.init(),
        LogFormat::Text => logs.event_format(baton::observe::PlainLines).init(),
        LogFormat::Json => logs.json().flatten_event(true).with_current_span(false).with_span_list(false).init(),
    }
    baton::http::install_panic_hook();
    let result = match cli.command {
        Command::Serve { config, listen } => cli::serve::run(&config, listen).await,
        Command::Demo { listen } => cli::demo::run(listen).await,
        Command::Mock(args) => cli::mock::run(args).await,
        Command::Check { config } => cli::check::run(&config).await,
        Command::Drill { config, route, fail } => cli::drill::run(&config, &route, fail.as_deref()).await,
        Command::Keys { command } => cli::keys::run(command).await,
        Command::Init { out, force } => cli::init::run(&out, force),
    };
    // The log lines still queued reach stderr before the error that ends the process.
    drop(flushed);
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("baton: {err}");
            ExitCode::FAILURE
        }
    }
}
