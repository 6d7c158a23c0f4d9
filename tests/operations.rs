//! What operators rely on: the worker registry, retrying dead requests,
//! retention, the metrics endpoint, and shutdown by signal.

mod common;

use std::time::Duration;

use common::{
    Running, TestDb, WorkerProcess, bookings, code, count_queued, eventually, hold, worker_hangs_in_transaction,
};
use seatq::{Request, Status};
use seatq_worker::{Config, Worker};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio_util::sync::CancellationToken;

#[tokio::test]
async fn workers_register_heartbeat_and_drop_the_dead() {
    let db = TestDb::new().await;
    // A worker that died without deregistering, a minute ago.
    sqlx::query("INSERT INTO seatq.workers (name, host, pid, heartbeat_at) VALUES ('ghost', 'gone', 1, now() - interval '1 minute')")
        .execute(&db.pool)
        .await
        .unwrap();
    assert!(db.client.workers().await.unwrap().is_empty(), "a stale heartbeat is not a live worker");

    let config =
        Config { name: Some("alpha".into()), heartbeat_interval: Duration::from_millis(100), ..Config::default() };
    let workers = Running::start(&db, 1, config).await;
    let registered = eventually(Duration::from_secs(30), || async {
        db.client
            .workers()
            .await
            .unwrap()
            .iter()
            .any(|w| w.name == "alpha" && w.settings["batch_size"] == seatq_worker::DEFAULT_BATCH_SIZE)
    })
    .await;
    assert!(registered, "the worker never registered");
    let first = db.client.workers().await.unwrap()[0].heartbeat_at;
    assert!(
        eventually(Duration::from_secs(30), || async { db.client.workers().await.unwrap()[0].heartbeat_at > first })
            .await,
        "the heartbeat never moved"
    );
    let ghosts: i64 = sqlx::query_scalar("SELECT count(*) FROM seatq.workers WHERE name = 'ghost'")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(ghosts, 0, "live workers delete the rows of dead ones");

    workers.stop().await;
    assert!(db.client.workers().await.unwrap().is_empty(), "a worker that stops cleanly deregisters");
    db.close().await;
}

