//! The worker process: batch loops, the wake-up listener, the sweeper, the
//! registry heartbeat, retention and metrics, with graceful shutdown.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use seatq_core::sql::notify;
use sqlx::PgPool;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use tokio::net::TcpListener;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::agenda::Agenda;
use crate::batch::{self, Claim};
use crate::decision::ProcessError;
use crate::metrics::{self, Metrics};
use crate::registry::{self, Identity};
use crate::wake::Wake;
use crate::{Config, rescue, retention, sweeper};
use seatq_core::retry::Jitter;

/// A pool of batch loops sharing one database pool.
#[derive(Debug, Clone)]
pub struct Worker {
    pool: PgPool,
    config: Config,
    metrics: Arc<Metrics>,
    /// A turn in a transaction: at most `max_active` of the loops hold one.
    turns: Arc<Semaphore>,
    /// Where `/metrics` is served, and its header timeout; taken by `run`.
    metrics_listener: Arc<Mutex<Option<(TcpListener, Duration)>>>,
    /// Requests the next claim of any loop asks for: doubled after a full
    /// claim whose requests all found their seats free of other batches'
    /// locks, back to `batch_size` after a short or contended one (see
    /// [`Config::backlog_batch_size`]). Shared by the loops: where batches
    /// collide over the same seats, one collision makes them all smaller.
    claim_size: Arc<AtomicI64>,
    /// On a database sharded by event (Citus), the events the loops serve
    /// next, one a batch; `None` on one server, where a batch claims the
    /// next due requests of any event. Known from the database's first
    /// answer ([`Worker::agenda`]).
    agenda: Arc<std::sync::OnceLock<Option<Agenda>>>,
}

