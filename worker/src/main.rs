//! `seatq-worker`: run batch loops until SIGINT or SIGTERM.

use std::time::Duration;

use anyhow::Context as _;
use clap::{CommandFactory as _, Parser, Subcommand};
use seatq_worker::{Config, Strategy, Worker};
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio_util::sync::CancellationToken;

/// Claim seatq booking requests and allocate seats.
#[derive(Debug, Parser)]
#[command(name = "seatq-worker", version)]
struct Args {
    #[command(subcommand)]
    tool: Option<Tool>,
    /// PostgreSQL URL; the database is created and migrated if missing.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true, default_value = seatq_core::db::DEFAULT_DATABASE_URL)]
    database_url: String,
    /// Batch loops in this process, 1 to 1024 (at most --max-active of them
    /// in a transaction at once).
    #[arg(long, env = "SEATQ_CONCURRENCY", default_value_t = 2, value_parser = seatq_worker::loops())]
    concurrency: usize,
    /// Of those loops, how many may be in a transaction at once, 1 to 1024.
    /// About two per database core: more concurrent batches only add
    /// contention.
    #[arg(long, env = "SEATQ_MAX_ACTIVE", default_value_t = seatq_worker::DEFAULT_MAX_ACTIVE, value_parser = seatq_worker::loops())]
    max_active: usize,
    /// Requests claimed per transaction (1 to 1000).
    #[arg(long, env = "SEATQ_BATCH_SIZE", default_value_t = seatq_worker::DEFAULT_BATCH_SIZE,
          value_parser = clap::value_parser!(i64).range(1..=seatq_worker::MAX_BATCH_SIZE))]
    batch_size: i64,
    /// Requests claimed per transaction while a backlog lasts (--batch-size
    /// to 1000): a full claim doubles the next, up to this.
    #[arg(long, env = "SEATQ_BACKLOG_BATCH_SIZE", default_value_t = seatq_worker::DEFAULT_BACKLOG_BATCH_SIZE,
          value_parser = clap::value_parser!(i64).range(1..=seatq_worker::MAX_BATCH_SIZE))]
    backlog_batch_size: i64,
    /// Fallback poll interval in milliseconds (NOTIFY wakes workers sooner).
    #[arg(long, env = "SEATQ_POLL_MS", default_value_t = 500)]
    poll_ms: u64,
    /// Sweeper interval in milliseconds; 0 turns the sweeper off.
    #[arg(long, env = "SEATQ_SWEEP_MS", default_value_t = 1000)]
    sweep_ms: u64,
    /// Contention retries before a request goes back to the queue (at least 1).
    #[arg(long, env = "SEATQ_CONTENTION_RETRIES", default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    contention_retries: u32,
    /// How to take seats: skip-locked (the default, and the one to use), or
    /// blocking, nowait, serializable (for comparison in benchmarks).
    #[arg(long, env = "SEATQ_STRATEGY", value_enum, default_value_t = Strategy::SkipLocked)]
    strategy: Strategy,
    /// Name in `seatq workers` (default host-pid).
    #[arg(long, env = "SEATQ_WORKER_NAME")]
    name: Option<String>,
    /// Record outcomes only with synchronous commit to a standby: refuse a server whose
    /// synchronous_standby_names is empty (see docs/operations.md, "Production PostgreSQL").
    #[arg(long, env = "SEATQ_SYNCHRONOUS_STANDBY")]
    synchronous_standby: bool,
    /// Serve Prometheus /metrics and /healthz on this address, e.g. 127.0.0.1:9187.
    #[arg(long, env = "SEATQ_METRICS_ADDR")]
    metrics_addr: Option<std::net::SocketAddr>,
    /// Close a metrics connection whose request line and headers are not all in within this many
    /// seconds, 1 to 300 (a client that never finishes its request holds nothing for long).
    #[arg(long, env = "SEATQ_METRICS_HEADER_TIMEOUT_SECS",
          default_value_t = seatq_core::http::DEFAULT_HEADER_TIMEOUT.as_secs(),
          value_parser = clap::value_parser!(u64).range(seatq_core::http::HEADER_TIMEOUT_SECS))]
    metrics_header_timeout_secs: u64,
    /// Delete finished requests older than this many hours, 0 to 1000000 (0 keeps them).
    #[arg(long, env = "SEATQ_RETENTION_HOURS", default_value_t = 7 * 24,
          value_parser = clap::value_parser!(u64).range(0..=seatq_core::limits::MAX_RETENTION_HOURS))]
    retention_hours: u64,
    /// On SIGTERM/SIGINT, give the batches in hand this many seconds to finish.
    #[arg(long, env = "SEATQ_SHUTDOWN_GRACE_SECS", default_value_t = 30)]
    shutdown_grace_secs: u64,
    /// Log as JSON lines.
    #[arg(long, env = "SEATQ_LOG_JSON")]
    log_json: bool,
}

