//! `seatq-bench`: how fast seatq books seats, measured honestly.
//!
//! For each scenario and strategy asked for, it creates a fresh database,
//! seeds the scenario, starts real `seatq-worker` processes, enqueues the
//! requests, waits for every outcome, and checks the invariants. Then it
//! prints one table (or JSON). See docs/benchmarks.md.

mod procs;
mod producers;
mod readers;
mod report;
mod run;
mod scenario;
mod sql;

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use clap::Parser;
use clap::ValueEnum as _;
use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use seatq_worker::Strategy;

use crate::procs::WorkerSettings;
use crate::run::{Load, PageViews, Plan};
use crate::scenario::Scenario;

/// Benchmark seatq: throughput, latency, CPU and memory, per scenario and
/// seat-taking strategy, with the invariant check after every run.
#[derive(Parser, Debug)]
#[command(name = "seatq-bench", version)]
struct Args {
    /// Server to benchmark on. Each scenario is seeded once into database
    /// `<db-prefix>_<scenario>` and each run gets a fresh copy of it; all are
    /// dropped afterwards.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true, default_value = seatq::db::DEFAULT_DATABASE_URL)]
    database_url: String,
    /// Scenarios: spread, hot, checkout, deep, on-sale (comma-separated), or
    /// all.
    #[arg(long, default_value = "all")]
    scenario: String,
    /// Strategies (comma-separated), or all.
    #[arg(long, value_delimiter = ',', default_value = "all", value_parser = strategy_or_all())]
    strategy: Vec<Option<Strategy>>,
    /// Requests per run (default: the scenario's; see docs/benchmarks.md).
    #[arg(long)]
    requests: Option<usize>,
    /// Worker processes per run (default: the scenario's).
    #[arg(long)]
    workers: Option<usize>,
    /// Batch loops per worker process, 1 to 1024 (default: the scenario's).
    #[arg(long, value_parser = seatq_worker::loops())]
    concurrency: Option<usize>,
    /// Of each process's loops, how many may be in a transaction at once, 1 to 1024.
    #[arg(long, default_value_t = seatq_worker::DEFAULT_MAX_ACTIVE, value_parser = seatq_worker::loops())]
    max_active: usize,
    /// Requests per batch transaction, 1 to 1000.
    #[arg(long, default_value_t = seatq_worker::DEFAULT_BATCH_SIZE,
          value_parser = clap::value_parser!(i64).range(1..=seatq_worker::MAX_BATCH_SIZE))]
    batch_size: i64,
    /// Requests per batch transaction while a backlog lasts, 1 to 1000 (see
    /// seatq-worker --backlog-batch-size).
    #[arg(long, default_value_t = seatq_worker::DEFAULT_BACKLOG_BATCH_SIZE,
          value_parser = clap::value_parser!(i64).range(1..=seatq_worker::MAX_BATCH_SIZE))]
    backlog_batch_size: i64,
    /// Also measure latency under a steady load at this fraction of the
    /// burst throughput just measured (skip-locked runs of scenarios without
    /// a backlog; 0 = off).
    #[arg(long, default_value_t = 0.5)]
    steady_at: f64,
    /// Also run each scenario and strategy with storefront readers: this many
    /// page views a second, each the availability and the whole seat map of
    /// the scenario's first event (the hot venue's 20,000 seats) from the
    /// client's shared cache, alternating with runs without; the report says
    /// what they cost the bookings (0 = off).
    #[arg(long, default_value_t = 0.0, value_name = "READS_PER_SEC")]
    readers: f64,
    /// How old a view the readers' cache may serve, in milliseconds (twice
    /// that while a newer one is read; 0: every page view reads, concurrent
    /// ones sharing a read).
    #[arg(long, default_value_t = seatq::view_cache::DEFAULT_MAX_AGE.as_millis() as u64, value_name = "MS")]
    readers_max_age_ms: u64,
    /// Also book through the HTTP API beside direct: this many producers,
    /// each sending one request at a time and waiting for its outcome, once
    /// through the producer library (direct) and once through `seatq
    /// serve`'s API (http), in alternate runs of each scenario and strategy;
    /// the report gives http's throughput against direct's (0 = off).
    #[arg(long, default_value_t = 0, value_name = "PRODUCERS")]
    http: usize,
    /// Enqueue at this many requests per second instead of all at once.
    #[arg(long)]
    rate: Option<f64>,
    /// Multiply request counts and the deep scenario's backlog (e.g. 0.1 for
    /// a quick run).
    #[arg(long, default_value_t = 1.0)]
    scale: f64,
    /// Run each scenario and strategy this many times (1 to 99), a round of every
    /// strategy after another, and report the run with the median throughput
    /// (short runs on a shared machine are noisy, and its speed drifts).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=99))]
    repeat: u32,
    /// Flights to seed for the spread, checkout and deep scenarios, 1 to
    /// 100000 (fewer make a quick run; the classic inventory is 3,000 of 250
    /// seats).
    #[arg(long, default_value_t = scenario::FLIGHTS as u64, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    flights: u64,
    /// How long checkout holds last, in seconds, 1 to 3600 (the run waits
    /// this long, plus two seconds, for abandoned ones to lapse and be swept).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=3600))]
    hold_secs: u32,
    /// Checkout and onsale-line: confirm, cancel or walk away from each hold
    /// (false: the holds are left as made, so onsale-line measures its line
    /// alone).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    follow_ups: bool,
    /// Give up on a run after this many seconds.
    #[arg(long, default_value_t = 900)]
    timeout_secs: u64,
    /// Keep the database of the last run of each scenario and strategy
    /// (`<db-prefix>_<scenario>_<strategy>`, with `_steady` for a steady
    /// stream: every request with its `created_at`, `started_at` and
    /// `finished_at`, every booking) instead of dropping it; the next
    /// benchmark replaces it.
    #[arg(long)]
    keep: bool,
    /// Prefix of the benchmark's database names.
    #[arg(long, default_value = "seatq_bench")]
    db_prefix: String,
    /// The server is a Citus coordinator (docs/operations.md, "Running on
    /// Citus"): every run uses the database of --database-url itself (a
    /// Citus database needs the extension and the nodes registered, which a
    /// copy has not), its seatq schema dropped and seeded afresh before each
    /// run, laid out sharded by event; the report adds each node's share of
    /// the database CPU.
    #[arg(long)]
    citus: bool,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

