//! Prometheus metrics and health, served over HTTP on `/metrics` and
//! `/healthz`.
//!
//! # Crates
//!
//! The metrics are handles of the `prometheus` crate (the Rust client kept
//! by TiKV) in a [`Registry`] of each [`Metrics`], so several workers in one
//! process (as the tests run them) each count their own; nothing is
//! installed globally. It is chosen over the two other maintained clients
//! because it alone meets the hot path's needs without changing what is
//! exposed:
//! - a finished request costs atomic adds only: every (kind, outcome)
//!   counter is registered up front (both are closed sets) and its handle
//!   kept, and its histograms observe without a lock or an allocation
//!   (`prometheus-client`'s histogram takes a mutex per observation;
//!   `metrics-exporter-prometheus` buffers every raw sample until a scrape or
//!   an upkeep task drains it);
//! - counters may be fractional (`seatq_turn_wait_seconds_total` counts
//!   seconds; the `metrics` facade's counters are whole numbers);
//! - it writes the classic text format, so every name, type, label and value
//!   reads as before (`prometheus-client` writes OpenMetrics: counter
//!   families lose `_total` in `# TYPE`, floats gain `.0`, `le="1"` becomes
//!   `le="1.0"`).
//!
//! HTTP is `axum` on the worker's runtime, served by
//! [`seatq_core::http::serve`] (with its header timeout), shut down
//! gracefully with the worker.
//!
//! # Scrapes
//!
//! A scrape stays cheap and bounded however large the queue table grows: the
//! queued requests are counted on every scrape through the partial index
//! `requests_ready` only; the totals by status (a scan of the whole table) are
//! counted at most every [`TOTALS_EVERY`]; every query runs under a short
//! statement timeout, and a scrape waits at most [`DB_WITHIN`] per query.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use prometheus::core::Collector;
use prometheus::proto::MetricFamily;
use prometheus::{
    Counter, Gauge, Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, PullingGauge,
    Registry, TextEncoder,
};
use seatq_core::outcome::{ErrorCode, Status};
use seatq_core::sql::stats;

use crate::sql::metrics as sql;
use sqlx::PgPool;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

const LATENCY_BUCKETS: &[f64] = &[0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0];
const BATCH_BUCKETS: &[f64] = &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0];

/// Server-side statement timeout of a scrape's queries, in milliseconds.
const STATEMENT_TIMEOUT_MS: u32 = 1000;
/// How long a scrape waits for each of its queries (connecting included),
/// and `/healthz` for the database's answer.
pub const DB_WITHIN: Duration = Duration::from_secs(2);
/// How long the totals by status are reused before they are counted again.
pub const TOTALS_EVERY: Duration = Duration::from_secs(10);
/// After the totals could not be counted within the statement timeout (a
/// huge table), how long before trying again.
const TOTALS_AFTER_TIMEOUT: Duration = Duration::from_secs(300);
/// After shutdown, how long connections still open (a client yet to send its
/// request; answers in progress end at shutdown) may hold the server up.
const ABANDON_AFTER: Duration = Duration::from_secs(1);

/// The `kind` label's values: the request kinds, and one for any other
/// stored kind (a stored kind could be anything; labels come from our own
/// set).
const KINDS: [&str; 6] = ["hold", "book", "confirm", "cancel", "extend", "unknown"];

/// Every error code, each an `outcome` label value besides `succeeded` (and
/// `other`, for anything else); strum lists them from the enum itself, so a
/// new code has its series at once.
const ERROR_CODES: &[ErrorCode] = <ErrorCode as strum::VariantArray>::VARIANTS;

/// `outcome` label values: `succeeded`, the error codes, `other`.
const OUTCOMES: usize = ERROR_CODES.len() + 2;

/// The `outcome` label of slot `i` (below [`OUTCOMES`]).
fn outcome_label(i: usize) -> &'static str {
    match i {
        0 => Status::Succeeded.as_str(),
        i if i <= ERROR_CODES.len() => ERROR_CODES[i - 1].as_str(),
        _ => "other",
    }
}

