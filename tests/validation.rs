//! Bad input: every malformed request gets the same stable error code whether
//! it comes through the client, is inserted by raw SQL (the database's own
//! checks), or reaches a worker unchecked; valid requests around it succeed.

mod common;

use common::{TestDb, code};
use proptest::prelude::*;
use seatq::{NewRequest, Request, Status};
use serde_json::{Value, json};

/// (kind, payload, expected code). `EV` is replaced by a real event id.
fn bad_requests() -> Vec<(&'static str, Value, &'static str)> {
    let long = "x".repeat(9000);
    vec![
        ("reserve", json!({"event": "EV", "class": 1, "party": 1, "customer": "c"}), "unknown_kind"),
        ("hold", json!({"event": "EV", "class": 1, "party": 1, "customer": "c", "note": long}), "payload_too_large"),
        ("hold", json!([1, 2, 3]), "wrong_type"),
        ("hold", json!("hold please"), "wrong_type"),
        ("hold", json!({"event": "EV", "class": 1, "party": 1, "customer": "c", "partal": true}), "unknown_field"),
        ("book", json!({"event": "EV", "class": 1, "party": 1, "customer": "c", "hold_seconds": 60}), "unknown_field"),
        ("hold", json!({"class": 1, "party": 2, "customer": "c"}), "missing_field"),
        ("hold", json!({"event": "EV", "class": 1, "party": 2}), "missing_field"),
        ("book", json!({"event": "EV", "class": 1, "customer": "c"}), "missing_field"),
        ("book", json!({"event": "EV", "party": 1, "customer": "c"}), "missing_field"),
        ("confirm", json!({"customer": "c"}), "missing_field"),
        ("hold", json!({"event": "one", "class": 1, "party": 1, "customer": "c"}), "wrong_type"),
        ("hold", json!({"event": "EV", "class": 1, "party": 2.5, "customer": "c"}), "wrong_type"),
        ("hold", json!({"event": "EV", "class": 1, "party": 1, "customer": 42}), "wrong_type"),
        ("hold", json!({"event": "EV", "class": null, "party": 1, "customer": "c"}), "wrong_type"),
        ("book", json!({"event": "EV", "seats": ["2A"], "customer": "c"}), "wrong_type"),
        ("book", json!({"event": "EV", "class": 1, "party": 1, "customer": "c", "partial": "yes"}), "wrong_type"),
        ("cancel", json!({"booking": "12", "customer": "c"}), "wrong_type"),
        ("book", json!({"event": "EV", "class": 1, "party": 0, "customer": "c"}), "party_out_of_range"),
        ("book", json!({"event": "EV", "class": 1, "party": 10, "customer": "c"}), "party_out_of_range"),
        (
            "hold",
            json!({"event": "EV", "class": 1, "party": 1, "customer": "c", "hold_seconds": 0}),
            "hold_time_out_of_range",
        ),
        (
            "hold",
            json!({"event": "EV", "class": 1, "party": 1, "customer": "c", "hold_seconds": 86401}),
            "hold_time_out_of_range",
        ),
        ("book", json!({"event": "EV", "seats": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], "customer": "c"}), "too_many_seats"),
        ("book", json!({"event": "EV", "seats": [4, 5, 4], "customer": "c"}), "duplicate_seat"),
        ("book", json!({"event": "EV", "seats": [0], "customer": "c"}), "unknown_seat"),
        ("book", json!({"event": "EV", "seats": [1, 2], "party": 3, "customer": "c"}), "invalid_request"),
        ("book", json!({"event": "EV", "seats": [1], "customer": "c", "together": true}), "invalid_request"),
        ("book", json!({"event": "EV", "class": 0, "party": 1, "customer": "c"}), "invalid_request"),
        ("book", json!({"event": "EV", "class": 1, "party": 1, "customer": " \t"}), "invalid_request"),
        ("extend", json!({"customer": "c", "hold_seconds": 60}), "missing_field"),
        ("extend", json!({"booking": 1, "customer": "c", "event": 0}), "invalid_request"),
        ("cancel", json!({"booking": 1, "customer": "c", "event": "x"}), "wrong_type"),
        ("confirm", json!({"booking": 1, "customer": "c", "event": 1.5}), "wrong_type"),
        ("extend", json!({"booking": 1, "customer": "c", "event": 9.3e18}), "wrong_type"),
        ("confirm", json!({"booking": 1, "customer": "c", "event": 1, "seat": 1}), "unknown_field"),
        ("extend", json!({"booking": 1, "customer": "c", "hold_seconds": "60"}), "wrong_type"),
        // Waiting for seats: a hold's or book's, a whole number of seconds up
        // to a week, for a party that names no seats and is not partial.
        ("hold", json!({"event": "EV", "class": 1, "party": 1, "customer": "c", "wait_seconds": "60"}), "wrong_type"),
        ("hold", json!({"event": "EV", "class": 1, "party": 1, "customer": "c", "wait_seconds": 1.5}), "wrong_type"),
        ("hold", json!({"event": "EV", "class": 1, "party": 1, "customer": "c", "wait_seconds": 0}), "invalid_request"),
        (
            "book",
            json!({"event": "EV", "class": 1, "party": 1, "customer": "c", "wait_seconds": 604801}),
            "invalid_request",
        ),
        ("hold", json!({"event": "EV", "seats": [1], "customer": "c", "wait_seconds": 60}), "invalid_request"),
        (
            "book",
            json!({"event": "EV", "class": 1, "party": 2, "customer": "c", "partial": true, "wait_seconds": 60}),
            "invalid_request",
        ),
        ("confirm", json!({"booking": 1, "customer": "c", "wait_seconds": 60}), "unknown_field"),
        (
            "hold",
            json!({"event": "EV", "class": 1, "party": 1, "customer": "c", "wait_seconds": 60, "x": 1}),
            "unknown_field",
        ),
        ("extend", json!({"booking": 1.5, "customer": "c"}), "wrong_type"),
        ("extend", json!({"booking": 1, "customer": "c", "hold_seconds": 0}), "hold_time_out_of_range"),
        ("extend", json!({"booking": 1, "customer": "c", "hold_seconds": 86401}), "hold_time_out_of_range"),
        ("extend", json!({"booking": 1, "customer": ""}), "invalid_request"),
        ("extend", json!(7), "wrong_type"),
        // A wrong element names its place; an empty field name shows as "".
        ("book", json!({"event": "EV", "seats": [3, 1.5], "customer": "c"}), "wrong_type"),
        ("hold", json!({"event": "EV", "class": 1, "party": 1, "customer": "c", "": 1}), "unknown_field"),
        // Control and bidirectional formatting characters in text.
        ("book", json!({"event": "EV", "class": 1, "party": 1, "customer": "ann\u{1b}[2J"}), "invalid_request"),
        ("confirm", json!({"booking": 1, "customer": "\u{202e}nna"}), "invalid_request"),
        ("hold", json!({"event": "EV", "class": 1, "party": 1, "customer": "c\u{85}"}), "invalid_request"),
        // Huge inputs, quoted only in part.
        (HUGE.as_str(), json!({}), "unknown_kind"),
        ("hold", json!({"event": "EV", "class": 1, "party": 1, "customer": "c", (LONG.as_str()): 1}), "unknown_field"),
    ]
}