#[tokio::test]
async fn dead_requests_can_be_retried() {
    let (db, ev) = TestDb::with_event("E", 60, 6).await;
    let mut ids = Vec::new();
    for customer in ["ann", "bob", "cat"] {
        ids.push(db.client.enqueue(Request::Book(hold(ev, 3, 1, customer))).await.unwrap());
    }
    // As if each had failed unexpectedly max_attempts times.
    sqlx::query(
        "UPDATE seatq.requests SET status = 'dead', attempts = 5, error_code = 'internal',
         error_message = 'connection reset', finished_at = now() WHERE id = ANY($1)",
    )
    .bind(&ids)
    .execute(&db.pool)
    .await
    .unwrap();
    db.drain().await;
    assert_eq!(db.client.status(ids[0]).await.unwrap().status, Status::Dead, "workers leave dead requests alone");

    assert_eq!(db.client.retry_dead(Some(ids[0])).await.unwrap(), [ids[0]]);
    assert!(db.client.retry_dead(Some(ids[0])).await.unwrap().is_empty(), "only dead requests are retried");
    let r = db.client.status(ids[0]).await.unwrap();
    assert_eq!((r.status, r.attempts), (Status::Queued, 0));
    db.drain().await;
    assert_eq!(code(&db.client.status(ids[0]).await.unwrap()), "succeeded");
    assert_eq!(db.client.status(ids[1]).await.unwrap().status, Status::Dead);

    let mut rest = db.client.retry_dead(None).await.unwrap();
    rest.sort_unstable();
    assert_eq!(rest, ids[1..]);
    db.drain().await;
    for r in db.records(&ids).await {
        assert_eq!((r.status, r.error_code.as_deref()), (Status::Succeeded, None), "{r:?}");
    }
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn retention_prunes_old_finished_requests_only() {
    let (db, ev) = TestDb::with_event("E", 60, 6).await;
    let ids = db.client.enqueue_many(&bookings(ev, 3, 1, 2500)).await.unwrap();
    db.drain().await;
    // 2,400 finished eight days ago, the rest recently; one more still queued.
    sqlx::query("UPDATE seatq.requests SET finished_at = now() - interval '8 days' WHERE id <= $1")
        .bind(ids[2399])
        .execute(&db.pool)
        .await
        .unwrap();
    // A request that died eight days ago stays, for an operator to retry.
    let dead: i64 = sqlx::query_scalar(
        "INSERT INTO seatq.requests (kind, payload, status, attempts, error_code, error_message, finished_at)
         VALUES ('book', '{}', 'dead', 5, 'internal', 'connection reset', now() - interval '8 days') RETURNING id",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    let queued = db.client.enqueue(Request::Book(hold(ev, 3, 1, "late"))).await.unwrap();

    let pruned = db.client.prune(Duration::from_secs(7 * 24 * 3600)).await.unwrap();
    assert_eq!(pruned, 2400);
    let left: Vec<i64> =
        sqlx::query_scalar("SELECT id FROM seatq.requests ORDER BY id").fetch_all(&db.pool).await.unwrap();
    assert_eq!(left.len(), 102);
    assert_eq!(left[0], ids[2400]);
    assert_eq!(left[left.len() - 2..], [dead, queued]);
    assert_eq!(db.client.status(dead).await.unwrap().status, Status::Dead);
    // Bookings outlive the requests that made them; the invariants still hold.
    assert_eq!(db.seats_taken(ev).await, db.seats_granted(ev).await);
    db.assert_invariants(false).await;
    db.close().await;
}

async fn http_get(addr: std::net::SocketAddr, path: &str) -> String {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.write_all(format!("GET {path} HTTP/1.1\r\nhost: x\r\n\r\n").as_bytes()).await.unwrap();
    let mut out = String::new();
    stream.read_to_string(&mut out).await.unwrap();
    out
}

#[tokio::test]
async fn the_metrics_endpoint_reports_what_the_worker_did() {
    let (db, ev) = TestDb::with_event("E", 12, 6).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    // One batch loop, and the four requests enqueued in one statement: they
    // are claimed in one batch and allocated in id order.
    let worker = db
        .worker(Config { concurrency: 1, ..Config::default() })
        .await
        .serve_metrics(listener, seatq_core::http::DEFAULT_HEADER_TIMEOUT);
    let shutdown = CancellationToken::new();
    let running = tokio::spawn({
        let (worker, token) = (worker.clone(), shutdown.clone());
        async move { worker.run(token).await }
    });
    let mut batch = bookings(ev, 1, 2, 3);
    batch.push(Request::Book(hold(ev, 1, 9, "big")).into());
    let ids = db.client.enqueue_many(&batch).await.unwrap();
    db.client.wait_all(&ids, Some(Duration::from_secs(60))).await.unwrap();

    let health = http_get(addr, "/healthz").await;
    assert!(health.starts_with("HTTP/1.1 200") && health.ends_with("ok\n"), "{health}");
    let metrics = http_get(addr, "/metrics").await;
    assert!(metrics.starts_with("HTTP/1.1 200"), "{metrics}");
    for line in [
        "seatq_requests_total{kind=\"book\",outcome=\"succeeded\"} 3",
        "seatq_requests_total{kind=\"book\",outcome=\"sold_out\"} 1",
        "seatq_request_latency_seconds_count 4",
        "seatq_request_latency_seconds_bucket{le=\"+Inf\"} 4",
        "seatq_queue_depth{status=\"succeeded\"} 3",
        "seatq_queue_depth{status=\"failed\"} 1",
        "seatq_database_up 1",
        "seatq_queue_due 0",
        "seatq_queue_scheduled 0",
        "seatq_queue_oldest_due_seconds 0",
        "# TYPE seatq_batch_size histogram",
        "# TYPE seatq_contention_retries_total counter",
        "# TYPE seatq_holds_expired_total counter",
        "# TYPE seatq_turn_wait_seconds_total counter",
    ] {
        assert!(metrics.lines().any(|l| l == line), "missing {line:?} in\n{metrics}");
    }
    assert!(metrics.lines().any(|l| l.starts_with("seatq_worker_heartbeats_total ") && !l.ends_with(" 0")));
    assert!(http_get(addr, "/nope").await.starts_with("HTTP/1.1 404"));
    assert_eq!(worker.metrics().requests("book", "succeeded"), 3);
    shutdown.cancel();
    running.await.unwrap();
    db.close().await;
}

/// The metrics server of a worker whose database is unreachable (a pool of
/// a server nobody runs: nothing on port 1), on a free port: its address,
/// its shutdown, and the task serving it.
async fn metrics_without_database(
    header_timeout: Duration,
) -> (std::net::SocketAddr, CancellationToken, tokio::task::JoinHandle<()>) {
    let pool = sqlx::postgres::PgPoolOptions::new()
        .acquire_timeout(Duration::from_millis(500))
        .connect_lazy("postgres://postgres@127.0.0.1:1/none")
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let metrics = std::sync::Arc::new(seatq_worker::metrics::Metrics::default());
    let shutdown = CancellationToken::new();
    let serving = tokio::spawn(seatq_worker::metrics::serve(listener, metrics, pool, header_timeout, shutdown.clone()));
    (addr, shutdown, serving)
}

#[tokio::test]
async fn health_fails_while_the_database_is_unreachable_and_the_server_stops_with_the_worker() {
    let (addr, shutdown, serving) = metrics_without_database(seatq_core::http::DEFAULT_HEADER_TIMEOUT).await;

    let health = http_get(addr, "/healthz").await;
    assert!(health.starts_with("HTTP/1.1 503") && health.contains("database: "), "{health}");
    let metrics = http_get(addr, "/metrics").await;
    assert!(metrics.starts_with("HTTP/1.1 200"), "{metrics}");
    assert!(metrics.lines().any(|l| l == "seatq_database_up 0"), "{metrics}");
    assert!(!metrics.contains("seatq_queue_due"), "no queue gauges without the database: {metrics}");
    assert!(metrics.lines().any(|l| l == "# TYPE seatq_requests_total counter"), "{metrics}");
    let mut post = tokio::net::TcpStream::connect(addr).await.unwrap();
    post.write_all(b"POST /metrics HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\n\r\n").await.unwrap();
    let mut answer = String::new();
    post.read_to_string(&mut answer).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 405"), "{answer}");

    // A client that connects and never sends its request does not hold the
    // worker's shutdown up.
    let _silent = tokio::net::TcpStream::connect(addr).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(5), serving).await.expect("stopped with the worker").unwrap();
}

#[tokio::test]
async fn the_metrics_endpoint_closes_a_connection_that_never_finishes_its_request() {
    // No database needed: /metrics answers without one.
    let (addr, shutdown, serving) = metrics_without_database(Duration::from_secs(1)).await;

    // Headers begun and never finished: closed, with no answer. (The bound
    // only keeps a server that never closes it from hanging the test.)
    let mut slow = tokio::net::TcpStream::connect(addr).await.unwrap();
    slow.write_all(b"GET /metrics HTTP/1.1\r\nhost: x\r\n").await.unwrap();
    let mut rest = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), slow.read_to_end(&mut rest))
        .await
        .expect("the server closed the connection")
        .unwrap();
    assert!(rest.is_empty(), "{}", String::from_utf8_lossy(&rest));
    // A whole request is still answered.
    let answer = http_get(addr, "/metrics").await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");

    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(5), serving).await.expect("stopped").unwrap();
}

