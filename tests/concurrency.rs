//! Many workers, one hot event: no seat twice, every party whole or refused,
//! every request finished exactly once; and a worker's loops take turns.

mod common;

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use common::{Running, TestDb, WorkerProcess, code, count_queued, hold};
use seatq::{NewRequest, Request, SeatRequest, Status};
use seatq_worker::Config;

const SEATS: i32 = 200;
const WORKERS: usize = 8;
const REQUESTS: usize = 2000;

/// A realistic mix: cheapest-first parties of 1-4 (some partial), parties
/// wanting adjacent seats, named seats, holds and bookings; then singles at a
/// lower priority to mop up what is left.
fn mixed_requests(event: i64) -> Vec<NewRequest> {
    let mut rng = fastrand::Rng::with_seed(7);
    let mut out = Vec::with_capacity(REQUESTS);
    for n in 0..REQUESTS - 100 {
        let customer = format!("c{n}");
        let class = match rng.u8(0..100) {
            0..15 => 1,
            15..40 => 2,
            _ => 3,
        };
        let mut r = SeatRequest::new(event, class, rng.u32(1..=4), customer.clone());
        match rng.u8(0..100) {
            0..10 => r.partial = true,
            10..25 => r.together = true,
            25..40 => {
                let mut seats: Vec<i32> = (0..rng.usize(1..=3)).map(|_| rng.i32(1..=SEATS)).collect();
                seats.sort_unstable();
                seats.dedup();
                r = SeatRequest::named(event, seats, customer);
            }
            _ => {}
        }
        out.push(NewRequest::from(if rng.bool() { Request::Hold(r) } else { Request::Book(r) }));
    }
    for class in [1, 2, 3] {
        for n in 0..34 {
            let r = SeatRequest::new(event, class, 1, format!("single{class}-{n}"));
            out.push(NewRequest { priority: -1, ..NewRequest::from(Request::Book(r)) });
        }
    }
    out.truncate(REQUESTS);
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_workers_two_thousand_requests_one_event() {
    let db = TestDb::new().await;
    let event = db.client.add_event("Hot", SEATS, 6).await.unwrap();
    let batch = mixed_requests(event);
    let config = Config { concurrency: 1, batch_size: 10, ..Config::default() };
    let workers = Running::start(&db, WORKERS, config).await;
    let mut ids = Vec::with_capacity(batch.len());
    for chunk in batch.chunks(250) {
        ids.extend(db.client.enqueue_many(chunk).await.unwrap());
    }
    db.client.wait_all(&ids, Some(Duration::from_secs(600))).await.expect("every request finishes");
    workers.stop().await;

    let mut codes: HashMap<String, usize> = HashMap::new();
    let mut granted = HashSet::new();
    let mut contention = 0;
    for (id, new) in ids.iter().zip(&batch) {
        let r = db.client.status(*id).await.unwrap();
        assert!(r.status.is_terminal(), "{r:?}");
        contention += r.contention_retries;
        *codes.entry(code(&r).to_string()).or_default() += 1;
        let (Request::Hold(want) | Request::Book(want)) = &new.request else { unreachable!() };
        if r.status == Status::Succeeded {
            let seats = r.booking().unwrap().seats;
            if want.partial {
                assert!(!seats.is_empty() && seats.len() as u32 <= want.party_size(), "{r:?}");
            } else {
                assert_eq!(seats.len() as u32, want.party_size(), "a party gets all its seats: {r:?}");
            }
            if !want.seats.is_empty() {
                assert_eq!(seats.iter().map(|s| s.seat).collect::<Vec<_>>(), want.seats);
            }
            for s in seats {
                assert!(granted.insert(s.seat), "seat {} granted twice", s.seat);
            }
        } else {
            let code = r.error_code.as_deref().unwrap();
            assert!(["sold_out", "seats_taken", "no_adjacent_seats"].contains(&code), "unexpected failure {r:?}");
        }
    }
    println!("outcomes: {codes:?}; contention retries: {contention}");
    assert!(codes.get("sold_out").copied().unwrap_or(0) > 0, "seats ran out, so some requests are sold_out");
    assert_eq!(granted.len() as i64, SEATS as i64, "the event sells out: {codes:?}");
    assert_eq!(db.seats_taken(event).await, granted.len() as i64, "seats taken = seats granted");
    assert_eq!(db.seats_granted(event).await, granted.len() as i64);
    db.assert_invariants_and_close().await;
}

/// Backends of this database in a batch that has claimed requests: the
/// claim's FOR UPDATE takes RowShareLock on the queue table (as retention's
/// does, which the test turns off).
async fn batches_in_flight(db: &TestDb) -> i64 {
    sqlx::query_scalar(
        "SELECT count(DISTINCT pid) FROM pg_locks
         WHERE database = (SELECT oid FROM pg_database WHERE datname = current_database())
           AND relation = 'seatq.requests'::regclass AND mode = 'RowShareLock' AND granted
           AND pid <> pg_backend_pid()",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_runs_at_most_max_active_batches_at_once() {
    let db = TestDb::new().await;
    let event = db.client.add_event("E", 100, 6).await.unwrap();
    // Six bookings that each pause 2 s inside their batch (fault:slow): six
    // loops claiming one each would hold six batches open at once.
    let batch: Vec<NewRequest> = (0..6).map(|_| Request::Book(hold(event, 3, 2, "fault:slow")).into()).collect();
    let ids = db.client.enqueue_many(&batch).await.unwrap();
    let args = [
        "--concurrency",
        "6",
        "--max-active",
        "2",
        "--batch-size",
        "1",
        "--backlog-batch-size",
        "1",
        "--retention-hours",
        "0",
    ];
    let worker = WorkerProcess::start(&db, "turns", &args, &[("SEATQ_FAULT_INJECTION", "1")]);
    let (mut most, deadline) = (0, Instant::now() + Duration::from_secs(60));
    let mut done = false;
    while !done && Instant::now() < deadline {
        most = most.max(batches_in_flight(&db).await);
        let unfinished = count_queued(&db.pool, &ids).await.unwrap();
        done = unfinished == 0;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(done, "the six bookings never finished");
    assert_eq!(most, 2, "two batches at a time, never more (and the two do run together)");
    db.assert_all_succeeded(&ids).await;
    assert_eq!(db.seats_taken(event).await, 12);
    assert_eq!(db.seats_granted(event).await, 12);
    worker.kill();
    db.assert_invariants_and_close().await;
}
