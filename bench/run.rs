//! One measured run: a fresh database, a scenario's inventory and backlog,
//! worker processes, a burst (or a steady stream) of requests, and what came
//! of them.

use std::collections::BTreeMap;
use std::io::{IsTerminal as _, Write as _};
use std::path::Path;
use std::time::{Duration, Instant};

use crate::sql;
use anyhow::{Context as _, bail};
use chrono::{DateTime, Utc};
use seatq::{BookingState, Client};
use serde::Serialize;
use serde_json::Value;
use sqlx::Connection as _;
use sqlx::PgPool;
use sqlx::postgres::{PgConnectOptions, PgConnection};

use crate::procs::{self, Launch, WorkerSettings, Workers};
use crate::producers::{self, Via};
use crate::readers::{Readers, Reads};
use crate::scenario::{self, Scenario};

/// Rows per enqueue statement.
const CHUNK: usize = 10_000;
/// Seeds of the request generators: every strategy sees the same requests.
const BACKLOG_SEED: u64 = 7;
const BURST_SEED: u64 = 11;

/// What to run.
#[derive(Debug, Clone)]
pub struct Plan {
    pub scenario: Scenario,
    pub strategy: String,
    pub requests: usize,
    /// Requests already queued when the measurement starts.
    pub backlog: usize,
    /// How long checkout holds last; abandoned ones lapse within the run.
    pub hold_secs: u32,
    /// Checkout customers follow their holds up (confirm, cancel, walk away).
    pub follow_ups: bool,
    pub workers: usize,
    pub settings: WorkerSettings,
    /// How the requests after the backlog arrive.
    pub load: Load,
    pub timeout: Duration,
    /// Storefront page views of the first event during the run (`None`: no
    /// readers).
    pub readers: Option<PageViews>,
    /// Leave the run's database for inspection instead of dropping it.
    pub keep: bool,
}

/// How a run's requests (after the backlog) arrive.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Load {
    /// All at once, in one transaction.
    Burst,
    /// A steady stream of this many requests a second.
    Steady(f64),
    /// This many producers, each sending one request at a time and waiting
    /// for its outcome, and how they send.
    Producers(usize, Via),
}

/// Storefront readers beside a run: page views a second, and how old a view
/// their cache may serve.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PageViews {
    pub per_sec: f64,
    pub max_age: Duration,
}

impl Plan {
    /// "burst", or "N/s" for a steady stream; with " + N reads/s" when
    /// storefront readers run beside.
    pub fn describe(&self) -> String {
        let load = match self.load {
            Load::Producers(n, via) => format!("{n} producers {}", via.name()),
            Load::Steady(rate) => format!("{rate:.0}/s"),
            Load::Burst => "burst".to_string(),
        };
        let load = match self.scenario {
            Scenario::Checkout | Scenario::OnSaleLine if !self.follow_ups => format!("{load}, no follow-ups"),
            _ => load,
        };
        match self.readers {
            Some(r) => format!("{load} + {:.0} reads/s", r.per_sec),
            None => load,
        }
    }
}

/// Enqueue-to-outcome latencies of a run, in milliseconds.
#[derive(Debug, Clone, Serialize)]
pub struct LatencyMs {
    /// Percentiles and the longest.
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// Medians of the latency's two parts: in the queue until the
    /// transaction that finished the request began, and in that transaction
    /// (`None` when no request finished in a batch it started).
    #[serde(flatten)]
    pub parts: Option<LatencyParts>,
}

/// The medians of a latency's two parts (see [`LatencyMs`]).
#[derive(Debug, Clone, Serialize)]
pub struct LatencyParts {
    pub queue_p50_ms: f64,
    pub batch_p50_ms: f64,
}

