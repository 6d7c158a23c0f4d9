//! PostgreSQL restarts under running workers and a producer (a private
//! cluster, so other tests are undisturbed): workers reconnect by themselves,
//! the producer retries safely with idempotency keys, nothing is lost or
//! doubled. A worker started while the server is down waits for it, and a
//! worker told to stop during an outage stops cleanly.

mod common;

use std::time::{Duration, Instant};

use common::{PrivateCluster, WorkerProcess, assert_invariants, code, count_queued, eventually, worker_log};
use seatq::{Client, NewRequest, Request, SeatRequest};

const REQUESTS: usize = 1500;

/// Retry `op` through outages, for up to two minutes.
async fn through_outages<T, F, Fut>(what: &str, mut op: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, seatq::Error>>,
{
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        match op().await {
            Ok(v) => return v,
            Err(e) if Instant::now() < deadline => {
                tracing::debug!(error = %e, "{what} failed; retrying");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("{what} kept failing: {e}"),
        }
    }
}

/// A producer enqueueing `batch` in chunks of 50, `pause` apart, each
/// retried through outages (safe: every request has an idempotency key);
/// their ids, in order.
fn produce(client: &Client, batch: Vec<NewRequest>, pause: Duration) -> tokio::task::JoinHandle<Vec<i64>> {
    let client = client.clone();
    tokio::spawn(async move {
        let mut ids = Vec::new();
        for chunk in batch.chunks(50) {
            ids.extend(through_outages("enqueue", || client.enqueue_many(chunk)).await);
            tokio::time::sleep(pause).await;
        }
        ids
    })
}

/// How many of `ids` are still queued, asked through outages.
async fn unfinished(client: &Client, ids: &[i64]) -> i64 {
    through_outages("count", || async { Ok(count_queued(client.pool(), ids).await?) }).await
}

/// A private cluster for the test called `name`: the cluster, the URL of the
/// database `seatq_{name}` on it, and the log prefix of its worker processes.
fn private_cluster(name: &str) -> (PrivateCluster, String, String) {
    let cluster = PrivateCluster::start();
    let url = cluster.url(&format!("seatq_{name}"));
    let log = format!("seatq-{name}-{}", cluster.port);
    (cluster, url, log)
}

/// Whether the log of worker `worker` comes to say `text` within 30 s.
async fn log_says(log: &str, worker: &str, text: &str) -> bool {
    eventually(Duration::from_secs(30), || async { worker_log(log, worker).contains(text) }).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_restart_under_load_loses_nothing() {
    let (cluster, url, log) = private_cluster("restart");
    let cluster = std::sync::Arc::new(cluster);
    let client = Client::connect(&url).await.expect("connect to the private cluster");
    let mut events = Vec::new();
    for n in 0..3 {
        events.push(client.add_event(&format!("E{n}"), 200, 6).await.unwrap());
    }
    let args = ["--concurrency", "2", "--batch-size", "16", "--poll-ms", "100"];
    let workers: Vec<WorkerProcess> =
        (0..3).map(|n| WorkerProcess::start_on(&url, &log, &format!("w{n}"), &args, &[])).collect();

    let mut rng = fastrand::Rng::with_seed(5);
    let batch: Vec<NewRequest> = (0..REQUESTS)
        .map(|n| {
            let r = SeatRequest::new(events[n % 3], [1, 2, 3][rng.usize(..3)], rng.u32(1..=4), format!("c{n}"));
            NewRequest { idempotency_key: Some(format!("order-{n}")), ..NewRequest::from(Request::Book(r)) }
        })
        .collect();

    // The producer enqueues in chunks while the server restarts twice under it.
    let producer = produce(&client, batch.clone(), Duration::from_millis(20));
    for _ in 0..2 {
        tokio::time::sleep(Duration::from_millis(400)).await;
        let cluster = cluster.clone();
        tokio::task::spawn_blocking(move || cluster.restart(Duration::from_millis(500))).await.unwrap();
    }
    let ids = producer.await.unwrap();
    assert_eq!(ids.len(), REQUESTS);

    let deadline = Instant::now() + Duration::from_secs(180);
    while unfinished(&client, &ids).await > 0 {
        assert!(Instant::now() < deadline, "requests still queued");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for w in workers {
        assert_eq!(w.terminate(Duration::from_secs(30)), Some(0), "workers survive restarts and exit cleanly");
    }

    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM seatq.requests").fetch_one(client.pool()).await.unwrap();
    assert_eq!(rows as usize, REQUESTS, "retried enqueues did not duplicate requests");
    let mut distinct = ids.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), REQUESTS);
    for id in &ids {
        let r = client.status(*id).await.unwrap();
        assert!(["succeeded", "sold_out"].contains(&code(&r)), "{r:?}");
    }
    for event in events {
        assert_eq!(client.seats_taken(event).await.unwrap(), client.seats_granted(event).await.unwrap());
    }
    assert_invariants(&client, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_started_while_the_database_is_down_waits_for_it() {
    let (cluster, url, log) = private_cluster("late");
    cluster.stop_server();
    let mut worker = WorkerProcess::start_on(&url, &log, "w", &["--poll-ms", "100"], &[]);
    let noticed = log_says(&log, "w", "database unavailable").await;
    assert!(noticed, "the worker never said the database is unavailable: {}", worker_log(&log, "w"));
    assert!(worker.is_running(), "a worker does not give up on a database that is down: {}", worker_log(&log, "w"));

    cluster.start_server();
    // The worker creates the database and schema as soon as the server
    // answers (so may this client; whichever is first).
    let client = through_outages("connect", || Client::connect(&url)).await;
    let event = client.add_event("E", 60, 6).await.unwrap();
    let id = client.enqueue(Request::Book(SeatRequest::new(event, 3, 2, "ann"))).await.unwrap();
    let r = client.wait(id, Some(Duration::from_secs(60))).await.expect("the worker came up and processed it");
    assert_eq!(code(&r), "succeeded", "{r:?}");
    assert_eq!(worker.terminate(Duration::from_secs(30)), Some(0), "clean exit");
    assert_invariants(&client, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_during_an_outage_exits_zero_promptly() {
    let (cluster, url, log) = private_cluster("outage");
    let client = Client::connect(&url).await.expect("connect to the private cluster");
    let running = WorkerProcess::start_on(&url, &log, "running", &["--poll-ms", "100"], &[]);
    let registered = eventually(Duration::from_secs(60), || async {
        client.workers().await.is_ok_and(|w| w.iter().any(|w| w.name == "running"))
    })
    .await;
    assert!(registered, "the worker never came up: {}", worker_log(&log, "running"));

    cluster.stop_server();
    // A worker that is running when the server goes away notices at once...
    let noticed = log_says(&log, "running", "heartbeat failed").await;
    assert!(noticed, "the outage was never logged: {}", worker_log(&log, "running"));
    // ... and one started during the outage waits for the server.
    let mut waiting = WorkerProcess::start_on(&url, &log, "waiting", &[], &[]);
    let noticed = log_says(&log, "waiting", "database unavailable").await;
    assert!(noticed && waiting.is_running(), "{}", worker_log(&log, "waiting"));

    // Both stop cleanly on SIGTERM without waiting for the server. The bound
    // is generous (a noisy machine); a worker stuck on the database would sit
    // out its 30 s grace period and exit 130.
    running.signal("TERM");
    waiting.signal("TERM");
    assert_eq!(running.wait_exit(Duration::from_secs(20)), Some(0), "{}", worker_log(&log, "running"));
    assert_eq!(waiting.wait_exit(Duration::from_secs(20)), Some(0), "{}", worker_log(&log, "waiting"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_saturated_queue_drains_through_sigkills_and_database_restarts() {
    // A backlog of thousands of requests queued before any worker runs, more
    // enqueued meanwhile; workers SIGKILLed and started again every few
    // hundred milliseconds, and PostgreSQL restarted twice, while the queue
    // drains. Every request ends once, in an outcome a healthy run gives; no
    // seat is in two bookings; seats taken = seats granted.
    const BACKLOG: usize = 4000;
    const MORE: usize = 1000;
    const SEATS: i32 = 600;
    let (cluster, url, log) = private_cluster("saturated");
    let cluster = std::sync::Arc::new(cluster);
    let client = Client::connect(&url).await.expect("connect to the private cluster");
    let mut events = Vec::new();
    for n in 0..4 {
        events.push(client.add_event(&format!("E{n}"), SEATS, 6).await.unwrap());
    }
    let mut rng = fastrand::Rng::with_seed(23);
    let backlog = common::mixed_requests(&mut rng, &events, SEATS, 0, BACKLOG);
    let more = common::mixed_requests(&mut rng, &events, SEATS, BACKLOG, MORE);
    let mut ids = Vec::with_capacity(BACKLOG + MORE);
    for chunk in backlog.chunks(1000) {
        ids.extend(client.enqueue_many(chunk).await.unwrap());
    }

    let args = ["--concurrency", "2", "--batch-size", "16", "--poll-ms", "100"];
    let start = |name: String| WorkerProcess::start_on(&url, &log, &name, &args, &[]);
    let mut workers: Vec<WorkerProcess> = (0..3).map(|n| start(format!("w{n}"))).collect();

    // The rest is enqueued a chunk per step of chaos, so that requests keep
    // arriving through every kill and both restarts however fast the
    // workers drain. The first restart comes while the backlog is surely
    // still queued (the workers have only just started); a fast build may
    // have drained everything by the second, so the chunk enqueued just
    // before it is due a few seconds later, after the database is back.
    // That requests were still unfinished at each restart is checked at the
    // end.
    let started = Instant::now();
    let mut chaos = Chaos { cluster, rng, round: 0, kills: 0, unfinished_at_restarts: Vec::new() };
    for chunk in more.chunks(MORE / 10) {
        chaos.step(&client, &ids, &mut workers, &start).await;
        let mut chunk = chunk.to_vec();
        // The next step restarts the database again.
        if chaos.round + 1 == SECOND_RESTART {
            let due = chrono::Utc::now() + chrono::Duration::seconds(3);
            chunk.iter_mut().for_each(|r| r.run_at = Some(due));
        }
        ids.extend(through_outages("enqueue", || client.enqueue_many(&chunk)).await);
    }
    while unfinished(&client, &ids).await > 0 {
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "requests stuck after {} kills, {} restarts",
            chaos.kills,
            chaos.unfinished_at_restarts.len()
        );
        chaos.step(&client, &ids, &mut workers, &start).await;
    }
    let Chaos { kills, unfinished_at_restarts, .. } = chaos;
    let restarts = unfinished_at_restarts.len();
    let elapsed = started.elapsed();
    // A worker started by the last step may not be up yet: a SIGTERM before
    // its handler is installed ends it at once, not cleanly. Each is up
    // once registered.
    let names: Vec<String> = workers.iter().map(|w| w.name.clone()).collect();
    let up = common::eventually(Duration::from_secs(30), || async {
        let registered: Result<i64, sqlx::Error> =
            sqlx::query_scalar("SELECT count(DISTINCT name) FROM seatq.workers WHERE name = ANY($1)")
                .bind(&names)
                .fetch_one(client.pool())
                .await;
        registered.is_ok_and(|n| n as usize == names.len())
    })
    .await;
    assert!(up, "every worker registered: {names:?}");
    for w in workers {
        assert_eq!(w.terminate(Duration::from_secs(30)), Some(0), "workers exit cleanly after it all");
    }
    println!(
        "{} requests ({BACKLOG} queued before the workers started) drained in {:.1}s under {kills} SIGKILLs and {restarts} database restarts (requests unfinished at each: {unfinished_at_restarts:?})",
        ids.len(),
        elapsed.as_secs_f64()
    );
    assert!(kills >= 10 && restarts == 2, "the chaos planned: {kills} kills, {restarts} restarts");
    // The restarts tested the drain only if they came while requests were
    // still queued.
    assert!(
        unfinished_at_restarts.iter().all(|&n| n > 0),
        "requests unfinished at each database restart: {unfinished_at_restarts:?} ({kills} kills)"
    );

    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM seatq.requests").fetch_one(client.pool()).await.unwrap();
    assert_eq!(rows as usize, BACKLOG + MORE, "retried enqueues did not duplicate requests");
    let batch: Vec<NewRequest> = backlog.into_iter().chain(more).collect();
    let outcomes = common::assert_recovered(&client, &ids, &batch, &events).await;
    println!("outcomes: {outcomes:?}");
    assert_invariants(&client, true).await;
}

/// The step of the saturated-queue test's chaos that restarts the database
/// a second time (the first restarts it first).
const SECOND_RESTART: usize = 4;

/// The chaos of the saturated-queue test: what it has done so far.
struct Chaos {
    cluster: std::sync::Arc<PrivateCluster>,
    rng: fastrand::Rng,
    round: usize,
    kills: usize,
    /// At each database restart, how many of the test's requests were still
    /// unfinished just before it.
    unfinished_at_restarts: Vec<i64>,
}

impl Chaos {
    /// One step of chaos: after a pause of 50 to 250 ms, SIGKILL a random
    /// worker and start another in its place; on the 1st and 4th
    /// ([`SECOND_RESTART`]) steps, first
    /// count how many of `ids` are unfinished and restart the database (down
    /// for half a second).
    async fn step(
        &mut self,
        client: &Client,
        ids: &[i64],
        workers: &mut Vec<WorkerProcess>,
        start: &impl Fn(String) -> WorkerProcess,
    ) {
        self.round += 1;
        tokio::time::sleep(Duration::from_millis(self.rng.u64(50..250))).await;
        if [1, SECOND_RESTART].contains(&self.round) {
            self.unfinished_at_restarts.push(unfinished(client, ids).await);
            let cluster = self.cluster.clone();
            tokio::task::spawn_blocking(move || cluster.restart(Duration::from_millis(500))).await.unwrap();
        }
        let victim = self.rng.usize(..workers.len());
        workers.remove(victim).kill();
        self.kills += 1;
        workers.insert(victim, start(format!("w{victim}-{}", self.round)));
    }
}
