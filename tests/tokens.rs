//! Hold tokens and customer identity, against a real database (and a real
//! `seatq serve`): a hold made with a token answers to it alone, from SQL,
//! Rust and HTTP (the command line's round trip is in tests/cli.rs); a
//! stranger with a guessed booking id and the customer's name is told there
//! is no such booking and changes nothing; only a token's hash is stored;
//! over HTTP, only a request's maker can read it; where the shop vouches for
//! the customer, a body cannot name another.

mod common;

use common::http::Served;
use common::{Running, TestDb, code, hold};
use seatq::{BookingRef, BookingState, HoldExtension, HoldToken, Request};
use seatq_server::Settings;
use seatq_worker::Config;
use serde_json::{Value, json};

fn token() -> HoldToken {
    HoldToken::new().expect("randomness")
}

/// A booking's state and expiry, and its seats' states, as stored.
async fn stands(db: &TestDb, booking: i64) -> (String, Option<chrono::DateTime<chrono::Utc>>, Vec<String>) {
    let (state, until): (String, Option<chrono::DateTime<chrono::Utc>>) =
        sqlx::query_as("SELECT state::text, held_until FROM seatq.bookings WHERE id = $1")
            .bind(booking)
            .fetch_one(&db.pool)
            .await
            .expect("booking");
    let seats: Vec<String> =
        sqlx::query_scalar("SELECT state::text FROM seatq.seats WHERE booking_id = $1 ORDER BY seat_no")
            .bind(booking)
            .fetch_all(&db.pool)
            .await
            .expect("seats");
    (state, until, seats)
}

