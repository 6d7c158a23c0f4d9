//! The `seatq` command line, run as a real process against a test database:
//! outcomes and exit codes, JSON output, bulk files, group bookings (a file
//! of parties in, each line's outcome out, as JSON lines or CSV; a batch
//! submitted again; `seatq batch`), idempotency keys, and
//! retrying through refused connections, a connection lost while waiting and
//! a connection lost during a bulk file's COMMIT (through a TCP proxy that
//! the test controls).

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{Running, TestDb, count_requests, eventually, seatq_bin};
use seatq_worker::Config;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// What a finished `seatq` run printed.
#[derive(Debug)]
struct Output {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Output {
    fn json(&self) -> Value {
        serde_json::from_str(self.stdout.trim()).unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {self:?}"))
    }
}

/// A `seatq` process; its standard error is collected as it comes.
struct Cli {
    child: Child,
    stderr: Arc<Mutex<String>>,
    reader: std::thread::JoinHandle<()>,
}

impl Cli {
    fn start(url: &str, args: &[&str]) -> Cli {
        Cli::start_with_env(url, args, &[])
    }

    /// [`Cli::start`] with these environment variables set.
    fn start_with_env(url: &str, args: &[&str], env: &[(&str, &str)]) -> Cli {
        let mut child = Command::new(seatq_bin())
            .arg("--database-url")
            .arg(url)
            .args(args)
            .env("RUST_LOG", "warn")
            .env_remove("SEATQ_RETRY_SECS")
            .env_remove("SEATQ_HOLD_TOKEN")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start seatq");
        let stderr = Arc::new(Mutex::new(String::new()));
        let pipe = child.stderr.take().expect("stderr pipe");
        let collected = stderr.clone();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                let mut text = collected.lock().unwrap();
                text.push_str(&line);
                text.push('\n');
            }
        });
        Cli { child, stderr, reader }
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Wait until it has written `needle` to standard error.
    async fn wait_for_stderr(&self, needle: &str) {
        let seen = eventually(Duration::from_secs(30), || async { self.stderr().contains(needle) }).await;
        assert!(seen, "seatq never printed {needle:?}; stderr: {}", self.stderr());
    }

    /// Wait for it to exit (it is killed after a minute).
    async fn finish(self) -> Output {
        tokio::task::spawn_blocking(move || {
            let Cli { mut child, stderr, reader } = self;
            let deadline = std::time::Instant::now() + Duration::from_secs(60);
            while child.try_wait().ok().flatten().is_none() && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = child.kill();
            let out = child.wait_with_output().expect("seatq output");
            let _ = reader.join();
            let stderr = stderr.lock().unwrap().clone();
            Output { code: out.status.code(), stdout: String::from_utf8_lossy(&out.stdout).into_owned(), stderr }
        })
        .await
        .expect("join")
    }
}

/// Run `seatq` to the end.
async fn seatq(url: &str, args: &[&str]) -> Output {
    Cli::start(url, args).finish().await
}

/// Run `seatq` to the end, and assert its exit code.
async fn seatq_exits(url: &str, args: &[&str], code: i32) -> Output {
    let out = seatq(url, args).await;
    assert_eq!(out.code, Some(code), "seatq {args:?}: {out:?}");
    out
}

/// `args` with `--json` before them.
fn json<'a>(args: &[&'a str]) -> Vec<&'a str> {
    [&["--json"][..], args].concat()
}

/// A test database with one event "E" of `seats` seats: the database, its
/// URL and the event's id, as the command line takes them.
async fn setup(seats: i32) -> (TestDb, String, String) {
    let (db, ev) = TestDb::with_event("E", seats, 6).await;
    let url = db.url();
    (db, url, ev.to_string())
}

/// [`setup`] with 12 seats, reached through 127.0.0.1:`port` (a free port,
/// where the test starts its [`Proxy`]): the database, the URL through the
/// port, the event's id and the port. `None` (the test is skipped, the
/// database dropped) where [`via`] says so.
async fn setup_behind_proxy() -> Option<(TestDb, String, String, u16)> {
    let (db, _, ev) = setup(12).await;
    let port = free_port();
    let Some(url) = via(&db, port) else {
        db.close().await;
        return None;
    };
    Some((db, url, ev, port))
}

fn write_file(db: &TestDb, name: &str, lines: &[&[u8]]) -> PathBuf {
    let path = std::env::temp_dir().join(format!("{}-{name}.jsonl", db.name));
    let mut f = std::fs::File::create(&path).unwrap();
    for line in lines {
        f.write_all(line).unwrap();
        f.write_all(b"\n").unwrap();
    }
    path
}