#[tokio::main]
async fn main() -> ExitCode {
    seatq_core::bin::init_tracing(false, "error");
    match bench(Args::parse()).await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// Run every plan; Ok(false) if an invariant broke.
async fn bench(args: Args) -> anyhow::Result<bool> {
    let scenarios = pick(&args.scenario, &scenario::ALL.map(|s| s.name()), "scenario")?;
    let strategies: Vec<Strategy> = if args.strategy.contains(&None) {
        Strategy::value_variants().to_vec()
    } else {
        args.strategy.iter().flatten().copied().collect()
    };
    if !args.db_prefix.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_') {
        anyhow::bail!("--db-prefix may hold only lower-case letters, digits and underscores");
    }
    let server = run::Server::new(&args.database_url, args.citus)?;
    let log_dir = std::env::temp_dir().join("seatq-bench");
    std::fs::create_dir_all(&log_dir).with_context(|| format!("creating {}", log_dir.display()))?;

    let mut results = Vec::new();
    for name in &scenarios {
        let scenario: Scenario = name.parse().map_err(anyhow::Error::msg)?;
        let d = scenario.defaults();
        let template = format!("{}_{}", args.db_prefix, scenario.name().replace('-', "_"));
        // (On Citus every run seeds afresh, in the coordinator's database.)
        if !server.citus {
            eprintln!("{scenario}: seeding {template}");
            run::prepare(&server, &template, scenario, args.scale, args.flights as usize)
                .await
                .with_context(|| format!("seeding {name}"))?;
        }
        // With readers, each strategy runs without them and with them, in turn.
        let with_readers = (args.readers > 0.0)
            .then(|| PageViews { per_sec: args.readers, max_age: Duration::from_millis(args.readers_max_age_ms) });
        // With --http, each strategy also runs its producers direct and over HTTP.
        let given = args.rate.map_or(Load::Burst, Load::Steady);
        let loads: Vec<Load> = match args.http {
            0 => vec![given],
            n => vec![given, Load::Producers(n, producers::Via::Direct), Load::Producers(n, producers::Via::Http)],
        };
        let plans: Vec<Plan> = strategies
            .iter()
            .flat_map(|strategy| [(strategy, None)].into_iter().chain(with_readers.map(|r| (strategy, Some(r)))))
            .flat_map(|(strategy, readers)| {
                let loads = if readers.is_none() { loads.clone() } else { vec![given] };
                loads.into_iter().map(move |load| (strategy, readers, load))
            })
            .map(|(strategy, readers, load)| Plan {
                scenario,
                strategy: strategy.to_string(),
                requests: ((args.requests.unwrap_or(d.requests) as f64 * args.scale).round() as usize).max(1),
                backlog: scenario.backlog(args.scale).1,
                hold_secs: args.hold_secs,
                follow_ups: args.follow_ups,
                workers: args.workers.unwrap_or(d.workers).max(1),
                settings: WorkerSettings {
                    concurrency: args.concurrency.unwrap_or(d.concurrency),
                    max_active: args.max_active,
                    batch_size: args.batch_size,
                    backlog_batch_size: args.backlog_batch_size,
                },
                load,
                timeout: Duration::from_secs(args.timeout_secs),
                readers,
                keep: args.keep,
            })
            .collect();
        let db = |plan: &Plan| {
            let load = match plan.load {
                Load::Producers(_, via) => format!("_{}", via.name()),
                Load::Steady(_) => "_steady".to_string(),
                Load::Burst => String::new(),
            };
            let readers = if plan.readers.is_some() { "_readers" } else { "" };
            format!("{template}_{}{load}{readers}", plan.strategy.replace('-', "_"))
        };
        let mut kept = Vec::new();
        // Round by round, every strategy once a round: this machine's speed
        // drifts over minutes, and strategies compared should see the same.
        let mut runs: Vec<Vec<run::Measured>> = plans.iter().map(|_| Vec::new()).collect();
        for _ in 0..args.repeat {
            for (plan, runs) in plans.iter().zip(&mut runs) {
                runs.push(run_once(&server, &template, &db(plan), plan, &log_dir, &args).await?);
            }
        }
        for (plan, runs) in plans.iter().zip(runs) {
            kept.push(db(plan));
            let measured = median(runs, plan);
            // The steady stream carries only the scenario's own requests
            // (checkout's follow-ups come on top), so its rate is scaled to
            // make the whole load the given fraction of the burst's. Not for
            // a scenario with a backlog: that would be drained first anyway.
            let streamed = plan.requests as f64 / measured.requests.max(1) as f64;
            let steady = (args.steady_at > 0.0
                && plan.load == Load::Burst
                && plan.readers.is_none()
                && plan.backlog == 0
                && plan.strategy == Strategy::default().as_str())
            .then_some(measured.requests_per_sec * args.steady_at * streamed);
            results.push(measured);
            if let Some(rate) = steady.filter(|r| *r >= 1.0) {
                let plan = Plan { load: Load::Steady(rate.round()), ..plan.clone() };
                kept.push(db(&plan));
                let mut steady_runs = Vec::new();
                for _ in 0..args.repeat {
                    steady_runs.push(run_once(&server, &template, &db(&plan), &plan, &log_dir, &args).await?);
                }
                results.push(median(steady_runs, &plan));
            }
        }
        run::discard(&server, &template).await?;
        if args.keep {
            kept.iter().for_each(|db| eprintln!("kept database {db}"));
        }
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&results)?);
    } else {
        println!("{}", report::table(&results));
    }
    Ok(results.iter().all(|r| r.invariants_ok))
}