#[tokio::test]
async fn from_rust_a_stranger_with_the_id_and_the_name_changes_nothing() {
    let (db, ev) = TestDb::with_event("Tokens", 20, 5).await;
    let ann = token();
    let held = db.run(Request::Hold(hold(ev, 1, 2, "Ann").tap_token(&ann))).await;
    let booking = held.booking().expect("held").booking;
    let before = stands(&db, booking).await;
    let missing = db
        .run(Request::Confirm(BookingRef { event: None, booking: 999_999, customer: "Ann".into(), token: None }))
        .await;
    let not_found = (code(&missing).to_string(), missing.error_message.clone().map(|m| m.replace("999999", "N")));

    // Every way a stranger could try: no token, another token, each kind.
    for guess in [None, Some(token())] {
        let by = |customer: &str| BookingRef { event: None, booking, customer: customer.into(), token: guess.clone() };
        let extend = HoldExtension {
            event: None,
            booking,
            customer: "ann".into(),
            hold_seconds: Some(86_400),
            token: guess.clone(),
        };
        for request in [Request::Confirm(by("Ann")), Request::Cancel(by("ann")), Request::Extend(extend)] {
            let r = db.run(request).await;
            let answer = (code(&r).to_string(), r.error_message.clone().map(|m| m.replace(&booking.to_string(), "N")));
            assert_eq!(answer, not_found, "a stranger hears what no booking gives: {r:?}");
            assert_eq!(stands(&db, booking).await, before, "and changes nothing");
        }
    }
    // The token with another customer's name is not hers either.
    let r = db
        .run(Request::Cancel(BookingRef { event: None, booking, customer: "eve".into(), token: Some(ann.clone()) }))
        .await;
    assert_eq!(code(&r), "booking_not_found");

    // Her token (and her name, in any case) does it.
    let r = db
        .run(Request::Confirm(BookingRef { event: None, booking, customer: "ANN".into(), token: Some(ann.clone()) }))
        .await;
    assert_eq!(r.booking().map(|b| b.state), Some(BookingState::Booked), "{r:?}");
    let r =
        db.run(Request::Cancel(BookingRef { event: None, booking, customer: "ann".into(), token: Some(ann) })).await;
    assert_eq!(r.booking().map(|b| b.state), Some(BookingState::Cancelled), "{r:?}");
    assert_eq!(db.seats_taken(ev).await, 0);
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn only_the_hash_is_stored() {
    let (db, ev) = TestDb::with_event("Hashes", 20, 5).await;
    let ann = token();
    let held = db.run(Request::Hold(hold(ev, 1, 1, "ann").tap_token(&ann))).await;
    let booking = held.booking().expect("held").booking;
    let confirm =
        Request::Confirm(BookingRef { event: None, booking, customer: "ann".into(), token: Some(ann.clone()) });
    assert_eq!(db.run(confirm).await.booking().map(|b| b.state), Some(BookingState::Booked));
    // Nowhere in either table, as text; its SHA-256 on both requests and on the booking.
    let found: i64 = sqlx::query_scalar(
        "SELECT (SELECT count(*) FROM seatq.requests r WHERE r::text LIKE '%' || $1 || '%')
              + (SELECT count(*) FROM seatq.bookings b WHERE b::text LIKE '%' || $1 || '%')",
    )
    .bind(ann.as_str())
    .fetch_one(&db.pool)
    .await
    .expect("search");
    assert_eq!(found, 0, "the token itself is stored nowhere");
    let hashes: Vec<Vec<u8>> = sqlx::query_scalar(
        "SELECT token_hash FROM seatq.requests WHERE token_hash IS NOT NULL
         UNION ALL SELECT token_hash FROM seatq.bookings WHERE id = $1",
    )
    .bind(booking)
    .fetch_all(&db.pool)
    .await
    .expect("hashes");
    assert_eq!(hashes, vec![ann.hash().as_bytes().to_vec(); 3]);
    // A request presenting the stored hash (written in a token's form) does not match.
    let stolen: String = sqlx::query_scalar(
        "SELECT translate(rtrim(encode(token_hash, 'base64'), '='), '+/', '-_') FROM seatq.bookings WHERE id = $1",
    )
    .bind(booking)
    .fetch_one(&db.pool)
    .await
    .expect("the stored hash");
    let r = db
        .run(Request::Cancel(BookingRef {
            event: None,
            booking,
            customer: "ann".into(),
            token: Some(HoldToken::parse(&stolen).expect("form")),
        }))
        .await;
    assert_eq!(code(&r), "booking_not_found");
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn from_sql_a_new_token_holds_and_confirms() {
    let (db, ev) = TestDb::with_event("Sql tokens", 20, 5).await;
    let token: String = sqlx::query_scalar("SELECT seatq.new_token()").fetch_one(&db.pool).await.expect("new_token");
    assert!(HoldToken::parse(&token).is_ok(), "{token}");
    let enqueue = |kind: &'static str, payload: Value| {
        let pool = db.pool.clone();
        async move {
            sqlx::query_scalar::<_, i64>("SELECT seatq.enqueue($1, $2)")
                .bind(kind)
                .bind(payload)
                .fetch_one(&pool)
                .await
                .expect("enqueue")
        }
    };
    let id = enqueue("hold", json!({"event": ev, "class": 1, "party": 2, "customer": "ann", "token": token})).await;
    db.drain().await;
    let booking = db.client.status(id).await.expect("status").booking().expect("held").booking;
    let refused = enqueue("confirm", json!({"booking": booking, "customer": "ann"})).await;
    let confirmed = enqueue("confirm", json!({"booking": booking, "customer": "ann", "token": token})).await;
    db.drain().await;
    assert_eq!(code(&db.client.status(refused).await.expect("status")), "booking_not_found");
    let record = db.client.status(confirmed).await.expect("status");
    assert_eq!(record.booking().map(|b| b.state), Some(BookingState::Booked), "{record:?}");
    // A malformed token is refused as any malformed field is, naming it.
    let bad = enqueue("confirm", json!({"booking": booking, "customer": "ann", "token": "short"})).await;
    let record = db.client.status(bad).await.expect("status");
    assert_eq!(code(&record), "invalid_request");
    assert!(record.error_message.as_deref().is_some_and(|m| m.starts_with("token: ")), "{record:?}");
    // A key reused with another token is another request.
    let keyed = |token: &str| {
        sqlx::query_scalar::<_, i64>("SELECT seatq.enqueue('book', $1, 'order-7')")
            .bind(json!({"event": ev, "class": 1, "party": 1, "customer": "bob", "token": token}))
            .fetch_one(&db.pool)
    };
    let first = keyed(&token).await.expect("first");
    assert_eq!(keyed(&token).await.expect("again"), first, "the same token: the same request");
    let other = HoldToken::new().expect("randomness");
    let err = keyed(other.as_str()).await.expect_err("another token under the key");
    assert!(err.to_string().contains("idempotency_conflict"), "{err}");
    db.drain().await;
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn over_http_only_the_maker_reads_a_request_and_acts_on_its_hold() {
    let (db, ev) = TestDb::with_event("Http tokens", 20, 5).await;
    let s = Served::start(&db, Settings::default()).await;
    let workers = Running::start(&db, 1, Config::default()).await;
    let body = json!({"kind": "hold", "payload": {"event": ev, "class": 1, "party": 2, "customer": "ann"}});
    let sent = s.http.post(s.url("/api/requests?wait=20")).json(&body).send().await.expect("hold");
    let ann = sent.headers()[seatq_server::TOKEN_HEADER].to_str().expect("token header").to_string();
    let record: Value = sent.json().await.expect("record");
    assert_eq!(record["status"], "succeeded", "{record}");
    let id = record["id"].as_i64().expect("id");
    let booking = record["result"]["booking"].as_i64().expect("booking");
    let before = stands(&db, booking).await;

    // A stranger reads nothing: without the token, or with another, the
    // request is answered as one that does not exist, to the byte.
    let (_, nothing) = s.get("/api/requests/999999").await;
    let read = |token: Option<String>, path: String| {
        let mut get = s.http.get(s.url(&path));
        if let Some(t) = token {
            get = get.bearer_auth(t);
        }
        async move { common::http::answer(get.send().await).await }
    };
    for path in
        [format!("/api/requests/{id}"), format!("/api/requests/{id}/wait"), format!("/api/requests/{id}/events")]
    {
        for guess in [None, Some(token().to_string())] {
            let (status, answer) = read(guess, path.clone()).await;
            let same = answer["error"]["message"].as_str().map(|m| m.replace(&id.to_string(), "999999"));
            assert_eq!((status, same.as_deref()), (404, nothing["error"]["message"].as_str()), "{path}: {answer}");
        }
    }
    let (status, mine) = read(Some(ann.clone()), format!("/api/requests/{id}")).await;
    assert_eq!((status, mine["result"]["booking"].as_i64()), (200, Some(booking)), "{mine}");

    // A stranger acts on nothing, with the guessed id and the name.
    for kind in ["confirm", "cancel", "extend"] {
        for guess in [None, Some(token().to_string())] {
            let mut payload = json!({"booking": booking, "customer": "ann"});
            if let Some(t) = guess {
                payload["token"] = json!(t);
            }
            let (status, r) = s.post("/api/requests?wait=20", &[], &json!({"kind": kind, "payload": payload})).await;
            assert_eq!((status, r["error_code"].as_str()), (200, Some("booking_not_found")), "{kind}: {r}");
            assert_eq!(stands(&db, booking).await, before, "{kind} by a stranger changed the hold");
        }
    }
    // The maker, with the token, confirms.
    let confirm = json!({"kind": "confirm", "payload": {"booking": booking, "customer": "ann", "token": ann}});
    let (status, r) = s.post("/api/requests?wait=20", &[], &confirm).await;
    assert_eq!((status, r["result"]["state"].as_str()), (200, Some("booked")), "{r}");
    workers.stop().await;
    db.assert_invariants_and_close().await;
}

/// A seat request carrying a token.
trait TapToken {
    fn tap_token(self, token: &HoldToken) -> Self;
}

impl TapToken for seatq::SeatRequest {
    fn tap_token(self, token: &HoldToken) -> Self {
        seatq::SeatRequest { token: Some(token.clone()), ..self }
    }
}

#[tokio::test]
async fn where_the_shop_vouches_for_the_customer_a_body_cannot_name_another() {
    let (db, ev) = TestDb::with_event("Identity", 20, 5).await;
    let key = seatq_server::SigningKey::new(b"a shop's key of thirty-two bytes or more").expect("key");
    let settings = Settings {
        customer_identity: seatq_server::CustomerIdentity::Signed(key.clone()),
        limits: seatq_server::Limits::off(),
        ..Settings::default()
    };
    let s = Served::start(&db, settings).await;
    let workers = Running::start(&db, 1, Config::default()).await;
    let hold = |customer: &str| json!({"kind": "hold", "payload": {"event": ev, "class": 1, "party": 1, "customer": customer}});
    let now = chrono::Utc::now().timestamp();
    let signed_in = |assertion: String| [("Seatq-Customer", assertion)];
    let post = |headers: Vec<(&'static str, String)>, body: Value| {
        let mut request = s.http.post(s.url("/api/requests?wait=20")).json(&body);
        for (name, value) in headers {
            request = request.header(name, value);
        }
        async move { common::http::answer(request.send().await).await }
    };
    // No assertion, a forged one, an expired one: one refusal, nothing stored.
    let forged = seatq_server::SigningKey::new(&[9u8; 32]).expect("key").assert("ann", now + 600);
    for headers in [vec![], signed_in(forged).to_vec(), signed_in(key.assert("ann", now - 1)).to_vec()] {
        let (status, answer) = post(headers, hold("ann")).await;
        assert_eq!((status, answer["error"]["code"].as_str()), (401, Some("unauthenticated")), "{answer}");
    }
    // Signed in as ann, naming eve: refused. Naming herself in any case: held.
    let ann = signed_in(key.assert("Ann", now + 600)).to_vec();
    let (status, answer) = post(ann.clone(), hold("eve")).await;
    assert_eq!((status, answer["error"]["code"].as_str()), (403, Some("customer_mismatch")), "{answer}");
    let (status, answer) = post(ann, hold(" ANN ")).await;
    assert_eq!((status, answer["status"].as_str()), (200, Some("succeeded")), "{answer}");
    assert_eq!(answer["result"]["customer"], " ANN ", "the name as given: {answer}");
    assert_eq!(db.seats_taken(ev).await, 1, "only the vouched hold took a seat");
    assert_eq!(db.client.stats().await.expect("stats").requests.values().sum::<i64>(), 1, "nothing else stored");

    // A proxy's header: believed from a trusted proxy only.
    let header = seatq_server::Header::from_static("x-customer");
    let behind = |proxy: &str| Settings {
        customer_identity: seatq_server::CustomerIdentity::Header(header.clone()),
        trusted_proxies: vec![proxy.parse().expect("a network")],
        limits: seatq_server::Limits::off(),
        ..Settings::default()
    };
    let trusted = Served::start(&db, behind("127.0.0.0/8")).await;
    let elsewhere = Served::start(&db, behind("10.0.0.1/32")).await;
    for (served, want) in [(&trusted, 200), (&elsewhere, 401)] {
        let sent = served.http.post(served.url("/api/requests?wait=20")).header("X-Customer", "bob").json(&hold("bob"));
        let (status, answer) = common::http::answer(sent.send().await).await;
        assert_eq!(status, want, "{answer}");
    }
    let sent = trusted.http.post(trusted.url("/api/requests?wait=20")).header("X-Customer", "bob").json(&hold("eve"));
    let (status, _) = common::http::answer(sent.send().await).await;
    assert_eq!(status, 403, "bob names eve");
    // Without a trusted proxy, a customer header is a setting that does not combine.
    let alone = Settings { trusted_proxies: Vec::new(), ..behind("10.0.0.1/32") };
    assert!(alone.check().is_err());
    workers.stop().await;
    db.assert_invariants_and_close().await;
}
