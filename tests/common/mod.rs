//! Test support: a private, migrated database per test on the real server,
//! in-process workers, and the invariant check every booking test ends with.
#![allow(dead_code)]

pub mod citus;
pub mod http;
pub mod pgbouncer;
pub mod replication;

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use seatq::{Client, NewRequest, Request, RequestRecord, SeatRequest, Status};
use seatq_worker::{Config, Worker};
use sqlx::Connection;
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool};
use tokio::sync::OnceCell;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// The server tests run on: `SEATQ_TEST_DATABASE_URL`, else `DATABASE_URL`,
/// else the local default. Each test gets its own database on it.
pub fn server_url() -> String {
    std::env::var("SEATQ_TEST_DATABASE_URL")
        .or_else(|_| std::env::var("DATABASE_URL"))
        .unwrap_or_else(|_| seatq::db::DEFAULT_DATABASE_URL.to_string())
}

static COUNTER: AtomicU32 = AtomicU32::new(0);
static CLEANED: OnceCell<()> = OnceCell::const_new();

/// A throwaway database, migrated.
pub struct TestDb {
    pub name: String,
    pub options: PgConnectOptions,
    pub pool: PgPool,
    pub client: Client,
}

impl TestDb {
    pub async fn new() -> TestDb {
        let base = seatq::db::options(&server_url()).expect("test database URL");
        CLEANED.get_or_init(drop_stale).await;
        let name = format!("seatq_test_{}_{}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed));
        let options = base.database(&name);
        // connect() creates the database and applies the migrations.
        let pool = seatq::db::connect(options.clone(), 10).await.expect("create test database");
        TestDb { name, options, client: Client::from_pool(pool.clone()), pool }
    }

    /// A fresh database with one event of `seats` seats, `per_row` a row
    /// (laid out as `Client::add_event` does), and that event's id.
    pub async fn with_event(name: &str, seats: i32, per_row: i32) -> (TestDb, i64) {
        let db = TestDb::new().await;
        let ev = db.client.add_event(name, seats, per_row).await.expect("add event");
        (db, ev)
    }

    /// The URL of this test's database, for worker processes.
    pub fn url(&self) -> String {
        seatq::db::url_for(&server_url(), &self.name).expect("test database URL")
    }

    /// A worker with its own pool and worker session settings.
    pub async fn worker(&self, config: Config) -> Worker {
        let options = seatq_worker::worker::session_options(self.options.clone());
        let pool = seatq_worker::worker::pool_options(&config);
        let pool = seatq::db::connect_pool(options, pool).await.expect("worker pool");
        Worker::new(pool, config)
    }

    /// Process everything due, synchronously.
    pub async fn drain(&self) {
        let config = Config { sweep_interval: Duration::ZERO, ..Config::default() };
        Worker::new(self.pool.clone(), config).drain().await.expect("drain");
    }

    /// Enqueue, process and return the finished request.
    pub async fn run(&self, request: Request) -> RequestRecord {
        let id = self.client.enqueue(NewRequest::from(request)).await.expect("enqueue");
        self.drain().await;
        self.client.status(id).await.expect("status")
    }

    /// Assert every seatq invariant holds.
    pub async fn assert_invariants(&self, drained: bool) {
        assert_invariants(&self.client, drained).await;
    }

    /// How every test that books seats ends: every invariant holds with the
    /// queue drained ([`TestDb::assert_invariants`]), then the database is dropped.
    pub async fn assert_invariants_and_close(self) {
        self.assert_invariants(true).await;
        self.close().await;
    }

    /// The finished (or not) requests `ids`, in that order.
    pub async fn records(&self, ids: &[i64]) -> Vec<RequestRecord> {
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            out.push(self.client.status(*id).await.unwrap_or_else(|e| panic!("status of request {id}: {e}")));
        }
        out
    }

    /// Assert every request of `ids` has succeeded.
    pub async fn assert_all_succeeded(&self, ids: &[i64]) {
        for r in self.records(ids).await {
            assert_eq!(r.status, Status::Succeeded, "request {} of {ids:?}: {r:?}", r.id);
        }
    }