/// What a run measured.
#[derive(Debug, Clone, Serialize)]
pub struct Measured {
    pub scenario: String,
    pub strategy: String,
    /// "burst", or "N/s" for a steady stream.
    pub load: String,
    pub workers: usize,
    /// The workers' settings (their fields sit beside these in JSON).
    #[serde(flatten)]
    pub settings: WorkerSettings,
    pub requests: i64,
    pub secs: f64,
    pub requests_per_sec: f64,
    /// Enqueue-to-outcome latency (its fields sit beside these in JSON).
    #[serde(flatten)]
    pub latency: LatencyMs,
    pub seats_sold: i64,
    pub contention_retries: i64,
    /// CPU seconds of the worker processes, and of the server processes
    /// serving them (when the server runs on this machine).
    pub worker_cpu_secs: Option<f64>,
    pub db_cpu_secs: Option<f64>,
    /// On Citus, the CPU seconds each node's server used during the run
    /// (coordinator first), from /proc.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_cpu_secs: Option<Vec<(String, f64)>>,
    /// Largest peak resident memory of one worker process.
    pub worker_peak_mib: Option<f64>,
    pub outcomes: BTreeMap<String, i64>,
    /// Checkout: bookings the sweeper expired (abandoned holds).
    pub holds_expired: Option<i64>,
    /// The line scenario: its fairness and its hand-overs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<LineMeasured>,
    /// What the storefront readers measured, when there were any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reads: Option<Reads>,
    pub invariants_ok: bool,
    pub violations: Vec<String>,
    /// With `--repeat`, the throughput of every run (this is the median one).
    pub runs_requests_per_sec: Vec<f64>,
}

/// Seed `scenario` into database `template` (dropped first): inventory, and
/// the history of finished requests. Each run copies it.
pub async fn prepare(
    server: &Server,
    template: &str,
    scenario: Scenario,
    scale: f64,
    flights: usize,
) -> anyhow::Result<()> {
    recreate_database(server, template).await?;
    let client = Client::connect(&server.url(template)?).await.with_context(|| format!("connecting to {template}"))?;
    let pool = client.pool().clone();
    let (names, seats) = scenario.inventory(flights);
    client.add_events(&names, seats, 6).await.context("seeding")?;
    let (history, _) = scenario.backlog(scale);
    if history > 0 {
        let mut tx = pool.begin().await?;
        // Only a superuser may skip triggers; without, the history is just slower to write.
        let _ = sqlx::query(sql::TRIGGERS_OFF).execute(&mut *tx).await;
        sqlx::query(sql::INSERT_HISTORY).bind(history).execute(&mut *tx).await.context("writing history")?;
        tx.commit().await?;
    }
    // A production table is vacuumed and analysed by autovacuum; so is this one.
    for table in ["VACUUM ANALYZE seatq.requests", "VACUUM ANALYZE seatq.seats", "VACUUM ANALYZE seatq.events"] {
        sqlx::raw_sql(table).execute(&pool).await?;
    }
    pool.close().await;
    Ok(())
}

/// Drop a database made by [`prepare`].
pub async fn discard(server: &Server, template: &str) -> anyhow::Result<()> {
    drop_database(server, template).await
}

