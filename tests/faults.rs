//! Faults, with real `seatq-worker` processes: workers SIGKILLed mid-batch or
//! frozen, random kills under load, a request that breaks its connection. Nothing may be lost, doubled or left half
//! done. The recovery times (from the signal to the last outcome recorded)
//! are printed (run with `--nocapture`); they are measured here, never
//! asserted.

mod common;

use std::time::{Duration, Instant};

use common::{TestDb, WorkerProcess, bookings, code, count_queued, eventually, hold, worker_hangs_in_transaction};
use seatq::{Request, Status};

async fn unfinished(db: &TestDb, ids: &[i64]) -> i64 {
    count_queued(&db.pool, ids).await.unwrap()
}

/// Five bookings and one that hangs, in one batch: the victim holds seat
/// changes for the five, uncommitted, when it dies.
async fn batch_with_a_hang(db: &TestDb, event: i64) -> Vec<i64> {
    let mut batch = bookings(event, 3, 2, 5);
    batch.push(Request::Book(hold(event, 3, 2, "fault:hang")).into());
    db.client.enqueue_many(&batch).await.unwrap()
}

/// Whether some worker's rescue session waits for another worker's life
/// lock (`worker/src/rescue.rs`): the survivor is watching the victim.
async fn watching(db: &TestDb) -> bool {
    sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM pg_stat_activity
         WHERE datname = current_database() AND application_name = 'seatq-worker-rescue'
           AND wait_event_type = 'Lock' AND wait_event = 'advisory')",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap_or(false)
}

/// Milliseconds from `since` to the last outcome recorded among `ids` (the
/// server's clock, on this machine).
async fn ms_to_last_outcome(db: &TestDb, ids: &[i64], since: std::time::SystemTime) -> f64 {
    let last: f64 = sqlx::query_scalar(
        "SELECT extract(epoch FROM max(finished_at))::float8 FROM seatq.requests WHERE id = ANY($1)",
    )
    .bind(ids)
    .fetch_one(&db.pool)
    .await
    .unwrap();
    let since = since.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
    (last - since) * 1000.0
}