/// The slot of a `(kind, outcome)` pair among the `seatq_requests_total`
/// handles, without allocating.
fn slot(kind: &str, outcome: &str) -> usize {
    let kind = KINDS.iter().position(|k| *k == kind).unwrap_or(KINDS.len() - 1);
    let outcome = if outcome == Status::Succeeded.as_str() {
        0
    } else {
        ERROR_CODES.iter().position(|c| c.as_str() == outcome).map_or(OUTCOMES - 1, |i| i + 1)
    };
    kind * OUTCOMES + outcome
}

/// A counter [`Metrics::add`] adds to.
pub trait Count {
    /// Add `n` of the counter's unit.
    fn count(&self, n: u64);
}

impl Count for IntCounter {
    fn count(&self, n: u64) {
        self.inc_by(n);
    }
}

/// A counter of seconds, added to in microseconds.
#[derive(Debug, Clone)]
pub struct Micros(Counter);

impl Count for Micros {
    fn count(&self, us: u64) {
        self.0.inc_by(us as f64 / 1e6);
    }
}

/// The metrics of one worker, in a registry of its own.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// `seatq_requests_total`, one handle per (kind, outcome): see [`slot`].
    requests: Vec<IntCounter>,
    latency: Histogram,
    batch_sizes: Histogram,
    pub contention_retries: IntCounter,
    pub requeued: IntCounter,
    pub batch_errors: IntCounter,
    pub seats_expired: IntCounter,
    pub holds_expired: IntCounter,
    pub pruned: IntCounter,
    pub heartbeats: IntCounter,
    /// Time batch loops spent waiting for a turn (`--max-active`), added in
    /// microseconds, exposed in seconds.
    pub turn_wait_us: Micros,
    /// Unix time of the last heartbeat, in milliseconds (read at each scrape).
    pub last_heartbeat_ms: Arc<AtomicU64>,
    /// The totals by status last counted, reused for [`TOTALS_EVERY`].
    totals: tokio::sync::Mutex<Totals>,
}

#[derive(Debug, Default)]
struct Totals {
    /// Requests by status; `None` if they could not be counted.
    counts: Option<Vec<(String, i64)>>,
    /// Count again after this.
    until: Option<Instant>,
}

/// What the database said about the queue, for one scrape.
#[derive(Debug, Default, Clone)]
pub struct QueueGauges {
    /// Whether the queue query answered within [`DB_WITHIN`].
    pub up: bool,
    /// Queued requests due now.
    pub due: i64,
    /// Queued requests scheduled for later (backoff, requeued contention).
    pub scheduled: i64,
    /// Age in seconds of the oldest due request (0 when none).
    pub oldest_due_secs: f64,
    /// All requests by status (at most [`TOTALS_EVERY`] old); `None` if they
    /// could not be counted.
    pub by_status: Option<Vec<(String, i64)>>,
}