/// Run `plan` in database `db_name`, a fresh copy of `template`.
pub async fn run(
    server: &Server,
    template: &str,
    db_name: &str,
    plan: &Plan,
    log_dir: &Path,
) -> anyhow::Result<Measured> {
    let worker_bin = procs::worker_binary()?;
    if !server.citus {
        let mut admin = server.admin().await?;
        seatq::db::drop_database(&mut admin, db_name).await?;
        seatq::db::create_database(&mut admin, db_name, Some(template))
            .await
            .with_context(|| format!("copying {template}"))?;
        admin.close().await?;
    }
    let url = server.url(db_name)?;
    let client = Client::connect(&url).await.with_context(|| format!("connecting to {db_name}"))?;
    let pool = client.pool().clone();
    let events: Vec<i64> = sqlx::query_scalar(sql::EVENTS).fetch_all(&pool).await?;
    let first: i64 = sqlx::query_scalar(sql::LAST_FINISHED_ID).fetch_one(&pool).await?;

    // Workers, registered and idle.
    let log = log_dir.join(format!("{db_name}.worker"));
    let launch = Launch {
        binary: &worker_bin,
        database_url: &url,
        processes: plan.workers,
        settings: &plan.settings,
        strategy: &plan.strategy,
        log: &log,
    };
    let mut workers = Workers::start(&launch)?;
    wait_for_workers(&pool, &mut workers, plan.workers, &log).await?;
    let nodes = if server.citus { postmasters(server, &pool).await? } else { Vec::new() };
    let nodes_before: Vec<Option<f64>> = nodes.iter().map(|(_, pm)| procs::server_cpu_secs(*pm)).collect();
    let cpu_before = cpu(&pool, &workers).await?;

    // The load: the backlog (already queued when the measurement starts)
    // and the burst. Both are enqueued once the workers are up, so that
    // nothing is processed before the clock starts.
    let mut rng = fastrand::Rng::with_seed(BACKLOG_SEED);
    let mut backlog: Vec<(&str, Value)> =
        (0..plan.backlog).map(|n| plan.scenario.request(&mut rng, &events, n, plan.hold_secs)).collect();
    let mut rng = fastrand::Rng::with_seed(BURST_SEED);
    let burst: Vec<(&str, Value)> = (0..plan.requests)
        .map(|n| plan.scenario.request(&mut rng, &events, plan.backlog + n, plan.hold_secs))
        .collect();
    let expected = (backlog.len() + burst.len()) as i64;
    let mut checkout = match plan.scenario {
        Scenario::Checkout | Scenario::OnSaleLine if plan.follow_ups => Some(Checkout::listen(&pool).await?),
        _ => None,
    };
    let readers = match (plan.readers, events.first()) {
        (Some(views), Some(&event)) => {
            Some(Readers::start(&url, event, views.per_sec, views.max_age).await.context("starting the readers")?)
        }
        _ => None,
    };
    let started = Instant::now();
    let t0: DateTime<Utc>;
    let feeder = match plan.load {
        Load::Producers(n, via) => {
            enqueue(&pool, &backlog, 0).await.context("enqueuing the backlog")?;
            t0 = sqlx::query_scalar(sql::NOW).fetch_one(&pool).await?;
            let client = producers::connect(&url).await?;
            Some(tokio::spawn(producers::produce(client, via, burst, n)))
        }
        Load::Burst => {
            backlog.extend(burst);
            t0 = enqueue(&pool, &backlog, 0).await.context("enqueuing the burst")?;
            None
        }
        Load::Steady(rate) => {
            enqueue(&pool, &backlog, 0).await.context("enqueuing the backlog")?;
            t0 = sqlx::query_scalar(sql::NOW).fetch_one(&pool).await?;
            Some(tokio::spawn(stream(pool.clone(), burst, rate)))
        }
    };
    let mut bar = Progress::new(plan);
    for tick in 1u64.. {
        tokio::time::sleep(Duration::from_millis(50)).await;
        if let Some(c) = &mut checkout {
            c.follow_up(&pool, &mut rng).await?;
        }
        // Looking at the queue costs the server CPU the workers would
        // otherwise have (counting a deep queue is not free): look seldom,
        // and count only for the bar.
        if tick % 5 != 0 {
            continue;
        }
        let look = if bar.on { sql::QUEUED } else { sql::ANY_QUEUED };
        let queued: i64 = sqlx::query_scalar(look).bind(first).fetch_one(&pool).await?;
        let fed = feeder.as_ref().is_none_or(|f| f.is_finished());
        let total = expected + checkout.as_ref().map_or(0, |c| c.enqueued);
        bar.show(total - queued, total);
        if fed && queued == 0 {
            // Holds that finished since the last look still need their follow-ups.
            let heard = match &mut checkout {
                Some(c) => c.follow_up(&pool, &mut rng).await?,
                None => 0,
            };
            if heard == 0 {
                break;
            }
        }
        if workers.any_exited() {
            bail!("a worker exited during the run; see {}", log.display());
        }
        if started.elapsed() > plan.timeout {
            bail!("{queued} requests still queued after {:?}; see {}", plan.timeout, log.display());
        }
    }
    bar.done();
    let reads = match readers {
        Some(r) => Some(r.stop().await.context("reading availability")?),
        None => None,
    };
    if let Some(f) = feeder {
        f.await.context("enqueuing")??;
    }
    let cpu_after = cpu(&pool, &workers).await?;
    let node_cpu_secs = (!nodes.is_empty()).then(|| {
        nodes
            .iter()
            .zip(&nodes_before)
            .map(|((name, pm), before)| {
                let used = procs::server_cpu_secs(*pm).zip(*before).map_or(0.0, |(after, before)| after - before);
                (name.clone(), used)
            })
            .collect()
    });
    let peak = workers.pids().into_iter().filter_map(procs::peak_rss_mib).reduce(f64::max);

    // Abandoned holds lapse; the workers' sweeper frees them.
    let holds_expired = match &checkout {
        Some(_) => {
            tokio::time::sleep(Duration::from_secs(u64::from(plan.hold_secs) + 2)).await;
            let states: Vec<(BookingState, i64)> = sqlx::query_as(sql::BOOKINGS_BY_STATE).fetch_all(&pool).await?;
            Some(states.iter().find(|(s, _)| *s == BookingState::Expired).map_or(0, |(_, n)| *n))
        }
        None => None,
    };
    workers.stop();

    let line = match plan.scenario {
        Scenario::OnSaleLine => Some(line_measured(&pool, first).await?),
        _ => None,
    };
    let summary = summary(&pool, first, t0).await?;
    // The line scenario's rate is its line's drain: every request answered
    // (held, or on the waiting list), not the hand-overs that follow.
    let (requests, last) = match plan.scenario {
        Scenario::OnSaleLine => sqlx::query_as(sql::LINE_DRAIN).bind(first).fetch_one(&pool).await?,
        _ => (summary.requests, summary.last_finished),
    };
    let secs = (last.unwrap_or(t0) - t0).num_microseconds().unwrap_or(0) as f64 / 1e6;
    let outcomes: Vec<(String, String, i64)> = sqlx::query_as(sql::OUTCOMES).bind(first).fetch_all(&pool).await?;
    let (taken, granted): (i64, i64) = sqlx::query_as(sql::SEATS_TAKEN_AND_GRANTED).fetch_one(&pool).await?;
    let mut violations: Vec<String> =
        client.check_invariants(true).await?.into_iter().map(|v| format!("{}: {}", v.violation, v.detail)).collect();
    if taken != granted {
        violations.push(format!("seats taken {taken} but granted {granted}"));
    }
    pool.close().await;
    if !plan.keep {
        drop_database(server, db_name).await?;
    }

    Ok(Measured {
        scenario: plan.scenario.to_string(),
        strategy: plan.strategy.clone(),
        load: plan.describe(),
        workers: plan.workers,
        settings: plan.settings.clone(),
        requests: summary.requests,
        secs,
        requests_per_sec: if secs > 0.0 { requests as f64 / secs } else { 0.0 },
        latency: LatencyMs {
            p50_ms: summary.p50.unwrap_or(0.0),
            p95_ms: summary.p95.unwrap_or(0.0),
            p99_ms: summary.p99.unwrap_or(0.0),
            max_ms: summary.max.unwrap_or(0.0),
            parts: summary
                .queue_p50
                .zip(summary.batch_p50)
                .map(|(queue_p50_ms, batch_p50_ms)| LatencyParts { queue_p50_ms, batch_p50_ms }),
        },
        seats_sold: taken,
        contention_retries: summary.contention_retries,
        worker_cpu_secs: delta(&cpu_before.workers, &cpu_after.workers),
        db_cpu_secs: delta(&cpu_before.backends, &cpu_after.backends),
        node_cpu_secs,
        worker_peak_mib: peak,
        outcomes: outcomes.into_iter().map(|(kind, outcome, n)| (format!("{kind} {outcome}"), n)).collect(),
        holds_expired,
        line,
        reads,
        invariants_ok: violations.is_empty(),
        violations,
        runs_requests_per_sec: Vec::new(),
    })
}