impl Worker {
    /// Connect with worker session settings (see [`session_options`],
    /// [`SETTINGS`] and [`settle`]),
    /// creating the database and applying migrations if needed.
    ///
    /// While the server is unreachable or not ready (down, starting up,
    /// restarting, out of connections) this keeps trying, with jittered
    /// backoff, and logs each failure; it never gives up by itself, so race it
    /// against a signal (as `seatq-worker` does) to stop waiting. A bad URL, a
    /// refused login, a database that does not exist and cannot be created,
    /// or a failed migration fail at once: waiting would not help.
    ///
    /// The pool waits at most [`ACQUIRE_TIMEOUT`] for a connection, so that
    /// during an outage every database call fails within seconds (and is
    /// logged) rather than hanging, and shutdown is never held up by it.
    pub async fn connect(url: &str, config: Config) -> Result<Worker, seatq_core::Error> {
        let target = seatq_core::reach::Target::parse(url, None)?;
        if target.mode == seatq_core::reach::PoolMode::Transaction {
            return Err(seatq_core::Error::BadUrl(format!(
                "{}=transaction: a worker needs a session of its own (its life lock and LISTEN outlive a \
                 transaction, and it keeps its statements prepared); give it a direct or session-mode URL",
                seatq_core::reach::POOL_MODE_PARAM
            )));
        }
        let options = session_options(target.options);
        let pool = pool_options(&config);
        let mut backoff = Jitter::starting();
        let mut attempts = 0u32;
        loop {
            let connected = match seatq_core::db::connect_pool(options.clone(), pool.clone()).await {
                // The pool retries a connection its `after_connect` refused
                // until it times out: ask one connection here, so that a
                // standby, or a server without the synchronous standby asked
                // for, is said at once rather than waited for.
                Err(e) if e.is_transient() => match probe(&options, config.synchronous_standby).await {
                    Err(refused) if !refused.is_transient() => Err(refused),
                    _ => Err(e),
                },
                connected => connected,
            };
            match connected {
                Ok(pool) => {
                    if attempts > 0 {
                        tracing::info!(attempts = attempts + 1, "connected to the database");
                    }
                    return Ok(Worker::new(pool, config));
                }
                Err(e) if e.is_transient() => {
                    attempts += 1;
                    let delay = backoff.next_delay();
                    // The cause, without the how-to-get-a-server paragraph.
                    let (server, cause) = match &e {
                        seatq_core::Error::Unreachable { target, source } => (target.clone(), source.to_string()),
                        other => (String::new(), other.to_string()),
                    };
                    tracing::warn!(%server, error = %cause, attempts, retry_in = ?delay,
                        "database unavailable; retrying until it answers (or a signal arrives)");
                    tokio::time::sleep(delay).await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Use an existing pool (migrations must already be applied). Its
    /// connections need the worker's settings: build it from
    /// [`pool_options`] (which settles and warms each connection) and
    /// [`session_options`]; a pool without them has no `lock_timeout` or
    /// other safety net and is not refused on a standby.
    pub fn new(pool: PgPool, mut config: Config) -> Worker {
        config.batch_size = config.batch_size.clamp(1, crate::MAX_BATCH_SIZE);
        config.backlog_batch_size = config.backlog_batch_size.clamp(config.batch_size, crate::MAX_BATCH_SIZE);
        config.concurrency = config.concurrency.max(1);
        config.max_active = config.max_active.clamp(1, Semaphore::MAX_PERMITS);
        let turns = Arc::new(Semaphore::new(config.max_active));
        let claim_size = Arc::new(AtomicI64::new(config.batch_size));
        Worker {
            pool,
            config,
            metrics: Arc::default(),
            turns,
            metrics_listener: Arc::default(),
            claim_size,
            agenda: Arc::default(),
        }
    }

    /// Serve `/metrics` and `/healthz` on this listener while running,
    /// closing a connection whose request head is not complete within
    /// `header_timeout`.
    pub fn serve_metrics(self, listener: TcpListener, header_timeout: Duration) -> Worker {
        *self.metrics_listener.lock().unwrap_or_else(|e| e.into_inner()) = Some((listener, header_timeout));
        self
    }

    /// The pool this worker uses.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// This worker's counters.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Process requests until `shutdown` is cancelled, then finish the batches
    /// in hand and return.
    pub async fn run(&self, shutdown: CancellationToken) {
        let wake = Arc::new(Wake::default());
        let tracker = TaskTracker::new();
        let c = &self.config;
        let joined = Arc::new(Notify::new());
        tracker.spawn(listen(self.pool.clone(), wake.clone(), joined.clone(), self.clone(), shutdown.clone()));
        let me = Identity::this_process(c.name.clone(), self.settings());
        let options = self.pool.connect_options().as_ref().clone();
        tracker.spawn(rescue::run(
            options,
            self.config.synchronous_standby,
            me.host.clone(),
            me.pid,
            wake.clone(),
            joined,
            shutdown.clone(),
        ));
        tracker.spawn(registry::run(
            self.pool.clone(),
            me,
            c.heartbeat_interval,
            self.metrics.clone(),
            shutdown.clone(),
        ));
        if !c.sweep_interval.is_zero() {
            tracker.spawn(sweeper::run(self.pool.clone(), c.sweep_interval, self.metrics.clone(), shutdown.clone()));
        }
        if let Some(older_than) = c.retention {
            let (pool, metrics, token) = (self.pool.clone(), self.metrics.clone(), shutdown.clone());
            tracker.spawn(retention::run(pool, older_than, c.prune_interval, metrics, token));
        }
        if let Some((listener, header_timeout)) = self.metrics_listener.lock().unwrap_or_else(|e| e.into_inner()).take()
        {
            let (metrics, pool) = (self.metrics.clone(), self.pool.clone());
            tracker.spawn(metrics::serve(listener, metrics, pool, header_timeout, shutdown.clone()));
        }
        for n in 0..c.concurrency {
            let worker = self.clone();
            let (wake, shutdown) = (wake.clone(), shutdown.clone());
            tracker.spawn(async move { worker.batch_loop(n, wake, shutdown).await });
        }
        tracker.close();
        tracker.wait().await;
    }

    /// Process due requests until none is left; returns how many finished.
    /// For tests and one-shot tools; long-running workers use [`Worker::run`].
    pub async fn drain(&self) -> Result<usize, ProcessError> {
        let mut finished = 0;
        loop {
            let _turn = self.turn().await;
            let pass = self.process_once(self.config.batch_size, &mut Vec::new(), None).await?;
            finished += pass.finished;
            if pass.claimed == 0 {
                return Ok(finished);
            }
        }
    }

    fn settings(&self) -> serde_json::Value {
        let c = &self.config;
        serde_json::json!({
            "concurrency": c.concurrency,
            "max_active": c.max_active,
            "batch_size": c.batch_size,
            "backlog_batch_size": c.backlog_batch_size,
            "poll_ms": c.poll_interval.as_millis() as u64,
            "sweep_ms": c.sweep_interval.as_millis() as u64,
            "contention_retries": c.contention_retries,
            "strategy": format!("{:?}", c.strategy),
            "retention_secs": c.retention.map(|r| r.as_secs()),
            "version": env!("CARGO_PKG_VERSION"),
        })
    }

    /// One batch loop. A new request wakes one idle loop; a loop whose claim
    /// comes back full wakes the next at once, so a burst draws in as many
    /// loops as it needs, one claim after another, and a trickle keeps the
    /// others asleep instead of sending them all to the head of the queue
    /// for nothing (see [`Wake`]).
    async fn batch_loop(&self, n: usize, wake: Arc<Wake>, shutdown: CancellationToken) {
        let mut pauses = Pauses::new();
        // After a failed batch, claim one request at a time for a while, so a
        // request that breaks its connection holds up only itself, and is
        // found out: its attempt is then counted (see below).
        let mut careful: usize = 0;
        let mut in_hand = Vec::new();
        while !shutdown.is_cancelled() {
            // A turn first (outside the batch's time limit: waiting for one
            // is not the batch being stuck). If meanwhile a claim begun after
            // this loop asked came back short, the others have drained the
            // queue: a claim now would find nothing.
            let asked = wake.ticket();
            let turn = tokio::select! {
                _ = shutdown.cancelled() => break,
                turn = self.turn() => turn,
            };
            if wake.drained_since(asked) {
                drop(turn);
                self.idle(&wake, &shutdown).await;
                continue;
            }
            let size = self.claim_size.load(Ordering::Relaxed);
            let limit = if careful > 0 { 1 } else { size };
            careful = careful.saturating_sub(1);
            let backs = wake.backs();
            let batch = self.process_once(limit, &mut in_hand, Some(&wake));
            let result = tokio::time::timeout(self.config.batch_timeout, batch).await;
            drop(turn);
            match result {
                // Requests left over for the next batch, or a full claim
                // (more are likely due, unless a later claim found none):
                // go on at once.
                Ok(Ok(pass))
                    if pass.left_over > 0 || (pass.claimed as i64 >= limit && !wake.drained_since(pass.ticket)) =>
                {
                    // A backlog: bigger batches, fewer commits per request;
                    // but where batches collide over the same seats (a hot
                    // event), smaller ones collide less.
                    if pass.contended > 0 {
                        self.claim_size.store(self.config.batch_size, Ordering::Relaxed);
                    } else if limit == size && pass.claimed as i64 >= limit {
                        let grown = (size * 2).min(self.config.backlog_batch_size);
                        // Unless another loop changed it meanwhile.
                        let _ = self.claim_size.compare_exchange(size, grown, Ordering::Relaxed, Ordering::Relaxed);
                    }
                    pauses.committed();
                    continue;
                }
                Ok(Ok(_)) => {
                    pauses = Pauses::new();
                    self.claim_size.store(self.config.batch_size, Ordering::Relaxed);
                }
                // A serialization failure at commit (--strategy serializable),
                // or lock_timeout in a batch that took no savepoint:
                // contention, not a fault; go again after a short pause.
                Ok(Err(e)) if e.is_contention() => {
                    Metrics::add(&self.metrics.contention_retries, 1);
                    let delay = pauses.contended();
                    tracing::debug!(loop_ = n, error = %e, retry_in = ?delay, "batch collided with another; retrying");
                    tokio::select! {
                        _ = shutdown.cancelled() => {}
                        _ = tokio::time::sleep(delay) => {}
                    }
                    continue;
                }
                Ok(Err(_)) | Err(_) => {
                    let delay = pauses.failed();
                    let error = match result {
                        Ok(Err(e)) => {
                            tracing::warn!(loop_ = n, error = %e, retry_in = ?delay,
                                "batch failed and rolled back; its requests stay queued");
                            e.to_string()
                        }
                        _ => {
                            tracing::warn!(loop_ = n, retry_in = ?delay,
                                "batch timed out; giving up its connection, its requests stay queued");
                            format!("timed out after {:?}", self.config.batch_timeout)
                        }
                    };
                    Metrics::add(&self.metrics.batch_errors, 1);
                    // Its requests are claimable again, unannounced.
                    wake.released();
                    careful = self.config.batch_size as usize;
                    self.claim_size.store(self.config.batch_size, Ordering::Relaxed);
                    // A database that answers again (after a restart or a
                    // failover) ends the pause, and the backoff starts over:
                    // bookings flow as soon as it is back, not a grown pause
                    // later.
                    tokio::select! {
                        _ = shutdown.cancelled() => {}
                        _ = tokio::time::sleep(delay) => {}
                        _ = wake.until_back(backs) => pauses = Pauses::new(),
                    }
                    // Claiming one at a time, the batch held one request, so
                    // that request broke it: count the attempt, so it is
                    // retried with backoff and ends `dead` like any failing
                    // request rather than being retried for ever. After the
                    // pause, so that the failed transaction has ended (a row
                    // it still locks is skipped, not waited for).
                    if limit == 1
                        && let Some(&request) = in_hand.first()
                    {
                        let _turn = self.turn().await;
                        self.record_failed_attempt(n, request, &error).await;
                    }
                    continue;
                }
            }
            self.idle(&wake, &shutdown).await;
        }
        tracing::debug!(loop_ = n, "batch loop stopped");
    }

    /// Wait for news, the next poll or shutdown.
    async fn idle(&self, wake: &Wake, shutdown: &CancellationToken) {
        tokio::select! {
            _ = shutdown.cancelled() => {}
            _ = wake.notified() => {}
            _ = tokio::time::sleep(self.config.poll_interval) => {}
        }
    }

    /// Count a failed attempt for a request that broke its batch; a failure
    /// to do so is only logged (the request stays queued, uncounted).
    async fn record_failed_attempt(&self, n: usize, request: batch::InHand, error: &str) {
        match batch::record_failed_attempt(&self.pool, request, error, &self.metrics).await {
            Ok(true) => {}
            Ok(false) => tracing::info!(
                loop_ = n,
                request = request.id,
                "request of a failed batch is locked or was dealt with meanwhile; its attempt is not counted"
            ),
            Err(e) => tracing::warn!(loop_ = n, request = request.id, error = %e,
                "cannot count the failed attempt of a request that broke its batch"),
        }
    }

    /// Wait for a turn in a transaction (see [`Config::max_active`]).
    async fn turn(&self) -> OwnedSemaphorePermit {
        let waiting = std::time::Instant::now();
        let turn = self.turns.clone().acquire_owned().await.expect("the turns semaphore is never closed");
        Metrics::add(&self.metrics.turn_wait_us, waiting.elapsed().as_micros() as u64);
        turn
    }

    /// One batch of up to `limit`, then its contended requests again after
    /// jittered backoffs (no transaction open while sleeping), all in the
    /// caller's turn (the backoffs are milliseconds, and with turns contention
    /// is rare); those still contended after the last try go back to the
    /// queue. `in_hand` says which requests the batch that failed held;
    /// `wake`, see [`batch::run`].
    async fn process_once(
        &self,
        limit: i64,
        in_hand: &mut Vec<batch::InHand>,
        wake: Option<&Wake>,
    ) -> Result<Pass, ProcessError> {
        let strategy = self.config.strategy;
        // On Citus, the next event with due requests, its requests alone;
        // none with any: nothing to claim.
        let agenda = self.agenda().await?;
        let route = match agenda {
            None => None,
            Some(agenda) => match agenda.next(&self.pool).await? {
                Some(event) => Some(event),
                None => return Ok(Pass { claimed: 0, finished: 0, contended: 0, left_over: 0, ticket: 0 }),
            },
        };
        // (A short claim of one event says nothing of the others: the loops
        // are woken by the agenda's events, not told the queue is drained.)
        let wake = wake.filter(|_| route.is_none());
        let first = batch::run(&self.pool, Claim::Next(limit), route, strategy, &self.metrics, in_hand, wake).await?;
        // A short claim drops its event; a full one keeps it (another
        // loop's short claim, which found this one's rows locked, may have
        // dropped it meanwhile).
        if let (Some(agenda), Some(event)) = (agenda, route) {
            if (first.claimed as i64) < limit {
                agenda.drained(event);
            } else {
                agenda.heard(event);
            }
        }
        let first_contended = first.contended.len();
        let mut finished = first.finished;
        let mut contended = first.contended;
        let mut jitter = Jitter::contention();
        for round in 1..=self.config.contention_retries {
            if contended.is_empty() {
                break;
            }
            tokio::time::sleep(jitter.next_delay()).await;
            let requeue = (round == self.config.contention_retries).then_some(self.config.requeue_delay);
            let claim = Claim::Retry { ids: &contended, requeue };
            let report = batch::run(&self.pool, claim, route, strategy, &self.metrics, in_hand, None).await?;
            finished += report.finished;
            contended = report.contended;
        }
        // Other events waiting count as requests left over: go on at once.
        let elsewhere = agenda.map_or(0, |a| usize::from(!a.is_empty()));
        Ok(Pass {
            claimed: first.claimed,
            finished,
            contended: first_contended,
            left_over: first.left_over + elsewhere,
            ticket: first.ticket,
        })
    }

    /// The agenda, on a database sharded by event; asked of the database
    /// once (`seatq.distributed()`).
    async fn agenda(&self) -> Result<Option<&Agenda>, ProcessError> {
        if let Some(agenda) = self.agenda.get() {
            return Ok(agenda.as_ref());
        }
        let mut conn = self.pool.acquire().await?;
        let by_event = seatq_core::citus::distributed(&mut conn).await?;
        Ok(self.agenda.get_or_init(|| by_event.then(Agenda::default)).as_ref())
    }
}

/// What [`Worker::process_once`] did.
struct Pass {
    claimed: usize,
    finished: usize,
    /// Of the claimed, how many found seats they needed held by other
    /// transactions (retried after a backoff).
    contended: usize,
    /// Claimed but left for the next batch: due now.
    left_over: usize,
    /// The claim's ticket (see [`Wake`]).
    ticket: u64,
}

/// A batch loop's pauses after batches that did not go through: jittered,
/// and growing while such batches follow one another.
struct Pauses {
    /// After a failed or timed-out batch; from the start again once the
    /// loop catches up with the queue.
    errors: Jitter,
    /// After a serialization failure at commit; from the start again after
    /// any batch that commits.
    contention: Jitter,
}

impl Pauses {
    fn new() -> Pauses {
        Pauses { errors: Jitter::failed_batch(), contention: Jitter::contention() }
    }

    /// After a serialization failure at commit. Short, since the transactions
    /// it collided with take milliseconds; but never none, or loops that
    /// collided go round together and collide again.
    fn contended(&mut self) -> Duration {
        self.contention.next_delay()
    }

    /// After a failed or timed-out batch.
    fn failed(&mut self) -> Duration {
        self.errors.next_delay()
    }

    /// After a batch that committed.
    fn committed(&mut self) {
        self.contention.reset();
    }
}

/// The worker's pool for `config`: one connection per batch loop that may be
/// in a transaction at once, plus one for the background tasks and one spare
/// (the listener has its own), all opened, settled ([`settle`]) and warmed
/// at once, and any opened later as it opens (`warm`): the first batches do
/// not wait for a connection to be made or pay for a cold session, and a
/// server that cannot take them says so at start rather than under load.
pub fn pool_options(config: &Config) -> PgPoolOptions {
    let loops = config.concurrency.min(config.max_active).max(1);
    let size = u32::try_from(loops).unwrap_or(u32::MAX).saturating_add(2);
    PgPoolOptions::new()
        .max_connections(size)
        .min_connections(size)
        .acquire_timeout(ACQUIRE_TIMEOUT)
        .after_connect(crate::warm::on_connect(config.strategy, config.synchronous_standby))
}

/// The worker's connection options: its application name, and no startup
/// parameter a pooler refuses (the session settings are [`SETTINGS`], set
/// once a connection is open, so that they hold through a session-mode
/// pooler too, which drops or refuses startup `options`).
pub fn session_options(options: PgConnectOptions) -> PgConnectOptions {
    options.application_name("seatq-worker")
}

/// Worker session settings, set on every connection as it opens (by the
/// pool's `after_connect`, and by the rescuer on its own sessions):
/// - `lock_timeout` as the safety net (the mechanism is SKIP LOCKED / NOWAIT);
/// - `statement_timeout` and `idle_in_transaction_session_timeout` end a stuck
///   statement or an abandoned transaction, releasing its locks;
/// - TCP keepalives and `client_connection_check_interval` let the server
///   notice within seconds that a worker's host is gone (no FIN), and roll its
///   transaction back;
/// - `random_page_cost` 1.1 rather than the default 4 (a disk that seeks):
///   what a worker reads, the head of the queue and the seats of events on
///   sale, is in memory. With 4, the planner may price a hot batch's many
///   primary-key lookups above a scan of the whole venue, and scan it (see
///   docs/design.md);
/// - `jit` off: a batch's statements over arrays of hundreds of requests are
///   estimated dear enough to be compiled (`jit_above_cost`), and compiling
///   costs each of them hundreds of milliseconds to save microseconds.
///
/// The same text then asks whether the server is a standby: see [`settle`].
pub const SETTINGS: &str = "SET lock_timeout = '2s'; SET statement_timeout = '30s'; \
    SET idle_in_transaction_session_timeout = '10s'; SET tcp_keepalives_idle = 5; \
    SET tcp_keepalives_interval = 1; SET tcp_keepalives_count = 3; \
    SET client_connection_check_interval = '1s'; SET random_page_cost = 1.1; SET jit = off; \
    SELECT pg_is_in_recovery()";

/// One connection with `options`, given the worker's settings ([`settle`]),
/// then closed: why the pool could not connect, if the server refuses
/// workers.
async fn probe(options: &PgConnectOptions, synchronous_standby: bool) -> Result<(), seatq_core::Error> {
    use sqlx::{ConnectOptions as _, Connection as _};
    let mut conn = options.connect().await.map_err(seatq_core::Error::Db)?;
    let settled = settle(&mut conn, synchronous_standby).await;
    let _ = conn.close().await;
    settled.map_err(seatq_core::Error::Db)
}

/// With [`Config::synchronous_standby`](crate::Config): commits wait for a
/// synchronous standby, and the same round trip asks whether the server has
/// one named.
pub const SYNCHRONOUS_STANDBY: &str =
    "SET synchronous_commit = on; SELECT current_setting('synchronous_standby_names') <> ''";

/// Give a new connection the worker's [`SETTINGS`], in one round trip (the
/// simple protocol: nothing prepared), and refuse it if the server is a
/// standby: a worker there could only fail every batch (`cannot execute
/// SELECT FOR UPDATE in a read-only transaction`), so it says where it is
/// instead, and the pool makes no connection until the URL reaches a
/// primary. With `synchronous_standby`, also [`SYNCHRONOUS_STANDBY`]: a
/// server with no synchronous standby named is refused the same way.
pub async fn settle(conn: &mut sqlx::PgConnection, synchronous_standby: bool) -> Result<(), sqlx::Error> {
    use sqlx::Row as _;
    let row = sqlx::raw_sql(SETTINGS).fetch_one(&mut *conn).await?;
    if row.try_get::<bool, _>(0)? {
        return Err(sqlx::Error::Configuration(
            "the server is a standby (in recovery, read-only): a worker needs the primary. Point its URL at the \
             primary, or at a router that follows it (HAProxy on Patroni's leader check, a cloud writer endpoint)"
                .into(),
        ));
    }
    if synchronous_standby {
        let row = sqlx::raw_sql(SYNCHRONOUS_STANDBY).fetch_one(&mut *conn).await?;
        if !row.try_get::<bool, _>(0)? {
            return Err(sqlx::Error::Configuration(
                "--synchronous-standby: the server has no synchronous standby (synchronous_standby_names is \
                 empty), so an outcome could be lost with the primary; name the standby there, or run without \
                 --synchronous-standby"
                    .into(),
            ));
        }
    }
    Ok(())
}

/// How long the worker's pool waits for a connection before a call fails.
pub const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(3);

/// Turn `seatq_new` notifications into wake-ups of one loop each, and
/// `seatq_workers` ones (a worker joined) into a ring read of the rescuer
/// (`joined`). NOTIFY is a hint: when the listener loses its connection, and
/// again once it listens anew, wake every idle loop to poll, and the rescuer
/// to read the ring, since notifications sent meanwhile are lost (in between,
/// the loops' own polls cover). Connecting races the shutdown token.
async fn listen(pool: PgPool, wake: Arc<Wake>, joined: Arc<Notify>, worker: Worker, shutdown: CancellationToken) {
    // Short: its reconnection is how the loops learn the database is back.
    let mut backoff = Jitter::watch();
    let mut reconnecting = false;
    while !shutdown.is_cancelled() {
        let connected = tokio::select! {
            _ = shutdown.cancelled() => return,
            connected = listen_for_work(&pool) => connected,
        };
        let mut listener = match connected {
            Ok(l) => {
                backoff.reset();
                if reconnecting {
                    tracing::info!("listening for new requests again");
                    wake.database_back();
                    wake.everyone();
                    joined.notify_one();
                }
                l
            }
            Err(e) => {
                let delay = backoff.next_delay();
                tracing::warn!(error = %e, retry_in = ?delay, "cannot listen for new requests; polling meanwhile");
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(delay) => continue,
                }
            }
        };
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                n = listener.try_recv() => match n {
                    Ok(Some(n)) if n.channel() == notify::WORKERS_CHANNEL => joined.notify_one(),
                    Ok(Some(n)) => {
                        // On Citus, the announcement names its event.
                        if let (Some(Some(agenda)), Ok(event)) = (worker.agenda.get(), n.payload().parse()) {
                            agenda.heard(event);
                        }
                        wake.news()
                    }
                    // Connect anew (rather than let the listener reconnect by
                    // itself) so as to know when it listens again.
                    Ok(None) => {
                        tracing::warn!("listener connection lost; reconnecting");
                        wake.everyone();
                        reconnecting = true;
                        break;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "listener failed; reconnecting");
                        wake.everyone();
                        reconnecting = true;
                        break;
                    }
                },
            }
        }
    }
}

/// A listener on both channels a worker hears.
async fn listen_for_work(pool: &PgPool) -> Result<sqlx::postgres::PgListener, sqlx::Error> {
    let mut listener = seatq_core::db::listen(pool, notify::NEW_CHANNEL).await?;
    listener.listen(notify::WORKERS_CHANNEL).await?;
    Ok(listener)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contention_at_commit_backs_off_and_a_commit_starts_again() {
        let mut pauses = Pauses::new();
        let delays: Vec<Duration> = (0..10).map(|_| pauses.contended()).collect();
        assert!(delays.iter().all(|d| !d.is_zero()), "never straight back round: {delays:?}");
        assert!(delays[9] > delays[0], "growing: {delays:?}");
        assert!(delays[9] <= Duration::from_millis(150), "short: {delays:?}");
        pauses.committed();
        assert!(pauses.contended() <= Duration::from_millis(3), "from the start again after a commit");
    }
}