impl QueueGauges {
    /// The gauges of this scrape: whether the database answered, and what
    /// it said (left out when it did not).
    fn families(&self) -> prometheus::Result<Vec<MetricFamily>> {
        let mut families = Vec::new();
        let up =
            IntGauge::new("seatq_database_up", "Whether the database answered this scrape's queue query in time.")?;
        up.set(i64::from(self.up));
        families.extend(up.collect());
        if self.up {
            let due = IntGauge::new("seatq_queue_due", "Queued requests due now.")?;
            due.set(self.due);
            let scheduled = IntGauge::new("seatq_queue_scheduled", "Queued requests scheduled for later.")?;
            scheduled.set(self.scheduled);
            let oldest = Gauge::new("seatq_queue_oldest_due_seconds", "Age of the oldest due request (0 when none).")?;
            oldest.set(self.oldest_due_secs);
            families.extend(due.collect().into_iter().chain(scheduled.collect()).chain(oldest.collect()));
        }
        if let Some(by_status) = &self.by_status {
            let depth = IntGaugeVec::new(
                Opts::new("seatq_queue_depth", "Requests in the queue table by status (counted at most every 10 s)."),
                &["status"],
            )?;
            for (status, n) in by_status {
                depth.get_metric_with_label_values(&[status])?.set(*n);
            }
            families.extend(depth.collect());
        }
        // A family without samples (no requests at all) is not written.
        families.retain(|f| !f.get_metric().is_empty());
        Ok(families)
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

/// Register `metric`, built from the constant definitions below; failing is
/// a mistake in them (a bad or repeated name), which the tests catch.
fn registered<M: Collector + Clone + 'static>(registry: &Registry, metric: prometheus::Result<M>) -> M {
    let metric = metric.expect("a valid metric definition");
    registry.register(Box::new(metric.clone())).expect("a metric name registered once");
    metric
}

impl Metrics {
    /// A worker's metrics, every handle registered in a registry of its own.
    pub fn new() -> Metrics {
        let registry = Registry::new();
        let r = &registry;
        let by_outcome = registered(
            r,
            IntCounterVec::new(
                Opts::new("seatq_requests_total", "Requests finished by this worker, by kind and outcome."),
                &["kind", "outcome"],
            ),
        );
        let requests = KINDS
            .iter()
            .flat_map(|kind| (0..OUTCOMES).map(move |o| (*kind, outcome_label(o))))
            .map(|(kind, outcome)| by_outcome.with_label_values(&[kind, outcome]))
            .collect();
        let histogram = |name: &str, help: &str, buckets: &[f64]| {
            registered(r, Histogram::with_opts(HistogramOpts::new(name, help).buckets(buckets.to_vec())))
        };
        let counter = |name: &str, help: &str| registered(r, IntCounter::new(name, help));
        let last_heartbeat_ms = Arc::new(AtomicU64::new(0));
        let read = last_heartbeat_ms.clone();
        registered(
            r,
            PullingGauge::new(
                "seatq_worker_last_heartbeat_ms",
                "Unix time of the last heartbeat, in milliseconds.",
                Box::new(move || read.load(Ordering::Relaxed) as f64),
            ),
        );
        Metrics {
            requests,
            latency: histogram(
                "seatq_request_latency_seconds",
                "Enqueue-to-outcome latency of requests finished by this worker.",
                LATENCY_BUCKETS,
            ),
            batch_sizes: histogram("seatq_batch_size", "Requests claimed per batch.", BATCH_BUCKETS),
            contention_retries: counter(
                "seatq_contention_retries_total",
                "Retries of requests that found seats locked.",
            ),
            requeued: counter("seatq_requests_requeued_total", "Requests put back in the queue for later."),
            batch_errors: counter(
                "seatq_batch_errors_total",
                "Batches rolled back by a connection or database failure.",
            ),
            seats_expired: counter("seatq_seats_expired_total", "Held seats freed by the sweeper."),
            holds_expired: counter("seatq_holds_expired_total", "Holds marked expired by the sweeper."),
            pruned: counter("seatq_requests_pruned_total", "Finished requests deleted by retention."),
            heartbeats: counter("seatq_worker_heartbeats_total", "Heartbeats written to seatq.workers."),
            turn_wait_us: Micros(registered(
                r,
                Counter::new(
                    "seatq_turn_wait_seconds_total",
                    "Time batch loops spent waiting for a turn in a transaction (--max-active).",
                ),
            )),
            last_heartbeat_ms,
            totals: tokio::sync::Mutex::default(),
            registry,
        }
    }

    /// A finished request: atomic adds only.
    pub fn finished(&self, kind: &str, outcome: &str, latency_secs: f64) {
        self.requests[slot(kind, outcome)].inc();
        self.latency.observe(latency_secs.max(0.0));
    }

    /// A batch of `size` requests claimed.
    pub fn batch(&self, size: usize) {
        self.batch_sizes.observe(size as f64);
    }