/// A kind of 100,000 characters, and a field name of 5,000 (a payload is at
/// most 8,192 bytes).
static HUGE: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| "k".repeat(100_000));
static LONG: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| "k".repeat(5_000));

/// Requests that validate but that a worker must refuse, by the state of the
/// database: (kind, payload, expected code).
fn refused_by_state() -> Vec<(&'static str, Value, &'static str)> {
    vec![
        ("book", json!({"event": 99999, "class": 1, "party": 1, "customer": "c"}), "unknown_event"),
        ("book", json!({"event": "EV", "seats": [5, 201], "customer": "c"}), "unknown_seat"),
        ("confirm", json!({"booking": 99999, "customer": "c"}), "booking_not_found"),
        ("extend", json!({"booking": 99999, "customer": "c", "hold_seconds": 60}), "booking_not_found"),
        // The event has classes 1 to 3: class 9 is no class of it, not sold out.
        ("book", json!({"event": "EV", "class": 9, "party": 1, "customer": "c"}), "unknown_class"),
        ("hold", json!({"event": "EV", "class": 9, "party": 2, "customer": "c", "together": true}), "unknown_class"),
    ]
}

fn with_event(payload: &Value, event: i64) -> Value {
    let mut p = payload.clone();
    if let Some(o) = p.as_object_mut()
        && o.get("event") == Some(&json!("EV"))
    {
        o.insert("event".into(), json!(event));
    }
    p
}

async fn insert_raw(db: &TestDb, kind: &str, payload: &Value) -> i64 {
    sqlx::query_scalar("INSERT INTO seatq.requests (kind, payload) VALUES ($1, $2) RETURNING id")
        .bind(kind)
        .bind(payload)
        .fetch_one(&db.pool)
        .await
        .unwrap()
}

async fn insert_valid(db: &TestDb, event: i64, n: usize) -> i64 {
    db.client.enqueue(Request::Book(common::hold(event, 3, 1, &format!("ok{n}")))).await.unwrap()
}

