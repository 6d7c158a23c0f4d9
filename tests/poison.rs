//! Poisoned requests: a request whose processing panics or fails unexpectedly
//! is retried and finally ends `dead` with its last error, while the rest of
//! its batch, and the worker, carry on.

mod common;

use std::time::Duration;

use common::{TestDb, code, hold};
use seatq::{NewRequest, Request, Status};

#[tokio::test]
async fn a_panicking_or_failing_request_ends_dead_and_its_batch_goes_on() {
    // Fault injection is read once per process; this test binary holds only this test.
    // SAFETY: set before any thread of this test reads the environment.
    #[allow(unsafe_code)] // the one unsafe block of the workspace: a test's own environment
    unsafe {
        std::env::set_var("SEATQ_FAULT_INJECTION", "1")
    };
    let (db, ev) = TestDb::with_event("E", 60, 6).await;
    let batch: Vec<NewRequest> = ["ann", "fault:panic", "bob", "fault:error", "cat"]
        .into_iter()
        .map(|customer| Request::Book(hold(ev, 3, 1, customer)).into())
        .collect();
    let ids = db.client.enqueue_many(&batch).await.unwrap();
    // Two attempts, then dead; retry delays are skipped by moving run_at.
    sqlx::query("UPDATE seatq.requests SET max_attempts = 2").execute(&db.pool).await.unwrap();
    for _ in 0..3 {
        db.drain().await;
        sqlx::query("UPDATE seatq.requests SET run_at = now() WHERE status = 'queued'")
            .execute(&db.pool)
            .await
            .unwrap();
    }
    db.drain().await;

    let records = db.records(&ids).await;
    let outcomes: Vec<(&str, Status, i32)> = records.iter().map(|r| (code(r), r.status, r.attempts)).collect();
    assert_eq!(
        outcomes,
        [
            ("succeeded", Status::Succeeded, 0),
            ("internal", Status::Dead, 2),
            ("succeeded", Status::Succeeded, 0),
            ("internal", Status::Dead, 2),
            ("succeeded", Status::Succeeded, 0),
        ]
    );
    assert!(records[1].error_message.as_deref().unwrap().contains("panicked"), "{:?}", records[1]);
    assert!(records[3].error_message.as_deref().unwrap().contains("injected fault"), "{:?}", records[3]);
    assert_eq!(db.seats_taken(ev).await, 3, "a dead request takes no seats");
    db.assert_invariants(true).await;

    // The worker is still alive and well: it takes new work.
    let id = db.client.enqueue(Request::Book(hold(ev, 3, 2, "dan"))).await.unwrap();
    db.drain().await;
    assert_eq!(db.client.wait(id, Some(Duration::from_secs(30))).await.unwrap().status, Status::Succeeded);
    db.close().await;
}