    /// Add `n` to `counter` (in its unit: see [`Count`]).
    pub fn add(counter: &impl Count, n: u64) {
        counter.count(n);
    }

    /// Finished requests of this kind and outcome so far.
    pub fn requests(&self, kind: &str, outcome: &str) -> u64 {
        self.requests[slot(kind, outcome)].get()
    }

    /// The Prometheus text exposition: this worker's metrics and the
    /// scrape's view of the queue.
    pub fn render(&self, queue: &QueueGauges) -> prometheus::Result<String> {
        let mut families = self.registry.gather();
        families.extend(queue.families()?);
        families.sort_by(|a, b| a.name().cmp(b.name()));
        let mut out = String::new();
        TextEncoder::new().encode_utf8(&families, &mut out)?;
        Ok(out)
    }

    /// The queue as the database sees it now, bounded in time: see the
    /// module docs.
    pub async fn queue_gauges(&self, pool: &PgPool) -> QueueGauges {
        let now = tokio::time::timeout(DB_WITHIN, queued_now(pool)).await;
        let sql::Queued { due, scheduled, oldest_due_secs } = match now {
            Ok(Ok(now)) => now,
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "metrics: queue query failed");
                return QueueGauges::default();
            }
            Err(_) => {
                tracing::debug!(within = ?DB_WITHIN, "metrics: no answer to the queue query");
                return QueueGauges::default();
            }
        };
        let by_status = tokio::time::timeout(DB_WITHIN, self.totals(pool)).await.unwrap_or(None);
        QueueGauges { up: true, due, scheduled, oldest_due_secs, by_status }
    }

    /// The totals by status, counted again only when [`TOTALS_EVERY`] has
    /// passed (one scrape counts; concurrent ones wait for it).
    async fn totals(&self, pool: &PgPool) -> Option<Vec<(String, i64)>> {
        let mut totals = self.totals.lock().await;
        if totals.until.is_some_and(|until| Instant::now() < until) {
            return totals.counts.clone();
        }
        let counted = bounded(pool, |tx| Box::pin(stats::RequestsByStatus.query().fetch_all(&mut **tx)))
            .await
            .map(|rows| rows.into_iter().map(|row| (row.status, row.count)).collect());
        let again_in = match &counted {
            Ok(_) => TOTALS_EVERY,
            Err(e) if seatq_core::sqlstate::is_query_canceled(e) => {
                tracing::warn!(again_in = ?TOTALS_AFTER_TIMEOUT,
                    "metrics: counting requests by status takes over {STATEMENT_TIMEOUT_MS} ms; leaving seatq_queue_depth out");
                TOTALS_AFTER_TIMEOUT
            }
            Err(e) => {
                tracing::debug!(error = %e, "metrics: counting requests by status failed");
                TOTALS_EVERY
            }
        };
        *totals = Totals { counts: counted.ok(), until: Some(Instant::now() + again_in) };
        totals.counts.clone()
    }
}

/// Queued requests due and scheduled, and the oldest due one's age.
async fn queued_now(pool: &PgPool) -> Result<sql::Queued, sqlx::Error> {
    bounded(pool, |tx| Box::pin(sql::QueuedNow.query().fetch_one(&mut **tx))).await
}

/// Run `query` in a transaction of its own (rolled back) under the scrape's
/// statement timeout.
async fn bounded<T>(
    pool: &PgPool,
    query: impl for<'t> FnOnce(
        &'t mut sqlx::Transaction<'static, sqlx::Postgres>,
    ) -> futures_util::future::BoxFuture<'t, Result<T, sqlx::Error>>,
) -> Result<T, sqlx::Error> {
    let mut tx = pool.begin().await?;
    let millis = STATEMENT_TIMEOUT_MS.to_string();
    sql::SetLocalStatementTimeout { millis: &millis }.query().execute(&mut *tx).await?;
    let answer = query(&mut tx).await?;
    tx.rollback().await?;
    Ok(answer)
}