/// Insert requests in chunks, in one transaction: they all become visible
/// together when it commits. Returns the server's clock just before COMMIT.
async fn enqueue(pool: &PgPool, requests: &[(&str, Value)], priority: i16) -> Result<DateTime<Utc>, sqlx::Error> {
    let mut tx = pool.begin().await?;
    for chunk in requests.chunks(CHUNK) {
        insert(chunk, priority).execute(&mut *tx).await?;
    }
    // Just before the commit: the workers may start the moment it lands.
    let at = sqlx::query_scalar(sql::NOW).fetch_one(&mut *tx).await?;
    tx.commit().await?;
    Ok(at)
}

/// One statement inserting `requests` (at most [`CHUNK`]).
fn insert<'q>(
    requests: &'q [(&str, Value)],
    priority: i16,
) -> sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments> {
    let kinds: Vec<&str> = requests.iter().map(|(k, _)| *k).collect();
    let payloads: Vec<&Value> = requests.iter().map(|(_, p)| p).collect();
    sqlx::query(sql::ENQUEUE).bind(kinds).bind(payloads).bind(vec![priority; requests.len()])
}

/// Enqueue `requests` at `rate` per second, every 2 ms those due, with one
/// INSERT (its own transaction), as a producer would: a request's
/// `created_at` is then the moment its INSERT began, a fraction of a
/// millisecond before workers can see it.
async fn stream(pool: PgPool, requests: Vec<(&'static str, Value)>, rate: f64) -> anyhow::Result<()> {
    let tick = Duration::from_millis(2);
    let started = Instant::now();
    let mut sent = 0;
    let mut interval = tokio::time::interval(tick);
    while sent < requests.len() {
        interval.tick().await;
        let due = ((started.elapsed().as_secs_f64() * rate) as usize).min(requests.len()).min(sent + CHUNK);
        if due > sent {
            insert(&requests[sent..due], 0).execute(&pool).await?;
            sent = due;
        }
    }
    Ok(())
}

/// The checkout customers: once a hold succeeds (they hear of it on the
/// `seatq_done` channel, as a shop's backend would), they confirm, cancel or
/// walk away. Their follow-ups jump the queue (priority 1): a customer at the
/// till should not wait behind new holds.
struct Checkout {
    finished: tokio::sync::mpsc::UnboundedReceiver<i64>,
    enqueued: i64,
}

impl Checkout {
    async fn listen(pool: &PgPool) -> anyhow::Result<Checkout> {
        let mut listener = seatq::db::listen(pool, seatq_core::sql::notify::DONE_CHANNEL).await?;
        let (tx, finished) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Ok(n) = listener.recv().await {
                if let Ok(id) = n.payload().parse()
                    && tx.send(id).is_err()
                {
                    return;
                }
            }
        });
        Ok(Checkout { finished, enqueued: 0 })
    }

    /// Follow up the holds that finished since last time; returns how many
    /// requests were heard of.
    async fn follow_up(&mut self, pool: &PgPool, rng: &mut fastrand::Rng) -> anyhow::Result<usize> {
        let mut ids = Vec::new();
        while let Ok(id) = self.finished.try_recv() {
            ids.push(id);
        }
        if ids.is_empty() {
            return Ok(0);
        }
        let holds: Vec<(i64, String)> = sqlx::query_as(sql::SUCCEEDED_HOLDS).bind(&ids).fetch_all(pool).await?;
        let next: Vec<(&str, Value)> = holds
            .into_iter()
            .filter_map(|(booking, customer)| {
                let kind = scenario::follow_up(rng)?;
                Some((kind, serde_json::json!({"booking": booking, "customer": customer})))
            })
            .collect();
        if !next.is_empty() {
            enqueue(pool, &next, 1).await?;
            self.enqueued += next.len() as i64;
        }
        Ok(ids.len())
    }
}

