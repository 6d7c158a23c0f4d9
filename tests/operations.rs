//! What operators rely on: the worker registry, retrying dead requests,
//! retention, the metrics endpoint, and shutdown by signal.

mod common;

use std::time::Duration;

use common::{Running, TestDb, WorkerProcess, code, eventually, hold};
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
        db.client.workers().await.unwrap().iter().any(|w| w.name == "alpha" && w.settings["batch_size"] == seatq_worker::DEFAULT_BATCH_SIZE)
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
    let db = TestDb::new().await;
    let ev = db.client.add_event("E", 60, 6).await.unwrap();
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
    for id in &ids {
        let r = db.client.status(*id).await.unwrap();
        assert_eq!((r.status, r.error_code.as_deref()), (Status::Succeeded, None), "{r:?}");
    }
    db.assert_invariants(true).await;
    db.close().await;
}

#[tokio::test]
async fn retention_prunes_old_finished_requests_only() {
    let db = TestDb::new().await;
    let ev = db.client.add_event("E", 60, 6).await.unwrap();
    let mut ids = Vec::new();
    for n in 0..2500 {
        ids.push(Request::Book(hold(ev, 3, 1, &format!("c{n}"))).into());
    }
    let ids = db.client.enqueue_many(&ids).await.unwrap();
    db.drain().await;
    // 2,400 finished eight days ago, the rest recently; one more still queued.
    sqlx::query("UPDATE seatq.requests SET finished_at = now() - interval '8 days' WHERE id <= $1")
        .bind(ids[2399])
        .execute(&db.pool)
        .await
        .unwrap();
    let queued = db.client.enqueue(Request::Book(hold(ev, 3, 1, "late"))).await.unwrap();

    let pruned = db.client.prune(Duration::from_secs(7 * 24 * 3600)).await.unwrap();
    assert_eq!(pruned, 2400);
    let left: Vec<i64> =
        sqlx::query_scalar("SELECT id FROM seatq.requests ORDER BY id").fetch_all(&db.pool).await.unwrap();
    assert_eq!(left.len(), 101);
    assert_eq!(left[0], ids[2400]);
    assert_eq!(*left.last().unwrap(), queued);
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
    let db = TestDb::new().await;
    let ev = db.client.add_event("E", 12, 6).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    // One batch loop, and the four requests enqueued in one statement: they
    // are claimed in one batch and allocated in id order.
    let worker = db.worker(Config { concurrency: 1, ..Config::default() }).await.serve_metrics(listener);
    let shutdown = CancellationToken::new();
    let running = tokio::spawn({
        let (worker, token) = (worker.clone(), shutdown.clone());
        async move { worker.run(token).await }
    });
    let mut batch: Vec<seatq::NewRequest> =
        (0..3).map(|n| Request::Book(hold(ev, 1, 2, &format!("c{n}"))).into()).collect();
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
        "# TYPE seatq_batch_size histogram",
        "# TYPE seatq_contention_retries_total counter",
        "# TYPE seatq_holds_expired_total counter",
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_finishes_the_work_in_hand_and_exits_zero() {
    let db = TestDb::new().await;
    let ev = db.client.add_event("E", 250, 6).await.unwrap();
    let batch: Vec<_> = (0..2000).map(|n| Request::Book(hold(ev, 3, 1, &format!("c{n}"))).into()).collect();
    let ids = db.client.enqueue_many(&batch).await.unwrap();
    let worker = WorkerProcess::start(&db, "w", &["--batch-size", "8"], &[]);
    assert!(
        eventually(Duration::from_secs(60), || async {
            db.client.wait_all(&ids[..1], Some(Duration::ZERO)).await.is_ok()
        })
        .await,
        "the worker never started working"
    );
    worker.signal("TERM");
    assert_eq!(worker.wait_exit(Duration::from_secs(60)), Some(0), "graceful exit");
    // Whatever it had claimed it finished; the rest is still queued, untouched.
    let left: i64 =
        sqlx::query_scalar(seatq::sql::queue::COUNT_UNFINISHED).bind(&ids).fetch_one(&db.pool).await.unwrap();
    assert!(left > 0, "stopped before the queue was empty");
    let untouched: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM seatq.requests WHERE status = 'queued' AND attempts = 0 AND error_code IS NULL",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(untouched, left);
    db.assert_invariants(false).await;
    assert!(db.client.workers().await.unwrap().is_empty(), "deregistered on the way out");
    db.drain().await;
    db.assert_invariants(true).await;
    db.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_signal_exits_at_once_and_loses_nothing() {
    unsafe_free_fault_env();
    let db = TestDb::new().await;
    let ev = db.client.add_event("E", 20, 6).await.unwrap();
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
    let hanging = eventually(Duration::from_secs(60), || async {
        sqlx::query_scalar::<_, bool>(
            "SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE datname = current_database()
             AND application_name = 'seatq-worker' AND state = 'idle in transaction')",
        )
        .fetch_one(&db.pool)
        .await
        .unwrap_or(false)
    })
    .await;
    assert!(hanging);
    worker.signal("TERM");
    tokio::time::sleep(Duration::from_millis(300)).await;
    worker.signal("TERM");
    assert_eq!(worker.wait_exit(Duration::from_secs(10)), Some(130), "second signal: immediate exit");
    // Its open transaction rolled back: both requests are queued, no seat taken.
    let left: i64 =
        sqlx::query_scalar(seatq::sql::queue::COUNT_UNFINISHED).bind(&ids).fetch_one(&db.pool).await.unwrap();
    assert_eq!(left, 2);
    assert!(
        eventually(Duration::from_secs(10), || async { db.seats_taken(ev).await == 0 }).await,
        "no seat change of the unfinished batch survives"
    );
    // Without fault injection, fault:hang is an ordinary customer.
    Worker::new(db.pool.clone(), Config::default()).drain().await.unwrap();
    assert_eq!(db.seats_taken(ev).await, 4);
    db.assert_invariants(true).await;
    db.close().await;
}

/// This test binary never turns fault injection on in-process (only in the
/// worker processes it starts), so in-process workers treat `fault:*` names
/// as ordinary customers.
fn unsafe_free_fault_env() {
    assert!(std::env::var_os("SEATQ_FAULT_INJECTION").is_none());
}

#[tokio::test]
async fn the_claim_stays_an_index_seek_with_a_million_finished_requests() {
    let db = TestDb::new().await;
    let ev = db.client.add_event("E", 250, 6).await.unwrap();
    sqlx::query(
        "INSERT INTO seatq.requests (kind, payload, status, result, finished_at)
         SELECT 'book', '{}', 'succeeded', '{}', now() FROM generate_series(1, 1000000)",
    )
    .execute(&db.pool)
    .await
    .unwrap();
    let batch: Vec<_> = (0..100).map(|n| Request::Book(hold(ev, 3, 1, &format!("c{n}"))).into()).collect();
    let ids = db.client.enqueue_many(&batch).await.unwrap();
    sqlx::query("ANALYZE seatq.requests").execute(&db.pool).await.unwrap();

    let explain = format!("EXPLAIN (FORMAT JSON) {}", seatq::sql::queue::CLAIM_BATCH.replace("$1", "32"));
    let plan: serde_json::Value = sqlx::query_scalar(sqlx::AssertSqlSafe(explain)).fetch_one(&db.pool).await.unwrap();
    let plan = plan.to_string();
    assert!(plan.contains("\"Index Name\":\"requests_ready\""), "claim plan: {plan}");
    assert!(!plan.contains("Seq Scan"), "claim plan: {plan}");

    db.drain().await;
    db.client.wait_all(&ids, Some(Duration::ZERO)).await.expect("all 100 processed");
    db.close().await;
}