/// What the HTTP handlers share.
#[derive(Clone)]
struct Served {
    metrics: Arc<Metrics>,
    pool: PgPool,
    shutdown: CancellationToken,
}

/// Serve `/metrics` and `/healthz` until `shutdown` is cancelled: no new
/// connections then, answers in progress end at once (503), and connections
/// still open `ABANDON_AFTER` later are abandoned. A connection whose
/// request head is not complete within `header_timeout` (a client that never
/// sends its request) is closed ([`seatq_core::http`]).
pub async fn serve(
    listener: TcpListener,
    metrics: Arc<Metrics>,
    pool: PgPool,
    header_timeout: Duration,
    shutdown: CancellationToken,
) {
    let app = Router::new()
        .route("/metrics", get(scrape))
        .route("/healthz", get(health))
        .fallback(not_found)
        .method_not_allowed_fallback(get_only)
        .layer(axum::middleware::map_response(close_after))
        .with_state(Served { metrics, pool, shutdown: shutdown.clone() });
    let connections = seatq_core::http::Connections { header_timeout, abandon_after: ABANDON_AFTER };
    seatq_core::http::serve(listener, app, connections, shutdown).await;
}

/// Every answer closes its connection, as a scrape every few seconds can
/// afford: a client may read an answer to the end of the stream, and no idle
/// connection outlives the worker's shutdown.
async fn close_after(mut response: Response) -> Response {
    response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

/// `answer`, or 503 at once if the worker shuts down first.
async fn unless_shut_down(shutdown: &CancellationToken, answer: impl Future<Output = Response>) -> Response {
    tokio::select! {
        response = answer => response,
        () = shutdown.cancelled() => (StatusCode::SERVICE_UNAVAILABLE, "shutting down\n").into_response(),
    }
}

async fn scrape(State(s): State<Served>) -> Response {
    unless_shut_down(&s.shutdown, async {
        let queue = s.metrics.queue_gauges(&s.pool).await;
        match s.metrics.render(&queue) {
            Ok(text) => ([(header::CONTENT_TYPE, prometheus::TEXT_FORMAT)], text).into_response(),
            Err(e) => {
                tracing::warn!(error = %e, "metrics: encoding failed");
                (StatusCode::INTERNAL_SERVER_ERROR, format!("encoding the metrics: {e}\n")).into_response()
            }
        }
    })
    .await
}

/// 200 when the database answers within [`DB_WITHIN`], else 503.
async fn health(State(s): State<Served>) -> Response {
    unless_shut_down(&s.shutdown, async {
        match tokio::time::timeout(DB_WITHIN, sql::Ping.query().execute(&s.pool)).await {
            Ok(Ok(_)) => (StatusCode::OK, "ok\n".to_string()),
            Ok(Err(e)) => (StatusCode::SERVICE_UNAVAILABLE, format!("database: {e}\n")),
            Err(_) => (StatusCode::SERVICE_UNAVAILABLE, format!("database: no answer within {DB_WITHIN:?}\n")),
        }
        .into_response()
    })
    .await
}

async fn not_found(method: Method) -> (StatusCode, &'static str) {
    if method == Method::GET || method == Method::HEAD {
        (StatusCode::NOT_FOUND, "try /metrics or /healthz\n")
    } else {
        get_only().await
    }
}

async fn get_only() -> (StatusCode, &'static str) {
    (StatusCode::METHOD_NOT_ALLOWED, "GET only\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_and_outcome_has_its_own_counter() {
        let m = Metrics::new();
        assert_eq!(m.requests.len(), KINDS.len() * OUTCOMES);
        m.finished("book", "succeeded", 0.01);
        m.finished("book", "sold_out", 0.02);
        m.finished("cancel", "not_your_hold", 0.02);
        m.finished("weird", "internal", 0.02);
        m.finished("hold", "no_such_code", 0.02);
        assert_eq!(m.requests("book", "succeeded"), 1);
        assert_eq!(m.requests("book", "sold_out"), 1);
        assert_eq!(m.requests("cancel", "not_your_hold"), 1);
        assert_eq!(m.requests("unknown", "internal"), 1);
        assert_eq!(m.requests("hold", "other"), 1);
        assert_eq!(m.requests("hold", "succeeded"), 0);
        for (i, code) in ERROR_CODES.iter().enumerate() {
            assert_eq!(outcome_label(i + 1), code.as_str());
        }
    }

    #[test]
    fn the_exposition_keeps_every_name_type_and_format() {
        let m = Metrics::new();
        m.finished("book", "succeeded", 0.003);
        m.batch(3);
        Metrics::add(&m.heartbeats, 2);
        Metrics::add(&m.turn_wait_us, 1_500_000);
        m.last_heartbeat_ms.store(1_700_000_000_123, Ordering::Relaxed);
        let queue = QueueGauges {
            up: true,
            due: 2,
            scheduled: 1,
            oldest_due_secs: 0.0,
            by_status: Some(vec![("queued".into(), 3), ("succeeded".into(), 1)]),
        };
        let text = m.render(&queue).unwrap();
        for line in [
            "# TYPE seatq_requests_total counter",
            "seatq_requests_total{kind=\"book\",outcome=\"succeeded\"} 1",
            "seatq_requests_total{kind=\"book\",outcome=\"sold_out\"} 0",
            "# TYPE seatq_request_latency_seconds histogram",
            "seatq_request_latency_seconds_bucket{le=\"0.0025\"} 0",
            "seatq_request_latency_seconds_bucket{le=\"0.005\"} 1",
            "seatq_request_latency_seconds_bucket{le=\"+Inf\"} 1",
            "seatq_request_latency_seconds_sum 0.003",
            "seatq_request_latency_seconds_count 1",
            "# TYPE seatq_batch_size histogram",
            "seatq_batch_size_bucket{le=\"2\"} 0",
            "seatq_batch_size_bucket{le=\"4\"} 1",
            "seatq_batch_size_sum 3",
            "# TYPE seatq_database_up gauge",
            "seatq_database_up 1",
            "seatq_queue_due 2",
            "seatq_queue_scheduled 1",
            "# TYPE seatq_queue_oldest_due_seconds gauge",
            "seatq_queue_oldest_due_seconds 0",
            "# TYPE seatq_queue_depth gauge",
            "seatq_queue_depth{status=\"queued\"} 3",
            "seatq_queue_depth{status=\"succeeded\"} 1",
            "# TYPE seatq_contention_retries_total counter",
            "seatq_contention_retries_total 0",
            "# TYPE seatq_requests_requeued_total counter",
            "# TYPE seatq_batch_errors_total counter",
            "# TYPE seatq_seats_expired_total counter",
            "# TYPE seatq_holds_expired_total counter",
            "# TYPE seatq_requests_pruned_total counter",
            "# TYPE seatq_worker_heartbeats_total counter",
            "seatq_worker_heartbeats_total 2",
            "# TYPE seatq_turn_wait_seconds_total counter",
            "seatq_turn_wait_seconds_total 1.5",
            "# TYPE seatq_worker_last_heartbeat_ms gauge",
            "seatq_worker_last_heartbeat_ms 1700000000123",
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line:?} in\n{text}");
        }
        // The database did not answer: only the gauge that says so.
        let text = m.render(&QueueGauges::default()).unwrap();
        assert!(text.lines().any(|l| l == "seatq_database_up 0"), "{text}");
        assert!(!text.contains("seatq_queue_"), "{text}");
    }

    #[test]
    fn workers_in_one_process_count_apart() {
        let (a, b) = (Metrics::new(), Metrics::default());
        a.finished("hold", "succeeded", 0.1);
        Metrics::add(&a.pruned, 5);
        assert_eq!((a.requests("hold", "succeeded"), b.requests("hold", "succeeded")), (1, 0));
        assert_eq!((a.pruned.get(), b.pruned.get()), (5, 0));
    }
}