    /// The states of the seats numbered `seats` of an event, in seat order.
    pub async fn seat_states(&self, event: i64, seats: impl IntoIterator<Item = i32>) -> Vec<String> {
        let seats: Vec<i32> = seats.into_iter().collect();
        sqlx::query_scalar(
            "SELECT state::text FROM seatq.seats WHERE event_id = $1 AND seat_no = ANY($2) ORDER BY seat_no",
        )
        .bind(event)
        .bind(&seats)
        .fetch_all(&self.pool)
        .await
        .unwrap_or_else(|e| panic!("states of seats {seats:?} of event {event}: {e}"))
    }

    /// Seats taken (held and live, or booked) on an event.
    pub async fn seats_taken(&self, event: i64) -> i64 {
        self.client.seats_taken(event).await.expect("count seats")
    }

    /// Seats granted by live bookings on an event, by the bookings' own lists.
    pub async fn seats_granted(&self, event: i64) -> i64 {
        self.client.seats_granted(event).await.expect("count granted")
    }

    /// Let the hold `booking` lapse, not yet swept: its time, and that of
    /// the seats it still holds (a lapsed hold's seats may have been taken
    /// since), set a minute past. The booking must be held.
    pub async fn lapse_hold(&self, booking: i64) {
        // A data-modifying WITH runs whether or not it is read.
        let bookings: i64 = sqlx::query_scalar(
            "WITH b AS (UPDATE seatq.bookings SET held_until = now() - interval '1 minute'
                        WHERE id = $1 AND state = 'held' RETURNING id),
                  s AS (UPDATE seatq.seats SET held_until = now() - interval '1 minute'
                        WHERE booking_id = $1 AND state = 'held')
             SELECT count(*) FROM b",
        )
        .bind(booking)
        .fetch_one(&self.pool)
        .await
        .unwrap_or_else(|e| panic!("lapse hold {booking}: {e}"));
        assert_eq!(bookings, 1, "hold {booking} to lapse is not held");
    }

    /// A new login role in `group` (`seatq_producer`, `seatq_worker`, ...),
    /// named after this database (roles are server-wide), and a pool of its
    /// own; drop it with [`Login::drop`].
    pub async fn login(&self, group: &str) -> Login {
        let name = format!("{}_{}", self.name, group);
        let create = format!("CREATE ROLE \"{name}\" LOGIN IN ROLE {group}");
        sqlx::query(sqlx::AssertSqlSafe(create)).execute(&self.pool).await.expect("create the login");
        let options = self.options.clone().username(&name);
        let pool = PgPool::connect_with(options.clone()).await.expect("connect as the login");
        let url = format!("postgres://{name}@{}:{}/{}", options.get_host(), options.get_port(), self.name);
        Login { name, pool, url }
    }

    /// Drop the database.
    pub async fn close(self) {
        self.pool.close().await;
        if let Ok(mut conn) = admin().await {
            let _ = seatq::db::drop_database(&mut conn, &self.name).await;
            let _ = conn.close().await;
        }
    }
}

/// A login role of a test database ([`TestDb::login`]).
pub struct Login {
    pub name: String,
    pub pool: PgPool,
    /// Its URL, for the command line.
    pub url: String,
}

impl Login {
    /// Close its pool and drop the role.
    pub async fn drop(self, db: &TestDb) {
        self.pool.close().await;
        let drop = format!("DROP ROLE \"{}\"", self.name);
        sqlx::query(sqlx::AssertSqlSafe(drop)).execute(&db.pool).await.expect("drop the login");
    }
}

/// The `seatq` binary: `cargo test --workspace` builds it beside the test
/// executables (cli/tests/cli.rs makes it build it).
pub fn seatq_bin() -> &'static std::path::Path {
    static BIN: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        let exe = std::env::current_exe().expect("test executable");
        let profile_dir = exe.parent().and_then(std::path::Path::parent).expect("target dir").to_path_buf();
        let bin = profile_dir.join(format!("seatq{}", std::env::consts::EXE_SUFFIX));
        assert!(
            bin.exists(),
            "{} is missing: run the tests with `cargo test --workspace`, or build it first with \
             `cargo build -p seatq-cli` (add --release for release tests)",
            bin.display()
        );
        bin
    })
}

