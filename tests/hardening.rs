//! `seatq serve` facing the internet, tried as real HTTP clients from
//! several loopback addresses (Linux routes all of 127/8 to the loopback
//! interface, so a client bound to 127.0.0.2 is another address): floods
//! from one address and for one customer are answered `429` with
//! `Retry-After` while another client still books; one client cannot hold
//! more than its share of an event by varying the customer's name; hosts,
//! origins and content types the server does not take are refused; wrong
//! operator tokens slow their address down; one address's idle connections
//! do not keep another's requests out; a header too large is answered in
//! JSON; the dashboard shows customers' names to a signed-in operator only.

mod common;

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use common::http::{Served, answer};
use common::{Running, TestDb, eventually};
use seatq::Status;
use seatq_server::{Limits, Settings};
use seatq_worker::Config;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

const TOKEN: &str = "hardening-token";

/// A limit of `count` an hour: nothing comes back during a test.
fn hourly(count: u32) -> Option<seatq_server::Rate> {
    Some(format!("{count}/h").parse().expect("a rate"))
}

/// No limits but those a test sets.
fn only(limits: Limits) -> Settings {
    Settings { limits, operator_token: Some(TOKEN.into()), ..Settings::default() }
}

/// An HTTP client whose connections come from `ip` (a loopback address).
fn client_at(ip: [u8; 4]) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(IpAddr::from(ip))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("an HTTP client")
}

/// POST `body` as JSON to `path` from `http`: the status, `Retry-After`, and the body.
async fn post(http: &reqwest::Client, s: &Served, path: &str, body: &Value) -> (u16, Option<u64>, Value) {
    let response = http.post(s.url(path)).json(body).send().await.expect("an answer");
    let retry = response.headers().get("retry-after").and_then(|v| v.to_str().ok()).and_then(|v| v.parse().ok());
    let (status, body) = answer(Ok(response)).await;
    (status, retry, body)
}

fn hold(ev: i64, seat: i32, customer: &str) -> Value {
    json!({"kind": "hold", "payload": {"event": ev, "seats": [seat], "customer": customer}})
}

/// Assert a 429 `rate_limited` with a `Retry-After` of whole seconds.
fn assert_limited((status, retry, body): &(u16, Option<u64>, Value), what: &str) {
    assert_eq!((*status, body["error"]["code"].as_str()), (429, Some("rate_limited")), "{what}: {body}");
    assert!(retry.is_some_and(|s| s >= 1), "{what}: Retry-After {retry:?}");
    assert!(body["error"]["message"].as_str().is_some_and(|m| m.contains("try again")), "{what}: {body}");
}

/// Whether the workers finish every queued request within a while.
async fn nothing_queued(db: &TestDb) -> bool {
    eventually(Duration::from_secs(20), || async {
        db.client.stats().await.is_ok_and(|s| s.requests.get("queued").copied().unwrap_or(0) == 0)
    })
    .await
}

