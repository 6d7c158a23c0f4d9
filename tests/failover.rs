//! Losing the primary: two private clusters, a primary and a standby
//! streaming from it (synchronously: `synchronous_standby_names` names it),
//! a TCP proxy in front that follows the primary as HAProxy on Patroni's
//! leader check would, a booking load, SIGKILL of every process of the
//! primary, and promotion of the standby (`pg_ctl promote`).
//!
//! - Every request whose enqueue was acknowledged, and every outcome a
//!   client was told, is on the new primary as it was told.
//! - A bulk enqueue whose COMMIT was in flight when the primary died reports
//!   exactly its own rows (its requests carry idempotency keys, so enqueueing
//!   again is safe) or says it does not know (no keys): never ids that
//!   belong to other requests, which a promoted standby's transaction ids
//!   would give.
//! - A worker refuses a standby, saying so.
//!
//! The time from promotion until bookings flow again is printed, never
//! asserted. Each test ends with the invariant check on the new primary.

mod common;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::PrivateCluster;
use common::replication::Proxy;
use seatq::{Client, Error, NewRequest, Request, RequestRecord, Retry};
use seatq_worker::{Config, Worker};
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

const DB: &str = "seatq";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_booking_told_survives_a_failover_with_synchronous_replication() {
    let (primary, standby) = PrivateCluster::with_standby(true);
    let proxy = Proxy::start(primary.port).await;
    let url = proxy.url(DB);
    let client = Client::connect_with_timeout(&url, Duration::from_secs(5)).await.expect("connect");
    let ev = client.add_event("failover", 3000, 20).await.expect("event");

    // A worker standing on the standby refuses it, saying why.
    let on_standby = Worker::connect(&standby.url(DB), Config::default()).await.expect_err("a worker on a standby");
    assert!(on_standby.to_string().contains("standby"), "{on_standby}");

    let shutdown = CancellationToken::new();
    // With the synchronous standby there, a worker that requires one starts.
    let config = Config { synchronous_standby: true, ..Config::default() };
    drop(Worker::connect(&url, config).await.expect("a worker requiring a synchronous standby"));
    // The one that works through the failover does not require one: the new
    // primary has no standby of its own (a test has no third node).
    let worker = Worker::connect(&url, Config::default()).await.expect("worker");
    let running = tokio::spawn({
        let shutdown = shutdown.clone();
        async move { worker.run(shutdown).await }
    });

    // Producers book one request at a time and keep what they were told:
    // the id of each acknowledged enqueue and each outcome received.
    let told: Arc<Mutex<HashMap<i64, Option<RequestRecord>>>> = Arc::default();
    let stop = CancellationToken::new();
    let mut producers = tokio::task::JoinSet::new();
    for p in 0..3 {
        let (client, told, stop) = (client.clone(), Arc::clone(&told), stop.clone());
        producers.spawn(async move {
            let mut k = 0;
            while !stop.is_cancelled() {
                k += 1;
                let request =
                    Request::Book(common::hold(ev, 1 + (k % 3) as i16, 1 + (k % 2) as u32, &format!("p{p}-{k}")));
                let new = NewRequest { idempotency_key: Some(format!("p{p}-{k}")), ..NewRequest::from(request) };
                // Retried across the failover: the key makes it once-only.
                let Ok(id) =
                    Retry::within(Duration::from_secs(60)).run("enqueue", || client.enqueue(new.clone())).await
                else {
                    continue;
                };
                told.lock().await.insert(id, None);
                if let Ok(record) = client.wait(id, Some(Duration::from_secs(60))).await {
                    told.lock().await.insert(id, Some(record));
                }
            }
        });
    }
    let finished = |told: &HashMap<i64, Option<RequestRecord>>| told.values().filter(|r| r.is_some()).count();
    assert!(
        common::eventually(Duration::from_secs(60), || async { finished(&*told.lock().await) >= 150 }).await,
        "no load before the failover"
    );

    primary.kill();
    let before = finished(&*told.lock().await);
    proxy.switch(standby.port);
    standby.promote();
    standby.alone();
    let promoted = Instant::now();
    let flowing =
        common::eventually(Duration::from_secs(60), || async { finished(&*told.lock().await) >= before + 50 }).await;
    println!("bookings flowed again {:?} after the promotion", promoted.elapsed());
    assert!(flowing, "no bookings after the promotion");
    stop.cancel();
    while producers.join_next().await.is_some() {}
    shutdown.cancel();
    let _ = running.await;

    // What the new primary has is what was told.
    let after = Client::connect(&standby.url(DB)).await.expect("the new primary");
    let told = told.lock().await;
    for (id, record) in told.iter() {
        let stored = after.status(*id).await.unwrap_or_else(|e| panic!("acknowledged request {id} is gone: {e}"));
        if let Some(record) = record {
            assert_eq!(
                (stored.status, &stored.result, &stored.error_code, &stored.payload),
                (record.status, &record.result, &record.error_code, &record.payload),
                "request {id}: told one outcome, the new primary has another"
            );
        }
    }
    println!("{} requests acknowledged, {} outcomes told, all on the new primary", told.len(), finished(&told));
    common::assert_invariants(&after, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_bulk_enqueue_cut_off_in_its_commit_reports_its_own_rows_or_that_it_does_not_know() {
    let (primary, standby) = PrivateCluster::with_standby(true);
    let proxy = Proxy::start(primary.port).await;
    let url = proxy.url(DB);
    let client = Client::connect_with_timeout(&url, Duration::from_secs(5)).await.expect("connect");
    let ev = client.add_event("failover", 100, 10).await.expect("event");
    // Requests on the primary before, so that its transaction ids run ahead
    // of nothing the standby lacks.
    let earlier: Vec<NewRequest> =
        (0..40).map(|k| Request::Hold(common::hold(ev, 1, 1, &format!("earlier-{k}"))).into()).collect();
    client.enqueue_all(&earlier, &Retry::NEVER).await.expect("earlier requests");

    // The standby stops acknowledging: the two bulks' COMMITs are written
    // on the primary and wait for it, and the primary dies meanwhile.
    standby.pause(true);
    let bulk = |tag: &str, keyed: bool| -> Vec<NewRequest> {
        (0..30)
            .map(|k| {
                let new = NewRequest::from(Request::Hold(common::hold(ev, 1, 1, &format!("{tag}-{k}"))));
                if keyed { NewRequest { idempotency_key: Some(format!("{tag}-{k}")), ..new } } else { new }
            })
            .collect()
    };
    let retry = Retry::within(Duration::from_secs(60));
    let keyed = tokio::spawn({
        let (client, batch, retry) = (client.clone(), bulk("keyed", true), retry);
        async move { client.enqueue_all(&batch, &retry).await }
    });
    let unkeyed = tokio::spawn({
        let (client, batch, retry) = (client.clone(), bulk("unkeyed", false), retry);
        async move { client.enqueue_all(&batch, &retry).await }
    });
    let waiting = common::eventually(Duration::from_secs(20), || async {
        // One waits for the standby (SyncRep), the other for the first's
        // lock on the notification queue, which it holds until it commits.
        primary.sql(
            "SELECT count(*) FILTER (WHERE query = 'COMMIT' AND state = 'active'), \
                    count(*) FILTER (WHERE wait_event = 'SyncRep') FROM pg_stat_activity",
        ) == "2|1"
    })
    .await;
    assert!(
        waiting,
        "the COMMITs never waited for the standby: replication {:?}, sessions {:?}",
        primary.sql("SELECT application_name, sync_state FROM pg_stat_replication"),
        primary.sql(
            "SELECT wait_event, state, left(query, 40) FROM pg_stat_activity WHERE backend_type = 'client backend'"
        )
    );
    primary.kill();
    proxy.switch(standby.port);
    standby.pause(false);
    standby.promote();
    standby.alone();

    let after = Client::connect(&standby.url(DB)).await.expect("the new primary");
    let customers = |ids: &[i64]| {
        let after = after.clone();
        let ids = ids.to_vec();
        async move {
            let mut names = Vec::new();
            for id in ids {
                let r = after.status(id).await.unwrap_or_else(|e| panic!("reported id {id}: {e}"));
                names.push(r.payload["customer"].as_str().unwrap_or_default().to_string());
            }
            names
        }
    };
    // With keys: enqueued again on the new primary, and the ids are its own.
    let ids = keyed.await.expect("task").expect("keyed bulk enqueued again after the failover");
    assert_eq!(customers(&ids).await, (0..30).map(|k| format!("keyed-{k}")).collect::<Vec<_>>());
    // Without: it cannot know, and says so; none of its rows are there.
    match unkeyed.await.expect("task") {
        Err(Error::CommitUnknown { why, .. }) => println!("the bulk without keys: commit unknown: {why}"),
        Ok(ids) => assert_eq!(customers(&ids).await, (0..30).map(|k| format!("unkeyed-{k}")).collect::<Vec<_>>()),
        Err(other) => panic!("unkeyed bulk: {other}"),
    }
    let unkeyed_rows: i64 =
        sqlx::query_scalar("SELECT count(*) FROM seatq.requests WHERE payload->>'customer' LIKE 'unkeyed-%'")
            .fetch_one(after.pool())
            .await
            .expect("count");
    assert!(unkeyed_rows == 0 || unkeyed_rows == 30, "part of a bulk: {unkeyed_rows} rows");
    common::assert_invariants(&after, false).await;
}

#[tokio::test]
async fn a_worker_told_to_need_a_synchronous_standby_refuses_a_server_without_one() {
    // The shared test server names no synchronous standby.
    let db = common::TestDb::new().await;
    let config = Config { synchronous_standby: true, ..Config::default() };
    let refused = Worker::connect(&db.url(), config).await.expect_err("no synchronous standby");
    assert!(refused.to_string().contains("no synchronous standby"), "{refused}");
    db.assert_invariants_and_close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn availability_and_seat_maps_read_from_a_hot_standby() {
    let (primary, standby) = PrivateCluster::with_standby(false);
    let client = Client::connect(&primary.url(DB)).await.expect("the primary");
    let ev = client.add_event("replica", 100, 10).await.expect("event");
    // The standby has the database once it has replayed its creation.
    let mut shop = None;
    for _ in 0..300 {
        match client.clone().with_reads_from(&standby.url(DB)).await {
            Ok(reads) => {
                shop = Some(reads);
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    let shop = shop.expect("reads from the standby");
    // No sweeper: a lapsed hold is free by its time alone, there as here.
    let config = Config { sweep_interval: Duration::ZERO, ..Config::default() };
    let worker = Worker::connect(&primary.url(DB), config).await.expect("worker");
    let shutdown = CancellationToken::new();
    let running = tokio::spawn({
        let shutdown = shutdown.clone();
        async move { worker.run(shutdown).await }
    });

    // How long after a client is told of a hold the standby shows it.
    let mut lags = Vec::new();
    for k in 0..20 {
        let id = client.enqueue(Request::Hold(common::hold(ev, 3, 1, &format!("c{k}")))).await.expect("enqueue");
        let record = client.wait(id, Some(Duration::from_secs(30))).await.expect("wait");
        let told = Instant::now();
        assert_eq!(common::code(&record), "succeeded", "{record:?}");
        let held = |n: i64| {
            let shop = shop.clone();
            async move { shop.availability(ev).await.expect("availability").iter().map(|c| c.held).sum::<i64>() == n }
        };
        assert!(common::eventually(Duration::from_secs(30), || held(k + 1)).await, "the standby never showed hold {k}");
        lags.push(told.elapsed());
    }
    lags.sort();
    println!(
        "standby shows a hold {:?} (median) to {:?} (max) after the client is told",
        lags[lags.len() / 2],
        lags[lags.len() - 1]
    );
    // The seat map there agrees with the primary's once it has replayed.
    let primary_map = client.seat_map(ev).await.expect("primary map");
    assert!(
        common::eventually(Duration::from_secs(30), || async {
            shop.seat_map(ev).await.expect("standby map") == primary_map
        })
        .await,
        "the standby's seat map never matched the primary's"
    );
    // A hold that lapses shows free on the standby with no sweep: passive
    // expiry is computed where it is read.
    let id = client
        .enqueue(Request::Hold(seatq::SeatRequest { hold_seconds: Some(1), ..common::hold(ev, 3, 1, "brief") }))
        .await
        .expect("enqueue");
    let record = client.wait(id, Some(Duration::from_secs(30))).await.expect("wait");
    assert_eq!(common::code(&record), "succeeded", "{record:?}");
    let free_again = common::eventually(Duration::from_secs(30), || async {
        shop.availability(ev).await.expect("availability").iter().map(|c| c.held).sum::<i64>() == 20
    })
    .await;
    assert!(free_again, "the lapsed hold still shows held on the standby");
    shutdown.cancel();
    let _ = running.await;
    common::assert_invariants(&client, false).await;
}