/// Run `plan` once (printing its summary line unless `--json`).
async fn run_once(
    server: &run::Server,
    template: &str,
    db: &str,
    plan: &Plan,
    log_dir: &std::path::Path,
    args: &Args,
) -> anyhow::Result<run::Measured> {
    if server.citus {
        run::prepare(server, template, plan.scenario, args.scale, args.flights as usize)
            .await
            .with_context(|| format!("seeding {} afresh", plan.scenario))?;
    }
    let measured = run::run(server, template, db, plan, log_dir)
        .await
        .with_context(|| format!("{} / {} ({})", plan.scenario, plan.strategy, plan.describe()))?;
    if !args.json {
        eprintln!("{}", report::line(&measured));
        if let Some(nodes) = &measured.node_cpu_secs {
            eprintln!("  database CPU by node: {}", report::shares(nodes));
        }
    }
    Ok(measured)
}

/// The median of a plan's runs: by throughput for a burst, by p99 latency
/// for a steady stream (whose throughput is its feed rate). Every run must
/// keep the invariants; the violations of all are kept.
fn median(mut runs: Vec<run::Measured>, plan: &Plan) -> run::Measured {
    let all_ok = runs.iter().all(|r| r.invariants_ok);
    let violations: Vec<String> = runs.iter().flat_map(|r| r.violations.iter().cloned()).collect();
    let rates: Vec<f64> = runs.iter().map(|r| r.requests_per_sec).collect();
    match plan.load {
        Load::Steady(_) => runs.sort_by(|a, b| a.latency.p99_ms.total_cmp(&b.latency.p99_ms)),
        Load::Burst | Load::Producers(..) => runs.sort_by(|a, b| a.requests_per_sec.total_cmp(&b.requests_per_sec)),
    }
    let mut median = runs.swap_remove(runs.len() / 2);
    median.runs_requests_per_sec = rates;
    median.invariants_ok = all_ok;
    median.violations = violations;
    median
}