/// What the line scenario measured beyond the rest.
#[derive(Debug, Clone, Serialize)]
pub struct LineMeasured {
    /// The most positions any request was answered ahead of an earlier one
    /// (how many requests that arrived before it were answered after it).
    pub largest_overtaking: u64,
    /// Seats handed over to waiting parties after they joined the list, and
    /// how long after each seat came free the party held it (a cancel hands
    /// over in its own transaction: 0; a lapsed hold, when the sweeper
    /// frees it).
    pub handed_over_seats: i64,
    pub handover_p50_ms: Option<f64>,
    pub handover_p99_ms: Option<f64>,
    /// Parties still waiting at the end.
    pub still_waiting: i64,
}

#[derive(sqlx::FromRow)]
struct Handovers {
    seats: i64,
    p50: Option<f64>,
    p99: Option<f64>,
}

async fn line_measured(pool: &PgPool, first: i64) -> Result<LineMeasured, sqlx::Error> {
    let answered: Vec<DateTime<Utc>> = sqlx::query_scalar(sql::LINE_ANSWERS).bind(first).fetch_all(pool).await?;
    let handed: Handovers = sqlx::query_as(sql::HANDOVERS).bind(first).fetch_one(pool).await?;
    let still_waiting = sqlx::query_scalar(sql::STILL_WAITING).fetch_one(pool).await?;
    Ok(LineMeasured {
        largest_overtaking: largest_overtaking(&answered),
        handed_over_seats: handed.seats,
        handover_p50_ms: handed.p50,
        handover_p99_ms: handed.p99,
        still_waiting,
    })
}

