//! Least privilege and isolation, as real logins: a producer login can
//! enqueue, read its own requests and bookings and act on them, and nothing
//! else (another producer's are invisible to it, and its confirm, cancel and
//! extend cannot reach them); a worker login runs a worker, deleting only
//! finished requests past retention; an admin login sees everything. Each
//! rule is tested for what it must refuse and what it must allow.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{TestDb, code, hold};
use seatq::{BookingRef, Client, HoldExtension, NewRequest, Request, RequestRecord, Status};
use serde_json::json;
use sqlx::postgres::PgPool;
use sqlx::{Executor, Row};

/// A login role of the test's own (roles are server-wide: the name starts
/// with the database's), with a pool and a client connected as it.
struct Login {
    name: String,
    pool: PgPool,
    client: Client,
}

/// Create login `{db}_{suffix}` in `group` (a seatq role, or a shop's role
/// made by the test), with `setup` run as the superuser after it exists
/// (e.g. `ALTER ROLE … SET role`; `{login}` stands for its name).
async fn login_with(db: &TestDb, suffix: &str, group: &str, setup: Option<&str>) -> Login {
    let name = format!("{}_{suffix}", db.name);
    db.pool.execute(sqlx::AssertSqlSafe(format!("CREATE ROLE \"{name}\" LOGIN IN ROLE \"{group}\""))).await.unwrap();
    if let Some(sql) = setup {
        db.pool.execute(sqlx::AssertSqlSafe(sql.replace("{login}", &name))).await.unwrap();
    }
    let pool = PgPool::connect_with(db.options.clone().username(&name)).await.unwrap();
    Login { name, client: Client::from_pool(pool.clone()), pool }
}

async fn login(db: &TestDb, suffix: &str, group: &str) -> Login {
    login_with(db, suffix, group, None).await
}

/// Two producer logins, each a shop of its own, selling an event of 60
/// seats in 6 classes.
async fn two_shops() -> (TestDb, i64, Login, Login) {
    let (db, ev) = TestDb::with_event("E", 60, 6).await;
    let (a, b) = (login(&db, "shop_a", "seatq_producer").await, login(&db, "shop_b", "seatq_producer").await);
    (db, ev, a, b)
}

/// Drop logins (then any other roles of the test's, by name).
async fn drop_roles(db: &TestDb, logins: Vec<Login>, others: &[&str]) {
    let mut names = Vec::new();
    for l in logins {
        l.pool.close().await;
        names.push(l.name);
    }
    names.extend(others.iter().map(|o| o.to_string()));
    for name in names {
        db.pool.execute(sqlx::AssertSqlSafe(format!("DROP ROLE \"{name}\""))).await.unwrap();
    }
}