/// A value of `--strategy`: a strategy, or `None` for all of them.
fn strategy_or_all() -> impl TypedValueParser<Value = Option<Strategy>> {
    let all = PossibleValue::new("all").help("Every strategy, in the order above");
    let names = Strategy::value_variants().iter().filter_map(|s| s.to_possible_value()).chain([all]);
    PossibleValuesParser::new(names).map(|name| name.parse::<Strategy>().ok())
}

/// A comma-separated selection from `all`, or every one of them.
fn pick<'a>(arg: &str, all: &[&'a str], what: &str) -> anyhow::Result<Vec<&'a str>> {
    if arg == "all" {
        return Ok(all.to_vec());
    }
    arg.split(',')
        .map(|s| {
            let s = s.trim();
            all.iter()
                .copied()
                .find(|a| *a == s)
                .with_context(|| format!("unknown {what} {s:?}: expected one of {}, or all", all.join(", ")))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory as _;
    use clap::Parser as _;

    use super::{Args, Strategy};

    #[test]
    fn every_argument_explains_itself() {
        seatq_core::bin::assert_documented(Args::command());
    }

    #[test]
    fn strategies_are_a_list_or_all() {
        let strategies = |args: &[&str]| Args::try_parse_from([&["seatq-bench"], args].concat()).map(|a| a.strategy);
        assert_eq!(strategies(&[]).unwrap(), [None]);
        assert_eq!(
            strategies(&["--strategy", "skip-locked,blocking"]).unwrap(),
            [Some(Strategy::SkipLocked), Some(Strategy::Blocking)]
        );
        let err = strategies(&["--strategy", "skip-locked,fast"]).unwrap_err().to_string();
        assert!(err.contains("skip-locked, blocking, nowait, serializable, all"), "{err}");
    }
}