/// Of requests in arrival order, answered at these times: the most requests
/// that arrived before one and were answered after it (answered at the same
/// time, in one batch, is not after). By rank and a Fenwick tree: n log n.
fn largest_overtaking(answered: &[DateTime<Utc>]) -> u64 {
    let mut times: Vec<DateTime<Utc>> = answered.to_vec();
    times.sort_unstable();
    times.dedup();
    let mut tree = vec![0u64; times.len() + 1];
    let mut most = 0;
    for (seen, t) in answered.iter().enumerate() {
        // The 1-based rank of its time: the earlier requests at a higher
        // rank were answered after it.
        let rank = times.partition_point(|x| x <= t);
        let mut at_or_before = 0;
        let mut i = rank;
        while i > 0 {
            at_or_before += tree[i];
            i &= i - 1;
        }
        most = most.max(seen as u64 - at_or_before);
        let mut i = rank;
        while i < tree.len() {
            tree[i] += 1;
            i += i & i.wrapping_neg();
        }
    }
    most
}

/// [`sql::SUMMARY`]'s row.
#[derive(sqlx::FromRow)]
struct Summary {
    requests: i64,
    last_finished: Option<DateTime<Utc>>,
    contention_retries: i64,
    p50: Option<f64>,
    p95: Option<f64>,
    p99: Option<f64>,
    max: Option<f64>,
    queue_p50: Option<f64>,
    batch_p50: Option<f64>,
}

async fn summary(pool: &PgPool, first: i64, t0: DateTime<Utc>) -> Result<Summary, sqlx::Error> {
    sqlx::query_as(sql::SUMMARY).bind(first).bind(t0).fetch_one(pool).await
}

/// CPU seconds so far of each worker process and each server process
/// serving the workers.
struct Cpu {
    workers: BTreeMap<u32, f64>,
    backends: BTreeMap<u32, f64>,
}

async fn cpu(pool: &PgPool, workers: &Workers) -> Result<Cpu, sqlx::Error> {
    let backends: Vec<i32> = sqlx::query_scalar(sql::WORKER_BACKENDS).fetch_all(pool).await?;
    let sample = |pids: Vec<u32>| pids.into_iter().filter_map(|p| Some((p, procs::cpu_secs(p)?))).collect();
    Ok(Cpu { workers: sample(workers.pids()), backends: sample(backends.into_iter().map(|p| p as u32).collect()) })
}

/// CPU used between two samples; a process that appeared in between counts
/// from zero. `None` when /proc showed nothing (a remote server).
fn delta(before: &BTreeMap<u32, f64>, after: &BTreeMap<u32, f64>) -> Option<f64> {
    if after.is_empty() {
        return None;
    }
    Some(after.iter().map(|(pid, t)| t - before.get(pid).copied().unwrap_or(0.0)).sum())
}