#[tokio::test]
async fn every_bad_request_gets_the_same_code_by_every_path() {
    let db = TestDb::new().await;
    let event = db.client.add_event("E", 200, 6).await.unwrap();
    let mut valid = Vec::new();

    // Through the client: refused before anything is written.
    for (kind, payload, expected) in bad_requests() {
        let payload = with_event(&payload, event);
        let err = seatq::validate::check(kind, &payload).expect_err(expected);
        assert_eq!(err.code(), expected, "client: {kind} {payload}: {err}");
    }

    // By raw SQL: failed by the database at once, nothing left for a worker.
    let mut by_sql = Vec::new();
    for (n, (kind, payload, expected)) in bad_requests().into_iter().enumerate() {
        valid.push(insert_valid(&db, event, n).await);
        let payload = with_event(&payload, event);
        let id = insert_raw(&db, kind, &payload).await;
        let r = db.client.status(id).await.unwrap();
        assert_eq!((r.status, code(&r)), (Status::Failed, expected), "sql: {kind} {payload}: {r:?}");
        let client_message = seatq::validate::check(kind, &payload).unwrap_err().message;
        assert_eq!(r.error_message.as_deref(), Some(client_message.as_str()), "same message both ways");
        by_sql.push(id);
    }

    // Reaching a worker unchecked (rows from before validation existed, say):
    // the worker's own checks give the same codes.
    sqlx::query("ALTER TABLE seatq.requests DISABLE TRIGGER requests_validate").execute(&db.pool).await.unwrap();
    let mut unchecked = Vec::new();
    for (n, (kind, payload, expected)) in bad_requests().into_iter().chain(refused_by_state()).enumerate() {
        let id = insert_raw(&db, kind, &with_event(&payload, event)).await;
        unchecked.push((id, expected));
        valid.push(insert_valid(&db, event, 100 + n).await);
    }
    db.drain().await;
    for (id, expected) in unchecked {
        let r = db.client.status(id).await.unwrap();
        assert_eq!((r.status, code(&r)), (Status::Failed, expected), "worker: {r:?}");
    }
    for id in valid {
        let r = db.client.status(id).await.unwrap();
        assert_eq!(r.status, Status::Succeeded, "valid requests around bad ones succeed: {r:?}");
    }
    // Whichever way it was failed, no row keeps a payload over the limit.
    let largest: i32 = sqlx::query_scalar("SELECT max(octet_length(payload::text)) FROM seatq.requests")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert!(largest as usize <= seatq::limits::MAX_PAYLOAD_BYTES, "{largest}");
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn a_bulk_file_reports_bad_lines_and_never_enqueues_half_a_line() {
    let file = [
        r#"{"kind": "book", "payload": {"event": 1, "class": 1, "party": 2, "customer": "a"}}"#,
        r#"{"kind": "book", "payload": {"event": 1, "class": 1, "party": 2, "cust"#,
        "",
        r#"{"kind": "hold", "payload": {"event": 1, "class": 1, "party": 12, "customer": "b"}}"#,
        r#"{"kind": "cancel", "payload": {"booking": 3, "customer": "c"}, "idempotency_key": "k", "priority": 5}"#,
        r#"{"kind": "cancel", "payload": {"booking": 3, "customer": "c"}, "extra": 1}"#,
    ]
    .join("\n");
    let parsed = seatq::bulk::parse(file.as_bytes()).unwrap();
    assert_eq!(parsed.good.len(), 2);
    assert_eq!(parsed.good[1].idempotency_key.as_deref(), Some("k"));
    assert_eq!(parsed.good[1].priority, 5);
    let bad: Vec<(usize, &str)> = parsed.bad.iter().map(|b| (b.line, b.code.as_str())).collect();
    assert_eq!(bad, [(2, "invalid_json"), (4, "party_out_of_range"), (6, "invalid_json")]);
    assert!(parsed.bad[2].reason.contains("extra"), "{:?}", parsed.bad[2]);
}

/// A bulk file's bad lines, each as `line: code: reason`, and how many are good.
fn bulk_refusals(file: &str) -> (Vec<String>, usize) {
    let parsed = seatq::bulk::parse(file.as_bytes()).unwrap();
    (parsed.bad.iter().map(|b| format!("{}: {}: {}", b.line, b.code, b.reason)).collect(), parsed.good.len())
}

fn sqlstate(e: sqlx::Error) -> String {
    seatq::sqlstate::code(&e).map(|c| c.into_owned()).unwrap_or_else(|| format!("not SQL: {e}"))
}

#[tokio::test]
async fn a_string_with_u0000_is_refused_by_every_path() {
    let db = TestDb::new().await;
    let event = db.client.add_event("E", 20, 6).await.unwrap();
    let cases = [
        ("hold", json!({"event": event, "class": 1, "party": 1, "customer": "a\u{0}b"}), "customer"),
        ("confirm", json!({"booking": 1, "customer": "\u{0}"}), "customer"),
        // First, before an unknown field or a bad party.
        ("book", json!({"event": event, "class": 1, "party": 12, "customer": "c", "note": ["x", "\u{0}"]}), "note[1]"),
        (
            "book",
            json!({"event": event, "class": 1, "party": 1, "customer": "c", "a\u{0}": 1}),
            "field name \"a\\u0000\"",
        ),
        ("hold", json!("\u{0}"), "payload"),
    ];
    for (kind, payload, field) in &cases {
        // The client refuses it, naming the field.
        let err = seatq::validate::check(kind, payload).expect_err("refused");
        assert_eq!(err.code(), "invalid_request", "{kind} {payload}: {err}");
        assert_eq!(err.message, format!("{field}: must not contain U+0000 (NUL)"));
        // The database cannot store it: the insert fails and nothing is left.
        let by_sql = sqlx::query("INSERT INTO seatq.requests (kind, payload) VALUES ($1, $2)")
            .bind(kind)
            .bind(payload)
            .execute(&db.pool)
            .await;
        assert_eq!(
            sqlstate(by_sql.expect_err("jsonb refuses U+0000")),
            seatq::sqlstate::UNTRANSLATABLE_CHARACTER,
            "{kind} {payload}"
        );
    }
    let mut r = common::hold(event, 1, 1, "nul\u{0}");
    let err = db.client.enqueue(Request::Hold(r.clone())).await.expect_err("refused");
    assert!(matches!(&err, seatq::Error::Invalid(e) if e.code() == "invalid_request"), "{err}");
    r.customer = "ann".into();
    let keyed = seatq::NewRequest { idempotency_key: Some("k\u{0}".into()), ..Request::Hold(r).into() };
    let err = db.client.enqueue(keyed).await.expect_err("refused");
    assert_eq!(err.to_string(), "idempotency_key: must not contain U+0000 (NUL)");
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM seatq.requests").fetch_one(&db.pool).await.unwrap();
    assert_eq!(rows, 0);

    let file = [
        r#"{"kind": "book", "payload": {"event": 1, "class": 1, "party": 1, "customer": "a\u0000"}}"#,
        r#"{"kind": "book", "payload": {"event": 1, "class": 1, "party": 1, "customer": "a"}, "idempotency_key": "\u0000"}"#,
    ]
    .join("\n");
    let (bad, _) = bulk_refusals(&file);
    assert_eq!(
        bad,
        [
            "1: invalid_request: customer: must not contain U+0000 (NUL)",
            "2: invalid_request: idempotency_key: must not contain U+0000 (NUL)"
        ]
    );
    db.close().await;
}

/// The database's answer for a request (`seatq.request_error`): code and message, or none.
async fn request_error(db: &TestDb, kind: &str, payload: &Value) -> Option<(String, String)> {
    let (code, message): (Option<String>, Option<String>) =
        sqlx::query_as("SELECT code, message FROM seatq.request_error($1, $2)")
            .bind(kind)
            .bind(payload)
            .fetch_one(&db.pool)
            .await
            .unwrap();
    code.zip(message)
}

#[tokio::test]
async fn numbers_are_judged_as_jsonb_stores_them() {
    let db = TestDb::new().await;
    let sql_error = |kind: &'static str, payload: Value| {
        let db = &db;
        async move { request_error(db, kind, &payload).await }
    };
    // Payloads given as values: the same answer both ways. serde_json writes
    // 1e16 as 1e+16, which jsonb stores as the integer 10000000000000000.
    let cases = [
        (json!({"event": 1e16, "class": 1, "party": 1, "customer": "c"}), None),
        (
            json!({"event": 1, "class": 1, "party": 1e16, "customer": "c"}),
            Some("party: 10000000000000000 is out of range 1 to 9"),
        ),
        (json!({"event": 1, "class": 1, "party": 2.0, "customer": "c"}), Some("party: must be an integer, not 2.0")),
        (json!({"event": 1, "class": 1, "party": -0.0, "customer": "c"}), Some("party: must be an integer, not 0.0")),
        (
            json!({"event": 1, "class": 1, "party": 1e-7, "customer": "c"}),
            Some("party: must be an integer, not 0.0000001"),
        ),
        (
            json!({"event": 1e19, "class": 1, "party": 1, "customer": "c"}),
            Some("event: must be an integer, not 10000000000000000000"),
        ),
        (json!({"event": 1, "seats": [2e16], "customer": "c"}), Some("seats: there is no seat 20000000000000000")),
    ];
    for (payload, expected) in cases {
        let rust = Request::decode("book", &payload).err().map(|e| e.message);
        assert_eq!(rust.as_deref(), expected, "{payload}");
        let sql = sql_error("book", payload.clone()).await.map(|(_, message)| message);
        assert_eq!(sql.as_deref(), expected, "{payload}");
    }
    let Ok(Request::Book(r)) =
        Request::decode("book", &json!({"event": 1e16, "class": 1, "party": 1, "customer": "c"}))
    else {
        panic!("decodes")
    };
    assert_eq!(r.event, 10_000_000_000_000_000);

    // JSON text: serde_json reads 2E0 as a float, jsonb stores it as 2. The
    // client (a bulk file line) refuses what the database accepts; a
    // fraction is wrong_type both ways.
    for (text, rust_code, sql_code) in [
        (r#"{"event": 1, "class": 1, "party": 2E0, "customer": "c"}"#, Some("wrong_type"), None),
        (r#"{"event": 1, "class": 1, "party": 2.50, "customer": "c"}"#, Some("wrong_type"), Some("wrong_type")),
        (r#"{"event": 1, "class": 1, "party": 2, "customer": "c"}"#, None, None),
    ] {
        let parsed: Value = serde_json::from_str(text).unwrap();
        let rust = Request::decode("book", &parsed).err().map(|e| e.code().to_string());
        assert_eq!(rust.as_deref(), rust_code, "{text}");
        let sql: Option<String> = sqlx::query_scalar("SELECT code FROM seatq.request_error('book', $1::text::jsonb)")
            .bind(text)
            .fetch_one(&db.pool)
            .await
            .unwrap();
        assert_eq!(sql.as_deref(), sql_code, "{text}");
    }
    db.close().await;
}

#[tokio::test]
async fn enqueue_refuses_a_priority_out_of_range_clearly() {
    let db = TestDb::new().await;
    let payload = json!({"event": 1, "class": 1, "party": 1, "customer": "c"});
    for priority in [32768, -32769, i32::MAX] {
        let err = sqlx::query_scalar::<_, i64>("SELECT seatq.enqueue('book', $1, NULL, $2)")
            .bind(&payload)
            .bind(priority)
            .fetch_one(&db.pool)
            .await
            .expect_err("out of range");
        let db_err = err.as_database_error().expect("a database error");
        assert_eq!(db_err.message(), "priority must be between -32768 and 32767", "{priority}");
        assert_eq!(db_err.code().as_deref(), Some(seatq::sqlstate::NUMERIC_VALUE_OUT_OF_RANGE), "{priority}");
    }
    for priority in [32767, -32768] {
        let id: i64 = sqlx::query_scalar("SELECT seatq.enqueue('book', $1, NULL, $2)")
            .bind(&payload)
            .bind(priority)
            .fetch_one(&db.pool)
            .await
            .unwrap();
        let stored: i16 = sqlx::query_scalar("SELECT priority FROM seatq.requests WHERE id = $1")
            .bind(id)
            .fetch_one(&db.pool)
            .await
            .unwrap();
        assert_eq!(i32::from(stored), priority);
    }
    db.close().await;
}

/// Rust's answer and the database's for a request, which must be the same.
async fn both_ways(db: &TestDb, kind: &str, payload: &Value) -> Option<(String, String)> {
    let rust = Request::decode(kind, payload).err().map(|e| (e.code().to_string(), e.message));
    assert_eq!(rust, request_error(db, kind, payload).await, "{kind} {payload}");
    rust
}

#[tokio::test]
async fn messages_quote_a_bounded_prefix_of_the_input_and_name_what_is_wrong() {
    let db = TestDb::new().await;
    let (huge, long) = (HUGE.as_str(), LONG.as_str());
    let k64 = "k".repeat(64);
    let seat = |seats: Value| json!({"event": 1, "seats": seats, "customer": "c"});
    let book = |customer: &str| json!({"event": 1, "class": 1, "party": 1, "customer": customer});
    let with_field = |name: &str| {
        let mut p = book("c");
        p[name] = json!(1);
        p
    };
    let expected_field = |shown: &str| {
        format!(
            "{shown}: unknown field for book; expected one of event, class, party, customer, seats, partial, together, token, wait_seconds"
        )
    };
    let cases: Vec<(&str, Value, &str, String)> = vec![
        (
            huge,
            json!({}),
            "unknown_kind",
            format!(
                "unknown request kind \"{k64}\"… (100000 characters): expected hold, book, confirm, cancel or extend"
            ),
        ),
        ("book", with_field(long), "unknown_field", expected_field(&format!("\"{k64}\"… (5000 characters)"))),
        ("book", with_field(""), "unknown_field", expected_field("\"\"")),
        ("book", with_field("a b\"\\\u{202e}\u{7}"), "unknown_field", expected_field(r#""a b\"\\\u202e\u0007""#)),
        ("book", seat(json!([3, 1.5])), "wrong_type", "seats[1]: 1.5 is not an integer".into()),
        ("book", seat(json!(["2A"])), "wrong_type", "seats[0]: \"2A\" is not an integer".into()),
        (
            "book",
            seat(json!([1, 2, long])),
            "wrong_type",
            format!("seats[2]: \"{k64}\"… (5000 characters) is not an integer"),
        ),
        ("book", seat(json!([null, true])), "wrong_type", "seats[0]: null is not an integer".into()),
        ("book", seat(json!([1, true])), "wrong_type", "seats[1]: true is not an integer".into()),
        ("book", seat(json!([[1]])), "wrong_type", "seats[0]: an array is not an integer".into()),
        ("book", seat(json!("1, 2")), "wrong_type", "seats: must be an array of integers, not string".into()),
        (
            "book",
            book("ann\u{1b}[2J"),
            "invalid_request",
            "customer: must not contain a control or bidirectional formatting character (U+001B)".into(),
        ),
        (
            "cancel",
            json!({"booking": 1, "customer": "evil\u{202e}gpj.exe"}),
            "invalid_request",
            "customer: must not contain a control or bidirectional formatting character (U+202E)".into(),
        ),
    ];
    for (kind, payload, code, message) in cases {
        assert_eq!(both_ways(&db, kind, &payload).await, Some((code.to_string(), message)), "{payload}");
    }
    // Plain text, accents and emoji are fine in a name.
    assert_eq!(both_ways(&db, "book", &book("Zoë O'Brien-Łukasz 🎭")).await, None);
    // A number longer than Rust can hold, in SQL: quoted in part too.
    let (code, message) = sqlx::query_as::<_, (String, String)>(
        "SELECT code, message FROM seatq.request_error('book', ('{\"event\": 1e5000, \"class\": 1, \"party\": 1, \"customer\": \"c\"}')::jsonb)",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(
        (code.as_str(), message),
        ("wrong_type", format!("event: must be an integer, not 1{}… (5001 characters)", "0".repeat(63)))
    );
    db.close().await;
}

#[tokio::test]
async fn no_row_keeps_a_payload_over_the_size_limit() {
    let db = TestDb::new().await;
    let large = json!({"event": 1, "class": 1, "party": 1, "customer": "c", "note": "x".repeat(20_000)});
    let id = insert_raw(&db, "book", &large).await;
    let by_fn: i64 =
        sqlx::query_scalar("SELECT seatq.enqueue('book', $1, 'big-1')").bind(&large).fetch_one(&db.pool).await.unwrap();
    for id in [id, by_fn] {
        let r = db.client.status(id).await.unwrap();
        assert_eq!((r.status, code(&r), &r.payload), (Status::Failed, "payload_too_large", &json!({})), "{r:?}");
        assert!(r.error_message.as_deref().is_some_and(|m| m.starts_with("payload is 20")), "{r:?}");
    }
    // The same oversize request again under its key is the same request, not
    // a conflict with the '{}' kept for it.
    let again: i64 =
        sqlx::query_scalar("SELECT seatq.enqueue('book', $1, 'big-1')").bind(&large).fetch_one(&db.pool).await.unwrap();
    assert_eq!(again, by_fn);
    db.close().await;
}

#[tokio::test]
async fn an_idempotency_key_is_at_most_200_characters_without_control_characters() {
    let (db, ev) = TestDb::with_event("E", 60, 6).await;
    let keyed = |key: String| NewRequest {
        idempotency_key: Some(key),
        ..NewRequest::from(Request::Book(common::hold(ev, 3, 1, "ann")))
    };
    let refusals = [
        ("k".repeat(201), "idempotency_key_too_long", "idempotency_key: 201 characters; at most 200"),
        ("k".repeat(5000), "idempotency_key_too_long", "idempotency_key: 5000 characters; at most 200"),
        (
            "order\u{7}".to_string(),
            "invalid_request",
            "idempotency_key: must not contain a control or bidirectional formatting character (U+0007)",
        ),
    ];
    for (key, code, message) in &refusals {
        // The client refuses it before sending anything...
        let err = db.client.enqueue(keyed(key.clone())).await.expect_err("refused");
        assert!(matches!(&err, seatq::Error::Invalid(e) if e.code() == *code && e.message == *message), "{err}");
        // ... and so does the database, with the same code and message, by
        // the function or a plain INSERT (SQLSTATE SQ002, never an index error).
        for sql in [
            "SELECT seatq.enqueue('book', $1, $2)",
            "INSERT INTO seatq.requests (kind, payload, idempotency_key) VALUES ('book', $1, $2)",
        ] {
            let e = sqlx::query(sqlx::AssertSqlSafe(sql))
                .bind(Request::Book(common::hold(ev, 3, 1, "ann")).payload())
                .bind(key)
                .execute(&db.pool)
                .await
                .expect_err("refused");
            assert_eq!(seatq::sqlstate::code(&e).as_deref(), Some(seatq::sqlstate::REQUEST_REFUSED), "{e}");
            let refused = seatq::Error::from(e);
            assert!(
                matches!(&refused, seatq::Error::Invalid(r) if r.code() == *code && r.message == *message),
                "{refused}"
            );
        }
        // Unvalidated, it is refused by the database alike.
        let raw = db.client.enqueue_raw(&["book"], &[json!({})], [(Some(key.clone()), 0)].into_iter()).await;
        assert!(matches!(&raw, Err(seatq::Error::Invalid(r)) if r.code() == *code), "{raw:?}");
    }
    assert_eq!(count_rows(&db).await, 0, "nothing stored");
    // At the limit, a key works as ever.
    let id = db.client.enqueue(keyed("k".repeat(200))).await.unwrap();
    assert_eq!(db.client.enqueue(keyed("k".repeat(200))).await.unwrap(), id);
    db.drain().await;
    db.assert_invariants_and_close().await;
}

async fn count_rows(db: &TestDb) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM seatq.requests").fetch_one(&db.pool).await.unwrap()
}

#[tokio::test]
async fn run_at_must_be_finite_and_within_a_year() {
    let (db, ev) = TestDb::with_event("E", 60, 6).await;
    let at = |days: i64| NewRequest {
        run_at: Some(chrono::Utc::now() + chrono::Duration::days(days)),
        ..NewRequest::from(Request::Book(common::hold(ev, 3, 1, "ann")))
    };
    let horizon = "run_at: must be at most 365 days from now";
    let err = db.client.enqueue(at(366)).await.expect_err("too far ahead");
    assert!(
        matches!(&err, seatq::Error::Invalid(e) if e.code() == "run_at_out_of_range" && e.message == horizon),
        "{err}"
    );
    let later = db.client.enqueue(at(364)).await.unwrap();
    // The database fails such a row at once, with the same code and message.
    let payload = Request::Book(common::hold(ev, 3, 1, "bob")).payload();
    let mut failed = Vec::new();
    for (run_at, message) in [
        ("infinity", "run_at: must be a finite time, not infinity"),
        ("-infinity", "run_at: must be a finite time, not -infinity"),
        ("400 days", horizon),
    ] {
        let sql = "INSERT INTO seatq.requests (kind, payload, run_at)
                   VALUES ('book', $1, CASE WHEN $2 LIKE '%days' THEN now() + $2::interval ELSE $2::timestamptz END)
                   RETURNING id";
        let id: i64 = sqlx::query_scalar(sql).bind(&payload).bind(run_at).fetch_one(&db.pool).await.unwrap();
        let r = db.client.status(id).await.unwrap();
        assert_eq!(
            (r.status, code(&r), r.error_message.as_deref()),
            (Status::Failed, "run_at_out_of_range", Some(message))
        );
        failed.push(id);
    }
    let by_fn: i64 = sqlx::query_scalar("SELECT seatq.enqueue('book', $1, NULL, 0, 'infinity')")
        .bind(&payload)
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(code(&db.client.status(by_fn).await.unwrap()), "run_at_out_of_range");
    // A bulk line too.
    let line = format!(
        r#"{{"kind": "book", "payload": {}, "run_at": "{}"}}"#,
        payload,
        (chrono::Utc::now() + chrono::Duration::days(400)).to_rfc3339()
    );
    assert_eq!(bulk_refusals(&line).0, [format!("1: run_at_out_of_range: {horizon}")]);
    assert_eq!(db.client.status(later).await.unwrap().status, Status::Queued, "364 days ahead waits");
    db.close().await;
}

#[tokio::test]
async fn json_text_naming_a_field_twice_is_refused_by_the_client() {
    let db = TestDb::new().await;
    let file = [
        r#"{"kind": "book", "payload": {"event": 1, "class": 1, "party": 1, "customer": "a", "party": 9}}"#,
        r#"{"kind": "book", "kind": "hold", "payload": {"event": 1, "class": 1, "party": 1, "customer": "b"}}"#,
        r#"{"kind": "book", "payload": {"event": 1, "class": 1, "party": 1, "customer": "c"}}"#,
    ]
    .join("\n");
    let (bad, good) = bulk_refusals(&file);
    assert_eq!(bad, ["1: duplicate_field: payload.party: named twice", "2: duplicate_field: kind: named twice"]);
    assert_eq!(good, 1);
    let venue = r#"{"name": "V", "seats": [{"section": "A", "row": 1, "seat": 1, "pos": 1, "class": 1, "price": 10, "class": 2}]}"#;
    let parsed = seatq::venue::parse_json(venue.as_bytes()).unwrap();
    let bad: Vec<(&str, &str)> = parsed.bad.iter().map(|b| (b.code.as_str(), b.reason.as_str())).collect();
    assert_eq!(bad, [("duplicate_field", "seats[0].class: named twice")]);
    // What a database producer sending such text gets: jsonb keeps the last.
    let kept: String = sqlx::query_scalar(r#"SELECT ('{"party": 1, "party": 9}'::jsonb) ->> 'party'"#)
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(kept, "9");
    db.close().await;
}

#[test]
fn a_bulk_line_that_is_not_utf8_is_a_bad_line() {
    let good = br#"{"kind": "cancel", "payload": {"booking": 3, "customer": "c"}}"#;
    let mut file = b"\xef\xbb\xbf".to_vec(); // a byte-order mark
    file.extend_from_slice(good);
    file.extend_from_slice(b"\r\n{\"kind\": \"cancel\", \"payload\": {\"booking\": 3, \"customer\": \"\xc3\x28\"}}\n");
    file.extend_from_slice(good);
    let parsed = seatq::bulk::parse(file.as_slice()).unwrap();
    assert_eq!(parsed.good.len(), 2, "{:?}", parsed.bad);
    let bad: Vec<(usize, &str)> = parsed.bad.iter().map(|b| (b.line, b.code.as_str())).collect();
    assert_eq!(bad, [(2, "invalid_json")]);
    assert!(parsed.bad[0].reason.starts_with("not valid UTF-8"), "{:?}", parsed.bad);
}

/// A random payload: mostly the right fields with values of any type, some
/// missing, some extra.
fn payload() -> impl Strategy<Value = (String, Value)> {
    let kind = prop_oneof![
        8 => prop_oneof![Just("hold"), Just("book"), Just("confirm"), Just("cancel"), Just("extend"), Just("bogus")]
            .prop_map(String::from),
        // Long, or holding what a message must escape.
        1 => "[a-z]{60,70}",
        1 => ODD_TEXT,
    ];
    let value = prop_oneof![
        (-3i64..15).prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        Just(json!(1.5)),
        Just(json!(null)),
        any::<bool>().prop_map(Value::from),
        "[ a-z]{0,6}".prop_map(Value::from),
        prop::collection::vec(-2i64..12, 0..12).prop_map(Value::from),
        Just(json!(["x"])),
        Just(json!({})),
        // What jsonb cannot store, and numbers it stores by value.
        "[a-z]{0,2}\u{0}[a-z]{0,2}".prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        prop::sample::select(vec![2.0, -0.0, 1e16, -1.5e17, 9.3e18, 1e-7, 5e-324, 1e300]).prop_map(Value::from),
        prop::collection::vec(prop::sample::select(vec![json!(1e16), json!(3.0), json!(2)]), 1..3)
            .prop_map(Value::from),
        // Text a message must escape or cut, and arrays with any element.
        ODD_TEXT.prop_map(Value::from),
        "[a-z]{60,70}".prop_map(Value::from),
        prop::collection::vec(
            prop_oneof![
                (1i64..20).prop_map(Value::from),
                Just(json!(1.5)),
                Just(json!(null)),
                any::<bool>().prop_map(Value::from),
                "[0-9A-Z]{0,3}".prop_map(Value::from),
                ODD_TEXT.prop_map(Value::from),
                Just(json!([1])),
                Just(json!({"seat": 1})),
            ],
            1..4
        )
        .prop_map(Value::from),
    ];
    let key = prop_oneof![
        Just("event"),
        Just("class"),
        Just("party"),
        Just("customer"),
        Just("hold_seconds"),
        Just("seats"),
        Just("partial"),
        Just("together"),
        Just("booking"),
        Just("extra"),
        Just("Party"),
        Just("nul\u{0}"),
        Just(""),
        Just("two words"),
    ]
    .prop_map(String::from);
    let key = prop_oneof![8 => key, 1 => "[a-z_]{62,67}", 1 => ODD_TEXT];
    let object =
        prop::collection::btree_map(key, value.clone(), 0..8).prop_map(|m| Value::Object(m.into_iter().collect()));
    (kind, prop_oneof![4 => object, 1 => value])
}

/// Text with what a message must escape: quotes, backslashes, control and
/// bidirectional formatting characters, among letters and others.
const ODD_TEXT: &str = "[a-zé🎭 \"\\\\]{0,3}[\u{1}-\u{1f}\u{7f}-\u{9f}\u{61c}\u{200e}\u{200f}\u{202a}-\u{202e}\u{2066}-\u{2069}\"\\\\][a-z\u{2028}]{0,3}";

/// An idempotency key: short, near the length limit, or odd.
fn idempotency_key() -> impl Strategy<Value = String> {
    prop_oneof!["[a-z0-9-]{0,12}", "[a-z]{198,202}", "[é🎭]{199,201}", ODD_TEXT]
}

/// A valid payload of a random kind, often with one field then replaced by
/// a random value or removed: the checks on the way to "valid", which the
/// random payloads above seldom get through.
fn nearly_valid() -> impl Strategy<Value = (String, Value)> {
    let seats = prop::collection::btree_set(1i64..300, 1..10).prop_map(|s| s.into_iter().collect::<Vec<_>>());
    let seat_request = (
        prop_oneof![Just("hold"), Just("book")],
        1i64..1000,
        1i64..5,
        1i64..10,
        prop::option::of(1i64..86_401),
        prop::option::of(seats),
        prop::option::of(any::<bool>()),
        prop::option::of(any::<bool>()),
        prop::option::of(0i64..700_000),
    )
        .prop_map(|(kind, event, class, party, hold, seats, partial, together, wait)| {
            let mut p = json!({"event": event, "customer": "c"});
            match seats {
                Some(seats) => p["seats"] = json!(seats),
                None => {
                    p["class"] = json!(class);
                    p["party"] = json!(party);
                    if let Some(b) = partial {
                        p["partial"] = json!(b);
                    }
                    if let Some(b) = together {
                        p["together"] = json!(b);
                    }
                }
            }
            if let (Some(secs), "hold") = (hold, kind) {
                p["hold_seconds"] = json!(secs);
            }
            if let Some(secs) = wait {
                p["wait_seconds"] = json!(secs);
            }
            (kind.to_string(), p)
        });
    let booking_request =
        (prop_oneof![Just("confirm"), Just("cancel"), Just("extend")], 1i64..1_000_000, prop::option::of(1i64..86_401))
            .prop_map(|(kind, booking, hold)| {
                let mut p = json!({"booking": booking, "customer": "c"});
                if let (Some(secs), "extend") = (hold, kind) {
                    p["hold_seconds"] = json!(secs);
                }
                (kind.to_string(), p)
            });
    let change = prop_oneof![
        2 => Just(None),
        1 => (payload(), prop::sample::select(vec!["event", "class", "party", "customer", "hold_seconds", "seats", "booking", "wait_seconds"]))
            .prop_map(|((_, value), key)| Some((key, value))),
    ];
    (prop_oneof![seat_request, booking_request], change).prop_map(|((kind, mut p), change)| {
        if let (Some((key, value)), Some(fields)) = (change, p.as_object_mut()) {
            match value {
                Value::Object(_) => fields.remove(key),
                other => fields.insert(key.to_string(), other),
            };
        }
        (kind, p)
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 10, ..ProptestConfig::default() })]

    /// The decoder never panics, and the database's checks agree with it,
    /// on payloads and on idempotency keys.
    #[test]
    fn the_database_and_the_client_agree_on_every_payload(
        cases in prop::collection::vec(prop_oneof![payload(), nearly_valid()], 300),
        keys in prop::collection::vec(idempotency_key(), 30),
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let db = TestDb::new().await;
            for (kind, payload) in &cases {
                let rust = Request::decode(kind, payload).err().map(|e| (e.code().to_string(), e.message));
                let sql: Result<(Option<String>, Option<String>), sqlx::Error> =
                    sqlx::query_as("SELECT code, message FROM seatq.request_error($1, $2)")
                        .bind(kind).bind(payload).fetch_one(&db.pool).await;
                if rust.as_ref().is_some_and(|(_, message)| message.contains("U+0000")) {
                    // jsonb refuses the payload before any check.
                    assert_eq!(
                        sqlstate(sql.expect_err("jsonb refuses U+0000")),
                        seatq::sqlstate::UNTRANSLATABLE_CHARACTER,
                        "{kind} {payload}"
                    );
                    continue;
                }
                let sql = sql.unwrap();
                assert_eq!(rust, sql.0.zip(sql.1), "{kind} {payload}");
            }
            for key in &keys {
                let rust = seatq::validate::check_idempotency_key(key).err().map(|e| (e.code().to_string(), e.message));
                let sql: (Option<String>, Option<String>) =
                    sqlx::query_as("SELECT code, message FROM seatq.idempotency_key_error($1)")
                        .bind(key).fetch_one(&db.pool).await.unwrap();
                assert_eq!(rust, sql.0.zip(sql.1), "{key:?}");
            }
            db.close().await;
        });
    }
}