#[tokio::test]
async fn a_flood_from_one_address_is_slowed_while_another_client_books() {
    let (db, ev) = TestDb::with_event("Flood", 40, 10).await;
    let limits = Limits { requests_per_address: hourly(12), enqueues_per_address: hourly(5), ..Limits::off() };
    let s = Served::start(&db, only(limits)).await;
    let workers = Running::start(&db, 1, Config::default()).await;
    let (flooder, other) = (client_at([127, 0, 0, 1]), client_at([127, 0, 0, 2]));

    // Enqueues: five go in, then the address is told to wait; nothing more is stored.
    let mut answers = Vec::new();
    for n in 0..8 {
        answers.push(post(&flooder, &s, "/api/requests", &hold(ev, n + 1, &format!("flood-{n}"))).await);
    }
    for (n, a) in answers.iter().enumerate() {
        match n {
            0..5 => assert_eq!(a.0, 202, "enqueue {n}: {}", a.2),
            _ => assert_limited(a, &format!("enqueue {n}")),
        }
    }
    // Another address books as if nothing happened.
    let booked = post(&other, &s, "/api/requests?wait=20", &hold(ev, 30, "calm")).await;
    assert_eq!((booked.0, booked.2["status"].as_str()), (200, Some("succeeded")), "{}", booked.2);

    // Every request counts against the address, reads too: 8 so far, 4 left.
    for n in 0..4 {
        let got = flooder.get(s.url("/api/events")).send().await.expect("an answer").status().as_u16();
        assert_eq!(got, 200, "read {n}");
    }
    let refused = flooder.get(s.url("/api/events")).send().await.expect("an answer");
    let retry = refused.headers().get("retry-after").and_then(|v| v.to_str().ok()).map(str::to_string);
    let (status, body) = answer(Ok(refused)).await;
    assert_limited(&(status, retry.and_then(|r| r.parse().ok()), body), "a read over the limit");
    let (status, _) = answer(other.get(s.url("/api/events")).send().await).await;
    assert_eq!(status, 200, "the other address reads on");

    // What was stored: the five let in, and the calm client's.
    let stats = db.client.stats().await.expect("stats");
    assert_eq!(stats.requests.values().sum::<i64>(), 6, "{:?}", stats.requests);
    assert!(nothing_queued(&db).await, "the workers never caught up");
    workers.stop().await;
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn a_flood_for_one_customer_is_slowed_whatever_the_address_or_spelling() {
    let (db, ev) = TestDb::with_event("Customer", 40, 10).await;
    let s = Served::start(&db, only(Limits { enqueues_per_customer: hourly(3), ..Limits::off() })).await;
    let workers = Running::start(&db, 1, Config::default()).await;
    // One customer, written three ways, from three addresses: one customer.
    let spellings = [("Ann Lee", [127, 0, 0, 1]), ("ANN  LEE", [127, 0, 0, 2]), (" ann lee ", [127, 0, 0, 3])];
    for (n, (name, ip)) in spellings.into_iter().enumerate() {
        let got = post(&client_at(ip), &s, "/api/requests", &hold(ev, n as i32 + 1, name)).await;
        assert_eq!(got.0, 202, "{name}: {}", got.2);
    }
    let over = post(&client_at([127, 0, 0, 4]), &s, "/api/requests", &hold(ev, 9, "Ann lee")).await;
    assert_limited(&over, "the customer's fourth");
    // Another customer, from the same address as the fourth, books.
    let other = post(&client_at([127, 0, 0, 4]), &s, "/api/requests?wait=20", &hold(ev, 10, "Bo")).await;
    assert_eq!((other.0, other.2["status"].as_str()), (200, Some("succeeded")), "{}", other.2);
    assert_eq!(db.client.stats().await.expect("stats").requests.values().sum::<i64>(), 4);
    assert!(nothing_queued(&db).await, "the workers never caught up");
    workers.stop().await;
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn one_client_cannot_hold_more_than_its_share_by_varying_the_name() {
    let (db, ev) = TestDb::with_event("Share", 40, 10).await;
    let other_event = db.client.add_event("Other", 10, 10).await.expect("another event");
    let s = Served::start(&db, only(Limits { holds_per_address_and_event: hourly(4), ..Limits::off() })).await;
    let workers = Running::start(&db, 1, Config::default()).await;
    let greedy = client_at([127, 0, 0, 1]);

    let mut held = 0;
    let mut limited = 0;
    // The first hold's token, to confirm it with.
    let token = seatq::HoldToken::new().expect("randomness").to_string();
    for n in 0..12 {
        let mut body = hold(ev, n + 1, &format!("name-{n}"));
        if n == 0 {
            body["payload"]["token"] = json!(token);
        }
        let got = post(&greedy, &s, "/api/requests?wait=20", &body).await;
        match got.0 {
            200 => {
                assert_eq!(got.2["status"], "succeeded", "{}", got.2);
                held += 1;
            }
            _ => {
                assert_limited(&got, &format!("hold {n}"));
                limited += 1;
            }
        }
    }
    assert_eq!((held, limited), (4, 8));
    // A book takes seats too, and counts the same.
    let book = json!({"kind": "book", "payload": {"event": ev, "seats": [20], "customer": "yet another"}});
    assert_limited(&post(&greedy, &s, "/api/requests", &book).await, "a booking over the share");
    // Confirming what it holds is not a hold: it goes on.
    let first: i64 = sqlx::query_scalar("SELECT id FROM seatq.bookings WHERE customer = 'name-0'")
        .fetch_one(&db.pool)
        .await
        .expect("the first hold");
    let confirm = json!({"kind": "confirm", "payload": {"booking": first, "customer": "name-0", "token": token}});
    let confirmed = post(&greedy, &s, "/api/requests?wait=20", &confirm).await;
    assert_eq!(confirmed.2["status"], "succeeded", "{}", confirmed.2);
    // The same client on another event, and another client on this one, hold.
    let elsewhere = post(&greedy, &s, "/api/requests?wait=20", &hold(other_event, 1, "name-0")).await;
    assert_eq!(elsewhere.2["status"], "succeeded", "{}", elsewhere.2);
    let neighbour = post(&client_at([127, 0, 0, 2]), &s, "/api/requests?wait=20", &hold(ev, 30, "neighbour")).await;
    assert_eq!(neighbour.2["status"], "succeeded", "{}", neighbour.2);

    // The database agrees: the greedy client has four seats of the event.
    let taken: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM seatq.seats s JOIN seatq.bookings b ON b.id = s.booking_id
         WHERE s.event_id = $1 AND b.customer LIKE 'name-%'",
    )
    .bind(ev)
    .fetch_one(&db.pool)
    .await
    .expect("seats");
    assert_eq!(taken, 4);
    assert_eq!(db.seats_taken(ev).await, 5);
    workers.stop().await;
    db.assert_invariants_and_close().await;
}

/// A dead request of `customer` (made so by hand), for the operator routes to retry.
async fn dead_request(db: &TestDb, ev: i64, customer: &str) -> i64 {
    common::dead_request(db, ev, 1, customer, &format!("test: died booking for {customer}")).await
}

#[tokio::test]
async fn hosts_origins_and_content_types_the_server_does_not_take_are_refused() {
    let (db, ev) = TestDb::with_event("Origins", 10, 5).await;
    let dead = dead_request(&db, ev, "ann").await;
    let settings = Settings {
        allowed_hosts: vec!["tickets.example.com".into()],
        public_origin: Some("https://shop.example.com".into()),
        ..only(Limits::off())
    };
    let s = Served::start(&db, settings).await;
    let port = s.base.rsplit(':').next().expect("port").to_string();
    let http = client_at([127, 0, 0, 1]);
    let code = |body: &Value| body["error"]["code"].as_str().map(str::to_string);

    // Host: a name the server was not given (DNS rebinding) is refused, on every route.
    for path in ["/api/events", "/healthz", "/", "/dashboard", "/api/nothing"] {
        let sent = http.get(s.url(path)).header("Host", format!("rebind.example:{port}")).send().await;
        let (status, body) = answer(sent).await;
        assert_eq!((status, code(&body).as_deref()), (400, Some("host_not_allowed")), "{path}: {body}");
    }
    for host in [
        format!("localhost:{port}"),
        format!("127.0.0.1:{port}"),
        "tickets.example.com".into(),
        "shop.example.com".into(),
    ] {
        let (status, body) = answer(http.get(s.url("/api/events")).header("Host", &host).send().await).await;
        assert_eq!(status, 200, "{host}: {body}");
    }

    // Origin: an operator action from another origin (another port of the
    // same host, which SameSite lets the cookie through from) is refused.
    let bearer = format!("Bearer {TOKEN}");
    let retry = format!("/api/ops/dead/{dead}/retry");
    for origin in [
        format!("http://127.0.0.1:{}", port.parse::<u16>().expect("port") + 1),
        "https://evil.example".into(),
        "null".into(),
    ] {
        let sent = http.post(s.url(&retry)).header("Authorization", &bearer).header("Origin", &origin).send().await;
        let (status, body) = answer(sent).await;
        assert_eq!((status, code(&body).as_deref()), (403, Some("origin_not_allowed")), "{origin}: {body}");
        let signin =
            http.post(s.url("/dashboard/login")).header("Origin", &origin).form(&[("token", TOKEN)]).send().await;
        let signin = signin.expect("an answer");
        assert!(signin.headers().get("set-cookie").is_none(), "{origin}: signed in");
        assert_eq!(signin.status().as_u16(), 403, "{origin}");
    }
    assert_eq!(db.client.status(dead).await.expect("status").status, Status::Dead, "retried from another origin");
    // From the server's own pages, and from a client without Origin, it goes through.
    let sent =
        http.post(s.url("/api/ops/dead/retry")).header("Authorization", &bearer).header("Origin", &s.base).send().await;
    let (status, body) = answer(sent).await;
    assert_eq!((status, body["requeued"].clone()), (200, json!([dead])), "{body}");
    let signin = http
        .post(s.url("/dashboard/login"))
        .header("Origin", "https://shop.example.com")
        .form(&[("token", TOKEN)])
        .send()
        .await;
    assert_eq!(signin.expect("an answer").status().as_u16(), 303, "from the public origin");
    let (status, _) =
        answer(http.post(s.url("/api/ops/dead/retry")).header("Authorization", &bearer).send().await).await;
    assert_eq!(status, 200, "without Origin");

    // Content-Type: a cross-site form (plain text, urlencoded) or a body
    // that says nothing of its type reaches no API route; nothing is stored.
    let body = hold(ev, 2, "mallory").to_string();
    for (what, typed) in
        [("text/plain", Some("text/plain")), ("a form", Some("application/x-www-form-urlencoded")), ("no type", None)]
    {
        let mut request = http.post(s.url("/api/requests")).body(body.clone());
        if let Some(t) = typed {
            request = request.header("Content-Type", t);
        }
        let (status, answer) = answer(request.send().await).await;
        assert_eq!((status, code(&answer).as_deref()), (415, Some("unsupported_media_type")), "{what}: {answer}");
    }
    let form =
        http.post(s.url("/api/ops/dead/retry")).header("Authorization", &bearer).form(&[("all", "1")]).send().await;
    assert_eq!(answer(form).await.0, 415);
    let requests: i64 =
        sqlx::query_scalar("SELECT count(*) FROM seatq.requests").fetch_one(&db.pool).await.expect("count");
    assert_eq!(requests, 1, "only the dead request, nothing from the refused posts");
    // JSON with a charset is JSON.
    let sent = http
        .post(s.url("/api/requests"))
        .header("Content-Type", "application/json; charset=utf-8")
        .body(body)
        .send()
        .await;
    assert_eq!(answer(sent).await.0, 202);
    db.drain().await;
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn wrong_operator_tokens_slow_their_address_down() {
    let db = TestDb::new().await;
    let settings = Settings {
        protect_reads: true,
        public_origin: Some("https://tickets.example.com".into()),
        ..only(Limits { failed_signins_per_address: hourly(3), ..Limits::off() })
    };
    let s = Served::start(&db, settings).await;
    let (guesser, operator) = (client_at([127, 0, 0, 1]), client_at([127, 0, 0, 2]));
    let sign_in = |http: &reqwest::Client, token: &str| {
        let request = http.post(s.url("/dashboard/login")).form(&[("token", token)]);
        async move { request.send().await.expect("an answer") }
    };
    for n in 0..3 {
        assert_eq!(sign_in(&guesser, &format!("guess-{n}")).await.status().as_u16(), 403, "guess {n}");
    }
    // The fourth wrong one, and from then on any, the right one included: 429.
    for token in ["guess-3", TOKEN] {
        let refused = sign_in(&guesser, token).await;
        assert_eq!(refused.status().as_u16(), 429, "{token}");
        let retry =
            refused.headers().get("retry-after").and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
        assert!(retry.is_some_and(|r| r >= 1), "{token}: Retry-After {retry:?}");
        assert!(refused.headers().get("set-cookie").is_none(), "{token}: signed in while slowed down");
    }
    // A bearer token from that address is not compared either.
    let sent = guesser.get(s.url("/api/ops/stats")).header("Authorization", format!("Bearer {TOKEN}")).send().await;
    let (status, body) = answer(sent).await;
    assert_eq!((status, body["error"]["code"].as_str()), (429, Some("rate_limited")), "{body}");

    // Another address signs in; with an https public origin the cookie is Secure.
    let signed = sign_in(&operator, TOKEN).await;
    assert_eq!(signed.status().as_u16(), 303);
    let cookie = signed.headers()["set-cookie"].to_str().expect("cookie").to_string();
    assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict") && cookie.contains("Secure"), "{cookie}");
    let stats = operator.get(s.url("/api/ops/stats")).header("Authorization", format!("Bearer {TOKEN}")).send().await;
    assert_eq!(answer(stats).await.0, 200);
    // Wrong bearer tokens count too.
    for n in 0..3 {
        let sent =
            operator.get(s.url("/api/ops/stats")).header("Authorization", format!("Bearer wrong-{n}")).send().await;
        assert_eq!(answer(sent).await.0, 403, "wrong bearer {n}");
    }
    let sent = operator.get(s.url("/api/ops/stats")).header("Authorization", "Bearer wrong-3").send().await;
    assert_eq!(answer(sent).await.0, 429);

    // Without an https origin the cookie is not Secure (a plain-HTTP page could not keep it).
    let plain = Served::start(&db, only(Limits::off())).await;
    let signed = operator.post(plain.url("/dashboard/login")).form(&[("token", TOKEN)]).send().await.expect("answer");
    let cookie = signed.headers().get("set-cookie").and_then(|c| c.to_str().ok()).unwrap_or_default().to_string();
    assert!(cookie.starts_with("seatq_operator=") && !cookie.contains("Secure"), "{cookie}");
    db.assert_invariants_and_close().await;
}

/// A TCP connection to `addr` from `from`.
async fn connect_from(from: [u8; 4], addr: SocketAddr) -> tokio::net::TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket.bind(SocketAddr::from((from, 0))).expect("bind the client's address");
    socket.connect(addr).await.expect("connect")
}

/// Send a GET of `path` on `stream`, closing after the answer, and read the answer.
async fn get_on(stream: &mut tokio::net::TcpStream, path: &str) -> String {
    let request = format!("GET {path} HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut out = Vec::new();
    // The bound keeps a server that never answers from hanging the test.
    tokio::time::timeout(Duration::from_secs(30), stream.read_to_end(&mut out))
        .await
        .expect("an answer in time")
        .expect("read");
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test]
async fn one_addresss_idle_connections_do_not_keep_another_out() {
    let (db, ev) = TestDb::with_event("Connections", 10, 5).await;
    let settings = only(Limits { connections_per_address: 8, ..Limits::off() });
    let shutdown = tokio_util::sync::CancellationToken::new();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    let router = seatq_server::router(db.client.clone(), settings.clone(), shutdown.clone()).expect("settings");
    // A long header timeout: here only the bound may close a connection.
    let serving = tokio::spawn({
        let (settings, shutdown) = (settings.clone(), shutdown.clone());
        async move { seatq_server::serve_with(listener, router, &settings, Duration::from_secs(120), shutdown).await }
    });

    // A flood of idle connections from 127.0.0.1: the first eight are held
    // open, every one after is answered 503 at once and closed.
    let mut idle = Vec::new();
    for _ in 0..8 {
        idle.push(connect_from([127, 0, 0, 1], addr).await);
    }
    let mut refused = 0;
    for _ in 0..40 {
        let mut extra = connect_from([127, 0, 0, 1], addr).await;
        let answer = get_on(&mut extra, "/healthz").await;
        assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
        assert!(answer.contains(r#""code":"too_many_connections""#), "{answer}");
        assert!(answer.to_ascii_lowercase().contains("retry-after: 1"), "{answer}");
        refused += 1;
    }
    assert_eq!(refused, 40);
    // Another address is served meanwhile.
    let mut other = connect_from([127, 0, 0, 2], addr).await;
    let answer = get_on(&mut other, &format!("/api/events/{ev}/availability")).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    // The idle ones were held, not dropped: one of them is served now.
    let answer = get_on(&mut idle[0], "/healthz").await;
    assert!(answer.starts_with("HTTP/1.1 200") && answer.ends_with("ok\n"), "{answer}");
    // Closed, they make room for the address again.
    idle.clear();
    let served_again = eventually(Duration::from_secs(20), || async {
        let mut again = connect_from([127, 0, 0, 1], addr).await;
        get_on(&mut again, "/healthz").await.starts_with("HTTP/1.1 200")
    })
    .await;
    assert!(served_again, "127.0.0.1 is never served again");

    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(30), serving).await.expect("stopped").expect("no panic");
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn a_header_too_large_is_answered_in_json() {
    let db = TestDb::new().await;
    let s = Served::start(&db, Settings::default()).await;
    let addr: SocketAddr = s.base.trim_start_matches("http://").parse().expect("address");
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let request = format!("GET /api/events HTTP/1.1\r\nhost: localhost\r\nx-big: {}\r\n\r\n", "a".repeat(1 << 20));
    // The server may answer before it has read the whole head: read as we write.
    let (mut reader, mut writer) = stream.split();
    let mut out = Vec::new();
    let (_, read) = tokio::join!(
        writer.write_all(request.as_bytes()),
        tokio::time::timeout(Duration::from_secs(30), reader.read_to_end(&mut out))
    );
    assert!(read.is_ok(), "no answer in time");
    let answer = String::from_utf8_lossy(&out);
    let (head, body) = answer.split_once("\r\n\r\n").expect("a head and a body");
    assert!(head.starts_with("HTTP/1.1 431"), "{head}");
    assert!(head.contains("content-type: application/json"), "{head}");
    let body: Value = serde_json::from_str(body).expect("JSON");
    assert_eq!(body["error"]["code"], "headers_too_large", "{body}");
    db.close().await;
}

#[tokio::test]
async fn the_dashboard_shows_customers_to_a_signed_in_operator_only() {
    let (db, ev) = TestDb::with_event("Masks", 10, 5).await;
    dead_request(&db, ev, "Secret Sam").await;
    let s = Served::start(&db, only(Limits::off())).await;
    let page = |path: &'static str, cookie: Option<String>| {
        let mut request = s.http.get(s.url(path));
        if let Some(c) = cookie {
            request = request.header("Cookie", c);
        }
        async move { request.send().await.expect("a page").text().await.expect("its text") }
    };
    for path in ["/dashboard", "/dashboard/live"] {
        let html = page(path, None).await;
        assert!(html.contains("data-dead="), "{path}: no dead request shown");
        assert!(!html.contains("Secret Sam"), "{path}: a customer shown to a stranger");
        assert!(html.contains("customer hidden"), "{path}");
        let html = page(path, Some(format!("seatq_operator={TOKEN}"))).await;
        assert!(html.contains("Secret Sam"), "{path}: the customer hidden from the operator");
    }
    // The API's list of dead requests likewise.
    let text = page("/api/ops/dead", None).await;
    assert!(text.contains("customer hidden") && !text.contains("Secret Sam"), "{text}");
    let text = page("/api/ops/dead", Some(format!("seatq_operator={TOKEN}"))).await;
    assert!(text.contains("Secret Sam"), "{text}");
    db.assert_invariants_and_close().await;
}