/// On a test database of its own, the victim hangs mid-batch; `stop` ends it
/// (SIGKILL or SIGSTOP); a survivor must finish every request. Returns the
/// time from `stop` to the last outcome, in milliseconds.
async fn take_over(stop: &str) -> f64 {
    let db = TestDb::new().await;
    let event = db.client.add_event("E", 100, 6).await.unwrap();
    let victim = WorkerProcess::start(&db, "victim", &[], &[("SEATQ_FAULT_INJECTION", "1")]);
    let ids = batch_with_a_hang(&db, event).await;
    assert!(eventually(Duration::from_secs(60), || worker_hangs_in_transaction(&db)).await, "victim never claimed");
    assert_eq!(db.seats_taken(event).await, 0, "uncommitted seat changes are invisible");
    // The survivor runs without fault injection: to it, fault:hang is a name.
    let survivor = WorkerProcess::start(&db, "survivor", &[], &[]);
    // Let it connect, go idle and watch the victim (its rescue session waits
    // for the victim's life lock), then stop the victim at a random phase of
    // the survivor's 500 ms poll.
    assert!(eventually(Duration::from_secs(60), || watching(&db)).await, "the survivor never watched the victim");
    tokio::time::sleep(Duration::from_millis(500 + fastrand::u64(0..500))).await;
    assert_eq!(unfinished(&db, &ids).await, 6, "the victim's claim holds while it lives");

    let stopped = std::time::SystemTime::now();
    victim.signal(stop);
    let done = eventually(Duration::from_secs(60), || async { unfinished(&db, &ids).await == 0 }).await;
    assert!(done, "the survivor never finished the victim's batch");
    let recovery = ms_to_last_outcome(&db, &ids, stopped).await;
    if stop == "STOP" {
        victim.signal("CONT");
    }
    victim.kill();
    for r in db.records(&ids).await {
        assert_eq!((r.status, r.attempts), (Status::Succeeded, 0), "{r:?}");
    }
    assert_eq!(db.seats_taken(event).await, 12, "each of the six bookings took its two seats once");
    assert_eq!(db.seats_granted(event).await, 12);
    assert_eq!(survivor.terminate(Duration::from_secs(30)), Some(0), "the survivor exits cleanly");
    db.assert_invariants_and_close().await;
    recovery
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_mid_batch_loses_nothing_and_is_taken_over_at_once() {
    let recovery = take_over("KILL").await;
    println!(
        "recovery after SIGKILL mid-batch (death to last outcome): {recovery:.0} ms (survivor idle, polling every 500 ms)"
    );
}

/// A worker killed within a second of its start is taken over through the
/// watch, not the poll: the survivor, running first and idle, polls only
/// every ten minutes, and the victim claims a batch that falls due just
/// after it starts. Before workers announced themselves, the survivor read
/// the ring of workers only every ten seconds and never watched a worker
/// that died younger than that: its requests waited for the poll.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_just_after_it_started_is_taken_over_through_the_watch() {
    let db = TestDb::new().await;
    let event = db.client.add_event("E", 100, 6).await.unwrap();
    let survivor = WorkerProcess::start(&db, "survivor", &["--poll-ms", "600000"], &[]);
    let registered = || async {
        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM seatq.workers").fetch_one(&db.pool).await.unwrap() == 1
    };
    assert!(eventually(Duration::from_secs(60), registered).await, "the survivor never registered");

    // Due a moment from now: the survivor, woken by the enqueue, finds
    // nothing due and goes back to its ten-minute poll; the victim, polling
    // every 50 ms, claims the batch as it falls due.
    let due = chrono::Utc::now() + chrono::Duration::milliseconds(400);
    let mut batch = bookings(event, 3, 2, 5);
    batch.push(Request::Book(hold(event, 3, 2, "fault:hang")).into());
    for new in &mut batch {
        new.run_at = Some(due);
    }
    let ids = db.client.enqueue_many(&batch).await.unwrap();
    let started = Instant::now();
    // One batch loop: with two, both may claim part of the batch as it falls
    // due, and the one without the hanging request finishes its part.
    let victim = WorkerProcess::start(
        &db,
        "victim",
        &["--poll-ms", "50", "--concurrency", "1"],
        &[("SEATQ_FAULT_INJECTION", "1")],
    );
    assert!(eventually(Duration::from_secs(60), || worker_hangs_in_transaction(&db)).await, "victim never claimed");
    assert_eq!(unfinished(&db, &ids).await, 6, "the victim's claim holds while it lives");
    let age = started.elapsed();
    let killed = std::time::SystemTime::now();
    victim.kill();

    // Well within the survivor's poll: only the watch can have woken it.
    let done = eventually(Duration::from_secs(120), || async { unfinished(&db, &ids).await == 0 }).await;
    assert!(done, "the survivor never took over the requests of a worker that died young");
    let recovery = ms_to_last_outcome(&db, &ids, killed).await;
    println!("a worker killed {} ms after its start: taken over in {recovery:.0} ms", age.as_millis());
    for r in db.records(&ids).await {
        assert_eq!((r.status, r.attempts), (Status::Succeeded, 0), "{r:?}");
    }
    assert_eq!(db.seats_taken(event).await, 12, "each of the six bookings took its two seats once");
    assert_eq!(survivor.terminate(Duration::from_secs(30)), Some(0), "the survivor exits cleanly");
    db.assert_invariants_and_close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_worker_is_cut_off_and_taken_over() {
    // A frozen process (SIGSTOP) looks to the server like a lost host: its
    // socket stays open and nothing comes. idle_in_transaction_session_timeout
    // (10 s) ends its transaction and frees its claim.
    let recovery = take_over("STOP").await;
    println!("recovery from a frozen worker mid-batch (freeze to last outcome): {recovery:.0} ms");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_sigkills_under_load_lose_nothing() {
    const EVENTS: i32 = 4;
    const SEATS: i32 = 250;
    const REQUESTS: usize = 3000;
    const WORKERS: usize = 4;
    let db = TestDb::new().await;
    let mut events = Vec::new();
    for n in 0..EVENTS {
        events.push(db.client.add_event(&format!("E{n}"), SEATS, 6).await.unwrap());
    }
    let mut rng = fastrand::Rng::with_seed(11);
    let batch = common::mixed_requests(&mut rng, &events, SEATS, 0, REQUESTS);
    // Small batches throughout (no growth with the backlog): many
    // transactions in flight for the kills to land in.
    let args = ["--concurrency", "2", "--batch-size", "16", "--backlog-batch-size", "16", "--poll-ms", "100"];
    let mut workers: Vec<WorkerProcess> =
        (0..WORKERS).map(|n| WorkerProcess::start(&db, &format!("w{n}"), &args, &[])).collect();
    // The requests arrive in waves, a kill after each, so that every kill
    // lands while work is in hand however fast the workers drain.
    let mut waves = batch.chunks(250);
    let mut ids = Vec::new();

    let started = Instant::now();
    let mut kills = 0;
    let mut restarts = 0;
    loop {
        match waves.next() {
            Some(wave) => ids.extend(db.client.enqueue_many(wave).await.unwrap()),
            None if unfinished(&db, &ids).await == 0 => break,
            None => {}
        }
        assert!(started.elapsed() < Duration::from_secs(300), "requests stuck after {kills} kills");
        tokio::time::sleep(Duration::from_millis(rng.u64(20..200))).await;
        let victim = rng.usize(..workers.len());
        let name = format!("w{victim}-{restarts}");
        workers.remove(victim).kill();
        kills += 1;
        restarts += 1;
        workers.insert(victim, WorkerProcess::start(&db, &name, &args, &[]));
    }
    let elapsed = started.elapsed();
    // The last one started may still be starting: asked to stop before it
    // listens for the signal, it would die of it. Registered, it listens.
    let registered = eventually(Duration::from_secs(60), || async {
        let live = db.client.workers().await.unwrap();
        workers.iter().all(|w| live.iter().any(|l| l.name == w.name))
    })
    .await;
    assert!(registered, "every worker registers");
    for w in workers {
        assert_eq!(w.terminate(Duration::from_secs(30)), Some(0), "graceful exit");
    }
    println!("{REQUESTS} requests finished in {:.1}s under {kills} SIGKILLs", elapsed.as_secs_f64());
    assert!(kills >= 3, "too few kills to mean anything: {kills}");

    let outcomes = common::assert_recovered(&db.client, &ids, &batch, &events).await;
    println!("outcomes: {outcomes:?}");
    db.assert_invariants_and_close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_that_breaks_its_connection_ends_dead_and_the_rest_succeed() {
    // The request ends its own database session mid-batch, so its whole batch
    // fails; claiming one at a time afterwards, the worker finds it out and
    // counts its attempts like any failure's.
    let db = TestDb::new().await;
    let injecting = [("SEATQ_FAULT_INJECTION", "1")];
    let r = one_dead_among_six(&db, Culprit { customer: "fault:terminate", at: 3, worker: "breaker", env: &injecting })
        .await;
    let message = r.error_message.as_deref().unwrap_or_default();
    assert!(message.contains("attempt 2 of 2") && message.contains("batch failed"), "{r:?}");
    db.assert_invariants_and_close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_whose_seats_cannot_be_taken_ends_dead_and_the_rest_of_its_batch_succeeds() {
    // A batch of cheapest-first bookings is allocated at once, so one request
    // whose booking the database refuses fails the whole allocation: the
    // worker must find that request out, count its attempts like any
    // failure's, and book the others.
    let db = TestDb::new().await;
    sqlx::raw_sql(
        "CREATE FUNCTION public.refuse_booking() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN
             IF NEW.customer = 'refused' THEN RAISE EXCEPTION 'booking refused by the test'; END IF;
             RETURN NEW;
         END $$;
         CREATE TRIGGER refuse BEFORE INSERT ON seatq.bookings
             FOR EACH ROW EXECUTE FUNCTION public.refuse_booking();",
    )
    .execute(&db.pool)
    .await
    .unwrap();
    let r = one_dead_among_six(&db, Culprit { customer: "refused", at: 2, worker: "refused", env: &[] }).await;
    assert!(r.error_message.as_deref().unwrap_or_default().contains("booking refused by the test"), "{r:?}");
    db.assert_invariants_and_close().await;
}

/// A request that fails every attempt, among good ones: its customer name,
/// where it stands in the batch, and the name and environment of the worker
/// process that meets it.
struct Culprit<'a> {
    customer: &'a str,
    at: usize,
    worker: &'a str,
    env: &'a [(&'a str, &'a str)],
}

/// Six one-seat bookings of a new event with the culprit among them, each
/// allowed two attempts (the default is five), processed by a worker process
/// with one batch loop: the culprit ends dead (returned, for its message),
/// every other request succeeds at its first attempt, and the worker exits
/// cleanly on SIGTERM.
async fn one_dead_among_six(db: &TestDb, culprit: Culprit<'_>) -> seatq::RequestRecord {
    let event = db.client.add_event("E", 60, 6).await.unwrap();
    let mut batch = bookings(event, 3, 1, 6);
    batch.insert(culprit.at, Request::Book(hold(event, 3, 1, culprit.customer)).into());
    let ids = db.client.enqueue_many(&batch).await.unwrap();
    sqlx::query("UPDATE seatq.requests SET max_attempts = 2").execute(&db.pool).await.unwrap();
    let args = ["--concurrency", "1", "--batch-size", "16", "--poll-ms", "100"];
    let worker = WorkerProcess::start(db, culprit.worker, &args, culprit.env);

    let dead = ends_dead(db, ids[culprit.at]).await;
    the_others_succeed(db, &ids, dead.id, event).await;
    assert_eq!(worker.terminate(Duration::from_secs(30)), Some(0), "the worker exits cleanly");
    dead
}

/// Wait for `id`, with `max_attempts` 2, to end dead after two failed
/// attempts (retry delays, seconds, are skipped by moving run_at); returns it.
async fn ends_dead(db: &TestDb, id: i64) -> seatq::RequestRecord {
    let dead = eventually(Duration::from_secs(60), || async {
        sqlx::query("UPDATE seatq.requests SET run_at = now() WHERE id = $1 AND status = 'queued'")
            .bind(id)
            .execute(&db.pool)
            .await
            .unwrap();
        db.client.status(id).await.unwrap().status == Status::Dead
    })
    .await;
    let r = db.client.status(id).await.unwrap();
    assert!(dead, "a request that breaks its batch must end dead: {r:?}");
    assert_eq!((code(&r), r.attempts), ("internal", 2), "{r:?}");
    r
}

/// Every request of `ids` but the dead one succeeds at its first attempt,
/// each taking one seat of `event`; the dead one takes none.
async fn the_others_succeed(db: &TestDb, ids: &[i64], dead: i64, event: i64) {
    assert!(eventually(Duration::from_secs(60), || async { unfinished(db, ids).await == 0 }).await);
    for id in ids.iter().filter(|id| **id != dead) {
        let r = db.client.status(*id).await.unwrap();
        assert_eq!((r.status, r.attempts), (Status::Succeeded, 0), "the requests around it are unharmed: {r:?}");
    }
    assert_eq!(db.seats_taken(event).await, ids.len() as i64 - 1, "the dead request took no seats");
}
