//! Prometheus metrics and health, served over plain HTTP on `/metrics` and
//! `/healthz`. Two fixed GET paths need no web framework: a small handler
//! reads the request line and writes the answer.
//!
//! A scrape stays cheap and bounded however large the queue table grows: the
//! queued requests are counted on every scrape through the partial index
//! `requests_ready` only; the totals by status (a scan of the whole table) are
//! counted at most every [`TOTALS_EVERY`]; every query runs under a short
//! statement timeout, and a scrape waits at most [`DB_WITHIN`] per query.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use seatq_core::sql::stats;
use sqlx::PgPool;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

const LATENCY_BUCKETS: &[f64] = &[0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0];
const BATCH_BUCKETS: &[f64] = &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0];

/// Server-side statement timeout of a scrape's queries, in milliseconds.
const STATEMENT_TIMEOUT_MS: u32 = 1000;
/// How long a scrape waits for each of its queries (connecting included).
pub const DB_WITHIN: Duration = Duration::from_secs(2);
/// How long the totals by status are reused before they are counted again.
pub const TOTALS_EVERY: Duration = Duration::from_secs(10);
/// After the totals could not be counted within the statement timeout (a
/// huge table), how long before trying again.
const TOTALS_AFTER_TIMEOUT: Duration = Duration::from_secs(300);
const KINDS: &[&str] = &["hold", "book", "confirm", "cancel"];

/// Counters of one worker process.
#[derive(Debug, Default)]
pub struct Metrics {
    /// Finished requests by (kind, outcome).
    requests: Mutex<BTreeMap<(String, String), u64>>,
    latency: Mutex<Histogram>,
    batch_sizes: Mutex<Histogram>,
    pub contention_retries: AtomicU64,
    pub requeued: AtomicU64,
    pub batch_errors: AtomicU64,
    pub seats_expired: AtomicU64,
    pub holds_expired: AtomicU64,
    pub pruned: AtomicU64,
    pub heartbeats: AtomicU64,
    /// Time batch loops spent waiting for a turn (`--max-active`), in
    /// microseconds.
    pub turn_wait_us: AtomicU64,
    /// Unix time of the last heartbeat, in milliseconds.
    pub last_heartbeat_ms: AtomicU64,
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

#[derive(Debug, Default)]
struct Histogram {
    /// Count per bucket (not cumulative); one more than the bounds for +Inf.
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Histogram {
    fn observe(&mut self, bounds: &[f64], v: f64) {
        if self.counts.is_empty() {
            self.counts = vec![0; bounds.len() + 1];
        }
        let i = bounds.iter().position(|b| v <= *b).unwrap_or(bounds.len());
        self.counts[i] += 1;
        self.sum += v;
        self.count += 1;
    }

    fn render(&self, out: &mut String, name: &str, help: &str, bounds: &[f64]) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        let mut cumulative = 0;
        for (i, b) in bounds.iter().enumerate() {
            cumulative += self.counts.get(i).copied().unwrap_or(0);
            let _ = writeln!(out, "{name}_bucket{{le=\"{b}\"}} {cumulative}");
        }
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {}", self.count);
        let _ = writeln!(out, "{name}_sum {}\n{name}_count {}", self.sum, self.count);
    }
}

/// A poisoned lock only means a panic elsewhere mid-update; the counts are
/// still usable.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Metrics {
    /// A finished request.
    pub fn finished(&self, kind: &str, outcome: &str, latency_secs: f64) {
        // Label values come from our own codes; a stored kind could be
        // anything, so unknown kinds share one label.
        let kind = if KINDS.contains(&kind) { kind } else { "unknown" };
        *lock(&self.requests).entry((kind.to_string(), outcome.to_string())).or_default() += 1;
        lock(&self.latency).observe(LATENCY_BUCKETS, latency_secs.max(0.0));
    }

    /// A batch of `size` requests claimed.
    pub fn batch(&self, size: usize) {
        lock(&self.batch_sizes).observe(BATCH_BUCKETS, size as f64);
    }

    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// Finished requests of this kind and outcome so far.
    pub fn requests(&self, kind: &str, outcome: &str) -> u64 {
        lock(&self.requests).get(&(kind.to_string(), outcome.to_string())).copied().unwrap_or(0)
    }

