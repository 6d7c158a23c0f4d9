//! Bad input: every malformed request gets the same stable error code whether
//! it comes through the client, is inserted by raw SQL (the database's own
//! checks), or reaches a worker unchecked; valid requests around it succeed.

mod common;

use common::{TestDb, code};
use proptest::prelude::*;
use seatq::{Request, Status};
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
    ]
}

/// Requests that validate but that a worker must refuse, by the state of the
/// database: (kind, payload, expected code).
fn refused_by_state() -> Vec<(&'static str, Value, &'static str)> {
    vec![
        ("book", json!({"event": 99999, "class": 1, "party": 1, "customer": "c"}), "unknown_event"),
        ("book", json!({"event": "EV", "seats": [5, 201], "customer": "c"}), "unknown_seat"),
        ("confirm", json!({"booking": 99999, "customer": "c"}), "booking_not_found"),
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
    db.assert_invariants(true).await;
    db.close().await;
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

/// A random payload: mostly the right fields with values of any type, some
/// missing, some extra.
fn payload() -> impl Strategy<Value = (String, Value)> {
    let kind = prop_oneof![Just("hold"), Just("book"), Just("confirm"), Just("cancel"), Just("bogus")];
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
    ];
    let object = prop::collection::btree_map(key.prop_map(String::from), value.clone(), 0..8)
        .prop_map(|m| Value::Object(m.into_iter().collect()));
    (kind.prop_map(String::from), prop_oneof![4 => object, 1 => value])
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 10, ..ProptestConfig::default() })]

    /// The decoder never panics, and the database's checks agree with it.
    #[test]
    fn the_database_and_the_client_agree_on_every_payload(cases in prop::collection::vec(payload(), 300)) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let db = TestDb::new().await;
            for (kind, payload) in &cases {
                let rust = Request::decode(kind, payload).err().map(|e| (e.code().to_string(), e.message));
                let sql: (Option<String>, Option<String>) =
                    sqlx::query_as("SELECT code, message FROM seatq.request_error($1, $2)")
                        .bind(kind).bind(payload).fetch_one(&db.pool).await.unwrap();
                let sql = sql.0.zip(sql.1);
                assert_eq!(rust, sql, "{kind} {payload}");
            }
            db.close().await;
        });
    }
}