async fn wait_for_workers(pool: &PgPool, workers: &mut Workers, n: usize, log: &Path) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let registered: i64 = sqlx::query_scalar(sql::WORKERS).fetch_one(pool).await?;
        if registered as usize >= n {
            return Ok(());
        }
        if workers.any_exited() || Instant::now() > deadline {
            bail!("the workers did not start; see {}", log.display());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Drop and create a database.
async fn recreate_database(server: &Server, name: &str) -> anyhow::Result<()> {
    if server.citus {
        // The URL's own database: its seatq schema, dropped (the next
        // connection migrates and lays it out again).
        let mut conn = PgConnection::connect(&server.url).await.context("connecting to the coordinator")?;
        sqlx::raw_sql(sql::DROP_SCHEMA).execute(&mut conn).await.context("dropping the seatq schema")?;
        conn.close().await?;
        return Ok(());
    }
    let mut admin = server.admin().await?;
    seatq::db::drop_database(&mut admin, name).await?;
    seatq::db::create_database(&mut admin, name, None).await?;
    admin.close().await?;
    Ok(())
}

async fn drop_database(server: &Server, name: &str) -> anyhow::Result<()> {
    if server.citus {
        return Ok(());
    }
    let mut admin = server.admin().await?;
    seatq::db::drop_database(&mut admin, name).await?;
    admin.close().await?;
    Ok(())
}

/// The server to benchmark on, as the user gave it.
pub struct Server {
    url: String,
    options: PgConnectOptions,
    /// A Citus coordinator: every run in the URL's own database (`--citus`).
    pub citus: bool,
}

impl Server {
    pub fn new(url: &str, citus: bool) -> anyhow::Result<Server> {
        Ok(Server { url: url.to_string(), options: seatq::db::options(url)?, citus })
    }

    /// A connection to the server's `postgres` database, to create and drop
    /// the benchmark's databases.
    async fn admin(&self) -> anyhow::Result<PgConnection> {
        seatq::db::admin(&self.options)
            .await
            .context("connecting to the server's postgres database to create the benchmark's database")
    }

    /// The user's URL with database `db`, for the benchmark's clients and
    /// worker processes.
    fn url(&self, db: &str) -> anyhow::Result<String> {
        if self.citus {
            return Ok(self.url.clone());
        }
        Ok(seatq::db::url_for(&self.url, db)?)
    }
}

/// A progress bar on stderr, when stderr is a terminal.
struct Progress {
    label: String,
    on: bool,
    started: Instant,
}

impl Progress {
    fn new(plan: &Plan) -> Progress {
        let label = format!("{} / {}", plan.scenario, plan.strategy);
        Progress { label, on: std::io::stderr().is_terminal(), started: Instant::now() }
    }

    fn show(&mut self, done: i64, total: i64) {
        if !self.on || total <= 0 {
            return;
        }
        let width = 30;
        let filled = ((done.max(0) as f64 / total as f64) * width as f64) as usize;
        let rate = done as f64 / self.started.elapsed().as_secs_f64().max(1e-3);
        eprint!(
            "\r{:<24} [{}{}] {done:>8}/{total:<8} {rate:>7.0}/s ",
            self.label,
            "#".repeat(filled.min(width)),
            " ".repeat(width - filled.min(width)),
        );
        let _ = std::io::stderr().flush();
    }

    fn done(&self) {
        if self.on {
            eprint!("\r{}\r", " ".repeat(90));
        }
    }
}

/// Each active node of a Citus cluster (`host:port`, the coordinator
/// first) and its postmaster's pid: the parent of a session opened on it.
async fn postmasters(server: &Server, pool: &PgPool) -> anyhow::Result<Vec<(String, u32)>> {
    let nodes: Vec<(String, i32)> = sqlx::query_as(sql::CITUS_NODES).fetch_all(pool).await?;
    let mut found = Vec::new();
    for (host, port) in nodes {
        let options = server.options.clone().host(&host).port(port as u16);
        let mut conn =
            PgConnection::connect_with(&options).await.with_context(|| format!("connecting to {host}:{port}"))?;
        let pid: i32 = sqlx::query_scalar(sql::BACKEND_PID).fetch_one(&mut conn).await?;
        if let Some(postmaster) = procs::parent(pid as u32) {
            found.push((format!("{host}:{port}"), postmaster));
        }
        conn.close().await?;
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overtaking_counts_the_earlier_requests_answered_later() {
        let t = |ms: i64| DateTime::<Utc>::from_timestamp_millis(ms).expect("a time");
        assert_eq!(largest_overtaking(&[]), 0);
        assert_eq!(largest_overtaking(&[t(1), t(1), t(2), t(3)]), 0, "in order, one batch sharing a time");
        // The fourth was answered before the second and third.
        assert_eq!(largest_overtaking(&[t(1), t(5), t(6), t(2), t(7)]), 2);
        assert_eq!(largest_overtaking(&[t(9), t(8), t(7), t(6)]), 3);
    }
}