    /// The Prometheus text exposition.
    pub fn render(&self, queue: &QueueGauges) -> String {
        let mut out = String::new();
        out.push_str("# HELP seatq_requests_total Requests finished by this worker, by kind and outcome.\n");
        out.push_str("# TYPE seatq_requests_total counter\n");
        for ((kind, outcome), n) in lock(&self.requests).iter() {
            let _ = writeln!(out, "seatq_requests_total{{kind=\"{kind}\",outcome=\"{outcome}\"}} {n}");
        }
        lock(&self.latency).render(
            &mut out,
            "seatq_request_latency_seconds",
            "Enqueue-to-outcome latency of requests finished by this worker.",
            LATENCY_BUCKETS,
        );
        lock(&self.batch_sizes).render(&mut out, "seatq_batch_size", "Requests claimed per batch.", BATCH_BUCKETS);
        let gauge = |out: &mut String, name: &str, help: &str, value: &dyn std::fmt::Display| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}");
        };
        gauge(
            &mut out,
            "seatq_database_up",
            "Whether the database answered this scrape's queue query in time.",
            &u8::from(queue.up),
        );
        if queue.up {
            gauge(&mut out, "seatq_queue_due", "Queued requests due now.", &queue.due);
            gauge(&mut out, "seatq_queue_scheduled", "Queued requests scheduled for later.", &queue.scheduled);
            gauge(
                &mut out,
                "seatq_queue_oldest_due_seconds",
                "Age of the oldest due request (0 when none).",
                &queue.oldest_due_secs,
            );
        }
        if let Some(by_status) = &queue.by_status {
            out.push_str(
                "# HELP seatq_queue_depth Requests in the queue table by status (counted at most every 10 s).\n\
                 # TYPE seatq_queue_depth gauge\n",
            );
            for (status, n) in by_status {
                let _ = writeln!(out, "seatq_queue_depth{{status=\"{status}\"}} {n}");
            }
        }
        // Counters named `*_seconds_total` are kept in microseconds.
        let counters: [(&str, &str, &AtomicU64); 9] = [
            (
                "seatq_contention_retries_total",
                "Retries of requests that found seats locked.",
                &self.contention_retries,
            ),
            ("seatq_requests_requeued_total", "Requests put back in the queue for later.", &self.requeued),
            (
                "seatq_batch_errors_total",
                "Batches rolled back by a connection or database failure.",
                &self.batch_errors,
            ),
            ("seatq_seats_expired_total", "Held seats freed by the sweeper.", &self.seats_expired),
            ("seatq_holds_expired_total", "Holds marked expired by the sweeper.", &self.holds_expired),
            ("seatq_requests_pruned_total", "Finished requests deleted by retention.", &self.pruned),
            ("seatq_worker_heartbeats_total", "Heartbeats written to seatq.workers.", &self.heartbeats),
            (
                "seatq_turn_wait_seconds_total",
                "Time batch loops spent waiting for a turn in a transaction (--max-active).",
                &self.turn_wait_us,
            ),
            (
                "seatq_worker_last_heartbeat_ms",
                "Unix time of the last heartbeat, in milliseconds.",
                &self.last_heartbeat_ms,
            ),
        ];
        for (name, help, value) in counters {
            let kind = if name.ends_with("_total") { "counter" } else { "gauge" };
            let value = value.load(Ordering::Relaxed);
            let _ = if name.ends_with("_seconds_total") {
                writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {}", value as f64 / 1e6)
            } else {
                writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}")
            };
        }
        out
    }

    /// The queue as the database sees it now, bounded in time: see the
    /// module docs.
    pub async fn queue_gauges(&self, pool: &PgPool) -> QueueGauges {
        let now = tokio::time::timeout(DB_WITHIN, queued_now(pool)).await;
        let (due, scheduled, oldest_due_secs) = match now {
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
        let counted =
            bounded(pool, |tx| Box::pin(sqlx::query_as(stats::REQUESTS_BY_STATUS).fetch_all(&mut **tx))).await;
        let again_in = match &counted {
            Ok(_) => TOTALS_EVERY,
            Err(e) if e.as_database_error().and_then(|d| d.code()).is_some_and(|c| c == "57014") => {
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
async fn queued_now(pool: &PgPool) -> Result<(i64, i64, f64), sqlx::Error> {
    bounded(pool, |tx| Box::pin(sqlx::query_as(stats::QUEUED_NOW).fetch_one(&mut **tx))).await
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
    sqlx::query(stats::SET_LOCAL_STATEMENT_TIMEOUT).bind(STATEMENT_TIMEOUT_MS.to_string()).execute(&mut *tx).await?;
    let answer = query(&mut tx).await?;
    tx.rollback().await?;
    Ok(answer)
}

/// Serve `/metrics` and `/healthz` until cancelled. Each answer is bounded in
/// time and abandoned at shutdown.
pub async fn serve(listener: TcpListener, metrics: std::sync::Arc<Metrics>, pool: PgPool, shutdown: CancellationToken) {
    loop {
        let stream = tokio::select! {
            _ = shutdown.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    tracing::warn!(error = %e, "metrics: accept failed");
                    continue;
                }
            },
        };
        let (metrics, pool, shutdown) = (metrics.clone(), pool.clone(), shutdown.clone());
        tokio::spawn(async move {
            tokio::select! {
                _ = shutdown.cancelled() => {}
                answered = tokio::time::timeout(Duration::from_secs(10), answer(stream, &metrics, &pool)) => {
                    if let Err(e) = answered {
                        tracing::debug!(error = %e, "metrics: request timed out");
                    }
                }
            }
        });
    }
}

async fn answer(mut stream: TcpStream, metrics: &Metrics, pool: &PgPool) -> std::io::Result<()> {
    let mut buf = vec![0u8; 4096];
    let mut len = 0;
    while !buf[..len].windows(4).any(|w| w == b"\r\n\r\n") && len < buf.len() {
        let n = stream.read(&mut buf[len..]).await?;
        if n == 0 {
            break;
        }
        len += n;
    }
    let head = String::from_utf8_lossy(&buf[..len]);
    let mut words = head.split_whitespace();
    let (method, path) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let (status, body) = match (method, path) {
        ("GET", "/metrics") => {
            let queue = metrics.queue_gauges(pool).await;
            ("200 OK", metrics.render(&queue))
        }
        ("GET", "/healthz") => {
            let ping = tokio::time::timeout(Duration::from_secs(2), sqlx::query(stats::PING).execute(pool)).await;
            match ping {
                Ok(Ok(_)) => ("200 OK", "ok\n".to_string()),
                Ok(Err(e)) => ("503 Service Unavailable", format!("database: {e}\n")),
                Err(_) => ("503 Service Unavailable", "database: no answer within 2s\n".to_string()),
            }
        }
        ("GET", _) => ("404 Not Found", "try /metrics or /healthz\n".to_string()),
        _ => ("405 Method Not Allowed", "GET only\n".to_string()),
    };
    let response = format!(
        "HTTP/1.1 {status}\r\ncontent-type: text/plain; version=0.0.4\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(response.as_bytes()).await?;
    stream.shutdown().await
}