/// Assert every seatq invariant holds on the database `client` reaches.
pub async fn assert_invariants(client: &Client, drained: bool) {
    let violations = client.check_invariants(drained).await.expect("check invariants");
    assert!(violations.is_empty(), "invariants broken: {violations:#?}");
}

/// A client of its own on the test database, its sessions (the listener's
/// too) named `app` in `pg_stat_activity`, with a pool of `pool` connections.
pub async fn client_named(db: &TestDb, app: &str, pool: u32) -> Client {
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(pool)
        .acquire_timeout(Duration::from_secs(60))
        .connect_with(db.options.clone().application_name(app))
        .await
        .expect("client pool");
    Client::from_pool(pool)
}

/// The server sessions of the test database named `app`.
pub async fn sessions(db: &TestDb, app: &str) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND application_name = $2")
        .bind(&db.name)
        .bind(app)
        .fetch_one(&db.pool)
        .await
        .expect("count sessions")
}

/// The backend of the session named `app` that is listening, if any.
pub async fn listener_pid(db: &TestDb, app: &str) -> Option<i32> {
    sqlx::query_scalar(
        "SELECT pid FROM pg_stat_activity
         WHERE datname = $1 AND application_name = $2 AND query ILIKE 'LISTEN%'",
    )
    .bind(&db.name)
    .bind(app)
    .fetch_optional(&db.pool)
    .await
    .expect("find the listener")
}

/// The backend of the session named `app` that listens, once it does.
pub async fn wait_for_listener(db: &TestDb, app: &str) -> i32 {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(pid) = listener_pid(db, app).await {
            return pid;
        }
        assert!(tokio::time::Instant::now() < deadline, "the client's hub is listening");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Every request in the test database, finished or not.
pub async fn count_requests(db: &TestDb) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM seatq.requests").fetch_one(&db.pool).await.expect("count requests")
}

/// How many of the requests `ids` are still queued (not finished, whether
/// due or scheduled): zero once all are.
pub async fn count_queued(pool: &PgPool, ids: &[i64]) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar("SELECT count(*) FROM seatq.requests WHERE id = ANY($1) AND status = 'queued'")
        .bind(ids)
        .fetch_one(pool)
        .await
}

/// A connection to the test server's `postgres` database, to create and drop
/// others.
pub async fn admin() -> Result<PgConnection, sqlx::Error> {
    seatq::db::admin(&seatq::db::options(&server_url()).expect("test server URL")).await
}

/// Drop test databases, then the roles tests made for them (named after
/// them), left by test processes that are gone (a failed test does not
/// reach `close`, nor drop its roles).
async fn drop_stale() {
    let Ok(mut conn) = admin().await else {
        return;
    };
    let gone = |name: &str| {
        let pid = name.split('_').nth(2).and_then(|p| p.parse::<u32>().ok());
        !pid.is_some_and(|p| std::path::Path::new(&format!("/proc/{p}")).exists())
    };
    let names: Vec<String> =
        sqlx::query_scalar("SELECT datname FROM pg_database WHERE datname LIKE 'seatq\\_test\\_%'")
            .fetch_all(&mut conn)
            .await
            .unwrap_or_default();
    for name in names.iter().filter(|n| gone(n)) {
        let _ = seatq::db::drop_database(&mut conn, name).await;
    }
    let roles: Vec<String> = sqlx::query_scalar("SELECT rolname FROM pg_roles WHERE rolname LIKE 'seatq\\_test\\_%'")
        .fetch_all(&mut conn)
        .await
        .unwrap_or_default();
    for role in roles.iter().filter(|r| gone(r)) {
        let _ = sqlx::query(sqlx::AssertSqlSafe(format!("DROP ROLE \"{}\"", role.replace('"', "\"\""))))
            .execute(&mut conn)
            .await;
    }
    let _ = conn.close().await;
}

/// Is some worker session idle inside a transaction for a while (hanging
/// mid-batch)? A worker's warm-up at start is idle in its own between
/// statements, for microseconds.
pub async fn worker_hangs_in_transaction(db: &TestDb) -> bool {
    sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM pg_stat_activity
         WHERE datname = current_database() AND application_name = 'seatq-worker'
           AND state = 'idle in transaction' AND state_change < now() - interval '500 milliseconds')",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap_or(false)
}

