//! `seatq serve`'s JSON API against a real server and database: every
//! request kind, every error code's HTTP status, idempotency, waiting
//! (long-poll and Server-Sent Events, for an outcome and on a waiting
//! list), lapsed holds, auth on operator actions, the OpenAPI description.

mod common;

use std::time::Duration;

use common::http::Served;
use common::{Running, TestDb};
use seatq::Status;
use seatq_server::Settings;
use seatq_worker::Config;
use serde_json::{Value, json};

const TOKEN: &str = "op-secret-token";

fn with_token() -> Settings {
    Settings { operator_token: Some(TOKEN.into()), ..Settings::default() }
}

/// A new hold token, as a client makes one.
fn new_token() -> String {
    seatq::HoldToken::new().expect("randomness").to_string()
}

/// GET `path` presenting hold token `token`.
async fn get_held(s: &Served, path: &str, token: &str) -> (u16, Value) {
    common::http::answer(s.http.get(s.url(path)).bearer_auth(token).send().await).await
}

/// POST a request carrying hold token `token` and wait for its outcome in
/// the same call.
async fn send_held(s: &Served, kind: &str, mut payload: Value, token: &str) -> Value {
    payload["token"] = json!(token);
    send(s, kind, payload).await
}

/// POST a request and wait for its outcome in the same call.
async fn send(s: &Served, kind: &str, payload: Value) -> Value {
    let (status, record) = s.post("/api/requests?wait=20", &[], &json!({"kind": kind, "payload": payload})).await;
    assert_eq!(status, 200, "{kind} {record}");
    assert_ne!(record["status"], "queued", "{kind} not finished: {record}");
    record
}