fn book_line(event: &str, customer: &str) -> Vec<u8> {
    format!(r#"{{"kind": "book", "payload": {{"event": {event}, "class": 1, "party": 1, "customer": "{customer}"}}}}"#)
        .into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hold_wait_prints_the_outcome_and_exits_0() {
    let (db, url, ev) = setup(12).await;
    let workers = Running::start(&db, 1, Config::default()).await;

    let hold = |customer| ["hold", "--event", &ev, "--class", "1", "--party", "2", "--customer", customer, "--wait"];
    let out = seatq_exits(&url, &hold("ann"), 0).await;
    assert!(out.stdout.contains("held for ann: ") && out.stdout.contains(" (class 1), total "), "{out:?}");

    let record = seatq_exits(&url, &json(&hold("bob")), 0).await.json();
    assert_eq!(record["status"], "succeeded", "{record}");
    assert_eq!(record["result"]["state"], "held", "{record}");
    assert_eq!(record["result"]["customer"], "bob", "{record}");
    assert!(record["idempotency_key"].as_str().is_some_and(|k| k.starts_with("cli-")), "a generated key: {record}");

    workers.stop().await;
    db.assert_invariants_and_close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_made_with_a_token_answers_to_that_token() {
    let (db, url, ev) = setup(12).await;
    let workers = Running::start(&db, 1, Config::default()).await;
    let token = seatq_exits(&url, &["token"], 0).await.stdout.trim().to_string();
    assert!(seatq::HoldToken::parse(&token).is_ok(), "{token:?}");
    let other = seatq_exits(&url, &["token"], 0).await.stdout.trim().to_string();
    assert_ne!(token, other, "a new token each time");

    let hold =
        ["hold", "--event", &ev, "--class", "1", "--party", "2", "--customer", "ann", "--token", &token, "--wait"];
    let held = seatq_exits(&url, &json(&hold), 0).await.json();
    let booking = held["result"]["booking"].as_i64().expect("booking").to_string();
    let settle = |kind: &'static str, token: &str| {
        let args = vec![kind, "--booking", &booking, "--customer", "ann", "--token", token, "--wait"];
        args.into_iter().map(String::from).collect::<Vec<_>>()
    };
    let run = |args: Vec<String>, code: i32| {
        let url = url.clone();
        async move {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            seatq_exits(&url, &json(&args), code).await.json()
        }
    };
    // Another token, and none: no such booking, and the hold is unchanged.
    let wrong = run(settle("cancel", &other), 1).await;
    assert_eq!(wrong["error_code"], "booking_not_found", "{wrong}");
    let none =
        seatq_exits(&url, &json(&["cancel", "--booking", &booking, "--customer", "ann", "--wait"]), 1).await.json();
    assert_eq!(none["error_code"], "booking_not_found", "{none}");
    assert_eq!(db.seats_taken(ev.parse().expect("event id")).await, 2);
    // The token from the environment, as a script keeps it off the command line.
    let confirmed = Cli::start_with_env(
        &url,
        &json(&["confirm", "--booking", &booking, "--customer", "ann", "--wait"]),
        &[("SEATQ_HOLD_TOKEN", &token)],
    )
    .finish()
    .await;
    assert_eq!(confirmed.code, Some(0), "{confirmed:?}");
    assert_eq!(confirmed.json()["result"]["state"], "booked", "{confirmed:?}");
    let malformed =
        seatq_exits(&url, &["confirm", "--booking", &booking, "--customer", "ann", "--token", "abc"], 2).await;
    assert!(malformed.stderr.contains("--token"), "{malformed:?}");

    workers.stop().await;
    db.assert_invariants_and_close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn availability_prints_classes_and_the_seat_map() {
    let (db, url, ev) = setup(12).await;
    let held = db.run(seatq::Request::Hold(common::hold(ev.parse().unwrap(), 1, 2, "ann"))).await;
    assert_eq!(held.status, seatq::Status::Succeeded, "{held:?}");

    let out = seatq_exits(&url, &["availability", "--event", &ev, "--seats"], 0).await;
    assert!(out.stdout.contains("seat map"), "{out:?}");
    // Each row named as the venue names it (the seeded cabin's rows are numbered).
    assert!(out.stdout.lines().any(|l| l.starts_with("Cabin  row 1 ")), "{out:?}");
    let marks = out.stdout.lines().filter(|l| l.contains(" row ")).flat_map(str::split_whitespace);
    assert_eq!(marks.filter(|&m| m == "h").count(), 2, "two seats held: {out:?}");
    assert!(!out.stdout.contains("ann"), "{out:?}");
    let doc = seatq_exits(&url, &json(&["availability", "--event", &ev, "--seats"]), 0).await.json();
    assert_eq!(doc["classes"][0]["held"], 2, "{doc}");
    assert_eq!(doc["classes"][0]["free"], 10, "{doc}");
    assert_eq!(doc["seats"].as_array().map(Vec::len), Some(12), "{doc}");
    assert_eq!(doc["seats"].as_array().unwrap().iter().filter(|s| s["state"] == "held").count(), 2, "{doc}");
    let none = seatq_exits(&url, &["availability", "--event", "999"], 1).await;
    assert!(none.stdout.contains("has no seats"), "{none:?}");
    db.assert_invariants_and_close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_or_dead_request_that_does_not_exist_is_said_so() {
    let (db, url, ev) = setup(4).await;
    // An event that does not exist is not_found, as a request that does not exist is.
    for command in [["event", "show", "999"], ["event", "close", "999"]] {
        let missing = seatq_exits(&url, &json(&command), 2).await.json();
        assert_eq!(missing["error"]["code"], "not_found", "{command:?}: {missing}");
        assert_eq!(missing["error"]["message"], "no event 999", "{command:?}: {missing}");
    }
    let request = seatq_exits(&url, &json(&["status", "999"]), 2).await.json();
    assert_eq!(request["error"]["code"], "not_found", "{request}");
    let shown = seatq_exits(&url, &["event", "show", &ev], 0).await;
    assert!(shown.stdout.contains("free"), "{shown:?}");
    // Retrying a request that is not dead says so, and exits 1.
    let retry = seatq_exits(&url, &["retry", "999"], 1).await;
    assert_eq!(retry.stdout.trim(), "no dead request 999: nothing requeued", "{retry:?}");
    assert_eq!(count_requests(&db).await, 0, "nothing enqueued");
    db.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_or_refused_request_exits_1_with_its_code() {
    let (db, url, ev) = setup(4).await;
    let workers = Running::start(&db, 1, Config::default()).await;

    // Sold out: processed, failed.
    let book = ["book", "--event", &ev, "--class", "1", "--party", "6", "--customer", "ann", "--wait"];
    let out = seatq_exits(&url, &book, 1).await;
    assert!(out.stdout.contains("failed: sold_out: 4 seat(s) of class 1 left"), "{out:?}");
    let record = seatq_exits(&url, &json(&book), 1).await.json();
    assert_eq!((&record["status"], &record["error_code"]), (&"failed".into(), &"sold_out".into()), "{record}");
    workers.stop().await;
    let enqueued = count_requests(&db).await;

    // Invalid: refused before anything is enqueued.
    let bad = ["book", "--event", &ev, "--class", "1", "--party", "12", "--customer", "ann"];
    let out = seatq_exits(&url, &bad, 1).await;
    assert_eq!(out.stdout.trim(), "party_out_of_range: party: 12 is out of range 1 to 9", "{out:?}");
    let refusal = seatq_exits(&url, &json(&bad), 1).await.json();
    assert_eq!(refusal["error_code"], "party_out_of_range", "{refusal}");
    assert_eq!(refusal["error_message"], "party: 12 is out of range 1 to 9", "{refusal}");
    let out = seatq_exits(&url, &["confirm", "--booking", "1", "--customer", " "], 1).await;
    assert_eq!(out.stdout.trim(), "invalid_request: customer: must not be empty", "{out:?}");
    assert_eq!(count_requests(&db).await, enqueued, "nothing enqueued");

    // A refusal needs no database.
    seatq_exits("postgres://postgres@127.0.0.1:1/none", &[&["--retry-secs", "0"][..], &bad].concat(), 1).await;

    db.close().await;
}

#[tokio::test]
async fn enqueue_file_enqueues_the_good_lines_and_reports_the_bad_ones() {
    let (db, url, ev) = setup(12).await;
    let file = write_file(
        &db,
        "mixed",
        &[
            &book_line(&ev, "a"),
            br#"{"kind": "book", "payload": {"event": 1, "cla"#,
            b"{\"kind\": \"book\", \"payload\": {\"event\": 1, \"class\": 1, \"party\": 1, \"customer\": \"\xff\"}}",
            &book_line(&ev, "b"),
            br#"{"kind": "hold", "payload": {"event": 1, "class": 1, "party": 12, "customer": "c"}}"#,
            // jsonb would keep the last party; the CLI refuses the line.
            br#"{"kind": "book", "payload": {"event": 1, "class": 1, "party": 1, "customer": "d", "party": 2}}"#,
        ],
    );
    let path = file.to_str().unwrap();

    // --strict: none.
    let out = seatq_exits(&url, &["enqueue", "--strict", "--file", path], 1).await;
    assert!(out.stdout.contains("enqueued nothing: 4 bad lines"), "{out:?}");
    assert_eq!(count_requests(&db).await, 0);

    // Otherwise the good ones, each bad line reported as file:line; the
    // batch is named after the file.
    let out = seatq_exits(&url, &["enqueue", "--file", path], 1).await;
    let expected =
        format!("batch \"{}-mixed\": 2 parties: 2 enqueued, 0 already submitted; 4 bad lines skipped", db.name);
    assert_eq!(out.stdout.trim(), expected, "{out:?}");
    for expected in [
        format!("{path}:2: invalid_json: "),
        format!("{path}:3: invalid_json: not valid UTF-8"),
        format!("{path}:5: party_out_of_range: party: 12 is out of range 1 to 9"),
        format!("{path}:6: duplicate_field: payload.party: named twice"),
    ] {
        assert!(out.stderr.contains(&expected), "{expected:?} missing: {out:?}");
    }
    assert_eq!(count_requests(&db).await, 2);

    let report = seatq_exits(&url, &json(&["enqueue", "--file", path]), 1).await.json();
    assert_eq!(report["enqueued"].as_array().map(Vec::len), Some(2), "{report}");
    assert_eq!(report["new"], 0, "{report}");
    let lines: Vec<&Value> = report["bad_lines"].as_array().unwrap().iter().map(|b| &b["line"]).collect();
    assert_eq!(lines, [2, 3, 5, 6], "{report}");
    assert_eq!(count_requests(&db).await, 2, "submitting the file again enqueues nothing");

    let good = write_file(&db, "good", &[&book_line(&ev, "c")]);
    let out = seatq_exits(&url, &["enqueue", "--file", good.to_str().unwrap()], 0).await;
    let expected = format!("batch \"{}-good\": 1 party: 1 enqueued, 0 already submitted; 0 bad lines skipped", db.name);
    assert_eq!(out.stdout.trim(), expected, "{out:?}");
    remove_files([file, good]);
    db.close().await;
}

#[tokio::test]
async fn the_same_key_returns_the_same_request() {
    let (db, url, ev) = setup(12).await;
    let book = ["book", "--event", &ev, "--class", "1", "--party", "1", "--customer", "ann"];

    let keyed = [&book[..], &["--key", "order-77"]].concat();
    let first = seatq_exits(&url, &keyed, 0).await;
    let again = seatq(&url, &keyed).await;
    assert_eq!(first.stdout, again.stdout, "the same id");
    assert_eq!(count_requests(&db).await, 1);

    // Without --key, each command has its own (random) key.
    let a = seatq(&url, &json(&book)).await.json();
    let b = seatq(&url, &json(&book)).await.json();
    assert_ne!(a["id"], b["id"]);
    assert_ne!(a["idempotency_key"], b["idempotency_key"]);
    assert_eq!(count_requests(&db).await, 3);
    db.close().await;
}

#[tokio::test]
async fn a_key_reused_for_another_request_is_refused_with_exit_1() {
    let (db, url, ev) = setup(12).await;
    let book = |customer| ["book", "--event", &ev, "--class", "1", "--party", "1", "--customer", customer];
    let first = seatq_exits(&url, &[&book("ann")[..], &["--key", "order-77"]].concat(), 0).await;
    let other = [&book("bob")[..], &["--key", "order-77"]].concat();
    let out = seatq_exits(&url, &other, 1).await;
    let expected = format!(
        "idempotency_conflict: idempotency key \"order-77\" was first used by request {} with another kind or payload",
        first.stdout.trim()
    );
    assert_eq!(out.stdout.trim(), expected, "{out:?}");
    let refusal = seatq_exits(&url, &json(&other), 1).await.json();
    assert_eq!(refusal["error_code"], "idempotency_conflict", "{refusal}");
    assert_eq!(count_requests(&db).await, 1);

    // In a file: a bad line like any other, by its number.
    let keyed = |customer: &str, key: &str| {
        let line = String::from_utf8(book_line(&ev, customer)).unwrap();
        format!("{}, \"idempotency_key\": \"{key}\"}}", line.strip_suffix('}').unwrap_or(&line)).into_bytes()
    };
    let file = write_file(&db, "keys", &[&keyed("cat", "k1"), &keyed("dan", "order-77"), &keyed("eve", "k1")]);
    let path = file.to_str().unwrap();
    let out = seatq_exits(&url, &["enqueue", "--strict", "--file", path], 1).await;
    assert!(out.stdout.contains("enqueued nothing: 2 bad lines"), "{out:?}");
    assert_eq!(count_requests(&db).await, 1);
    let report = seatq_exits(&url, &json(&["enqueue", "--file", path]), 1).await.json();
    let bad: Vec<(&Value, &Value)> =
        report["bad_lines"].as_array().unwrap().iter().map(|b| (&b["line"], &b["code"])).collect();
    assert_eq!(bad, [(&2.into(), &"idempotency_conflict".into()), (&3.into(), &"idempotency_conflict".into())]);
    assert_eq!(report["enqueued"].as_array().map(Vec::len), Some(1), "{report}");
    assert_eq!(count_requests(&db).await, 2);
    remove_files([file]);
    db.close().await;
}

/// `text` in a file of the test's own, named `{database}-{name}` (the
/// batch's name is the part before the extension).
fn write_text(db: &TestDb, name: &str, text: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("{}-{name}", db.name));
    std::fs::write(&path, text).unwrap();
    path
}

/// A tour operator's file for an event of 12 seats: parties with refs, a
/// broken line, a blank one, a party too large, one with no ref, and one
/// (last to run) for which too few seats are left.
fn tour_file(db: &TestDb, ev: &str) -> PathBuf {
    let party = |reference: &str, party: u32, customer: &str, priority: i16| {
        let reference = if reference.is_empty() { String::new() } else { format!(r#""ref": "{reference}", "#) };
        format!(
            r#"{{{reference}"kind": "book", "priority": {priority}, "payload": {{"event": {ev}, "class": 1, "party": {party}, "customer": "{customer}"}}}}"#
        )
    };
    let lines = [
        party("P1", 4, "Smith", 0),
        party("P2", 4, "Jones", 0),
        r#"{"ref": "P3", "kind": "book", "payload": {"event": "#.to_string(),
        String::new(),
        party("P5", 12, "Lee", 0),
        party("P6", 5, "Kim", -1),
        party("", 2, "anon", 0),
    ];
    write_text(db, "tour.jsonl", &lines.join("\n"))
}

/// Remove a test's files (what is already gone is no matter).
fn remove_files<const N: usize>(files: [PathBuf; N]) {
    for f in files {
        let _ = std::fs::remove_file(f);
    }
}

/// A CSV file's header and its records.
fn csv_rows(path: &Path) -> (Vec<String>, Vec<Vec<String>>) {
    let mut reader = csv::Reader::from_path(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let header = reader.headers().expect("a header").iter().map(String::from).collect();
    let rows = reader.records().map(|r| r.expect("a CSV record").iter().map(String::from).collect()).collect();
    (header, rows)
}

/// The lines of a JSON-lines file.
fn json_lines(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}"))).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enqueue_wait_writes_each_lines_outcome_and_exits_1_when_a_party_failed() {
    let (db, url, ev) = setup(12).await;
    let workers = Running::start(&db, 1, Config::default()).await;
    let file = tour_file(&db, &ev);
    let path = file.to_str().unwrap();
    let out_file = write_text(&db, "tour-outcomes.jsonl", "");
    let out_path = out_file.to_str().unwrap();
    let name = format!("{}-tour", db.name);

    let out = seatq_exits(&url, &["enqueue", "--file", path, "--wait", "--out", out_path], 1).await;
    for expected in [format!("{path}:3: invalid_json: "), format!("{path}:5: party_out_of_range: party: 12")] {
        assert!(out.stderr.contains(&expected), "{expected:?} missing: {out:?}");
    }
    assert!(!out.stderr.contains("parties,"), "no progress bar when standard error is not a terminal: {out:?}");
    let summary = format!(
        "batch \"{name}\": 4 parties: 3 booked (10 seats), 1 sold out, 0 other failures, 0 queued; 2 lines refused"
    );
    assert!(out.stdout.contains(&summary), "{out:?}");
    assert!(out.stdout.contains("failures by error code: invalid_json 1, party_out_of_range 1, sold_out 1"), "{out:?}");

    // One line per line of the file (the blank one aside), in its order,
    // each with its ref.
    let outcomes = json_lines(&out_file);
    let got: Vec<(&Value, &Value, &Value, &Value)> =
        outcomes.iter().map(|o| (&o["line"], &o["ref"], &o["status"], &o["error_code"])).collect();
    let expected: [(Value, Value, Value, Value); 6] = [
        (1.into(), "P1".into(), "succeeded".into(), Value::Null),
        (2.into(), "P2".into(), "succeeded".into(), Value::Null),
        (3.into(), Value::Null, "refused".into(), "invalid_json".into()),
        (5.into(), "P5".into(), "refused".into(), "party_out_of_range".into()),
        (6.into(), "P6".into(), "failed".into(), "sold_out".into()),
        (7.into(), Value::Null, "succeeded".into(), Value::Null),
    ];
    let expected: Vec<(&Value, &Value, &Value, &Value)> = expected.iter().map(|(a, b, c, d)| (a, b, c, d)).collect();
    assert_eq!(got, expected);
    let booking = &outcomes[0]["booking"];
    assert_eq!(booking["customer"], "Smith");
    let seats = booking["seats"].as_array().unwrap();
    assert_eq!(seats.len(), 4);
    assert!(seats.iter().all(|s| s["label"].as_str().is_some_and(|l| !l.is_empty())), "{booking}");
    let total: i64 = seats.iter().map(|s| s["price_cents"].as_i64().unwrap()).sum();
    assert_eq!(booking["total_cents"], total);
    assert!(outcomes[4]["error_message"].as_str().is_some_and(|m| m.contains("left")), "{}", outcomes[4]);
    let ids: Vec<i64> = outcomes.iter().filter_map(|o| o["id"].as_i64()).collect();
    assert_eq!(ids.len(), 4);
    assert_eq!(db.seats_taken(ev.parse().unwrap()).await, 10);

    // Submitted again: nothing new, the same outcomes from the record.
    let before = count_requests(&db).await;
    let again = seatq_exits(&url, &["enqueue", "--file", path, "--wait", "--out", out_path], 1).await;
    assert!(again.stdout.contains("4 parties: 0 enqueued, 4 already submitted"), "{again:?}");
    assert_eq!(count_requests(&db).await, before, "nothing new enqueued");
    assert_eq!(json_lines(&out_file), outcomes);
    assert!(!Path::new(&format!("{out_path}.partial")).exists());

    // Read back by its name, by another process.
    let status = seatq_exits(&url, &json(&["batch", "status", &name]), 0).await.json();
    let total = &status["summary"]["total"];
    assert_eq!((&total["parties"], &total["booked"], &total["seats"]), (&4.into(), &3.into(), &10.into()), "{status}");
    assert_eq!((&total["sold_out"], &total["failed"], &total["queued"]), (&1.into(), &0.into(), &0.into()), "{status}");
    let text = seatq_exits(&url, &["batch", "status", &name], 0).await;
    assert!(text.stdout.contains("by status: failed 1, succeeded 3"), "{text:?}");
    let results = seatq_exits(&url, &["batch", "results", &name], 0).await;
    let read_back: Vec<Value> = results.stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let enqueued: Vec<&Value> = outcomes.iter().filter(|o| o["status"] != "refused").collect();
    assert_eq!(read_back.iter().collect::<Vec<_>>(), enqueued, "the same outcomes, from the database alone");
    let unknown = seatq_exits(&url, &["batch", "status", "no-such-batch"], 1).await;
    assert!(unknown.stdout.contains("batch \"no-such-batch\" has no requests"), "{unknown:?}");

    workers.stop().await;
    remove_files([file, out_file]);
    db.assert_invariants_and_close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_csv_file_in_and_outcomes_out_as_csv() {
    let (db, url, ev) = setup(12).await;
    let workers = Running::start(&db, 1, Config::default()).await;
    let csv_in = write_text(
        &db,
        "groups.csv",
        &format!(
            "ref,kind,event,class,party,customer,seats\n\
             G-1,book,{ev},1,2,\"Smith, J.\",\n\
             G-2,book,{ev},,,Jones,5 6\n\
             G-3,book,{ev},1,twenty,Lee,\n"
        ),
    );
    let out_csv = std::env::temp_dir().join(format!("{}-groups-out.csv", db.name));
    let (path, out_path) = (csv_in.to_str().unwrap(), out_csv.to_str().unwrap());

    let out = seatq_exits(&url, &["enqueue", "--file", path, "--wait", "--out", out_path], 1).await;
    assert!(out.stderr.contains(&format!("{path}:4: wrong_type: party")), "{out:?}");
    let (header, rows) = csv_rows(&out_csv);
    assert_eq!(header, seatq::outcome_file::OUTCOME_COLUMNS);
    let column = |row: &[String], name: &str| row[header.iter().position(|h| h == name).unwrap()].clone();
    let got: Vec<(String, String, String)> =
        rows.iter().map(|r| (column(r, "line"), column(r, "ref"), column(r, "status"))).collect();
    let expected = [("2", "G-1", "succeeded"), ("3", "G-2", "succeeded"), ("4", "G-3", "refused")];
    assert_eq!(got, expected.map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string())));
    assert_eq!(column(&rows[1], "seats"), "5 6");
    assert_eq!(column(&rows[1], "seat_labels"), "Cabin, row 1, seat 1E; Cabin, row 1, seat 1F");
    assert_eq!(column(&rows[1], "total"), "1800.00");
    assert_eq!(column(&rows[2], "error_code"), "wrong_type");
    assert_eq!(db.seats_taken(ev.parse().unwrap()).await, 4);

    // `batch results` writes CSV by the extension, the same lines (the
    // refused one was never a request).
    let results = std::env::temp_dir().join(format!("{}-groups-results.csv", db.name));
    let name = format!("{}-groups", db.name);
    let written = seatq_exits(&url, &["batch", "results", &name, "--out", results.to_str().unwrap()], 0).await;
    assert!(written.stdout.contains("2 outcomes"), "{written:?}");
    let (read_header, read_back) = csv_rows(&results);
    assert_eq!((read_header, read_back), (header, rows[..2].to_vec()));

    // Every party booked: exit status 0; the batch named on the command line.
    let good = write_text(&db, "more.csv", &format!("kind,event,class,party,customer\nbook,{ev},1,1,Kim\n"));
    let out = seatq_exits(&url, &["enqueue", "--file", good.to_str().unwrap(), "--batch", "more", "--wait"], 0).await;
    assert!(out.stdout.contains("batch \"more\": 1 party: 1 booked (1 seat), "), "{out:?}");

    workers.stop().await;
    remove_files([csv_in, out_csv, results, good]);
    db.assert_invariants_and_close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quote_left_open_is_reported_with_every_line_it_swallowed() {
    let (db, url, ev) = setup(12).await;
    let workers = Running::start(&db, 1, Config::default()).await;
    // Nine parties; the stray quote on line 3 is closed only by the quoted
    // customer of line 8.
    let mut text = String::from("ref,kind,event,class,party,customer\n");
    for n in 2..=10 {
        let customer = match n {
            3 => "\"Smith".to_string(),
            8 => "\"Jones, J.\"".to_string(),
            n => format!("c{n}"),
        };
        text.push_str(&format!("P{n},book,{ev},1,1,{customer}\n"));
    }
    let file = write_text(&db, "stray.csv", &text);
    let out_file = std::env::temp_dir().join(format!("{}-stray-out.jsonl", db.name));
    let (path, out_path) = (file.to_str().unwrap(), out_file.to_str().unwrap());
    let name = format!("{}-stray", db.name);

    let out = seatq_exits(&url, &["enqueue", "--file", path, "--wait", "--out", out_path], 1).await;
    let opened = "a quote opened on line 3 is not closed until line 8: lines 3-8 read as one record";
    assert!(out.stderr.contains(&format!("{path}:3: invalid_line: {opened}\n")), "{out:?}");
    for n in 4..=8 {
        let swallowed = format!("{path}:{n}: invalid_line: swallowed by the unclosed quote on line 3\n");
        assert!(out.stderr.contains(&swallowed), "{swallowed:?} missing: {out:?}");
    }
    assert!(out.stdout.contains("3 parties: 3 enqueued, 0 already submitted; 6 bad lines skipped"), "{out:?}");
    let summary = format!(
        "batch \"{name}\": 3 parties: 3 booked (3 seats), 0 sold out, 0 other failures, 0 queued; 6 lines refused"
    );
    assert!(out.stdout.contains(&summary), "{out:?}");
    assert!(out.stdout.contains("failures by error code: invalid_line 6"), "{out:?}");

    // Every line of the file has its outcome line, in its order.
    let outcomes = json_lines(&out_file);
    let got: Vec<(i64, String, String)> = outcomes
        .iter()
        .map(|o| {
            let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
            (o["line"].as_i64().unwrap_or_default(), text(&o["status"]), text(&o["error_code"]))
        })
        .collect();
    let expected: Vec<(i64, String, String)> = (2..=10)
        .map(|n| match n {
            3..=8 => (n, "refused".to_string(), "invalid_line".to_string()),
            n => (n, "succeeded".to_string(), String::new()),
        })
        .collect();
    assert_eq!(got, expected);
    assert_eq!(outcomes[1]["error_message"], opened);
    assert_eq!(db.seats_taken(ev.parse().unwrap()).await, 3);

    workers.stop().await;
    remove_files([file, out_file]);
    db.assert_invariants_and_close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_integer_ref_comes_back_as_an_integer() {
    let (db, url, ev) = setup(12).await;
    let workers = Running::start(&db, 1, Config::default()).await;
    let line = |reference: &str, party: u32| {
        format!(
            r#"{{"ref": {reference}, "kind": "book", "payload": {{"event": {ev}, "class": 1, "party": {party}, "customer": "c"}}}}"#
        )
    };
    let text = [line("7", 2), line("8", 12), line("\"9\"", 2)].join("\n");
    let file = write_text(&db, "refs.jsonl", &text);
    let out_file = std::env::temp_dir().join(format!("{}-refs-out.jsonl", db.name));
    let (path, out_path) = (file.to_str().unwrap(), out_file.to_str().unwrap());
    let args = ["enqueue", "--file", path, "--wait", "--out", out_path];

    seatq_exits(&url, &args, 1).await;
    let refs =
        |outcomes: Vec<Value>| outcomes.iter().map(|o| (o["ref"].clone(), o["status"].clone())).collect::<Vec<_>>();
    let expected: Vec<(Value, Value)> =
        vec![(7.into(), "succeeded".into()), (8.into(), "refused".into()), ("9".into(), "succeeded".into())];
    assert_eq!(refs(json_lines(&out_file)), expected);
    // Submitted again: answered from the record, the refs as the file gives them.
    let again = seatq_exits(&url, &args, 1).await;
    assert!(again.stdout.contains("2 parties: 0 enqueued, 2 already submitted"), "{again:?}");
    assert_eq!(refs(json_lines(&out_file)), expected);
    // The database keeps a ref as text: read back from it, every ref is text.
    let results = seatq_exits(&url, &["batch", "results", &format!("{}-refs", db.name)], 0).await;
    let read_back: Vec<Value> = results.stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(refs(read_back), [("7".into(), "succeeded".into()), ("9".into(), "succeeded".into())]);

    workers.stop().await;
    remove_files([file, out_file]);
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn strict_enqueues_nothing_but_writes_every_lines_outcome() {
    let (db, url, ev) = setup(12).await;
    let file = tour_file(&db, &ev);
    let out_file = std::env::temp_dir().join(format!("{}-strict-out.jsonl", db.name));
    let out_csv = std::env::temp_dir().join(format!("{}-strict-out.csv", db.name));
    let path = file.to_str().unwrap();

    let args = ["enqueue", "--strict", "--file", path, "--wait", "--out", out_file.to_str().unwrap()];
    let out = seatq_exits(&url, &args, 1).await;
    assert!(out.stdout.contains("enqueued nothing: 2 bad lines (--strict)"), "{out:?}");
    assert!(out.stdout.contains(&format!("outcomes written to {}", out_file.display())), "{out:?}");
    assert_eq!(count_requests(&db).await, 0);
    // One line per line of the file (the blank one aside): the bad ones with
    // their errors, the good ones not submitted; none with a request.
    let outcomes = json_lines(&out_file);
    let got: Vec<(&Value, &Value, &Value, &Value)> =
        outcomes.iter().map(|o| (&o["line"], &o["ref"], &o["status"], &o["error_code"])).collect();
    let expected: [(Value, Value, Value, Value); 6] = [
        (1.into(), "P1".into(), "refused".into(), "not_submitted".into()),
        (2.into(), "P2".into(), "refused".into(), "not_submitted".into()),
        (3.into(), Value::Null, "refused".into(), "invalid_json".into()),
        (5.into(), "P5".into(), "refused".into(), "party_out_of_range".into()),
        (6.into(), "P6".into(), "refused".into(), "not_submitted".into()),
        (7.into(), Value::Null, "refused".into(), "not_submitted".into()),
    ];
    let expected: Vec<(&Value, &Value, &Value, &Value)> = expected.iter().map(|(a, b, c, d)| (a, b, c, d)).collect();
    assert_eq!(got, expected);
    assert!(outcomes.iter().all(|o| o["id"].is_null()), "{outcomes:?}");
    assert_eq!(outcomes[0]["error_message"], "not enqueued (--strict): the file has 2 bad lines");
    assert_eq!((&outcomes[0]["event"], &outcomes[0]["class"]), (&ev.parse::<i64>().unwrap().into(), &1.into()));

    // As CSV too, and with --json.
    let args = ["--json", "enqueue", "--strict", "--file", path, "--wait", "--out", out_csv.to_str().unwrap()];
    let report = seatq_exits(&url, &args, 1).await.json();
    assert_eq!(report["bad_lines"].as_array().map(Vec::len), Some(2), "{report}");
    let (_, rows) = csv_rows(&out_csv);
    let codes: Vec<&str> = rows.iter().map(|r| r[12].as_str()).collect();
    assert_eq!(
        codes,
        ["not_submitted", "not_submitted", "invalid_json", "party_out_of_range", "not_submitted", "not_submitted"]
    );
    assert_eq!(count_requests(&db).await, 0);
    remove_files([file, out_file, out_csv]);
    db.close().await;
}

#[tokio::test]
async fn an_unknown_csv_column_is_refused_by_name() {
    let (db, url, ev) = setup(12).await;
    let file = write_text(&db, "misspelt.csv", &format!("kind,event,class,party,cutsomer\nbook,{ev},1,2,Smith\n"));
    let out_file = std::env::temp_dir().join(format!("{}-misspelt-out.jsonl", db.name));
    let path = file.to_str().unwrap();
    let out = seatq_exits(&url, &["enqueue", "--file", path, "--wait", "--out", out_file.to_str().unwrap()], 1).await;
    let expected =
        format!("{path}:1: unknown_column: header: unknown column \"cutsomer\" (the known columns are kind, ");
    assert!(out.stderr.contains(&expected), "{out:?}");
    assert!(out.stderr.contains("customer"), "the known columns listed: {out:?}");
    let outcomes = json_lines(&out_file);
    assert_eq!(outcomes.len(), 1, "{outcomes:?}");
    assert_eq!((&outcomes[0]["line"], &outcomes[0]["error_code"]), (&1.into(), &"unknown_column".into()));
    assert_eq!(count_requests(&db).await, 0);
    remove_files([file, out_file]);
    db.close().await;
}

#[tokio::test]
async fn a_wait_that_times_out_writes_what_it_knows_and_exits_2() {
    let (db, url, ev) = setup(12).await;
    let file = tour_file(&db, &ev);
    let out_file = std::env::temp_dir().join(format!("{}-late.jsonl", db.name));
    let args = ["enqueue", "--file", file.to_str().unwrap(), "--wait", "--timeout", "1", "--out"];
    // No worker runs: nothing finishes.
    let out = seatq_exits(&url, &[&args[..], &[out_file.to_str().unwrap()]].concat(), 2).await;
    assert!(out.stderr.contains("4 parties without an outcome: request "), "{out:?}");
    assert!(out.stderr.contains("(timed out waiting)"), "{out:?}");
    let statuses: Vec<Value> = json_lines(&out_file).iter().map(|o| o["status"].clone()).collect();
    assert_eq!(statuses, ["queued", "queued", "refused", "refused", "queued", "queued"]);

    // Standard input has no name to give the batch.
    let out = seatq_exits(&url, &["enqueue", "--file", "-"], 2).await;
    assert!(out.stderr.contains("name the batch with --batch NAME"), "{out:?}");
    db.drain().await;
    remove_files([file, out_file]);
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn at_schedules_a_request_for_later() {
    let (db, url, ev) = setup(12).await;
    let book = ["book", "--event", &ev, "--class", "1", "--party", "1", "--customer", "ann"];
    // A month ahead (at most 365 days are allowed), written at UTC+1.
    let when = chrono::DateTime::from_timestamp(chrono::Utc::now().timestamp() + 30 * 86_400, 0).unwrap();
    let written = when.with_timezone(&chrono::FixedOffset::east_opt(3600).unwrap()).to_rfc3339();
    let at = [&book[..], &["--at", &written]].concat();
    let id = seatq_exits(&url, &at, 0).await.stdout.trim().to_string();
    let record = seatq_exits(&url, &json(&["status", &id]), 0).await.json();
    assert_eq!(record["run_at"], when.to_rfc3339_opts(chrono::SecondsFormat::Secs, true), "{record}");
    let too_far = [&book[..], &["--at", "2100-01-31T19:00:00+01:00"]].concat();
    let out = seatq_exits(&url, &too_far, 1).await;
    assert_eq!(out.stdout.trim(), "run_at_out_of_range: run_at: must be at most 365 days from now", "{out:?}");
    db.drain().await;
    let record = seatq_exits(&url, &json(&["status", &id]), 0).await.json();
    assert_eq!(record["status"], "queued", "not before its time: {record}");

    let out = seatq_exits(&url, &[&book[..], &["--at", "tomorrow"]].concat(), 2).await;
    assert!(out.stderr.contains("RFC 3339"), "{out:?}");
    // Clean up: the request is not due for a long time.
    sqlx::query("DELETE FROM seatq.requests").execute(&db.pool).await.unwrap();
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn without_retries_an_unreachable_server_is_an_error_naming_its_cause_once() {
    let port = free_port();
    let url = format!("postgres://postgres@127.0.0.1:{port}/seatq");
    let out = seatq_exits(&url, &["--retry-secs", "0", "stats"], 2).await;
    assert!(out.stderr.contains(&format!("cannot reach PostgreSQL at 127.0.0.1:{port}/seatq")), "{out:?}");
    assert_eq!(out.stderr.matches("Connection refused").count(), 1, "{out:?}");
    assert!(out.stderr.contains("version 14 or later"), "{out:?}");
    assert!(!out.stderr.contains("retrying"), "{out:?}");
}

#[tokio::test]
async fn prune_help_says_how_often_workers_prune() {
    let out = seatq_exits("postgres://unused", &["prune", "--help"], 0).await;
    assert!(out.stdout.contains("every minute") && !out.stdout.contains("hourly"), "{out:?}");
}

#[tokio::test]
async fn a_command_retries_until_the_server_answers() {
    let Some((db, url, ev, port)) = setup_behind_proxy().await else { return };
    let cli =
        Cli::start(&url, &["book", "--event", &ev, "--class", "1", "--party", "1", "--customer", "ann", "--key", "k1"]);
    // Nothing listens yet: it retries, and carries on once the server answers.
    cli.wait_for_stderr("connecting failed; retrying").await;
    let proxy = Proxy::start(&db, port).await;
    let out = cli.finish().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let id: i64 = out.stdout.trim().parse().unwrap_or_else(|_| panic!("an id: {out:?}"));
    let key: Option<String> = sqlx::query_scalar("SELECT idempotency_key FROM seatq.requests WHERE id = $1")
        .bind(id)
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(key.as_deref(), Some("k1"));
    assert_eq!(count_requests(&db).await, 1);
    proxy.stop();
    db.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_retries_through_a_lost_connection() {
    let Some((db, url, ev, port)) = setup_behind_proxy().await else { return };
    let proxy = Proxy::start(&db, port).await;
    let cli =
        Cli::start(&url, &["hold", "--event", &ev, "--class", "1", "--party", "2", "--customer", "ann", "--wait"]);
    let enqueued = eventually(Duration::from_secs(30), || async { count_requests(&db).await == 1 }).await;
    assert!(enqueued, "{}", cli.stderr());

    // The server goes away while the command waits (no worker yet, so the
    // outcome cannot have come); it retries, and prints the outcome once
    // the server is back and a worker has processed the request.
    // Whichever notices the outage first says so: the command's own wait
    // (it retries), or the client's shared listener (it polls meanwhile),
    // which may lose its connection or, if it had none yet, fail to listen.
    proxy.go_down();
    let noticed = eventually(Duration::from_secs(30), || async {
        let stderr = cli.stderr();
        stderr.contains("waiting for the outcome failed; retrying")
            || stderr.contains("lost the connection listening for finished requests")
            || stderr.contains("could not listen for finished requests")
    })
    .await;
    assert!(noticed, "seatq never said it lost the server; stderr: {}", cli.stderr());
    proxy.come_back();
    let workers = Running::start(&db, 1, Config::default()).await;
    let out = cli.finish().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stdout.contains("held for ann"), "{out:?}");
    assert_eq!(count_requests(&db).await, 1);
    workers.stop().await;
    proxy.stop();
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn a_file_is_enqueued_once_when_the_connection_drops_during_commit() {
    let Some((db, url, ev, port)) = setup_behind_proxy().await else { return };
    let proxy = Proxy::start(&db, port).await;
    let lines: Vec<Vec<u8>> = (0..30).map(|n| book_line(&ev, &format!("c{n}"))).collect();
    let file = write_file(&db, "commit", &lines.iter().map(Vec::as_slice).collect::<Vec<_>>());
    let path = file.to_str().unwrap();

    // The COMMIT reaches the server (which commits) but its answer is lost;
    // then the COMMIT is lost on the way (the server rolls back). Either
    // way the file ends up enqueued exactly once, each time as a batch of
    // its own.
    for (n, cut) in [Cut::AfterCommitSent, Cut::BeforeCommitSent].into_iter().enumerate() {
        proxy.cut_next_commit(cut);
        let batch = format!("commit-{n}");
        let out = seatq_exits(&url, &["enqueue", "--batch", &batch, "--file", path], 0).await;
        assert_eq!(proxy.state.cuts.load(Ordering::SeqCst), n + 1, "the connection was cut at COMMIT");
        let expected = format!("batch \"{batch}\": 30 parties: 30 enqueued, 0 already submitted; 0 bad lines skipped");
        assert_eq!(out.stdout.trim(), expected, "{out:?}");
        assert!(out.stderr.contains("the connection was lost during COMMIT"), "{out:?}");
        assert_eq!(count_requests(&db).await, 30 * (n as i64 + 1), "{cut:?}: {out:?}");
    }
    proxy.stop();
    remove_files([file]);
    db.close().await;
}

// ---------------------------------------------------------------- the proxy

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("free port").port()
}

/// The test database's URL, through 127.0.0.1:`port`; `None` (the test is
/// skipped) when the server is reached through a Unix socket.
fn via(db: &TestDb, port: u16) -> Option<String> {
    if db.options.get_host().starts_with('/') {
        eprintln!("skipped: the test server is reached through a Unix socket");
        return None;
    }
    let url = db.url();
    let (scheme, rest) = url.split_once("://")?;
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    let user = authority.rsplit_once('@').map(|(user, _)| format!("{user}@")).unwrap_or_default();
    Some(format!("{scheme}://{user}127.0.0.1:{port}/{path}"))
}

/// Where to cut a connection at its next COMMIT.
#[derive(Debug, Clone, Copy)]
enum Cut {
    /// Pass the COMMIT to the server, then close both sides.
    AfterCommitSent,
    /// Close both sides instead of passing the COMMIT on.
    BeforeCommitSent,
}

struct ProxyState {
    upstream: (String, u16),
    /// Refusing connections (accepting and closing them at once).
    down: AtomicBool,
    /// Cancelled to cut every open connection.
    open: Mutex<CancellationToken>,
    cut: Mutex<Option<Cut>>,
    /// Connections cut at COMMIT.
    cuts: AtomicUsize,
}

/// A TCP proxy to the test server on 127.0.0.1, which can cut connections.
struct Proxy {
    state: Arc<ProxyState>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    async fn start(db: &TestDb, port: u16) -> Proxy {
        let listener = TcpListener::bind(("127.0.0.1", port)).await.expect("proxy port");
        let state = Arc::new(ProxyState {
            upstream: (db.options.get_host().to_string(), db.options.get_port()),
            down: AtomicBool::new(false),
            open: Mutex::new(CancellationToken::new()),
            cut: Mutex::new(None),
            cuts: AtomicUsize::new(0),
        });
        let task = tokio::spawn(serve(listener, state.clone()));
        Proxy { state, task }
    }

    /// Cut every connection and refuse new ones.
    fn go_down(&self) {
        self.state.down.store(true, Ordering::SeqCst);
        std::mem::take(&mut *self.state.open.lock().unwrap()).cancel();
    }

    fn come_back(&self) {
        self.state.down.store(false, Ordering::SeqCst);
    }

    fn cut_next_commit(&self, cut: Cut) {
        *self.state.cut.lock().unwrap() = Some(cut);
    }

    fn stop(self) {
        self.task.abort();
        self.state.open.lock().unwrap().cancel();
    }
}

async fn serve(listener: TcpListener, state: Arc<ProxyState>) {
    while let Ok((client, _)) = listener.accept().await {
        if state.down.load(Ordering::SeqCst) {
            continue; // dropped: closed at once
        }
        let open = state.open.lock().unwrap().clone();
        let state = state.clone();
        tokio::spawn(async move {
            let (host, port) = &state.upstream;
            let Ok(server) = TcpStream::connect((host.as_str(), *port)).await else { return };
            tokio::select! {
                _ = open.cancelled() => {}
                _ = relay(client, server, &state) => {}
            }
        });
    }
}

/// Copy both ways until either side closes, or a COMMIT is to be cut.
async fn relay(client: TcpStream, server: TcpStream, state: &ProxyState) {
    let (mut from_client, mut to_client) = client.into_split();
    let (mut from_server, mut to_server) = server.into_split();
    let upstream = async {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = from_client.read(&mut buf).await?;
            if n == 0 {
                return Ok::<(), std::io::Error>(());
            }
            let chunk = &buf[..n];
            // A simple-protocol query 'Q' carrying "COMMIT", as sqlx sends it.
            let cut = if chunk.windows(7).any(|w| w == b"COMMIT\0") { state.cut.lock().unwrap().take() } else { None };
            if let Some(cut) = cut {
                if let Cut::AfterCommitSent = cut {
                    to_server.write_all(chunk).await?;
                    to_server.flush().await?;
                }
                state.cuts.fetch_add(1, Ordering::SeqCst);
                return Ok(());
            }
            to_server.write_all(chunk).await?;
        }
    };
    let downstream = tokio::io::copy(&mut from_server, &mut to_client);
    tokio::select! {
        _ = upstream => {}
        _ = downstream => {}
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_party_waits_on_the_list_and_an_operator_sees_orders_and_closes_it() {
    let (db, url, ev) = setup(2).await;
    let workers = Running::start(&db, 1, Config::default()).await;
    let hold = |customer, party| ["hold", "--event", &ev, "--class", "1", "--party", party, "--customer", customer];
    seatq_exits(&url, &[&hold("ann", "2")[..], &["--wait"]].concat(), 0).await;
    let queued =
        seatq_exits(&url, &json(&[&hold("bob", "1")[..], &["--wait-seconds", "600"]].concat()), 0).await.json();
    let id = queued["id"].as_i64().expect("an id").to_string();
    assert!(
        common::eventually(Duration::from_secs(20), || async {
            seatq(&url, &["status", &id]).await.stdout.contains("number 1 on the waiting list (0 seats wanted ahead)")
        })
        .await,
        "bob waits as number 1"
    );
    let shown = seatq_exits(&url, &["event", "show", &ev], 0).await;
    assert!(shown.stdout.contains("waiting list: 1 parties, 1 seats wanted, longest since "), "{shown:?}");
    assert!(shown.stdout.contains("(served first fit, bounded)"), "{shown:?}");
    let ordered = seatq_exits(&url, &["event", "list-order", &ev, "first-fit"], 0).await;
    assert_eq!(ordered.stdout.trim(), format!("event {ev}: waiting list served first fit"));
    let listed = seatq_exits(&url, &json(&["event", "show", &ev]), 0).await.json();
    assert_eq!(listed["waiting_list"]["order"], "first_fit", "{listed}");
    assert_eq!(listed["waiting_list"]["waiting"], 1, "{listed}");
    let bad = seatq_exits(&url, &["event", "list-order", &ev, "sideways"], 2).await;
    assert!(bad.stderr.contains("expected strict, first-fit or bounded"), "{bad:?}");

    let closed = seatq_exits(&url, &["event", "close-list", &ev], 0).await;
    assert_eq!(closed.stdout.trim(), format!("event {ev}: waiting list closed"));
    let told = seatq_exits(&url, &["status", &id], 1).await;
    assert!(told.stdout.contains("sold_out: sold out: the waiting list of event"), "{told:?}");
    let none = seatq_exits(&url, &["event", "close-list", "999999"], 2).await;
    assert_eq!(none.stderr.trim(), "error: no event 999999");

    workers.stop().await;
    db.assert_invariants_and_close().await;
}