/// Is request `id` locked by some transaction (a worker's claim)? Asked with
/// `FOR UPDATE NOWAIT` from a transaction of our own, rolled back at once.
async fn is_claimed(db: &TestDb, id: i64) -> bool {
    let mut tx = db.pool.begin().await.unwrap();
    let probe = sqlx::query("SELECT id FROM seatq.requests WHERE id = $1 FOR UPDATE NOWAIT")
        .bind(id)
        .fetch_optional(&mut *tx)
        .await;
    tx.rollback().await.unwrap();
    match probe {
        Ok(_) => false,
        Err(e) if seatq::sqlstate::is_lock_unavailable(&e) => true,
        Err(e) => panic!("probing request {id}: {e}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_finishes_the_batch_in_hand_and_exits_zero() {
    unsafe_free_fault_env();
    let (db, ev) = TestDb::with_event("E", 250, 6).await;
    // One batch loop taking one request at a time; fault:slow pauses inside
    // its batch transaction, so the signal arrives while a batch is in hand.
    let args = ["--concurrency", "1", "--batch-size", "1", "--backlog-batch-size", "1"];
    let worker = WorkerProcess::start(&db, "w", &args, &[("SEATQ_FAULT_INJECTION", "1")]);
    let backlog = bookings(ev, 3, 1, 20);
    // Catch a slow request while it is claimed. Should one finish before we
    // look (a very slow test machine), try again with another.
    let mut slow = None;
    for _ in 0..5 {
        let id = db.client.enqueue(Request::Book(hold(ev, 3, 2, "fault:slow"))).await.unwrap();
        let claimed = eventually(Duration::from_secs(60), || async {
            is_claimed(&db, id).await || db.client.status(id).await.unwrap().status != Status::Queued
        })
        .await;
        assert!(claimed, "the worker never claimed the slow request");
        if is_claimed(&db, id).await {
            slow = Some(id);
            break;
        }
    }
    let slow = slow.expect("never caught a slow request in its batch");
    let backlog = db.client.enqueue_many(&backlog).await.unwrap();
    worker.signal("TERM");
    assert_eq!(worker.wait_exit(Duration::from_secs(60)), Some(0), "graceful exit");

    // The batch in hand was finished, not abandoned.
    let r = db.client.status(slow).await.unwrap();
    assert_eq!(code(&r), "succeeded", "{r:?}");
    let booking = r.booking().expect("the slow request's booking");
    assert_eq!((booking.state.as_str(), booking.seats.len()), ("booked", 2), "{r:?}");
    // Whatever else it took it finished; the rest is still queued, untouched.
    for id in backlog {
        let r = db.client.status(id).await.unwrap();
        let untouched = r.status == Status::Queued && r.attempts == 0 && r.error_code.is_none();
        assert!(untouched || code(&r) == "succeeded", "{r:?}");
    }
    db.assert_invariants(false).await;
    assert!(db.client.workers().await.unwrap().is_empty(), "deregistered on the way out");
    db.drain().await;
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn a_bad_url_or_a_refused_login_fails_at_once() {
    let db = TestDb::new().await;
    // A role the server does not know: no amount of waiting helps.
    let options = seatq::db::options(&db.url()).unwrap();
    let (host, port) = (options.get_host().to_string(), options.get_port());
    let url = if host.starts_with('/') {
        format!("postgres://seatq_no_such_role@localhost:{port}/{}?host={host}", db.name)
    } else {
        format!("postgres://seatq_no_such_role@{host}:{port}/{}", db.name)
    };
    let prefix = format!("{}-refused", db.name);
    let refused = WorkerProcess::start_on(&url, &prefix, "w", &[], &[]);
    assert_eq!(refused.wait_exit(Duration::from_secs(30)), Some(1), "a refused login ends the worker");
    let log = common::worker_log(&prefix, "w");
    assert!(log.contains("seatq_no_such_role"), "the error names the problem: {log}");

    let prefix = format!("{}-bad-url", db.name);
    let bad = WorkerProcess::start_on("not a url", &prefix, "w", &[], &[]);
    assert_eq!(bad.wait_exit(Duration::from_secs(30)), Some(1), "a bad URL ends the worker");
    assert!(common::worker_log(&prefix, "w").contains("bad database URL"));
    db.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_signal_exits_at_once_and_loses_nothing() {
    unsafe_free_fault_env();
    let (db, ev) = TestDb::with_event("E", 20, 6).await;
    // The worker hangs mid-batch, so the first SIGTERM cannot finish.
    let ids = db
        .client
        .enqueue_many(&[
            Request::Book(hold(ev, 1, 2, "ann")).into(),
            Request::Book(hold(ev, 1, 2, "fault:hang")).into(),
        ])
        .await
        .unwrap();
    let worker = WorkerProcess::start(&db, "w", &[], &[("SEATQ_FAULT_INJECTION", "1")]);
    let hanging = eventually(Duration::from_secs(60), || worker_hangs_in_transaction(&db)).await;
    assert!(hanging);
    worker.signal("TERM");
    tokio::time::sleep(Duration::from_millis(300)).await;
    worker.signal("TERM");
    assert_eq!(worker.wait_exit(Duration::from_secs(10)), Some(130), "second signal: immediate exit");
    // Its open transaction rolled back: both requests are queued, no seat taken.
    let left = count_queued(&db.pool, &ids).await.unwrap();
    assert_eq!(left, 2);
    assert!(
        eventually(Duration::from_secs(10), || async { db.seats_taken(ev).await == 0 }).await,
        "no seat change of the unfinished batch survives"
    );
    // Without fault injection, fault:hang is an ordinary customer.
    Worker::new(db.pool.clone(), Config::default()).drain().await.unwrap();
    assert_eq!(db.seats_taken(ev).await, 4);
    db.assert_invariants_and_close().await;
}

/// This test binary never turns fault injection on in-process (only in the
/// worker processes it starts), so in-process workers treat `fault:*` names
/// as ordinary customers.
fn unsafe_free_fault_env() {
    assert!(std::env::var_os("SEATQ_FAULT_INJECTION").is_none());
}

#[tokio::test]
async fn the_claim_stays_an_index_seek_with_a_million_finished_requests() {
    let (db, ev) = TestDb::with_event("E", 250, 6).await;
    sqlx::query(
        "INSERT INTO seatq.requests (kind, payload, status, result, finished_at)
         SELECT 'book', '{}', 'succeeded', '{}', now() FROM generate_series(1, 1000000)",
    )
    .execute(&db.pool)
    .await
    .unwrap();
    let batch = bookings(ev, 3, 1, 100);
    let ids = db.client.enqueue_many(&batch).await.unwrap();
    sqlx::query("ANALYZE seatq.requests").execute(&db.pool).await.unwrap();

    let claim = seatq_worker::sql::claim::CLAIM_BATCH.replace("$1", "32");
    assert_seeks_index(&db, &claim, "requests_ready", "claim plan").await;
    // So does the queue count every /metrics scrape makes.
    assert_seeks_index(&db, seatq_worker::sql::metrics::QUEUED_NOW, "requests_ready", "queue count plan").await;

    db.drain().await;
    db.client.wait_all(&ids, Some(Duration::ZERO)).await.expect("all 100 processed");
    db.close().await;
}

/// Assert the plan of `sql` (a statement without parameters) reads through
/// `index` and scans no table whole.
async fn assert_seeks_index(db: &TestDb, sql: &str, index: &str, what: &str) {
    let explain = format!("EXPLAIN (FORMAT JSON) {sql}");
    let plan: serde_json::Value = sqlx::query_scalar(sqlx::AssertSqlSafe(explain)).fetch_one(&db.pool).await.unwrap();
    let plan = plan.to_string();
    assert!(plan.contains(&format!("\"Index Name\":\"{index}\"")), "{what}: {plan}");
    assert!(!plan.contains("Seq Scan"), "{what}: {plan}");
}

#[tokio::test]
async fn a_worker_warms_every_connection_it_opens() {
    // Every connection of a started worker has already run (so prepared and
    // planned) the statements of a batch, the spread function's included.
    let db = TestDb::new().await;
    db.client.add_event("Venue", 100, 10).await.unwrap();
    let worker = Worker::connect(&db.url(), Config { concurrency: 3, ..Config::default() }).await.unwrap();
    let pool = worker.pool();
    assert_eq!(pool.size(), 5, "one connection per loop, and two more");
    let pids = assert_every_connection_warm(pool).await;
    // Connections the pool opens later (here: replacing ones whose server
    // process was terminated, as after a restart) are warmed as they open.
    let terminated: i64 = sqlx::query_scalar("SELECT count(*) FROM unnest($1::int[]) p WHERE pg_terminate_backend(p)")
        .bind(&pids)
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(terminated, 5);
    let new_pids = assert_every_connection_warm(pool).await;
    assert!(new_pids.iter().all(|p| !pids.contains(p)), "new connections: {pids:?} then {new_pids:?}");
    pool.close().await;
    db.close().await;
}

/// Hold every connection of `pool` and check that each has run (so prepared
/// and planned) the statements of a batch, the spread function's included.
/// Returns their server process ids.
async fn assert_every_connection_warm(pool: &sqlx::PgPool) -> Vec<i32> {
    use seatq_worker::sql::{allocation, claim};
    let mut conns = Vec::new();
    for _ in 0..pool.size() {
        conns.push(pool.acquire().await.unwrap());
    }
    let mut pids = Vec::new();
    for conn in &mut conns {
        pids.push(sqlx::query_scalar("SELECT pg_backend_pid()").fetch_one(&mut **conn).await.unwrap());
        let prepared: Vec<String> =
            sqlx::query_scalar("SELECT statement FROM pg_prepared_statements").fetch_all(&mut **conn).await.unwrap();
        for statement in [
            claim::CLAIM_BATCH,
            allocation::LOCK_CHEAPEST,
            allocation::TAKE_SEATS,
            claim::RECORD_OUTCOMES,
            allocation::WARM_SPREAD,
        ] {
            assert!(prepared.iter().any(|p| p == statement), "not prepared: {statement}\nprepared: {prepared:#?}");
        }
    }
    pids
}

#[tokio::test]
async fn a_hot_batch_takes_its_seats_by_primary_key_not_by_scanning_the_venue() {
    // One 20,000-seat venue and a batch of 100 parties taking 450 of its
    // seats: with the default random_page_cost (4), the planner would read
    // the whole venue to find them; worker sessions set it to 1.1.
    let (db, ev) = TestDb::with_event("Venue", 20_000, 6).await;
    let seat_requests: Vec<i64> = (0..450).map(|n| 1 + n * 100 / 450).collect();
    assert_seats_taken_by_seeks(&db, ev, 100, &seat_requests, 10_001).await;
    db.close().await;
}

#[tokio::test]
async fn a_big_batch_takes_its_seats_by_primary_key_not_by_merging_with_every_seat() {
    // A backlog's batch of 1,000 parties on a big venue: a planner that
    // joins the parties to their seats first overestimates the rows several
    // times over and merges them with a scan of every seat instead.
    let (db, ev) = TestDb::with_event("Stadium", 150_000, 50).await;
    let seat_requests: Vec<i64> = (1..=1000).collect();
    assert_seats_taken_by_seeks(&db, ev, 1000, &seat_requests, 50_001).await;
    db.close().await;
}

/// Plan take-seats, as a worker session would, for `requests` bookings of
/// event `ev` taking one seat each of `seat_requests` (the request of each),
/// seats numbered from `first`, and check that every seat is reached by a
/// primary-key seek.
async fn assert_seats_taken_by_seeks(db: &TestDb, ev: i64, requests: usize, seat_requests: &[i64], first: i32) {
    sqlx::query("VACUUM ANALYZE seatq.seats").execute(&db.pool).await.unwrap();
    let worker = db.worker(Config::default()).await;
    let ids: Vec<i64> = (1..=requests as i64).collect();
    let seats: Vec<i32> = (first..).take(seat_requests.len()).collect();
    let explain = format!("EXPLAIN (FORMAT JSON) {}", seatq_worker::sql::allocation::TAKE_SEATS);
    let plan: serde_json::Value = sqlx::query_scalar(sqlx::AssertSqlSafe(explain))
        .bind(&ids)
        .bind(vec![ev; requests])
        .bind(vec!["c"; requests])
        .bind(vec![seatq::BookingState::Booked; requests])
        .bind(vec![1000i64; requests])
        .bind(vec![None::<i32>; requests])
        .bind(seat_requests)
        .bind(vec![ev; seat_requests.len()])
        .bind(&seats)
        .bind(vec!["postgres"; requests])
        .bind(vec![false; requests])
        .bind(vec![None::<Vec<u8>>; requests])
        .bind(vec![None::<&str>; requests])
        .fetch_one(worker.pool())
        .await
        .unwrap();
    let mut scans = Vec::new();
    seat_scans(&plan, &mut scans);
    assert!(!scans.is_empty(), "take-seats plan reads no seats: {plan}");
    for scan in scans {
        assert_eq!(scan["Node Type"], "Index Scan", "take-seats plan: {plan}");
        assert_eq!(scan["Index Name"], "seats_pkey", "take-seats plan: {plan}");
        assert!(scan.get("Index Cond").is_some(), "a seek, not the whole index: {plan}");
    }
    worker.pool().close().await;
}

/// The plan nodes that read seatq.seats (not the update itself).
fn seat_scans<'p>(node: &'p serde_json::Value, out: &mut Vec<&'p serde_json::Value>) {
    match node {
        serde_json::Value::Array(nodes) => nodes.iter().for_each(|n| seat_scans(n, out)),
        serde_json::Value::Object(fields) => {
            if fields.get("Relation Name").and_then(|r| r.as_str()) == Some("seats")
                && fields.get("Node Type").and_then(|t| t.as_str()) != Some("ModifyTable")
            {
                out.push(node);
            }
            fields.values().for_each(|v| seat_scans(v, out));
        }
        _ => {}
    }
}