/// What `seatq-worker` does instead of running, when asked.
#[derive(Debug, Subcommand)]
enum Tool {
    /// Print a shell completion script, e.g. `seatq-worker completions bash`.
    Completions {
        /// The shell to complete in.
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff), e.g. `seatq-worker man | man -l -`.
    Man,
}

/// Print what `tool` makes to standard output.
fn print(tool: Tool) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut text = Vec::new();
    match tool {
        Tool::Completions { shell } => {
            clap_complete::generate(shell, &mut Args::command(), "seatq-worker", &mut text);
        }
        Tool::Man => clap_mangen::Man::new(Args::command()).render(&mut text)?,
    }
    let mut out = std::io::stdout().lock();
    out.write_all(&text).and_then(|()| out.flush()).context("writing to standard output")
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = Args::parse();
    if let Some(tool) = args.tool.take() {
        return print(tool);
    }
    seatq_core::bin::init_tracing(args.log_json, "info");
    // Signal handlers before anything else, so that a signal arriving at any
    // later moment (while connecting, while waiting for the database) is seen.
    let term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let int = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    let shutdown = CancellationToken::new();
    tokio::spawn(on_signals(term, int, shutdown.clone(), Duration::from_secs(args.shutdown_grace_secs)));
    let config = Config {
        concurrency: args.concurrency,
        max_active: args.max_active,
        batch_size: args.batch_size,
        backlog_batch_size: args.backlog_batch_size,
        poll_interval: Duration::from_millis(args.poll_ms.max(1)),
        sweep_interval: Duration::from_millis(args.sweep_ms),
        contention_retries: args.contention_retries,
        name: args.name,
        strategy: args.strategy,
        synchronous_standby: args.synchronous_standby,
        retention: (args.retention_hours > 0).then(|| Duration::from_secs(args.retention_hours * 3600)),
        ..Config::default()
    };
    // Bind before connecting: a taken port is a mistake to report at once.
    let metrics_listener = match args.metrics_addr {
        Some(addr) => Some(tokio::net::TcpListener::bind(addr).await.with_context(|| format!("binding {addr}"))?),
        None => None,
    };
    // Waits out a database that is down or starting; fails at once on a bad
    // URL, a refused login or a database that cannot be created.
    let connected = tokio::select! {
        _ = shutdown.cancelled() => {
            tracing::info!("stopped before the database answered");
            return Ok(());
        }
        connected = Worker::connect(&args.database_url, config.clone()) => connected,
    };
    let mut worker = connected.context("starting seatq-worker")?;
    if let Some(listener) = metrics_listener {
        tracing::info!(addr = %listener.local_addr()?, "serving /metrics and /healthz");
        worker = worker.serve_metrics(listener, Duration::from_secs(args.metrics_header_timeout_secs));
    }
    tracing::info!(?config, "seatq-worker started");
    worker.run(shutdown).await;
    tracing::info!("seatq-worker stopped");
    Ok(())
}

/// First SIGINT/SIGTERM: stop claiming and finish the batches in hand, for
/// at most `grace`. Second: exit at once (open transactions roll back; their
/// requests stay queued).
async fn on_signals(mut term: Signal, mut int: Signal, shutdown: CancellationToken, grace: Duration) {
    tokio::select! { _ = term.recv() => {}, _ = int.recv() => {} }
    tracing::info!("shutting down: finishing the requests in hand (signal again to exit at once)");
    shutdown.cancel();
    tokio::select! {
        _ = term.recv() => tracing::warn!("second signal: exiting now"),
        _ = int.recv() => tracing::warn!("second signal: exiting now"),
        _ = tokio::time::sleep(grace) => tracing::error!(?grace, "batches still running after the grace period; exiting"),
    }
    std::process::exit(130);
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory as _;

    #[test]
    fn every_argument_explains_itself() {
        seatq_core::bin::assert_documented(super::Args::command());
    }
}