/// Workers running in the background until stopped.
pub struct Running {
    pub shutdown: CancellationToken,
    tracker: TaskTracker,
}

impl Running {
    pub async fn start(db: &TestDb, workers: usize, config: Config) -> Running {
        let shutdown = CancellationToken::new();
        let tracker = TaskTracker::new();
        for _ in 0..workers {
            let worker = db.worker(config.clone()).await;
            let token = shutdown.clone();
            tracker.spawn(async move { worker.run(token).await });
        }
        Running { shutdown, tracker }
    }

    pub async fn stop(self) {
        self.shutdown.cancel();
        self.tracker.close();
        self.tracker.wait().await;
    }
}

pub fn hold(event: i64, class: i16, party: u32, customer: &str) -> SeatRequest {
    SeatRequest::new(event, class, party, customer)
}

/// `n` cheapest-first bookings of `party` seats of `class`, for customers
/// c0, c1, ...
pub fn bookings(event: i64, class: i16, party: u32, n: usize) -> Vec<NewRequest> {
    (0..n).map(|k| Request::Book(hold(event, class, party, &format!("c{k}"))).into()).collect()
}

/// The error code of a finished request, or "succeeded".
pub fn code(r: &RequestRecord) -> &str {
    r.error_code.as_deref().unwrap_or(r.status.as_str())
}

/// `n` holds and books of random events of `events` (each of `seats`
/// seats), customers c{first}, c{first + 1}, ...: mostly cheapest-first
/// parties of 1 to 4 in any class, one in ten named seats, one in ten
/// together. Each has the idempotency key `order-{customer}`.
pub fn mixed_requests(rng: &mut fastrand::Rng, events: &[i64], seats: i32, first: usize, n: usize) -> Vec<NewRequest> {
    (first..first + n)
        .map(|k| {
            let event = events[rng.usize(..events.len())];
            let customer = format!("c{k}");
            let mut r = SeatRequest::new(event, [1, 2, 3, 3][rng.usize(..4)], rng.u32(1..=4), customer.clone());
            r.together = rng.u8(..10) == 0;
            if rng.u8(..10) == 0 {
                r = SeatRequest::named(event, vec![rng.i32(1..=seats)], customer.clone());
            }
            let request = if rng.bool() { Request::Hold(r) } else { Request::Book(r) };
            NewRequest { idempotency_key: Some(format!("order-{customer}")), ..NewRequest::from(request) }
        })
        .collect()
}

/// After faults: every request of `batch` (enqueued as `ids`) ended in one
/// of the outcomes a healthy run gives (never `internal`), a booking gets
/// its whole party, no request made two bookings, and on every event seats
/// taken equal seats granted. Returns the outcomes counted.
pub async fn assert_recovered(
    client: &Client,
    ids: &[i64],
    batch: &[NewRequest],
    events: &[i64],
) -> std::collections::BTreeMap<String, usize> {
    let mut outcomes = std::collections::BTreeMap::<String, usize>::new();
    for (id, new) in ids.iter().zip(batch) {
        let r = client.status(*id).await.unwrap();
        *outcomes.entry(code(&r).to_string()).or_default() += 1;
        assert!(
            ["succeeded", "sold_out", "seats_taken", "no_adjacent_seats"].contains(&code(&r)),
            "no request dies of a fault: {r:?}"
        );
        let (Request::Hold(want) | Request::Book(want)) = &new.request else { unreachable!() };
        if let Some(b) = r.booking() {
            assert_eq!(b.seats.len() as u32, want.party_size(), "whole parties only: {r:?}");
        }
    }
    let twice: Vec<i64> =
        sqlx::query_scalar("SELECT request_id FROM seatq.bookings GROUP BY request_id HAVING count(*) > 1")
            .fetch_all(client.pool())
            .await
            .unwrap();
    assert!(twice.is_empty(), "requests that made two bookings: {twice:?}");
    for event in events {
        assert_eq!(
            client.seats_taken(*event).await.unwrap(),
            client.seats_granted(*event).await.unwrap(),
            "seats taken = seats granted"
        );
    }
    outcomes
}

/// A `seatq-worker` process. Killed (SIGKILL) if dropped while running.
pub struct WorkerProcess {
    pub child: std::process::Child,
    pub name: String,
}