/// Each statement (sql, what it tries) is refused: permission denied.
async fn all_denied(pool: &PgPool, statements: &[(&'static str, &str)]) {
    for (sql, what) in statements {
        let err = sqlx::query(sqlx::AssertSqlSafe(*sql)).execute(pool).await.expect_err(what);
        assert_eq!(
            seatq::sqlstate::code(&err).as_deref(),
            Some(seatq::sqlstate::INSUFFICIENT_PRIVILEGE),
            "{what}: expected permission denied, got {err}"
        );
    }
}

async fn count(pool: &PgPool, sql: &'static str) -> i64 {
    sqlx::query_scalar(sql).fetch_one(pool).await.unwrap()
}

/// The producer recorded on request `id` (read as the superuser).
async fn producer_of(db: &TestDb, id: i64) -> String {
    sqlx::query_scalar("SELECT producer FROM seatq.requests WHERE id = $1").bind(id).fetch_one(&db.pool).await.unwrap()
}

/// The finished request `id`, read as the superuser.
async fn finished(db: &TestDb, id: i64) -> RequestRecord {
    db.drain().await;
    db.client.status(id).await.unwrap()
}

fn booking_of(r: &RequestRecord) -> i64 {
    r.booking().unwrap_or_else(|| panic!("no booking: {r:?}")).booking
}

#[tokio::test]
async fn the_producer_role_can_enqueue_and_read_and_nothing_else() {
    let (db, ev) = TestDb::with_event("E", 60, 6).await;
    let shop = login(&db, "shop", "seatq_producer").await;
    let pool = &shop.pool;
    // Enqueue through the client (which sees the schema is current and does
    // not try to migrate), by the function, and by a plain INSERT.
    seatq::db::migrate(pool).await.expect("a current schema needs no migration rights");
    let mine = shop.client.enqueue(Request::Book(hold(ev, 1, 1, "bob"))).await.unwrap();
    let by_fn: i64 = sqlx::query_scalar("SELECT seatq.enqueue('book', $1)")
        .bind(json!({"event": ev, "class": 1, "party": 1, "customer": "cat"}))
        .fetch_one(pool)
        .await
        .unwrap();
    let by_insert: i64 =
        sqlx::query_scalar("INSERT INTO seatq.requests (kind, payload) VALUES ('hold', $1) RETURNING id")
            .bind(json!({"event": ev, "class": 2, "party": 2, "customer": "dan"}))
            .fetch_one(pool)
            .await
            .unwrap();
    // The database records who enqueued each, whichever way.
    for id in [mine, by_fn, by_insert] {
        assert_eq!(producer_of(&db, id).await, shop.name);
    }
    // It reads its outcomes, and the bookings its requests made.
    let held = finished(&db, by_insert).await;
    let r = shop.client.status(by_insert).await.unwrap();
    assert_eq!((r.status, r.booking()), (Status::Succeeded, held.booking()));
    let bookings: Vec<(String, i64)> =
        sqlx::query_as("SELECT customer, cardinality(seats)::bigint FROM seatq.bookings ORDER BY customer")
            .fetch_all(pool)
            .await
            .unwrap();
    assert_eq!(bookings, [("bob".to_string(), 1), ("cat".to_string(), 1), ("dan".to_string(), 2)]);

    // And it can touch nothing else.
    all_denied(
        pool,
        &[
            ("UPDATE seatq.seats SET state = 'available', booking_id = NULL, held_until = NULL", "update seats"),
            ("SELECT 1 FROM seatq.seats", "read seats"),
            ("UPDATE seatq.bookings SET customer = 'mallory'", "update bookings"),
            ("UPDATE seatq.requests SET status = 'failed', error_code = 'x'", "change a request's outcome"),
            ("DELETE FROM seatq.requests", "delete requests"),
            (
                "INSERT INTO seatq.requests (kind, payload, status, result) VALUES ('book', '{}', 'succeeded', '{}')",
                "insert a request with a made-up outcome",
            ),
            (
                "INSERT INTO seatq.requests (kind, payload, producer) VALUES ('book', '{}', 'someone_else')",
                "insert a request as another producer",
            ),
            (
                "INSERT INTO seatq.bookings (event_id, customer, state, seats, total_cents, request_id, producer)
                 VALUES (1, 'x', 'booked', '{1}', 0, 1, 'x')",
                "insert bookings",
            ),
            ("SELECT * FROM seatq.check_invariants()", "read every booking"),
        ],
    )
    .await;
    // The client's error says what PostgreSQL said, with its SQLSTATE, and not
    // the line of the server's source that said it.
    let denied = shop.client.check_invariants(false).await.expect_err("a producer may not check");
    assert_eq!(denied.code(), "database");
    assert_eq!(denied.to_string(), "database error: permission denied for function check_invariants (SQLSTATE 42501)");

    drop_roles(&db, vec![shop], &[]).await;
    // What it enqueued is processed normally by a worker.
    db.drain().await;
    db.assert_all_succeeded(&[mine, by_fn, by_insert]).await;
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn producers_see_only_their_own_requests_and_bookings() {
    let (db, ev, a, b) = two_shops().await;
    let admin = login(&db, "ops", "seatq_admin").await;
    let a_ids = a.client.enqueue_many(&common::bookings(ev, 3, 1, 3)).await.unwrap();
    let b_id = b.client.enqueue(Request::Hold(hold(ev, 2, 2, "bea"))).await.unwrap();
    let b_booking = booking_of(&finished(&db, b_id).await);

    // Each reads its own, and another's request does not exist for it.
    for id in &a_ids {
        assert_eq!(a.client.status(*id).await.unwrap().status, Status::Succeeded);
        assert!(matches!(b.client.status(*id).await, Err(seatq::Error::NotFound(n)) if n == *id));
    }
    assert_eq!(b.client.status(b_id).await.unwrap().status, Status::Succeeded);
    assert!(matches!(a.client.status(b_id).await, Err(seatq::Error::NotFound(_))));
    // Waiting for another's request finds none (it is not there to wait for).
    let waited = a.client.wait(b_id, Some(Duration::from_secs(5))).await;
    assert!(matches!(waited, Err(seatq::Error::NotFound(_))), "{waited:?}");
    // Whole-table reads count their own rows only.
    assert_eq!(count(&a.pool, "SELECT count(*) FROM seatq.requests").await, 3);
    assert_eq!(count(&a.pool, "SELECT count(*) FROM seatq.bookings").await, 3);
    assert_eq!(count(&b.pool, "SELECT count(*) FROM seatq.requests").await, 1);
    let b_sees: Vec<i64> = sqlx::query_scalar("SELECT id FROM seatq.bookings").fetch_all(&b.pool).await.unwrap();
    assert_eq!(b_sees, [b_booking]);
    let by_status = seatq_core::sql::stats::RequestsByStatus.query().fetch_all(&a.pool).await.unwrap();
    let by_status: Vec<(String, i64)> = by_status.into_iter().map(|row| (row.status, row.count)).collect();
    assert_eq!(by_status, [("succeeded".to_string(), 3)], "a producer's queue statistics are its own");
    // The admin sees everything.
    assert_eq!(count(&admin.pool, "SELECT count(*) FROM seatq.requests").await, 4);
    assert_eq!(count(&admin.pool, "SELECT count(*) FROM seatq.bookings").await, 4);

    // The storefront reads are seat facts, the same for everyone, and name
    // no customer or booking.
    let everyone = db.client.availability(ev).await.unwrap();
    assert_eq!(everyone.iter().map(|c| c.held + c.booked).sum::<i64>(), 5);
    for shop in [&a, &b] {
        assert_eq!(shop.client.availability(ev).await.unwrap(), everyone);
        assert_eq!(shop.client.seat_map(ev).await.unwrap(), db.client.seat_map(ev).await.unwrap());
    }
    drop_roles(&db, vec![a, b, admin], &[]).await;
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn another_producers_booking_is_not_found_and_left_alone() {
    let (db, ev, a, b) = two_shops().await;
    let held = finished(&db, a.client.enqueue(Request::Hold(hold(ev, 2, 2, "ann"))).await.unwrap()).await;
    let booking = booking_of(&held);
    let missing = booking + 1000;

    // B names A's booking and A's customer: to B it does not exist, exactly
    // as a booking that does not exist at all.
    let by_b = |booking: i64| {
        let reference = BookingRef { event: None, booking, customer: "ann".into(), token: None };
        [
            Request::Confirm(reference.clone()),
            Request::Cancel(reference),
            Request::Extend(HoldExtension {
                event: None,
                booking,
                customer: "ann".into(),
                hold_seconds: Some(3600),
                token: None,
            }),
        ]
    };
    for (theirs, nothing) in by_b(booking).into_iter().zip(by_b(missing)) {
        let theirs = finished(&db, b.client.enqueue(theirs).await.unwrap()).await;
        let nothing = finished(&db, b.client.enqueue(nothing).await.unwrap()).await;
        assert_eq!(code(&theirs), "booking_not_found", "{theirs:?}");
        assert_eq!(
            theirs.error_message.as_deref().map(|m| m.replace(&booking.to_string(), "N")),
            nothing.error_message.as_deref().map(|m| m.replace(&missing.to_string(), "N")),
            "no hint that it exists"
        );
    }
    // A's hold is untouched: still held, not extended, and A confirms it.
    let state: (String, chrono::DateTime<chrono::Utc>) =
        sqlx::query_as("SELECT state::text, held_until FROM seatq.bookings WHERE id = $1")
            .bind(booking)
            .fetch_one(&db.pool)
            .await
            .unwrap();
    assert_eq!(state, ("held".to_string(), held.booking().and_then(|b| b.held_until).unwrap()));
    let confirm = Request::Confirm(BookingRef { event: None, booking, customer: "ann".into(), token: None });
    let confirmed = finished(&db, a.client.enqueue(confirm).await.unwrap()).await;
    assert_eq!(code(&confirmed), "succeeded", "{confirmed:?}");
    // The admin (and a superuser) may act on any producer's booking.
    let admin = login(&db, "ops", "seatq_admin").await;
    let cancel = Request::Cancel(BookingRef { event: None, booking, customer: "ann".into(), token: None });
    let cancelled = finished(&db, admin.client.enqueue(cancel).await.unwrap()).await;
    assert_eq!(cancelled.booking().map(|b| b.state), Some(seatq::BookingState::Cancelled), "{cancelled:?}");
    drop_roles(&db, vec![a, b, admin], &[]).await;
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn idempotency_keys_are_per_producer() {
    let (db, ev, a, b) = two_shops().await;
    let keyed = |customer: &str| NewRequest {
        idempotency_key: Some("order-1".into()),
        ..NewRequest::from(Request::Book(hold(ev, 3, 1, customer)))
    };
    let a_id = a.client.enqueue(keyed("ann")).await.unwrap();
    // The same key from B is B's own: a request of its own, its payload kept.
    let b_id = b.client.enqueue(keyed("bob")).await.unwrap();
    assert_ne!(a_id, b_id);
    assert_eq!(b.client.status(b_id).await.unwrap().payload["customer"], "bob");
    // Each gets its own back on a retry; neither's check sees the other's.
    assert_eq!(a.client.enqueue(keyed("ann")).await.unwrap(), a_id);
    assert_eq!(b.client.enqueue(keyed("bob")).await.unwrap(), b_id);
    assert!(b.client.idempotency_conflicts(&[keyed("bob")]).await.unwrap().is_empty());
    let conflicts = b.client.idempotency_conflicts(&[keyed("ann")]).await.unwrap();
    assert_eq!(conflicts.len(), 1, "B's own first use is the one compared: {conflicts:?}");
    assert!(conflicts[0].1.message.contains(&format!("request {b_id}")), "{conflicts:?}");
    let err = b.client.enqueue(keyed("ann")).await.expect_err("another payload under B's key");
    assert!(
        matches!(&err, seatq::Error::Invalid(e) if e.code() == "idempotency_conflict" && e.message.contains(&format!("request {b_id}"))),
        "{err}"
    );
    // A plain INSERT with A's key by B is no unique violation either.
    sqlx::query("INSERT INTO seatq.requests (kind, payload, idempotency_key) VALUES ('book', $1, 'order-2')")
        .bind(json!({"event": ev, "class": 3, "party": 1, "customer": "cy"}))
        .execute(&a.pool)
        .await
        .unwrap();
    sqlx::query("INSERT INTO seatq.requests (kind, payload, idempotency_key) VALUES ('book', $1, 'order-2')")
        .bind(json!({"event": ev, "class": 3, "party": 1, "customer": "dee"}))
        .execute(&b.pool)
        .await
        .unwrap();
    assert_eq!(count(&db.pool, "SELECT count(*) FROM seatq.requests").await, 4);
    drop_roles(&db, vec![a, b], &[]).await;
    db.drain().await;
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn a_per_customer_limit_counts_each_producers_customers_apart() {
    let (db, ev, a, b) = two_shops().await;
    sqlx::query("UPDATE seatq.events SET per_customer = 2 WHERE id = $1").bind(ev).execute(&db.pool).await.unwrap();
    // Both shops have a customer called ann, and their requests go in one
    // batch: each ann gets her two seats.
    let a_first = a.client.enqueue(Request::Book(hold(ev, 1, 2, "ann"))).await.unwrap();
    let b_first = b.client.enqueue(Request::Book(hold(ev, 1, 2, "ann"))).await.unwrap();
    for id in [a_first, b_first] {
        let r = finished(&db, id).await;
        assert_eq!(r.booking().map(|b| b.seats.len()), Some(2), "{r:?}");
    }
    // Each ann is at her own limit now, and only at her own.
    let a_more = finished(&db, a.client.enqueue(Request::Book(hold(ev, 1, 1, "ann"))).await.unwrap()).await;
    let b_more = finished(&db, b.client.enqueue(Request::Book(hold(ev, 1, 1, "ann"))).await.unwrap()).await;
    assert_eq!(code(&a_more), "customer_limit_exceeded", "{a_more:?}");
    assert_eq!(code(&b_more), "customer_limit_exceeded", "{b_more:?}");
    assert!(b_more.error_message.as_deref().is_some_and(|m| m.contains("the customer has 2")), "{b_more:?}");
    let bob = finished(&db, b.client.enqueue(Request::Book(hold(ev, 1, 2, "bob"))).await.unwrap()).await;
    assert_eq!(code(&bob), "succeeded", "{bob:?}");
    assert_eq!(db.seats_taken(ev).await, 6);
    drop_roles(&db, vec![a, b], &[]).await;
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn a_shop_with_several_logins_shares_through_its_own_role() {
    let (db, ev) = TestDb::with_event("E", 60, 6).await;
    let shop = format!("{}_shop", db.name);
    db.pool
        .execute(sqlx::AssertSqlSafe(format!("CREATE ROLE \"{shop}\" NOLOGIN IN ROLE seatq_producer")))
        .await
        .unwrap();
    // Each login runs as the shop's role from the moment it connects.
    let runs_as_shop = format!("ALTER ROLE \"{{login}}\" SET role = '{shop}'");
    let web = login_with(&db, "web", &shop, Some(&runs_as_shop)).await;
    let batch = login_with(&db, "batch", &shop, Some(&runs_as_shop)).await;
    let other = login(&db, "other", "seatq_producer").await;

    let id = web.client.enqueue(Request::Hold(hold(ev, 2, 2, "ann"))).await.unwrap();
    assert_eq!(producer_of(&db, id).await, shop);
    let booking = booking_of(&finished(&db, id).await);
    // The other login of the shop sees the request and acts on its booking.
    assert_eq!(batch.client.status(id).await.unwrap().status, Status::Succeeded);
    let confirm = Request::Confirm(BookingRef { event: None, booking, customer: "ann".into(), token: None });
    let confirmed = finished(&db, batch.client.enqueue(confirm.clone()).await.unwrap()).await;
    assert_eq!(code(&confirmed), "succeeded", "{confirmed:?}");
    // Another shop does not.
    assert!(matches!(other.client.status(id).await, Err(seatq::Error::NotFound(_))));
    // Running as seatq_producer itself (which any producer login may SET
    // ROLE to) would share with every shop: refused.
    let mut conn = other.pool.acquire().await.unwrap();
    sqlx::query("SET ROLE seatq_producer").execute(&mut *conn).await.unwrap();
    let refused =
        sqlx::query("INSERT INTO seatq.requests (kind, payload) VALUES ('book', '{}')").execute(&mut *conn).await;
    let err = refused.expect_err("a request as seatq_producer");
    assert!(err.to_string().contains("row-level security"), "{err}");
    sqlx::query("RESET ROLE").execute(&mut *conn).await.unwrap();
    drop(conn);
    drop_roles(&db, vec![web, batch, other], &[&shop]).await;
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn the_worker_role_can_run_a_worker_but_not_rewrite_inventory_or_delete_requests() {
    let (db, ev) = TestDb::with_event("E", 100, 6).await;
    let shop = login(&db, "shop", "seatq_producer").await;
    let id = shop.client.enqueue(Request::Hold(hold(ev, 1, 2, "ann"))).await.unwrap();
    // And enough parties for one class to take the spread path (`seatq.lock_cheapest_spread`, migrations/0004_allocation.sql).
    let party: Vec<NewRequest> = (0..12).map(|n| Request::Hold(hold(ev, 3, 3, &format!("p{n}"))).into()).collect();
    let ids = shop.client.enqueue_many(&party).await.unwrap();

    let worker = login(&db, "worker", "seatq_worker").await;
    let run = || seatq_worker::Worker::new(worker.pool.clone(), seatq_worker::Config::default());
    run().drain().await.unwrap();
    db.assert_all_succeeded(&[&ids[..], &[id]].concat()).await;
    // It confirms a producer's hold: it sees every booking.
    let booking = booking_of(&db.client.status(id).await.unwrap());
    let confirm = shop
        .client
        .enqueue(Request::Confirm(BookingRef { event: None, booking, customer: "ann".into(), token: None }))
        .await
        .unwrap();
    run().drain().await.unwrap();
    assert_eq!(code(&db.client.status(confirm).await.unwrap()), "succeeded");
    seatq_worker::sweeper::sweep(&worker.pool).await.unwrap();
    let row = sqlx::query("SELECT count(*) AS n FROM seatq.check_invariants()").fetch_one(&worker.pool).await.unwrap();
    assert_eq!(row.get::<i64, _>("n"), 0);

    let pool = &worker.pool;
    all_denied(
        pool,
        &[
            ("DELETE FROM seatq.seats", "delete seats"),
            ("INSERT INTO seatq.events (name) VALUES ('x')", "create events"),
            ("DELETE FROM seatq.bookings", "delete bookings"),
            ("UPDATE seatq.events SET name = 'x'", "rename events"),
            ("DELETE FROM seatq.requests WHERE status = 'queued'", "delete requests"),
        ],
    )
    .await;

    // Retention is the one way it deletes: finished requests past the age
    // given, never queued or dead ones, nor recent ones.
    let queued = shop.client.enqueue(Request::Book(hold(ev, 3, 1, "later"))).await.unwrap();
    let dead = shop.client.enqueue(Request::Book(hold(ev, 3, 1, "dead"))).await.unwrap();
    sqlx::query("UPDATE seatq.requests SET status = 'dead', error_code = 'internal' WHERE id = $1")
        .bind(dead)
        .execute(&db.pool)
        .await
        .unwrap();
    sqlx::query("UPDATE seatq.requests SET created_at = now() - interval '3 days', finished_at = now() - interval '2 days', run_at = now() + interval '1 day' WHERE id = ANY($1) OR id IN ($2, $3)")
        .bind(&ids)
        .bind(queued)
        .bind(dead)
        .execute(&db.pool)
        .await
        .unwrap();
    let prune = seatq_core::sql::retention::PruneFinished { older_than_secs: 86_400.0, limit: 1000 };
    let pruned = prune.query().fetch_one(pool).await.unwrap();
    assert_eq!(pruned, ids.len() as i64, "the old finished ones");
    let left: Vec<i64> =
        sqlx::query_scalar("SELECT id FROM seatq.requests ORDER BY id").fetch_all(&db.pool).await.unwrap();
    assert_eq!(left, [id, confirm, queued, dead]);
    drop_roles(&db, vec![shop, worker], &[]).await;
    db.close().await;
}

#[tokio::test]
async fn row_level_security_leaves_the_workers_plans_as_they_were() {
    // The worker's policies are simply true: the planner drops them, and the
    // hot path's statements plan as a worker login exactly as they do with
    // row-level security off. On a queue of some size (finished requests,
    // some queued, bookings), so that the plans are the ones that matter.
    let db = TestDb::new().await;
    sqlx::raw_sql(
        "INSERT INTO seatq.requests (kind, payload, status, error_code, finished_at)
         SELECT 'book', '{}', 'failed', 'sold_out', now() - interval '1 day' FROM generate_series(1, 5000);
         INSERT INTO seatq.requests (kind, payload)
         SELECT 'book', jsonb_build_object('event', 1, 'class', 3, 'party', 1, 'customer', 'c' || g)
         FROM generate_series(1, 500) g;
         INSERT INTO seatq.bookings (event_id, customer, state, seats, total_cents, request_id, producer)
         SELECT 1, 'c' || g, 'cancelled', ARRAY[g], 0, 0, 'shop' FROM generate_series(1, 5000) g;
         ANALYZE seatq.requests, seatq.bookings;",
    )
    .execute(&db.pool)
    .await
    .unwrap();
    let worker = login(&db, "worker", "seatq_worker").await;
    let prepare = [
        format!("PREPARE claim(bigint) AS {}", seatq_worker::sql::claim::CLAIM_BATCH),
        format!("PREPARE lockb(bigint, bigint) AS {}", seatq_worker::sql::bookings::LOCK_BOOKING),
        format!("PREPARE sweep(bigint) AS {}", seatq_worker::sql::expiry::SWEEP_BOOKINGS.replace("$2", "'x'")),
    ];
    let explain = [
        "EXPLAIN (COSTS OFF) EXECUTE claim(16)",
        "EXPLAIN (COSTS OFF) EXECUTE lockb(1, 1)",
        "EXPLAIN (COSTS OFF) EXECUTE sweep(100)",
    ];
    let mut plans = Vec::new();
    for rls in ["DISABLE", "ENABLE"] {
        db.pool
            .execute(sqlx::AssertSqlSafe(format!(
                "ALTER TABLE seatq.requests {rls} ROW LEVEL SECURITY; ALTER TABLE seatq.bookings {rls} ROW LEVEL SECURITY"
            )))
            .await
            .unwrap();
        let mut conn = worker.pool.acquire().await.unwrap();
        conn.execute("SET plan_cache_mode = force_generic_plan").await.unwrap();
        for p in &prepare {
            conn.execute(sqlx::AssertSqlSafe(p.as_str())).await.unwrap();
        }
        let mut texts = Vec::new();
        for e in explain {
            let lines: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(e)).fetch_all(&mut *conn).await.unwrap();
            texts.push(lines.join("\n"));
        }
        conn.execute("DEALLOCATE claim; DEALLOCATE lockb; DEALLOCATE sweep").await.unwrap();
        plans.push(texts);
    }
    assert_eq!(plans[0], plans[1], "without row-level security, then with it");
    assert!(plans[1][0].contains("requests_ready"), "the claim is an index seek: {}", plans[1][0]);
    assert!(plans[1][1].contains("bookings_pkey"), "a booking is found by key: {}", plans[1][1]);
    drop_roles(&db, vec![worker], &[]).await;
    db.close().await;
}

#[tokio::test]
async fn a_forged_completion_notification_is_only_a_hint() {
    // Anyone may NOTIFY any channel: a producer (or anyone) sending
    // `seatq_done` with another's request id must not end that request's
    // wait; the waiter re-reads the row and waits on while it is queued.
    let (db, ev, a, b) = two_shops().await;
    let id = a.client.enqueue(Request::Book(hold(ev, 3, 2, "ann"))).await.unwrap();
    let waiting = {
        let client = a.client.clone();
        tokio::spawn(async move { client.wait(id, Some(Duration::from_secs(60))).await })
    };
    let listening = common::eventually(Duration::from_secs(20), || async {
        sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE usename = $1 AND query ILIKE 'LISTEN%')",
        )
        .bind(&a.name)
        .fetch_one(&db.pool)
        .await
        .unwrap_or(false)
    })
    .await;
    assert!(listening, "the waiter's hub listens");
    // Forged notifications, over more than one fallback poll: the id, and
    // payloads that are not ids.
    for payload in [id.to_string(), id.to_string(), "not an id".into(), format!("{id} ")] {
        sqlx::query("SELECT pg_notify('seatq_done', $1)").bind(payload).execute(&b.pool).await.unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert!(!waiting.is_finished(), "a notification alone ended the wait");
    assert_eq!(a.client.status(id).await.unwrap().status, Status::Queued);
    // The real outcome ends it.
    db.drain().await;
    let r = waiting.await.unwrap().unwrap();
    assert_eq!(code(&r), "succeeded", "{r:?}");
    drop_roles(&db, vec![a, b], &[]).await;
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn the_producer_role_submits_a_batch_and_reads_it_back() {
    use futures_util::StreamExt as _;
    let (db, ev) = TestDb::with_event("E", 20, 6).await;
    let shop = login(&db, "batch", "seatq_producer").await;
    let producer = &shop.client;
    let batch = || {
        let mut batch = seatq::Batch::new("roles").unwrap();
        for (reference, party) in [("a", 9), ("b", 9), ("c", 9)] {
            batch.push(Some(reference.into()), Request::Book(hold(ev, 1, party, reference))).unwrap();
        }
        batch
    };
    let mut first = batch();
    producer.check_batch(&mut first).await.unwrap();
    let submitted = producer.enqueue_batch(&first, &seatq::Retry::NEVER).await.unwrap();
    assert_eq!(submitted.enqueued, 3);
    db.drain().await;
    let outcomes: Vec<_> = producer.batch_outcomes(&first, &submitted).map(Result::unwrap).collect().await;
    assert_eq!(outcomes.iter().filter(|o| o.error_code.as_deref() == Some("sold_out")).count(), 1);
    // Again: nothing new; and the batch read back, all with the producer's rights.
    let again = producer.enqueue_batch(&batch(), &seatq::Retry::NEVER).await.unwrap();
    assert_eq!((again.enqueued, &again.ids), (0, &submitted.ids));
    assert_eq!(producer.batch_status("roles").await.unwrap().summary.total.booked, 2);
    let results: Vec<_> = producer.batch_results("roles").map(Result::unwrap).collect().await;
    assert_eq!(results.iter().map(|o| o.reference.as_deref()).collect::<Vec<_>>(), [Some("a"), Some("b"), Some("c")]);
    drop_roles(&db, vec![shop], &[]).await;
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn the_producer_role_reads_stats_its_own_requests_and_every_seat() {
    let (db, ev) = TestDb::with_event("E", 20, 6).await;
    let shop = login(&db, "stats", "seatq_producer").await;
    // Class 1 is seats 1 to 19: the shop books 3, holds 2 and 1, another
    // producer (the superuser here) holds 1; seat 20 is set aside.
    let mut ids = Vec::new();
    for request in [
        Request::Book(hold(ev, 1, 3, "bob")),
        Request::Hold(hold(ev, 1, 2, "cat")),
        Request::Hold(hold(ev, 1, 1, "dan")),
    ] {
        ids.push(shop.client.enqueue(request).await.unwrap());
    }
    let other = db.client.enqueue(Request::Hold(hold(ev, 1, 1, "eve"))).await.unwrap();
    db.drain().await;
    db.assert_all_succeeded(&[ids.as_slice(), &[other]].concat()).await;
    // dan's hold lapses, not yet swept.
    let dan = booking_of(&db.client.status(ids[2]).await.unwrap());
    db.lapse_hold(dan).await;
    sqlx::query("UPDATE seatq.seats SET state = 'blocked' WHERE event_id = $1 AND seat_no = 20")
        .bind(ev)
        .execute(&db.pool)
        .await
        .unwrap();
    // One more of the shop's, still queued.
    shop.client.enqueue(Request::Hold(hold(ev, 1, 1, "fay"))).await.unwrap();

    let stats = shop.client.stats().await.expect("a producer login reads stats");
    let counts =
        |pairs: &[(&str, i64)]| -> BTreeMap<String, i64> { pairs.iter().map(|(s, n)| (s.to_string(), *n)).collect() };
    let expected = counts(&[("available", 12), ("blocked", 1), ("booked", 3), ("held", 2 + 1), ("lapsed", 1)]);
    assert_eq!(stats.seats, expected, "every seat, the other producer's hold too");
    // Its own requests only (row-level security); the admin path sees all.
    assert_eq!(stats.requests, counts(&[("queued", 1), ("succeeded", 3)]));
    assert!(stats.oldest_queued_secs.is_some());
    let all = db.client.stats().await.unwrap();
    assert_eq!(all.seats, expected);
    assert_eq!(all.requests, counts(&[("queued", 1), ("succeeded", 4)]));
    // The function is all it gets: the seats themselves stay closed to it.
    all_denied(&shop.pool, &[("SELECT 1 FROM seatq.seats", "read seats")]).await;

    drop_roles(&db, vec![shop], &[]).await;
    db.drain().await;
    db.assert_invariants_and_close().await;
}