#[tokio::test]
async fn every_kind_books_through_the_api() {
    let (db, ev) = TestDb::with_event("Hamlet", 60, 10).await;
    let s = Served::start(&db, Settings::default()).await;
    let workers = Running::start(&db, 1, Config::default()).await;

    // hold named seats, extend, confirm
    let ann = new_token();
    let held =
        send_held(&s, "hold", json!({"event": ev, "seats": [11, 12], "customer": "ann", "hold_seconds": 60}), &ann)
            .await;
    assert_eq!(held["status"], "succeeded", "{held}");
    let booking = held["result"]["booking"].as_i64().expect("booking id");
    assert_eq!(held["result"]["state"], "held");
    let extended =
        send_held(&s, "extend", json!({"booking": booking, "customer": "ann", "hold_seconds": 120}), &ann).await;
    assert_eq!(extended["status"], "succeeded", "{extended}");
    assert!(extended["result"]["held_until"].as_str() > held["result"]["held_until"].as_str());
    let confirmed = send_held(&s, "confirm", json!({"booking": booking, "customer": "ann"}), &ann).await;
    assert_eq!(confirmed["result"]["state"], "booked", "{confirmed}");

    // book by class and party
    let booked = send(&s, "book", json!({"event": ev, "class": 3, "party": 3, "customer": "bob"})).await;
    assert_eq!(booked["result"]["seats"].as_array().map(Vec::len), Some(3), "{booked}");

    // hold, then cancel
    let cy_token = new_token();
    let held = send_held(&s, "hold", json!({"event": ev, "class": 2, "party": 2, "customer": "cy"}), &cy_token).await;
    let cy = held["result"]["booking"].as_i64().expect("booking id");
    let cancelled = send_held(&s, "cancel", json!({"booking": cy, "customer": "cy"}), &cy_token).await;
    assert_eq!(cancelled["result"]["state"], "cancelled", "{cancelled}");

    // A refusal is an outcome, not an HTTP error: 200, status failed.
    let taken = send(&s, "book", json!({"event": ev, "seats": [11], "customer": "dee"})).await;
    assert_eq!((taken["status"].as_str(), taken["error_code"].as_str()), (Some("failed"), Some("seats_taken")));
    // Without ann's token, her own name is not enough.
    let wrong = send(&s, "cancel", json!({"booking": booking, "customer": "ann"})).await;
    assert_eq!(wrong["error_code"], "booking_not_found", "{wrong}");

    // The database agrees: ann has seats 11 and 12, bob three, cy none.
    let owners: Vec<(i32, String)> = sqlx::query_as(
        "SELECT s.seat_no, b.customer FROM seatq.seats s JOIN seatq.bookings b ON b.id = s.booking_id
         WHERE s.event_id = $1 AND s.state = 'booked' ORDER BY s.seat_no",
    )
    .bind(ev)
    .fetch_all(&db.pool)
    .await
    .expect("booked seats");
    assert_eq!(owners.iter().filter(|(_, c)| c == "ann").map(|(n, _)| *n).collect::<Vec<_>>(), [11, 12]);
    assert_eq!(owners.iter().filter(|(_, c)| c == "bob").count(), 3);
    assert_eq!(owners.len(), 5);
    // A request made over HTTP is a request like any other: it shows in the stats.
    let stats = db.client.stats().await.expect("stats");
    assert_eq!(stats.requests.get("succeeded"), Some(&6));
    assert_eq!(stats.requests.get("failed"), Some(&2));

    workers.stop().await;
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn every_error_has_its_code_and_status() {
    let (db, ev) = TestDb::with_event("Errors", 10, 5).await;
    let s = Served::start(&db, Settings { body_limit: 16 * 1024, ..Settings::default() }).await;
    let hold = |payload: Value| json!({"kind": "hold", "payload": payload});
    let big = "x".repeat(9000);
    let cases: Vec<(&str, Value, u16, &str)> = vec![
        ("not an object", json!([1, 2]), 400, "wrong_type"),
        ("no kind", json!({"payload": {}}), 400, "missing_field"),
        ("no payload", json!({"kind": "hold"}), 400, "missing_field"),
        ("kind not a string", json!({"kind": 1, "payload": {}}), 400, "wrong_type"),
        ("unknown envelope field", json!({"kind": "hold", "payload": {}, "note": 1}), 400, "unknown_field"),
        ("bad priority", json!({"kind": "hold", "payload": {}, "priority": 40000}), 400, "wrong_type"),
        ("bad run_at", json!({"kind": "hold", "payload": {}, "run_at": "soon"}), 400, "wrong_type"),
        ("unknown kind", json!({"kind": "reserve", "payload": {}}), 400, "unknown_kind"),
        ("payload not an object", hold(json!([1])), 400, "wrong_type"),
        ("missing customer", hold(json!({"event": ev, "class": 1, "party": 1})), 400, "missing_field"),
        ("wrong type", hold(json!({"event": "x", "class": 1, "party": 1, "customer": "c"})), 400, "wrong_type"),
        (
            "unknown field",
            hold(json!({"event": ev, "class": 1, "party": 1, "customer": "c", "partal": true})),
            400,
            "unknown_field",
        ),
        ("party", hold(json!({"event": ev, "class": 1, "party": 10, "customer": "c"})), 400, "party_out_of_range"),
        (
            "hold time",
            hold(json!({"event": ev, "class": 1, "party": 1, "customer": "c", "hold_seconds": 0})),
            400,
            "hold_time_out_of_range",
        ),
        (
            "too many seats",
            hold(json!({"event": ev, "seats": (1..=10).collect::<Vec<_>>(), "customer": "c"})),
            400,
            "too_many_seats",
        ),
        ("duplicate seat", hold(json!({"event": ev, "seats": [3, 3], "customer": "c"})), 400, "duplicate_seat"),
        ("empty customer", hold(json!({"event": ev, "class": 1, "party": 1, "customer": " "})), 400, "invalid_request"),
        (
            "payload too large",
            hold(json!({"event": ev, "class": 1, "party": 1, "customer": big})),
            413,
            "payload_too_large",
        ),
        ("body over the limit", hold(json!({"customer": "y".repeat(20_000)})), 413, "payload_too_large"),
    ];
    for (what, body, status, code) in cases {
        let (got, answer) = s.post("/api/requests", &[], &body).await;
        assert_eq!((got, answer["error"]["code"].as_str()), (status, Some(code)), "{what}: {answer}");
        assert!(answer["error"]["message"].as_str().is_some_and(|m| !m.is_empty()), "{what}: {answer}");
    }
    // Not JSON at all, though it says it is.
    let sent = s
        .http
        .post(s.url("/api/requests"))
        .header("Content-Type", "application/json")
        .body("hold 2 seats")
        .send()
        .await;
    let (got, answer) = common::http::answer(sent).await;
    assert_eq!((got, answer["error"]["code"].as_str()), (400, Some("invalid_json")), "{answer}");
    // A wait that is not a number of seconds, 0 or more, is refused before
    // the request is stored.
    let good = hold(json!({"event": ev, "class": 1, "party": 1, "customer": "w"}));
    for wait in ["NaN", "-3", "-inf"] {
        let (got, answer) = s.post(&format!("/api/requests?wait={wait}"), &[], &good).await;
        assert_eq!((got, answer["error"]["code"].as_str()), (400, Some("invalid_request")), "wait={wait}: {answer}");
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(message.starts_with("wait: must be a number of seconds"), "wait={wait}: {answer}");
    }
    // Nothing refused was stored.
    assert_eq!(db.client.stats().await.expect("stats").requests.values().sum::<i64>(), 0);

    for (path, status, code) in [
        ("/api/requests/999", 404, "not_found"),
        ("/api/requests/abc", 400, "invalid_request"),
        ("/api/requests/999/wait?timeout=0", 404, "not_found"),
        ("/api/requests/999/events", 404, "not_found"),
        ("/api/requests/1/wait?timeout=-1", 400, "invalid_request"),
        ("/api/events/999/availability", 404, "unknown_event"),
        ("/api/events/999/seats", 404, "unknown_event"),
        ("/api/ops/throughput?minutes=0", 400, "invalid_request"),
        ("/api/ops/dead?limit=0", 400, "invalid_request"),
        ("/api/nothing", 404, "not_found"),
    ] {
        let (got, answer) = s.get(path).await;
        assert_eq!((got, answer["error"]["code"].as_str()), (status, Some(code)), "{path}: {answer}");
    }
    // A path or query parameter at fault is named, in the API's words.
    for (path, message) in [
        ("/api/requests/abc", "id: \"abc\" is not an integer"),
        ("/api/events/x1/seats", "id: \"x1\" is not an integer"),
        ("/api/holds/9.5/lapsed", "booking: \"9.5\" is not an integer"),
        ("/api/requests/1/wait?timeout=soon", "timeout: invalid float literal"),
        ("/api/ops/dead?limit=many", "limit: invalid digit found in string"),
    ] {
        let (got, answer) = s.get(path).await;
        assert_eq!((got, answer["error"]["message"].as_str()), (400, Some(message)), "{path}: {answer}");
    }
    let (got, answer) = common::http::answer(s.http.delete(s.url("/api/requests/1")).send().await).await;
    assert_eq!((got, answer["error"]["code"].as_str()), (405, Some("method_not_allowed")), "{answer}");

    // The database out of reach: 503 unreachable.
    let options = seatq::db::options(&common::server_url()).expect("URL").port(1);
    let pool = sqlx::postgres::PgPoolOptions::new().acquire_timeout(Duration::from_secs(2)).connect_lazy_with(options);
    let down = Served::start_with(seatq::Client::from_pool(pool), Settings::default()).await;
    let (got, answer) =
        down.post("/api/requests", &[], &hold(json!({"event": 1, "class": 1, "party": 1, "customer": "c"}))).await;
    assert_eq!((got, answer["error"]["code"].as_str()), (503, Some("unreachable")), "{answer}");
    let (got, _) = down.get("/healthz").await;
    assert_eq!(got, 503);
    let (got, _) = s.get("/healthz").await;
    assert_eq!(got, 200);
    db.close().await;
}

#[tokio::test]
async fn an_idempotency_key_enqueues_once() {
    let (db, ev) = TestDb::with_event("Keys", 10, 5).await;
    let s = Served::start(&db, Settings::default()).await;
    let token = new_token();
    let book = |party: u32, token: &str| json!({"kind": "book", "payload": {"event": ev, "class": 1, "party": party, "customer": "ann", "token": token}});
    let body = book(2, &token);
    let key = [("Idempotency-Key", "order-1-book")];
    let (first, a) = s.post("/api/requests", &key, &body).await;
    let (again, b) = s.post("/api/requests", &key, &body).await;
    assert_eq!((first, again), (202, 202));
    assert_eq!(a["id"], b["id"], "{a} {b}");
    assert_eq!(a["idempotency_key"], "order-1-book");
    assert_eq!(a["token"], token.as_str());
    // The same key for another request, or another token: refused, nothing stored.
    for other in [book(3, &token), book(2, &new_token())] {
        let (status, answer) = s.post("/api/requests", &key, &other).await;
        assert_eq!((status, answer["error"]["code"].as_str()), (409, Some("idempotency_conflict")), "{answer}");
    }
    // A keyed request must bring its own token, or its retry could not present it.
    let untokened = json!({"kind": "book", "payload": {"event": ev, "class": 1, "party": 2, "customer": "ann"}});
    let (status, answer) = s.post("/api/requests", &[("Idempotency-Key", "order-2-book")], &untokened).await;
    assert_eq!((status, answer["error"]["code"].as_str()), (400, Some("missing_field")), "{answer}");
    assert!(answer["error"]["message"].as_str().is_some_and(|m| m.starts_with("token: ")), "{answer}");
    let unreadable = reqwest::header::HeaderValue::from_bytes(b"caf\xe9").expect("an obs-text header");
    let sent = s.http.post(s.url("/api/requests")).header("Idempotency-Key", unreadable).json(&body).send().await;
    let (status, answer) = common::http::answer(sent).await;
    assert_eq!((status, answer["error"]["code"].as_str()), (400, Some("invalid_request")), "{answer}");
    assert_eq!(db.client.stats().await.expect("stats").requests.get("queued"), Some(&1));
    db.drain().await;
    let (_, record) = get_held(&s, &format!("/api/requests/{}", a["id"]), &token).await;
    assert_eq!(record["status"], "succeeded", "{record}");
    assert_eq!(db.seats_taken(ev).await, 2);
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn waiting_by_long_poll_and_by_events() {
    let (db, ev) = TestDb::with_event("Waits", 10, 5).await;
    let s = Served::start(&db, Settings::default()).await;
    let book = |customer: &str| json!({"kind": "book", "payload": {"event": ev, "class": 1, "party": 1, "customer": customer}});

    // Nothing processes: the long-poll answers with the request still queued.
    let (_, a) = s.post("/api/requests", &[], &book("ann")).await;
    let a_token = a["token"].as_str().expect("a token made by the server").to_string();
    let a = a["id"].as_i64().expect("id");
    let (status, record) = get_held(&s, &format!("/api/requests/{a}/wait?timeout=0.3"), &a_token).await;
    assert_eq!((status, record["status"].as_str()), (200, Some("queued")), "{record}");

    // A long-poll and an event stream waiting while a worker processes.
    let (_, b) = s.post("/api/requests", &[], &book("bob")).await;
    let b_token = b["token"].as_str().expect("a token").to_string();
    let b = b["id"].as_i64().expect("id");
    let poll = tokio::spawn({
        // Without ?timeout: the server's longest wait.
        let (http, url) = (s.http.clone(), s.url(&format!("/api/requests/{a}/wait")));
        async move { common::http::answer(http.get(url).bearer_auth(a_token).send().await).await }
    });
    let events = s
        .http
        .get(s.url(&format!("/api/requests/{b}/events")))
        .bearer_auth(&b_token)
        .send()
        .await
        .expect("event stream");
    assert_eq!(events.headers()["content-type"], "text/event-stream");
    let stream = tokio::spawn(read_events(events, "finished"));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!poll.is_finished(), "the long-poll answered before anything was processed");
    db.drain().await;
    let (status, record) = poll.await.expect("long-poll");
    assert_eq!((status, record["status"].as_str()), (200, Some("succeeded")), "{record}");
    let seen = tokio::time::timeout(Duration::from_secs(20), stream).await.expect("events in time").expect("events");
    assert_eq!(seen.iter().map(|(e, _)| e.as_str()).collect::<Vec<_>>(), ["queued", "finished"], "{seen:?}");
    assert_eq!(seen[1].1["status"], "succeeded");
    assert_eq!(seen[1].1["id"], b);

    // Enqueue and wait in one call, with a worker running.
    let workers = Running::start(&db, 1, Config::default()).await;
    let (status, record) = s.post("/api/requests?wait=20", &[], &book("cy")).await;
    assert_eq!((status, record["status"].as_str()), (200, Some("succeeded")), "{record}");
    workers.stop().await;
    db.assert_invariants_and_close().await;
}

/// A request on the waiting list over HTTP: `?wait` answers once it has
/// joined, with its place; a long-poll answers when its place changes (not
/// at once, as for news), and an event stream sends `waiting` each time,
/// then `finished` once seats are handed to it, and stays open meanwhile;
/// a stream that outlasts the server's longest wait ends, with `timeout`.
#[tokio::test]
async fn a_waiting_request_is_followed_by_long_poll_and_by_events() {
    let (db, ev) = TestDb::with_event("One seat", 1, 1).await;
    let s = Served::start(&db, Settings::default()).await;
    let config = Config { sweep_interval: Duration::from_millis(200), ..Config::default() };
    let workers = Running::start(&db, 1, config).await;
    let hold = |customer: &str, wait: bool| {
        let mut payload = json!({"event": ev, "class": 1, "party": 1, "customer": customer});
        if wait {
            payload["wait_seconds"] = json!(600);
        }
        payload
    };
    let ann = new_token();
    let held = send_held(&s, "hold", hold("ann", false), &ann).await;
    let ann_booking = held["result"]["booking"].as_i64().expect("ann holds the seat");

    // Sold out: each joins the list and is answered at once, with its place.
    let (bob, cy) = (new_token(), new_token());
    let bob_r = send_held(&s, "hold", hold("bob", true), &bob).await;
    assert_eq!((bob_r["status"].as_str(), &bob_r["line"]), (Some("waiting"), &json!(true)), "{bob_r}");
    assert_eq!(bob_r["place"], json!({"list": "waiting", "parties_ahead": 0, "seats_ahead": 0}));
    let cy_r = send_held(&s, "hold", hold("cy", true), &cy).await;
    assert_eq!(cy_r["place"], json!({"list": "waiting", "parties_ahead": 1, "seats_ahead": 1}), "{cy_r}");
    let (bob_id, cy_id) = (bob_r["id"].as_i64().expect("id"), cy_r["id"].as_i64().expect("id"));

    // Cy follows by events and by long-poll; neither answers while nothing moves.
    let events = s.http.get(s.url(&format!("/api/requests/{cy_id}/events"))).bearer_auth(&cy).send().await;
    let stream = tokio::spawn(read_events(events.expect("event stream"), "finished"));
    let poll = tokio::spawn({
        let (http, url) = (s.http.clone(), s.url(&format!("/api/requests/{cy_id}/wait?timeout=20")));
        let token = cy.clone();
        async move { common::http::answer(http.get(url).bearer_auth(token).send().await).await }
    });
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(!poll.is_finished(), "the long-poll of a waiting request answered though nothing moved");

    // Ann cancels: the seat is Bob's; Cy is first now, which both tell.
    let cancelled = send_held(&s, "cancel", json!({"booking": ann_booking, "customer": "ann"}), &ann).await;
    assert_eq!(cancelled["status"], "succeeded", "{cancelled}");
    let (_, bob_r) = get_held(&s, &format!("/api/requests/{bob_id}/wait?timeout=20"), &bob).await;
    assert_eq!(bob_r["status"], "succeeded", "{bob_r}");
    assert_eq!(bob_r["result"]["seats"][0]["seat"], 1, "{bob_r}");
    let (status, moved) = tokio::time::timeout(Duration::from_secs(20), poll).await.expect("in time").expect("poll");
    assert_eq!((status, moved["status"].as_str()), (200, Some("waiting")), "{moved}");
    assert_eq!(moved["place"], json!({"list": "waiting", "parties_ahead": 0, "seats_ahead": 0}), "{moved}");

    // Bob gives it up: handed to Cy, which ends Cy's stream.
    let bob_booking = bob_r["result"]["booking"].as_i64().expect("booking");
    send_held(&s, "cancel", json!({"booking": bob_booking, "customer": "bob"}), &bob).await;
    let seen = tokio::time::timeout(Duration::from_secs(20), stream).await.expect("events in time").expect("events");
    let names: Vec<&str> = seen.iter().map(|(e, _)| e.as_str()).collect();
    assert_eq!(names, ["waiting", "waiting", "finished"], "{seen:?}");
    let ahead: Vec<&Value> = seen.iter().map(|(_, r)| &r["place"]["parties_ahead"]).collect();
    assert_eq!(ahead[..2], [&json!(1), &json!(0)], "{seen:?}");
    assert_eq!(
        (seen[2].1["status"].as_str(), &seen[2].1["result"]["seats"][0]["seat"]),
        (Some("succeeded"), &json!(1))
    );

    // On a server whose longest wait is a second, a waiting request's
    // stream ends with `timeout`, the request as it stands.
    let dee = new_token();
    let dee_r = send_held(&s, "hold", hold("dee", true), &dee).await;
    assert_eq!(dee_r["status"], "waiting", "{dee_r}");
    let brief = Served::start(&db, Settings { request_timeout: Duration::from_secs(3), ..Settings::default() }).await;
    let url = brief.url(&format!("/api/requests/{}/events", dee_r["id"]));
    let events = brief.http.get(url).bearer_auth(&dee).send().await.expect("event stream");
    // (Read to the stream's end, whatever it sends: it must end by itself.)
    let seen = tokio::time::timeout(Duration::from_secs(10), read_events(events, "")).await.expect("the stream ends");
    let names: Vec<(&str, &str)> =
        seen.iter().map(|(e, r)| (e.as_str(), r["status"].as_str().unwrap_or_default())).collect();
    assert_eq!(names, [("waiting", "waiting"), ("timeout", "waiting")], "{seen:?}");

    workers.stop().await;
    db.assert_invariants_and_close().await;
}

/// Read Server-Sent Events until the one named `last`: (event, data) pairs.
async fn read_events(mut response: reqwest::Response, last: &str) -> Vec<(String, Value)> {
    let mut text = String::new();
    let mut seen = Vec::new();
    while let Ok(Some(chunk)) = response.chunk().await {
        text.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = text.find("\n\n") {
            let block: String = text.drain(..end + 2).collect();
            let field = |name: &str| block.lines().find_map(|l| l.strip_prefix(name)).map(|v| v.trim().to_string());
            if let (Some(event), Some(data)) = (field("event:"), field("data:")) {
                let done = event == last;
                seen.push((event, serde_json::from_str(&data).unwrap_or(Value::Null)));
                if done {
                    return seen;
                }
            }
        }
    }
    seen
}

#[tokio::test]
async fn a_lapsed_hold_is_announced_to_its_page() {
    let (db, ev) = TestDb::with_event("Lapse", 10, 5).await;
    let s = Served::start(&db, Settings::default()).await;
    let config = Config { sweep_interval: Duration::from_millis(200), ..Config::default() };
    let workers = Running::start(&db, 1, config).await;
    let ann = new_token();
    let held =
        send_held(&s, "hold", json!({"event": ev, "seats": [2], "customer": "ann", "hold_seconds": 1}), &ann).await;
    let booking = held["result"]["booking"].as_i64().expect("booking");
    // Only the hold's token follows it: without, or with another, no such booking.
    for (token, status) in [(None, 404), (Some(new_token()), 404)] {
        let mut get = s.http.get(s.url(&format!("/api/holds/{booking}/lapsed")));
        if let Some(token) = token {
            get = get.bearer_auth(token);
        }
        let (got, answer) = common::http::answer(get.send().await).await;
        assert_eq!((got, answer["error"]["code"].as_str()), (status, Some("not_found")), "{answer}");
    }
    let events = s
        .http
        .get(s.url(&format!("/api/holds/{booking}/lapsed")))
        .bearer_auth(&ann)
        .send()
        .await
        .expect("event stream");
    let seen =
        tokio::time::timeout(Duration::from_secs(20), read_events(events, "lapsed")).await.expect("lapsed in time");
    assert_eq!(seen.last().map(|(e, d)| (e.as_str(), d["booking"].as_i64())), Some(("lapsed", Some(booking))));
    let state: String = sqlx::query_scalar("SELECT state::text FROM seatq.bookings WHERE id = $1")
        .bind(booking)
        .fetch_one(&db.pool)
        .await
        .expect("booking");
    assert_eq!(state, "expired");
    let late = send_held(&s, "confirm", json!({"booking": booking, "customer": "ann"}), &ann).await;
    assert_eq!(late["error_code"], "hold_expired");
    workers.stop().await;
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn operator_actions_need_the_token() {
    let (db, ev) = TestDb::with_event("Ops", 10, 5).await;
    let id = db.client.enqueue(seatq::Request::Book(common::hold(ev, 1, 1, "ann"))).await.expect("enqueue");
    sqlx::query("UPDATE seatq.requests SET status = 'dead', finished_at = now(), attempts = 3, error_code = 'internal', error_message = 'boom' WHERE id = $1")
        .bind(id)
        .execute(&db.pool)
        .await
        .expect("kill the request");
    let retry = format!("/api/ops/dead/{id}/retry");

    // No token set: actions are off, reading is open.
    let open = Served::start(&db, Settings::default()).await;
    let (status, answer) = open.post(&retry, &[], &json!({})).await;
    assert_eq!((status, answer["error"]["code"].as_str()), (403, Some("forbidden")), "{answer}");
    let (status, dead) = open.get("/api/ops/dead").await;
    assert_eq!(status, 200);
    assert_eq!(dead[0]["id"], id);
    assert_eq!(dead[0]["error_message"], "boom");

    let s = Served::start(&db, with_token()).await;
    let (status, answer) = s.post(&retry, &[], &json!({})).await;
    assert_eq!((status, answer["error"]["code"].as_str()), (401, Some("unauthorized")), "{answer}");
    let (status, answer) = s.post(&retry, &[("Authorization", "Bearer wrong")], &json!({})).await;
    assert_eq!((status, answer["error"]["code"].as_str()), (403, Some("forbidden")), "{answer}");
    assert_eq!(db.client.status(id).await.expect("status").status, Status::Dead);
    let bearer = format!("Bearer {TOKEN}");
    let (status, answer) = s.post(&retry, &[("Authorization", &bearer)], &json!({})).await;
    assert_eq!((status, answer["requeued"].clone()), (200, json!([id])), "{answer}");
    assert_eq!(db.client.status(id).await.expect("status").status, Status::Queued);
    // Not dead any more: nothing to retry.
    let (status, answer) = s.post(&retry, &[("Authorization", &bearer)], &json!({})).await;
    assert_eq!((status, answer["error"]["code"].as_str()), (404, Some("not_found")), "{answer}");
    let (status, answer) = s.post("/api/ops/dead/retry", &[("Authorization", &bearer)], &json!({})).await;
    assert_eq!((status, answer["requeued"].clone()), (200, json!([])), "{answer}");

    // Reads protected: the token is needed to read too.
    let protected = Served::start(&db, Settings { protect_reads: true, ..with_token() }).await;
    for path in ["/api/ops/stats", "/api/ops/workers", "/api/ops/dead", "/api/ops/throughput"] {
        let (status, _) = protected.get(path).await;
        assert_eq!(status, 401, "{path}");
        let sent = protected.http.get(protected.url(path)).header("Authorization", &bearer).send().await;
        let (status, answer) = common::http::answer(sent).await;
        assert_eq!(status, 200, "{path}: {answer}");
    }
    let (status, stats) = open.get("/api/ops/stats").await;
    assert_eq!((status, stats["requests"]["queued"].as_i64()), (200, Some(1)), "{stats}");
    // A producer's reads stay open.
    let (status, _) = protected.get(&format!("/api/events/{ev}/seats")).await;
    assert_eq!(status, 200);
    db.drain().await;
    assert_eq!(db.client.status(id).await.expect("status").status, Status::Succeeded);
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn reads_and_the_openapi_description() {
    let db = TestDb::new().await;
    let venue = seatq::venue::parse_csv(std::io::BufReader::new(
        std::fs::File::open("examples/venues/theatre.csv").expect("the sample theatre"),
    ))
    .expect("read the venue");
    let event = seatq::venue::NewEvent { name: "Hamlet".into(), ..Default::default() };
    let ev = db.client.import_event(&event, &venue.seats).await.expect("import");
    let s = Served::start(&db, Settings::default()).await;
    let (status, seats) = s.get(&format!("/api/events/{ev}/seats")).await;
    assert_eq!(status, 200);
    assert_eq!(seats.as_array().map(Vec::len), Some(venue.seats.len()));
    assert_eq!(seats[0]["section"], "Stalls");
    let blocked = seats.as_array().map_or(0, |a| a.iter().filter(|s| s["state"] == "not_for_sale").count());
    assert_eq!(blocked, venue.seats.iter().filter(|s| !s.for_sale).count());
    let (status, classes) = s.get(&format!("/api/events/{ev}/availability")).await;
    assert_eq!((status, classes.as_array().map(Vec::len)), (200, Some(4)));
    // A class's prices sit beside its counts, as in SQL.
    assert!(classes[0]["min_cents"].is_i64() && classes[0].get("prices").is_none(), "{}", classes[0]);
    let (status, events) = s.get("/api/events").await;
    assert_eq!((status, events[0]["name"].as_str()), (200, Some("Hamlet")));

    let (status, doc) = s.get("/api/openapi.json").await;
    assert_eq!(status, 200);
    // Every response has its description, which OpenAPI requires.
    let mut undescribed = Vec::new();
    for (path, operations) in doc["paths"].as_object().expect("paths") {
        for (method, operation) in operations.as_object().expect("operations") {
            for (status, response) in operation["responses"].as_object().into_iter().flatten() {
                if response["description"].as_str().is_none_or(|d| d.is_empty()) {
                    undescribed.push(format!("{method} {path} {status}"));
                }
            }
        }
    }
    assert!(undescribed.is_empty(), "responses without a description: {undescribed:?}");
    // Operation ids are unique, as OpenAPI requires.
    let mut ids: Vec<&str> = doc["paths"]
        .as_object()
        .into_iter()
        .flat_map(|paths| paths.values())
        .filter_map(|operations| operations.as_object())
        .flat_map(|operations| operations.values())
        .filter_map(|operation| operation["operationId"].as_str())
        .collect();
    let all = ids.len();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), all, "operation ids named twice: {doc}");
    // A path parameter is in its path (query parameters are said to be).
    for (path, operations) in doc["paths"].as_object().expect("paths") {
        for operation in operations.as_object().expect("operations").values() {
            for parameter in operation["parameters"].as_array().into_iter().flatten() {
                if parameter["in"] == "path" {
                    let name = parameter["name"].as_str().unwrap_or_default();
                    assert!(path.contains(&format!("{{{name}}}")), "{path}: path parameter {name} not in the path");
                }
            }
        }
    }
    assert!(doc["components"]["schemas"]["ClassPrices"]["properties"]["free_min_cents"].is_object(), "{doc}");
    for path in [
        "/api/requests",
        "/api/requests/{id}",
        "/api/requests/{id}/wait",
        "/api/requests/{id}/events",
        "/api/holds/{booking}/lapsed",
        "/api/events",
        "/api/events/{id}/availability",
        "/api/events/{id}/seats",
        "/api/ops/stats",
        "/api/ops/workers",
        "/api/ops/throughput",
        "/api/ops/dead",
        "/api/ops/dead/{id}/retry",
        "/api/ops/dead/retry",
    ] {
        assert!(doc["paths"][path].is_object(), "{path} is not described");
    }
    let schemas = &doc["components"]["schemas"];
    for schema in ["SeatRequest", "BookingRef", "HoldExtension", "RequestRecord", "MapSeat", "ErrorBody"] {
        assert!(schemas[schema].is_object(), "no schema {schema}");
    }
    assert!(schemas["SeatRequest"]["properties"]["party"].is_object());
    db.close().await;
}

#[tokio::test]
async fn every_answer_carries_the_security_headers() {
    let (db, ev) = TestDb::with_event("Headers", 4, 2).await;
    let s = Served::start(&db, Settings::default()).await;
    for path in ["/", &format!("/shop/{ev}"), "/api/events", "/api/requests/999", "/no/such/page", "/healthz"] {
        let r = s.http.get(s.url(path)).send().await.expect("answer");
        let h = r.headers();
        let got = |name: &str| h.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
        assert_eq!(got("x-content-type-options"), "nosniff", "{path}");
        assert_eq!(got("x-frame-options"), "DENY", "{path}");
        assert_eq!(got("referrer-policy"), "same-origin", "{path}");
        assert!(got("content-security-policy").contains("frame-ancestors 'none'"), "{path}");
        assert!(got("content-security-policy").contains("script-src 'self';"), "{path}: inline script allowed");
    }
    db.close().await;
}

#[tokio::test]
async fn parts_turn_off() {
    let db = TestDb::new().await;
    let s = Served::start(&db, Settings { api: false, shop: false, ..Settings::default() }).await;
    assert_eq!(s.get("/api/requests/1").await.0, 404);
    assert_eq!(s.get("/api/openapi.json").await.0, 404);
    assert_eq!(s.get("/api/ops/stats").await.0, 200);
    let refused = Settings { api: false, ..Settings::default() }.check();
    assert!(refused.is_err(), "a shop without the API");
    assert!(
        Settings { protect_reads: true, ..Settings::default() }.check().is_err(),
        "protected reads without a token"
    );
    db.close().await;
}

#[tokio::test]
async fn the_pages_and_signing_in() {
    let (db, ev) = TestDb::with_event("Pages", 12, 6).await;
    let s = Served::start(&db, Settings { protect_reads: true, ..with_token() }).await;
    let page = |path: &str| {
        let (http, url) = (s.http.clone(), s.url(path));
        async move {
            let r = http.get(url).send().await.expect("page");
            (r.status().as_u16(), r.text().await.expect("page text"))
        }
    };
    let (status, html) = page(&format!("/shop/{ev}")).await;
    assert_eq!(status, 200);
    assert_eq!(html.matches("data-seat=").count(), 12, "every seat drawn");
    assert!(html.contains(r#"data-seat="12""#) && html.contains(r#"class="seat free""#));
    assert_eq!(page("/shop/999").await.0, 404);
    assert_eq!(page(&format!("/shop/{ev}?hold_seconds=0")).await.0, 400);
    let (status, html) = page("/").await;
    assert_eq!(status, 200);
    assert!(html.contains(&format!("/shop/{ev}")));

    // Reads protected: the dashboard asks for the token.
    let (status, html) = page("/dashboard").await;
    assert_eq!(status, 401);
    assert!(html.contains(r#"action="/dashboard/login""#));
    let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().expect("client");
    let wrong = http.post(s.url("/dashboard/login")).form(&[("token", "nope")]).send().await.expect("sign in");
    assert_eq!(wrong.status().as_u16(), 403);
    let right = http.post(s.url("/dashboard/login")).form(&[("token", TOKEN)]).send().await.expect("sign in");
    assert_eq!(right.status().as_u16(), 303);
    let cookie = right.headers()["set-cookie"].to_str().expect("cookie").to_string();
    assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"), "{cookie}");
    let cookie = cookie.split(';').next().expect("name=value").to_string();
    let signed = http.get(s.url("/dashboard")).header("Cookie", &cookie).send().await.expect("dashboard");
    assert_eq!(signed.status().as_u16(), 200);
    let html = signed.text().await.expect("dashboard text");
    assert!(html.contains(r#"data-testid="requests-queued""#) && html.contains("Signed in"));
    let event = http.get(s.url(&format!("/dashboard/events/{ev}"))).header("Cookie", &cookie).send().await;
    assert_eq!(event.expect("event page").status().as_u16(), 200);
    // The cookie also carries operator actions.
    let retried = http.post(s.url("/api/ops/dead/retry")).header("Cookie", &cookie).send().await.expect("retry");
    assert_eq!(retried.status().as_u16(), 200);
    assert_eq!(page("/assets/seatq.js").await.0, 200);
    db.close().await;
}

#[tokio::test]
async fn a_connection_that_never_finishes_its_request_head_is_closed() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let db = TestDb::new().await;
    let shutdown = tokio_util::sync::CancellationToken::new();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind a free port");
    let addr = listener.local_addr().expect("local address");
    let router = seatq_server::router(db.client.clone(), Settings::default(), shutdown.clone()).expect("settings");
    let serving = tokio::spawn(seatq_server::serve(listener, router, Duration::from_secs(1), shutdown.clone()));

    // Slow loris: a request line begun and never finished.
    let mut slow = tokio::net::TcpStream::connect(addr).await.expect("connect");
    slow.write_all(b"GET /healthz HTT").await.expect("write");
    // Meanwhile a whole request is answered.
    let mut whole = tokio::net::TcpStream::connect(addr).await.expect("connect");
    whole.write_all(b"GET /healthz HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n").await.expect("write");
    let mut answer = String::new();
    whole.read_to_string(&mut answer).await.expect("read the answer");
    assert!(answer.starts_with("HTTP/1.1 200") && answer.ends_with("ok\n"), "{answer}");
    // The server closes the slow one, with no answer (it never had a
    // request). The bound only keeps a server that never closes it from
    // hanging the test.
    let mut rest = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), slow.read_to_end(&mut rest))
        .await
        .expect("the server closed the connection")
        .expect("read to the end");
    assert_eq!(String::from_utf8_lossy(&rest), "");

    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(30), serving).await.expect("stopped").expect("no panic");
    db.close().await;
}