impl WorkerProcess {
    /// Start `seatq-worker` on `db` with extra arguments and environment.
    pub fn start(db: &TestDb, name: &str, args: &[&str], env: &[(&str, &str)]) -> WorkerProcess {
        WorkerProcess::start_on(&db.url(), &db.name, name, args, env)
    }

    /// Start `seatq-worker` on the database at `url`; its log goes to
    /// `$TMPDIR/{log_prefix}-{name}.log`.
    pub fn start_on(url: &str, log_prefix: &str, name: &str, args: &[&str], env: &[(&str, &str)]) -> WorkerProcess {
        // cargo builds the binary beside the test executables (worker/tests/cli.rs makes it build it).
        let exe = std::env::current_exe().expect("test executable");
        let bin = exe.parent().and_then(|deps| deps.parent()).expect("target dir").join("seatq-worker");
        assert!(
            bin.exists(),
            "{} is missing: run the tests with `cargo test --workspace`, or build it first with `cargo build -p seatq-worker` (add --release for release tests)",
            bin.display()
        );
        let log =
            std::fs::File::create(std::env::temp_dir().join(format!("{log_prefix}-{name}.log"))).expect("log file");
        let child = std::process::Command::new(bin)
            .args(["--name", name])
            .args(args)
            .env("DATABASE_URL", url)
            .env("RUST_LOG", "info,sqlx=warn")
            .envs(env.iter().copied())
            .stdout(std::process::Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start seatq-worker");
        WorkerProcess { child, name: name.to_string() }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Send a signal by name (TERM, STOP, CONT, KILL).
    pub fn signal(&self, sig: &str) {
        let ok = std::process::Command::new("kill").args([&format!("-{sig}"), &self.pid().to_string()]).status();
        assert!(ok.is_ok_and(|s| s.success()), "kill -{sig} {}", self.pid());
    }

    /// SIGTERM, then wait for the exit (see [`WorkerProcess::wait_exit`]).
    pub fn terminate(self, limit: Duration) -> Option<i32> {
        self.signal("TERM");
        self.wait_exit(limit)
    }

    /// SIGKILL and reap.
    pub fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Wait for the process to exit (up to `limit`); its exit code, or None
    /// if it was still running (it is then killed).
    pub fn wait_exit(mut self, limit: Duration) -> Option<i32> {
        let deadline = std::time::Instant::now() + limit;
        while std::time::Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status.code().unwrap_or(-1));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        None
    }
}

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Poll `check` every 20 ms until it is true or `limit` passes; whether it became true.
pub async fn eventually<F, Fut>(limit: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + limit;
    while tokio::time::Instant::now() < deadline {
        if check().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

/// A private PostgreSQL cluster (initdb into a temporary folder, its own
/// port), for tests that restart the server under the workers without
/// disturbing the shared one. Run as the `postgres` user when we are root.
pub struct PrivateCluster {
    dir: std::path::PathBuf,
    bin: std::path::PathBuf,
    pub port: u16,
    /// More server settings (`-c name=value ...`), given at every start.
    settings: String,
}

impl PrivateCluster {
    pub fn start() -> PrivateCluster {
        PrivateCluster::start_with("")
    }

    /// A new cluster started with these server settings too (`-c name=value ...`).
    pub fn start_with(settings: &str) -> PrivateCluster {
        let mut cluster = PrivateCluster::empty();
        cluster.settings = settings.to_string();
        let data = cluster.dir.join("data");
        cluster.pg("initdb", &["-D", path(&data), "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8"]);
        cluster.ctl("start");
        cluster
    }

    /// A cluster with nothing in its folder yet (owned by `postgres` when we
    /// are root) and a free port: [`PrivateCluster::start`] lays out a new
    /// one there, a standby copies its primary there.
    fn empty() -> PrivateCluster {
        let bin = std::fs::read_dir("/usr/lib/postgresql")
            .ok()
            .and_then(|versions| versions.filter_map(Result::ok).map(|v| v.path().join("bin")).max())
            .filter(|b| b.join("initdb").exists())
            .expect("PostgreSQL's server binaries (initdb, pg_ctl) under /usr/lib/postgresql/*/bin");
        let dir = std::env::temp_dir().join(format!(
            "seatq-cluster-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).expect("cluster dir");
        let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("free port").port();
        let cluster = PrivateCluster { dir, bin, port, settings: String::new() };
        if cluster.as_root() {
            let ok = std::process::Command::new("chown").args(["-R", "postgres:postgres"]).arg(&cluster.dir).status();
            assert!(ok.is_ok_and(|s| s.success()), "chown the cluster dir to postgres");
        }
        cluster
    }

    pub fn url(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}", self.port)
    }

    /// The server's log file.
    pub fn log(&self) -> std::path::PathBuf {
        self.dir.join("server.log")
    }

    /// Stop (fast: sessions are cut off), stay down for `down`, start again.
    pub fn restart(&self, down: Duration) {
        self.ctl("stop");
        std::thread::sleep(down);
        self.ctl("start");
    }

    fn as_root(&self) -> bool {
        std::process::Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout.starts_with(b"0"))
    }

    fn ctl(&self, action: &str) {
        let data = self.dir.join("data");
        let log = self.dir.join("server.log");
        let opts = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=100 {}",
            self.port,
            path(&self.dir),
            self.settings
        );
        self.pg("pg_ctl", &["-D", path(&data), "-l", path(&log), "-o", &opts, "-m", "fast", "-w", "-t", "60", action]);
    }

    /// Run the server binary `program` with `args` (as `postgres` when we
    /// are root); panic if it cannot be run or fails.
    fn pg(&self, program: &str, args: &[&str]) {
        self.try_pg(program, args).unwrap_or_else(|e| panic!("{e}"));
    }

    /// Run the server binary `program` with `args` (as `postgres` when we
    /// are root); why not, if it cannot be run or fails.
    fn try_pg(&self, program: &str, args: &[&str]) -> Result<(), String> {
        let exe = self.bin.join(program);
        let mut cmd = if self.as_root() {
            let mut c = std::process::Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(&exe);
            c
        } else {
            std::process::Command::new(&exe)
        };
        let out = cmd.args(args).current_dir(&self.dir).output().map_err(|e| format!("{program}: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!("{program} {args:?}: {}", String::from_utf8_lossy(&out.stderr)))
        }
    }
}

fn path(p: &std::path::Path) -> &str {
    p.to_str().expect("utf-8 temp path")
}

impl Drop for PrivateCluster {
    fn drop(&mut self) {
        let data = self.dir.join("data");
        // A test that failed with the server paused (SIGSTOP) leaves it so.
        if data.join("postmaster.pid").exists() {
            self.pause(false);
        }
        // A test may leave the server down, and then pg_ctl stop fails:
        // nothing to do either way.
        let _ = self.try_pg("pg_ctl", &["-D", path(&data), "-m", "immediate", "-w", "stop"]);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl PrivateCluster {
    /// Stop the server (fast: sessions are cut off) and leave it down.
    pub fn stop_server(&self) {
        self.ctl("stop");
    }

    /// Start the server again after [`PrivateCluster::stop_server`].
    pub fn start_server(&self) {
        self.ctl("start");
    }
}

impl WorkerProcess {
    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

/// The log of a worker process started with `log_prefix` and `name` (see
/// [`WorkerProcess::start_on`]); empty if there is none yet.
pub fn worker_log(log_prefix: &str, name: &str) -> String {
    std::fs::read_to_string(std::env::temp_dir().join(format!("{log_prefix}-{name}.log"))).unwrap_or_default()
}

/// A book of one seat of `class` for `customer` on `ev`, due in an hour and
/// made dead by hand with `message` as its last error: for the operator
/// routes and pages that show and retry dead requests.
pub async fn dead_request(db: &TestDb, ev: i64, class: i16, customer: &str, message: &str) -> i64 {
    let later = NewRequest {
        run_at: Some(chrono::Utc::now() + chrono::Duration::hours(1)),
        ..Request::Book(hold(ev, class, 1, customer)).into()
    };
    let id = db.client.enqueue(later).await.expect("enqueue");
    sqlx::query(
        "UPDATE seatq.requests SET status = 'dead', finished_at = now(), attempts = 3,
                error_code = 'internal', error_message = $2 WHERE id = $1",
    )
    .bind(id)
    .bind(message)
    .execute(&db.pool)
    .await
    .expect("make it dead");
    id
}
