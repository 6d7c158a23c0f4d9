//! The pages in a real browser: headless Chromium (Debian's `chromium`)
//! driven over the DevTools protocol (`chromiumoxide`). The checkout page
//! holds, counts down and confirms exactly the seats clicked (checked in the
//! database), cancels a hold, shows a short hold lapsing and one the
//! sweeper releases early (heard on the lapse stream the page follows with
//! the hold token it made), and the dashboard's figures match the database
//! while a worker runs; its retry button requeues a dead
//! request. On a phone's screen the checkout page fits (its map pans in its
//! own box, seats 24 px across) and keeps Hold, the countdown and Confirm in
//! reach; seats are picked with the keyboard too; prices show their
//! currency, refusals speak plainly and the countdown stops once booked.
//! Screenshots of both pages, desktop and phone, are saved under
//! `target/browser/`.
//! Sold out, a customer joins the waiting list, sees their number and the
//! seats wanted ahead, and is handed the seats another customer cancels,
//! held with a running countdown; a wait that ends and a list closed are
//! said in plain words; the dashboard counts the list, on a phone too.
//! Markup and script in every text field (an event's name and venue, seat
//! labels, customers' names, error messages echoing input) show as text on
//! every page and in the API's errors, and none of it runs.
//!
//! Without Chromium these tests fail under CI (`CI` set, as `.ci/run` does),
//! saying how to install it; elsewhere they skip, saying so in one line.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use chromiumoxide::browser::{Browser, BrowserConfig};
use chromiumoxide::cdp::browser_protocol::emulation::SetDeviceMetricsOverrideParams;
use chromiumoxide::cdp::browser_protocol::network::{CookieParam, EventResponseReceived};
use chromiumoxide::cdp::browser_protocol::page::SetBypassCspParams;
use chromiumoxide::cdp::browser_protocol::target::{CreateBrowserContextParams, CreateTargetParams};
use chromiumoxide::page::{Page, ScreenshotParams};
use common::http::Served;
use common::{Running, TestDb, eventually};
use futures_util::StreamExt as _;
use seatq::Status;
use seatq_server::Settings;
use seatq_worker::Config;

const TOKEN: &str = "browser-test-token";
/// How long the browser gets for anything the page does after a click.
const WITHIN: Duration = Duration::from_secs(20);

/// Chromium: `$SEATQ_CHROMIUM`, else the first of Debian's and Google's
/// names on the `PATH`. Without one, a test fails under CI (`CI` set) and
/// otherwise skips, saying why in one line (`None`).
fn chromium() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("SEATQ_CHROMIUM").map(PathBuf::from) {
        assert!(path.is_file(), "SEATQ_CHROMIUM names {}, which is not a file", path.display());
        return Some(path);
    }
    let names = ["chromium", "chromium-browser", "google-chrome", "google-chrome-stable"];
    let path = std::env::var_os("PATH").unwrap_or_default();
    let found =
        std::env::split_paths(&path).flat_map(|dir| names.iter().map(move |n| dir.join(n))).find(|p| p.is_file());
    if found.is_none() {
        let why = format!(
            "no Chromium for the browser test (looked for {names:?} on PATH): install Debian's package \
             (apt-get install -y chromium, as .ci/run does) or set SEATQ_CHROMIUM to its path"
        );
        assert!(std::env::var_os("CI").is_none(), "{why}: CI must run the browser tests");
        eprintln!("skipped: {why}");
    }
    found
}

/// A headless Chromium with a fresh profile, closed when dropped.
struct Chrome {
    browser: Browser,
    handler: tokio::task::JoinHandle<()>,
    profile: PathBuf,
}

impl Chrome {
    /// Chromium started, or `None` (having said why) where the test skips.
    async fn launch() -> Option<Chrome> {
        let executable = chromium()?;
        // A profile of its own per browser: tests run side by side, and
        // Chromium refuses a profile another instance holds.
        static LAUNCHES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = LAUNCHES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let profile = std::env::temp_dir().join(format!("seatq-chromium-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&profile);
        let config = BrowserConfig::builder()
            .chrome_executable(executable)
            .disable_default_args()
            .no_sandbox()
            .args([
                "disable-gpu",
                "disable-quic",
                "no-first-run",
                "disable-background-networking",
                "disable-component-update",
                "disable-sync",
            ])
            .user_data_dir(&profile)
            .window_size(1280, 1000)
            .viewport(None)
            .launch_timeout(Duration::from_secs(60))
            .build()
            .expect("browser configuration");
        let (browser, mut events) = Browser::launch(config).await.expect("start Chromium");
        let handler = tokio::spawn(async move { while events.next().await.is_some() {} });
        Some(Chrome { browser, handler, profile })
    }

    async fn close(mut self) {
        let _ = self.browser.close().await;
        let _ = self.browser.wait().await;
        self.handler.abort();
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}

/// The element's text, or "" when it is not there.
async fn text(page: &Page, selector: &str) -> String {
    match page.find_element(selector).await {
        Ok(e) => e.inner_text().await.ok().flatten().unwrap_or_default(),
        Err(_) => String::new(),
    }
}

async fn attribute(page: &Page, selector: &str, name: &str) -> Option<String> {
    page.find_element(selector).await.ok()?.attribute(name).await.ok()?
}

/// Click the element. The pages redraw their live parts every few seconds,
/// so an element found may be replaced before the click lands: then find it
/// again.
async fn click(page: &Page, selector: &str) {
    let mut tries = 0;
    loop {
        let clicked = match page.find_element(selector).await {
            Ok(element) => element.click().await.map(|_| ()),
            Err(e) => Err(e),
        };
        match clicked {
            Ok(_) => return,
            Err(e) if tries < 5 => {
                tries += 1;
                eprintln!("clicking {selector}: {e}; finding it again");
            }
            Err(e) => panic!("clicking {selector}: {e}"),
        }
    }
}

/// How many elements match, counted in the page at one instant (a live
/// part may be redrawn between finding elements and reading them).
async fn count(page: &Page, selector: &str) -> usize {
    let script = format!("document.querySelectorAll({}).length", serde_json::json!(selector));
    page.evaluate(script).await.expect("count elements").into_value().expect("a number")
}

/// Wait until the hold panel is in `state`.
async fn panel_in(page: &Page, state: &str, within: Duration) -> bool {
    eventually(within, || async { attribute(page, "#hold-panel", "data-state").await.as_deref() == Some(state) }).await
}

/// Where the screenshots go: `target/browser/`.
fn artifacts() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target"));
    let dir = target.join("browser");
    std::fs::create_dir_all(&dir).expect("target/browser");
    dir
}

async fn screenshot(page: &Page, name: &str) {
    let path = artifacts().join(name);
    let params = ScreenshotParams::builder().full_page(true).build();
    page.save_screenshot(params, &path).await.unwrap_or_else(|e| panic!("screenshot {}: {e}", path.display()));
}

/// The screen as it is, no more: a phone's (a whole-page screenshot would
/// resize the page and drop the phone's metrics).
async fn screen(page: &Page, name: &str) {
    let path = artifacts().join(name);
    let params = ScreenshotParams::builder().full_page(false).build();
    page.save_screenshot(params, &path).await.unwrap_or_else(|e| panic!("screenshot {}: {e}", path.display()));
}

/// A phone's screen, in CSS pixels (an iPhone 14's).
const PHONE: (i64, i64) = (390, 844);

/// A new page the size of a phone (a touch screen, twice as dense as CSS
/// pixels, reading `<meta name=viewport>` as a phone does) at `url`.
async fn phone(chrome: &Chrome, url: &str) -> Page {
    let page = chrome.browser.new_page("about:blank").await.expect("a new page");
    page.execute(SetDeviceMetricsOverrideParams::new(PHONE.0, PHONE.1, 2.0, true)).await.expect("a phone's screen");
    page.goto(url).await.unwrap_or_else(|e| panic!("open {url}: {e}"));
    page
}

/// What a script evaluates to.
async fn js<T: serde::de::DeserializeOwned>(page: &Page, script: &str) -> T {
    let value = page.evaluate(script).await.unwrap_or_else(|e| panic!("{script}: {e}"));
    value.into_value().unwrap_or_else(|e| panic!("{script}: {e}"))
}

/// Where an element is drawn, in CSS pixels of the viewport.
#[derive(Debug, serde::Deserialize)]
struct Rect {
    left: f64,
    right: f64,
    width: f64,
}

async fn rect(page: &Page, selector: &str) -> Rect {
    let script = format!(
        "(() => {{ const r = document.querySelector({}).getBoundingClientRect();
                  return {{ left: r.left, right: r.right, width: r.width }}; }})()",
        serde_json::json!(selector)
    );
    js(page, &script).await
}

/// Whether the element is on the screen and nothing covers its middle: a
/// finger there reaches it.
async fn reachable(page: &Page, selector: &str) -> bool {
    js(
        page,
        &format!(
            "(() => {{ const e = document.querySelector({}); const r = e.getBoundingClientRect();
                      if (r.top < 0 || r.left < 0 || r.bottom > innerHeight || r.right > innerWidth || r.width === 0) return false;
                      const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
                      return hit === e || e.contains(hit); }})()",
            serde_json::json!(selector)
        ),
    )
    .await
}

/// The element focused: its `data-seat`, or its tag name.
async fn focused(page: &Page) -> String {
    js(page, "document.activeElement.dataset.seat || document.activeElement.tagName").await
}

/// Press `key` where the focus is.
async fn press(page: &Page, key: &str) {
    page.find_element("body").await.expect("the page").press_key(key).await.unwrap_or_else(|e| panic!("{key}: {e}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checkout_and_dashboard_in_chromium() {
    let Some(chrome) = Chrome::launch().await else { return };
    let db = TestDb::new().await;
    let (ev, seats) = theatre(&db, "Hamlet", Some("The Globe")).await;
    let s = Served::start(&db, Settings { operator_token: Some(TOKEN.into()), ..Settings::default() }).await;
    let config =
        Config { sweep_interval: Duration::from_millis(200), name: Some("browser-worker".into()), ..Config::default() };
    let workers = Running::start(&db, 1, config).await;

    // Checkout: pick three seats on the map, hold, see the countdown, confirm.
    let page = chrome.browser.new_page(s.url(&format!("/shop/{ev}"))).await.expect("open the checkout page");
    assert_eq!(count(&page, "svg.seatmap circle.seat").await, seats.len());
    click(&page, "#customer").await;
    page.find_element("#customer").await.expect("name field").type_str("Ann Browser").await.expect("type");
    let wanted = [45, 46, 47];
    for seat in wanted {
        click(&page, &format!(r#"circle.seat[data-seat="{seat}"]"#)).await;
    }
    let chosen = text(&page, "#selection").await;
    for seat in wanted {
        let v = &seats[seat as usize - 1];
        let name = format!("{}, row {}, seat {}", v.section, v.row_label, v.label);
        assert!(chosen.contains(&name), "{name} missing from the selection: {chosen}");
    }
    click(&page, "#hold").await;
    assert!(panel_in(&page, "held", WITHIN).await, "no hold: {}", text(&page, "#message").await);
    let first = text(&page, "#countdown").await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let later = text(&page, "#countdown").await;
    let secs =
        |t: &str| t.split_once(':').and_then(|(m, s)| Some(m.parse::<u32>().ok()? * 60 + s.parse::<u32>().ok()?));
    assert!(secs(&first).is_some_and(|f| f > 500 && f <= 600), "countdown {first:?}");
    assert!(secs(&later) < secs(&first), "the countdown does not run: {first:?} then {later:?}");
    assert_eq!(count(&page, "svg.seatmap circle.seat.mine").await, 3);
    screenshot(&page, "checkout.png").await;
    click(&page, "#confirm").await;
    assert!(panel_in(&page, "booked", WITHIN).await, "not booked: {}", text(&page, "#message").await);
    assert!(text(&page, "#hold-message").await.contains("is yours"));
    assert_eq!(text(&page, "#countdown-line").await, "Booked — your seats are yours", "the countdown runs on");

    // Exactly those seats are booked to that customer, and nothing else is.
    let booked: Vec<(i32, String)> = sqlx::query_as(
        "SELECT s.seat_no, b.customer FROM seatq.seats s JOIN seatq.bookings b ON b.id = s.booking_id
         WHERE s.event_id = $1 AND s.state IN ('booked', 'held') ORDER BY s.seat_no",
    )
    .bind(ev)
    .fetch_all(&db.pool)
    .await
    .expect("booked seats");
    assert_eq!(booked, wanted.map(|n| (n, "Ann Browser".to_string())));
    // Another hold on the same page, cancelled: the seat is free again.
    click(&page, "#again").await;
    click(&page, r#"circle.seat[data-seat="50"]"#).await;
    click(&page, "#hold").await;
    assert!(panel_in(&page, "held", WITHIN).await, "no second hold: {}", text(&page, "#message").await);
    click(&page, "#cancel").await;
    assert!(panel_in(&page, "cancelled", WITHIN).await, "not cancelled: {}", text(&page, "#message").await);
    let (state, seat): (String, String) = sqlx::query_as(
        "SELECT b.state::text, s.state::text FROM seatq.bookings b, seatq.seats s
         WHERE b.customer = 'Ann Browser' AND b.state <> 'booked' AND s.event_id = b.event_id AND s.seat_no = 50",
    )
    .fetch_one(&db.pool)
    .await
    .expect("the cancelled hold");
    assert_eq!((state.as_str(), seat.as_str()), ("cancelled", "available"));

    // A hold the sweeper releases long before its countdown ends: the page
    // hears of it from the lapse stream it follows with the hold's token
    // (a 200 only for the token the page made; a wrong one is a 404).
    let mut responses = page.event_listener::<EventResponseReceived>().await.expect("follow the page's responses");
    click(&page, "#again").await;
    click(&page, r#"circle.seat[data-seat="51"]"#).await;
    click(&page, "#hold").await;
    assert!(panel_in(&page, "held", WITHIN).await, "no third hold: {}", text(&page, "#message").await);
    let followed = tokio::time::timeout(WITHIN, async {
        while let Some(r) = responses.next().await {
            if r.response.url.contains("/lapsed") {
                return Some(r.response.status);
            }
        }
        None
    })
    .await;
    assert_eq!(followed, Ok(Some(200)), "the page does not follow its hold's lapse");
    let booking: i64 = attribute(&page, "#hold-panel", "data-booking")
        .await
        .and_then(|b| b.parse().ok())
        .expect("the hold's booking on the panel");
    db.lapse_hold(booking).await;
    assert!(panel_in(&page, "lapsed", WITHIN).await, "the sweeper's release is not shown");
    let said = text(&page, "#hold-message").await;
    assert!(said.contains("The sweeper released them"), "{said}");
    assert!(secs(&text(&page, "#countdown").await) == Some(0));
    // Every hold the page made answers to a token of its own (only its hash stored).
    let (holds, tokened, distinct): (i64, i64, i64) = sqlx::query_as(
        "SELECT count(*), count(token_hash), count(DISTINCT token_hash) FROM seatq.bookings WHERE customer = 'Ann Browser'",
    )
    .fetch_one(&db.pool)
    .await
    .expect("the page's bookings");
    assert_eq!((holds, tokened, distinct), (3, 3, 3));

    // Once the map refreshes, they show booked to everyone (a map may be
    // as old as the server's cache of views allows, docs/checkout.md).
    let reload = chrome.browser.new_page(s.url(&format!("/shop/{ev}"))).await.expect("another page");
    let shown_booked = eventually(WITHIN, || async {
        let mut all = true;
        for seat in wanted {
            let class = attribute(&reload, &format!(r#"circle.seat[data-seat="{seat}"]"#), "class").await;
            all &= class.as_deref() == Some("seat booked");
        }
        all
    })
    .await;
    assert!(shown_booked, "the booked seats never show booked to another page");

    // A short hold lapses, and the page says so.
    let short = chrome.browser.new_page(s.url(&format!("/shop/{ev}?hold_seconds=2"))).await.expect("short holds");
    click(&short, "#customer").await;
    short.find_element("#customer").await.expect("name").type_str("Bo Lapse").await.expect("type");
    click(&short, r#"circle.seat[data-seat="60"]"#).await;
    click(&short, "#hold").await;
    assert!(panel_in(&short, "held", WITHIN).await, "no hold: {}", text(&short, "#message").await);
    assert!(panel_in(&short, "lapsed", WITHIN).await, "the lapse is not shown");
    assert!(text(&short, "#hold-message").await.contains("lapsed"));
    assert!(attribute(&short, "#confirm", "disabled").await.is_some(), "a lapsed hold can still be confirmed");
    let swept = eventually(WITHIN, || async {
        sqlx::query_scalar::<_, String>("SELECT state::text FROM seatq.bookings WHERE customer = 'Bo Lapse'")
            .fetch_one(&db.pool)
            .await
            .is_ok_and(|state| state == "expired")
    })
    .await;
    assert!(swept, "the lapsed hold was not swept");

    // The dashboard, with a dead request to retry, while the worker runs.
    // A request that died (scheduled for later, so that no worker takes it first).
    let later = seatq::NewRequest {
        run_at: Some(chrono::Utc::now() + chrono::Duration::hours(1)),
        ..seatq::Request::Book(common::hold(ev, 2, 2, "Cy Dead")).into()
    };
    let dead = db.client.enqueue(later).await.expect("enqueue");
    sqlx::query(
        "UPDATE seatq.requests SET status = 'dead', finished_at = now(), attempts = 3,
                error_code = 'internal', error_message = 'test: died' WHERE id = $1",
    )
    .bind(dead)
    .execute(&db.pool)
    .await
    .expect("make it dead");
    let dash = chrome.browser.new_page(s.url("/dashboard")).await.expect("open the dashboard");
    click(&dash, "#token").await;
    dash.find_element("#token").await.expect("token field").type_str(TOKEN).await.expect("type");
    click(&dash, "#signin button").await;
    assert!(eventually(WITHIN, || async { text(&dash, ".signin").await.contains("Signed in") }).await, "not signed in");
    assert!(eventually(WITHIN, || async { text(&dash, r#"[data-testid="dead-count"]"#).await == "1" }).await);
    assert!(text(&dash, r#"tr[data-dead]"#).await.contains("test: died"));
    screenshot(&dash, "dashboard.png").await;
    click(&dash, &format!(r#"button[data-retry="{dead}"]"#)).await;
    assert!(eventually(WITHIN, || async { text(&dash, "#message").await.contains("Requeued") }).await);
    assert!(
        eventually(WITHIN, || async { db.client.status(dead).await.is_ok_and(|r| r.status == Status::Succeeded) })
            .await
    );

    // Its figures match the database's once the page has refreshed.
    let matches = eventually(WITHIN, || async {
        let stats = db.client.stats().await.expect("stats");
        let mut same = true;
        for status in ["queued", "succeeded", "failed", "dead"] {
            let shown = text(&dash, &format!(r#"[data-testid="requests-{status}"]"#)).await;
            same &= shown == stats.requests.get(status).copied().unwrap_or(0).to_string();
        }
        let workers = db.client.workers().await.expect("workers");
        same &= text(&dash, r#"[data-testid="workers-count"]"#).await == workers.len().to_string();
        same &= text(&dash, r#"[data-testid="worker-name"]"#).await == "browser-worker";
        let (sold, held, free): (i64, i64, i64) = sqlx::query_as(
            "SELECT count(*) FILTER (WHERE state = 'booked'),
                    count(*) FILTER (WHERE seatq.is_live(state, held_until) AND state = 'held'),
                    count(*) FILTER (WHERE seatq.is_free(state, held_until))
             FROM seatq.seats WHERE event_id = $1",
        )
        .bind(ev)
        .fetch_one(&db.pool)
        .await
        .expect("seats");
        for (what, n) in [("sold", sold), ("held", held), ("free", free)] {
            same &= text(&dash, &format!(r#"[data-testid="event-{ev}-{what}"]"#)).await == n.to_string();
        }
        same && sold == 5
    })
    .await;
    assert!(matches, "the dashboard's figures do not match the database's");
    assert!(text(&dash, r#"[data-testid="finished-recently"]"#).await.parse::<i64>().is_ok_and(|n| n >= 4));

    chrome.close().await;
    workers.stop().await;
    db.assert_invariants_and_close().await;
}

/// A customer of their own: a page at `url` in a new browser context (no
/// cookies or storage shared with other customers), on a phone's screen
/// when `on_phone`.
async fn customer(chrome: &Chrome, url: &str, on_phone: bool) -> Page {
    let context =
        chrome.browser.create_browser_context(CreateBrowserContextParams::default()).await.expect("a context");
    let target =
        CreateTargetParams::builder().url("about:blank").browser_context_id(context).build().expect("a target");
    let page = chrome.browser.new_page(target).await.expect("a new page");
    if on_phone {
        page.execute(SetDeviceMetricsOverrideParams::new(PHONE.0, PHONE.1, 2.0, true)).await.expect("a phone's screen");
    }
    page.goto(url).await.unwrap_or_else(|e| panic!("open {url}: {e}"));
    page
}

/// Type the customer's name as a paste would.
async fn name(page: &Page, customer: &str) {
    page.evaluate(format!(
        "{{ const c = document.querySelector('#customer'); c.value = {}; c.dispatchEvent(new Event('input')); }}",
        serde_json::json!(customer)
    ))
    .await
    .expect("the customer's name");
}

/// Ask for the best `party` seats of the page's first class: sold out, the
/// page offers the waiting list; join it, and wait until it says where the
/// customer stands. What the offer said.
async fn join_the_list(page: &Page, party: u32) -> String {
    page.evaluate(format!("document.querySelector('#party').value = '{party}'")).await.expect("the party");
    click(page, "#hold-best").await;
    let offered =
        eventually(WITHIN, || async { attribute(page, "#wait-panel", "data-state").await.as_deref() == Some("offer") })
            .await;
    assert!(offered, "no waiting list offered: {:?}", text(page, "#message").await);
    assert_eq!(attribute(page, "#message", "data-code").await.as_deref(), Some("sold_out"));
    assert!(reachable(page, "#join").await, "Join the waiting list is off the screen or covered");
    let offer = text(page, "#wait-text").await;
    click(page, "#join").await;
    let listed = eventually(WITHIN, || async {
        attribute(page, "#wait-panel", "data-state").await.as_deref() == Some("waiting")
    })
    .await;
    assert!(listed, "not on the waiting list: {:?}", text(page, "#message").await);
    offer
}

/// The waiting list from the customers' side. Ann holds the last two seats
/// of a small event; Bob, in a browser of his own, asks for two: sold out,
/// he is offered the waiting list, joins and is number 1; Cy, on a phone,
/// joins for one and is number 2 with two seats wanted ahead of him; Dee's
/// short wait ends, said plainly; the dashboard counts the list (on a phone
/// too). Ann cancels: Bob's page shows the two seats held for him, named,
/// with a countdown that runs, and he confirms them; Cy moves up to number
/// 1, then the list is closed and his page says so. Screenshots:
/// `waiting-list.png`, `waiting-list-phone.png` and `dashboard-waiting.png`
/// (docs/images).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sold_out_customer_joins_the_waiting_list_and_is_handed_seats() {
    let Some(chrome) = Chrome::launch().await else { return };
    let db = TestDb::new().await;
    let mut csv = String::from("section,row,seat,pos,class,price,for_sale\n");
    for n in 1..=4 {
        csv.push_str(&format!("Stalls,A,{n},{n},1,30,yes\n"));
    }
    let venue = seatq::venue::parse_csv(csv.as_bytes()).expect("read the venue");
    let event =
        seatq::venue::NewEvent { name: "Late show".into(), venue: Some("The Cellar".into()), ..Default::default() };
    let ev = db.client.import_event(&event, &venue.seats).await.expect("import");
    let early = db.run(seatq::Request::Book(seatq::SeatRequest::named(ev, vec![1, 2], "Early Bird"))).await;
    assert_eq!(early.status, Status::Succeeded, "{early:?}");
    // (Seven holds from one address, within its ten per event.)
    let s = Served::start(&db, Settings::default()).await;
    let config = Config { sweep_interval: Duration::from_millis(200), ..Config::default() };
    let workers = Running::start(&db, 1, config).await;
    let shop = s.url(&format!("/shop/{ev}"));

    // Ann holds the last two seats.
    let ann = customer(&chrome, &shop, false).await;
    name(&ann, "Ann Last").await;
    click(&ann, r#"circle.seat[data-seat="3"]"#).await;
    click(&ann, r#"circle.seat[data-seat="4"]"#).await;
    click(&ann, "#hold").await;
    assert!(panel_in(&ann, "held", WITHIN).await, "no hold: {}", text(&ann, "#message").await);

    // Bob asks for two: sold out, offered the list, joins: number 1.
    let bob = customer(&chrome, &shop, false).await;
    name(&bob, "Bob Waits").await;
    let offer = join_the_list(&bob, 2).await;
    assert_eq!(
        offer,
        "When 2 seats in Stalls come free, the cheapest are held for you at once, for 10 minutes, to confirm and pay \
         as any hold. You wait up to 30 minutes; keep this page open."
    );
    assert_eq!(text(&bob, "#wait-title").await, "Waiting for 2 seats in Stalls");
    assert_eq!(text(&bob, "#wait-place").await, "You are number 1 on the waiting list");
    assert_eq!(text(&bob, "#wait-ahead").await, "No one is ahead of you: the next seats that come free are yours.");
    assert!(text(&bob, "#wait-note").await.contains("Keep this page open"), "{}", text(&bob, "#wait-note").await);
    assert!(bob.find_element("#pick").await.expect("the picker").attribute("hidden").await.ok().flatten().is_some());

    // Cy, on a phone, asks for one: number 2, two seats wanted ahead.
    let cy = customer(&chrome, &shop, true).await;
    name(&cy, "Cy Phone").await;
    let offer = join_the_list(&cy, 1).await;
    assert!(offer.starts_with("When 1 seat in Stalls comes free, it is held for you at once"), "{offer}");
    assert_eq!(text(&cy, "#wait-place").await, "You are number 2 on the waiting list");
    assert_eq!(text(&cy, "#wait-ahead").await, "Ahead of you: 1 party wanting 2 seats in all.");
    assert!(reachable(&cy, "#wait-place").await, "the customer's number is off the screen or covered");
    let cy_width: f64 = js(&cy, "document.documentElement.scrollWidth").await;
    assert!(cy_width <= PHONE.0 as f64, "the page scrolls sideways: {cy_width} px wide");
    // (Bob's map, drawn from a view a moment old, shows Ann's hold once redrawn.)
    let redrawn = eventually(WITHIN, || async {
        attribute(&bob, r#"circle.seat[data-seat="3"]"#, "class").await.as_deref() == Some("seat held")
    })
    .await;
    assert!(redrawn, "Ann's hold never shows on Bob's map");
    screenshot(&bob, "waiting-list.png").await;
    screen(&cy, "waiting-list-phone.png").await;
    let places: Vec<String> = sqlx::query_scalar(
        "SELECT r.payload ->> 'customer' FROM seatq.waiting w JOIN seatq.requests r ON r.id = w.request_id
         WHERE w.event_id = $1 ORDER BY w.request_id",
    )
    .bind(ev)
    .fetch_all(&db.pool)
    .await
    .expect("the waiting list");
    assert_eq!(places, ["Bob Waits", "Cy Phone"], "the waiting list, in order");

    // Dee waits two seconds only: her wait ends, and her page says so.
    let dee = customer(&chrome, &format!("{shop}?wait_seconds=2"), false).await;
    name(&dee, "Dee Brief").await;
    dee.evaluate("document.querySelector('#party').value = '1'").await.expect("the party");
    click(&dee, "#hold-best").await;
    assert!(
        eventually(WITHIN, || async { attribute(&dee, "#wait-panel", "data-state").await.as_deref() == Some("offer") })
            .await,
        "no waiting list offered to Dee"
    );
    click(&dee, "#join").await;
    let ended = "No seats in Stalls came free for you before your wait ended.";
    assert!(
        eventually(WITHIN, || async { text(&dee, "#message").await.starts_with(ended) }).await,
        "the wait's end: {:?}",
        text(&dee, "#message").await
    );
    assert_eq!(attribute(&dee, "#message", "data-code").await.as_deref(), Some("sold_out"));
    assert!(
        dee.find_element("#wait-panel").await.expect("the panel").attribute("hidden").await.ok().flatten().is_some()
    );

    // The dashboard counts the list: two parties, three seats, open; on a
    // phone too, each figure named in its stacked cell.
    let dash = chrome.browser.new_page(s.url("/dashboard")).await.expect("open the dashboard");
    let figure = |page: &Page, what: &str| {
        let selector = format!(r#"[data-testid="event-{ev}-{what}"]"#);
        let page = page.clone();
        async move { text(&page, &selector).await }
    };
    assert!(
        eventually(WITHIN, || async {
            figure(&dash, "waiting").await == "2" && figure(&dash, "seats-wanted").await == "3"
        })
        .await,
        "the dashboard's waiting list: {:?} parties, {:?} seats",
        figure(&dash, "waiting").await,
        figure(&dash, "seats-wanted").await
    );
    assert!(figure(&dash, "list").await.starts_with("open"), "{}", figure(&dash, "list").await);
    assert_eq!(text(&dash, r#"[data-testid="requests-waiting"]"#).await, "2");
    screenshot(&dash, "dashboard-waiting.png").await;
    assert!(figure(&dash, "oldest-wait").await.ends_with(" s"), "{}", figure(&dash, "oldest-wait").await);
    let dash_phone = phone(&chrome, &s.url("/dashboard")).await;
    assert_eq!(figure(&dash_phone, "waiting").await, "2");
    let label: String = js(
        &dash_phone,
        &format!(
            "getComputedStyle(document.querySelector('[data-testid=\"event-{ev}-waiting\"]'), '::before').content"
        ),
    )
    .await;
    assert_eq!(label, "\"Waiting: \"", "the stacked cell is not named");
    let dash_width: f64 = js(&dash_phone, "document.documentElement.scrollWidth").await;
    assert!(dash_width <= PHONE.0 as f64, "the dashboard scrolls sideways: {dash_width} px wide");
    let event_page =
        chrome.browser.new_page(s.url(&format!("/dashboard/events/{ev}"))).await.expect("the event's page");
    assert_eq!(text(&event_page, r#"[data-testid="waiting"]"#).await, "2");

    // Ann cancels: the two seats are Bob's, held, the countdown running.
    click(&ann, "#cancel").await;
    assert!(panel_in(&ann, "cancelled", WITHIN).await, "not cancelled: {}", text(&ann, "#message").await);
    assert!(panel_in(&bob, "held", WITHIN).await, "nothing handed to Bob: {}", text(&bob, "#message").await);
    assert_eq!(text(&bob, "#hold-seats").await, "Stalls, row A, seat 3; Stalls, row A, seat 4");
    assert_eq!(text(&bob, "#hold-total").await, "£60.00");
    let secs =
        |t: &str| t.split_once(':').and_then(|(m, s)| Some(m.parse::<u32>().ok()? * 60 + s.parse::<u32>().ok()?));
    let first = text(&bob, "#countdown").await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let later = text(&bob, "#countdown").await;
    assert!(secs(&first).is_some_and(|f| f > 500 && f <= 600), "countdown {first:?}");
    assert!(secs(&later) < secs(&first), "the countdown does not run: {first:?} then {later:?}");
    assert!(
        bob.find_element("#wait-panel").await.expect("the panel").attribute("hidden").await.ok().flatten().is_some()
    );
    assert!(
        eventually(WITHIN, || async { count(&bob, "svg.seatmap circle.seat.mine").await == 2 }).await,
        "Bob's seats are not marked his on the map"
    );
    click(&bob, "#confirm").await;
    assert!(panel_in(&bob, "booked", WITHIN).await, "not booked: {}", text(&bob, "#message").await);

    // Cy moves up: number 1 now, no one ahead; the dashboard counts one.
    assert!(
        eventually(WITHIN, || async { text(&cy, "#wait-place").await == "You are number 1 on the waiting list" }).await,
        "Cy's place is not refreshed: {:?}",
        text(&cy, "#wait-place").await
    );
    assert!(
        eventually(WITHIN, || async { figure(&dash, "waiting").await == "1" }).await,
        "the dashboard still counts 2"
    );

    // The list closed: Cy's page says so, plainly.
    assert!(db.client.close_waiting_list(ev).await.expect("close the list"));
    let closed = "Stalls is sold out, and its waiting list is closed.";
    assert!(
        eventually(WITHIN, || async { text(&cy, "#message").await.starts_with(closed) }).await,
        "the list's close: {:?}",
        text(&cy, "#message").await
    );
    assert!(eventually(WITHIN, || async { figure(&dash, "list").await.starts_with("closed") }).await);

    let booked: Vec<(i32, String, String)> = sqlx::query_as(
        "SELECT s.seat_no, b.customer, b.state::text FROM seatq.seats s JOIN seatq.bookings b ON b.id = s.booking_id
         WHERE s.event_id = $1 ORDER BY s.seat_no",
    )
    .bind(ev)
    .fetch_all(&db.pool)
    .await
    .expect("the seats");
    let booked_to = |n: i32, who: &str| (n, who.to_string(), "booked".to_string());
    assert_eq!(
        booked,
        [booked_to(1, "Early Bird"), booked_to(2, "Early Bird"), booked_to(3, "Bob Waits"), booked_to(4, "Bob Waits")]
    );

    chrome.close().await;
    workers.stop().await;
    db.assert_invariants_and_close().await;
}

/// An event of the sample theatre (`examples/venues/theatre.csv`), and its seats.
async fn theatre(db: &TestDb, name: &str, venue: Option<&str>) -> (i64, Vec<seatq::venue::VenueSeat>) {
    let file = std::fs::File::open("examples/venues/theatre.csv").expect("the sample theatre");
    let seats = seatq::venue::parse_csv(std::io::BufReader::new(file)).expect("read the venue").seats;
    let event = seatq::venue::NewEvent { name: name.into(), venue: venue.map(Into::into), ..Default::default() };
    (db.client.import_event(&event, &seats).await.expect("import"), seats)
}

/// The checkout page on a phone (390 x 844): the page never scrolls
/// sideways, the map pans in its own box (and stays panned when redrawn)
/// with every seat at least 24 px across, and the action bar (the choice
/// and Hold, then the countdown and Confirm) is on the screen, uncovered,
/// however far down the map the customer is. A seat someone took meanwhile
/// is refused in plain words, the code kept for support; a booking stops
/// the countdown and says so; prices show their currency; the icon is
/// there (no 404). Then the keyboard: Tab reaches the first free seat,
/// Space and Enter tick seats, arrows move between them, and a redraw keeps
/// the focus. Last, the dashboard on a phone: a worker's settings read in
/// lines of words, not a character a line. Screenshots: `checkout-phone.png`,
/// `checkout-phone-held.png`, `dashboard-phone.png`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_phone_and_a_keyboard_buy_seats() {
    let Some(chrome) = Chrome::launch().await else { return };
    let db = TestDb::new().await;
    let (ev, seats) = theatre(&db, "Hamlet", Some("The Globe")).await;
    let s = Served::start(&db, Settings { operator_token: Some(TOKEN.into()), ..Settings::default() }).await;
    let config = Config { name: Some("phone-worker".into()), ..Config::default() };
    let workers = Running::start(&db, 1, config).await;
    let width = PHONE.0 as f64;

    // Every answer the page loads, to find any 404 (a favicon's, say).
    let page = chrome.browser.new_page("about:blank").await.expect("a new page");
    let mut responses = page.event_listener::<EventResponseReceived>().await.expect("follow the page's responses");
    page.execute(SetDeviceMetricsOverrideParams::new(PHONE.0, PHONE.1, 2.0, true)).await.expect("a phone's screen");
    page.goto(s.url(&format!("/shop/{ev}"))).await.expect("open the checkout page");

    // The page fits the screen; the map is wider and pans in its box.
    let screen_size: (f64, f64) = js(&page, "[innerWidth, innerHeight]").await;
    assert_eq!(screen_size, (width, PHONE.1 as f64), "not a phone's viewport");
    let page_width: f64 = js(&page, "document.documentElement.scrollWidth").await;
    assert!(page_width <= width, "the page scrolls sideways: {page_width} px wide on a {width} px screen");
    let mapbox = rect(&page, ".mapbox").await;
    assert!(mapbox.left >= 0.0 && mapbox.right <= width, "the map's box runs off the screen: {mapbox:?}");
    let (scroll, client): (f64, f64) =
        js(&page, "[document.querySelector('.mapbox').scrollWidth, document.querySelector('.mapbox').clientWidth]")
            .await;
    assert!(scroll > client, "the theatre's 20-seat rows fit a phone only by shrinking: {scroll} in {client}");
    assert!(!text(&page, ".pan-hint").await.is_empty(), "nothing says the map pans");
    let sizes: Vec<(f64, f64)> = js(
        &page,
        "[...document.querySelectorAll('svg.seatmap circle.seat')].map(c => { const r = c.getBoundingClientRect(); return [r.width, r.height]; })",
    )
    .await;
    assert_eq!(sizes.len(), seats.len());
    assert!(
        sizes.iter().all(|&(w, h)| w >= 24.0 && h >= 24.0),
        "a seat under 24 px: {:?}",
        sizes.iter().min_by(|a, b| a.0.total_cmp(&b.0))
    );

    // Prices in pounds (the default currency), classes by their names.
    assert_eq!(text(&page, r#"[data-testid="class-2-price"]"#).await, "£45.00");
    assert_eq!(text(&page, r#"tr[data-class="2"] td"#).await, "Stalls rows A–G");
    assert_eq!(text(&page, r#"tr[data-class="4"] td"#).await, "Boxes");
    assert_eq!(text(&page, r#"#class option[value="3"]"#).await, "Stalls rows H–M, Circle rows D–F · £28.00 – £32.50");
    let spoken = attribute(&page, r#"circle.seat[data-seat="1"]"#, "aria-label").await;
    assert_eq!(spoken.as_deref(), Some("Stalls row A seat 1, £45.00"));
    assert_eq!(count(&page, "svg.seatmap .stage").await, 1, "no stage on the map");

    // The icon: linked, served, and no answer of the page's was a 404.
    let icon: (u16, String, u16) = js(
        &page,
        "(async () => { const r = await fetch(document.querySelector('link[rel=icon]').href);
                        const ico = await fetch('/favicon.ico');
                        return [r.status, r.headers.get('Content-Type'), ico.status]; })()",
    )
    .await;
    assert_eq!(icon, (200, "image/svg+xml".to_string(), 200));
    let mut missing = Vec::new();
    while let Ok(Some(r)) = tokio::time::timeout(Duration::from_millis(300), responses.next()).await {
        if r.response.status == 404 {
            missing.push(r.response.url.clone());
        }
    }
    assert!(missing.is_empty(), "404s while loading the page: {missing:?}");

    // Panned sideways, the map stays panned when the page redraws it.
    page.evaluate("document.querySelector('.mapbox').scrollLeft = 120").await.expect("pan");
    assert!(refreshed(&page).await, "the map is never redrawn");
    let panned: f64 = js(&page, "document.querySelector('.mapbox').scrollLeft").await;
    assert_eq!(panned, 120.0, "a redraw threw the map back to its left edge");
    page.evaluate("document.querySelector('.mapbox').scrollLeft = 0").await.expect("pan back");

    // A tap on a seat: Hold is on the screen at once, nothing over it,
    // though the page is scrolled down to the map's last rows.
    page.evaluate(
        "{ const c = document.querySelector('#customer'); c.value = 'Pat Phone'; c.dispatchEvent(new Event('input')); }",
    )
    .await
    .expect("the customer's name");
    page.evaluate("scrollTo(0, 0)").await.expect("scroll to the top");
    click(&page, r#"circle.seat[data-seat="65"]"#).await;
    assert!(text(&page, "#selection").await.contains("Stalls, row D, seat 5 — total £45.00"));
    assert!(reachable(&page, "#hold").await, "Hold is off the screen or covered after a tap on a seat");
    screen(&page, "checkout-phone.png").await;
    page.evaluate("document.querySelector('circle.seat[data-seat=\"350\"]').scrollIntoView()").await.expect("scroll");
    assert!(reachable(&page, "#hold").await, "Hold is off the screen at the bottom of the map");

    // Someone else takes that seat first: the refusal in plain words,
    // above the bar, its code kept for support; the seat shows taken.
    // (Waited for, not drained here: the running worker may claim it first.)
    let quick = seatq::Request::Hold(seatq::SeatRequest::named(ev, vec![65], "Quick Quentin"));
    let quick = db.client.enqueue(quick).await.expect("enqueue");
    let other = db.client.wait(quick, Some(WITHIN)).await.expect("Quick Quentin's hold");
    assert_eq!(other.status, Status::Succeeded, "{other:?}");
    click(&page, "#hold").await;
    let said = "Stalls seat D5 was just taken by someone else. Pick another seat.";
    assert!(
        eventually(WITHIN, || async { text(&page, "#message").await.starts_with(said) }).await,
        "the refusal: {:?}",
        text(&page, "#message").await
    );
    assert_eq!(attribute(&page, "#message", "data-code").await.as_deref(), Some("seats_taken"));
    assert_eq!(text(&page, "#message small.code").await, "Code for support: seats_taken");
    assert!(!text(&page, "#message").await.contains("seat(s)"), "seatq's own words shown to the customer");
    assert!(reachable(&page, "#message").await, "the refusal is off the screen");
    // Shown taken at once (a redraw from a view a moment old may show it
    // free again for a moment: never chosen), and held once redrawn.
    let class = attribute(&page, r#"circle.seat[data-seat="65"]"#, "class").await.unwrap_or_default();
    assert!(!class.contains("selected"), "the taken seat still shows chosen: {class}");
    let shown_held = eventually(WITHIN, || async {
        attribute(&page, r#"circle.seat[data-seat="65"]"#, "class").await.as_deref() == Some("seat held")
    })
    .await;
    assert!(shown_held, "the taken seat never shows held");
    assert_eq!(text(&page, "#selection").await, "No seats chosen.");

    // Another seat, held: the countdown and Confirm in reach; confirmed:
    // the countdown stops and says the seats are the customer's.
    click(&page, r#"circle.seat[data-seat="66"]"#).await;
    click(&page, "#hold").await;
    assert!(panel_in(&page, "held", WITHIN).await, "no hold: {}", text(&page, "#message").await);
    assert!(reachable(&page, "#confirm").await, "Confirm is off the screen or covered");
    assert!(reachable(&page, "#countdown").await, "the countdown is off the screen or covered");
    assert_eq!(text(&page, "#hold-total").await, "£45.00");
    screen(&page, "checkout-phone-held.png").await;
    click(&page, "#confirm").await;
    assert!(panel_in(&page, "booked", WITHIN).await, "not booked: {}", text(&page, "#message").await);
    let stopped = text(&page, "#countdown-line").await;
    assert_eq!(stopped, "Booked — your seats are yours");
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(text(&page, "#countdown-line").await, stopped, "the countdown still runs after booking");
    assert!(reachable(&page, "#again").await, "no way on after booking");

    // Sales closed: said so, in words.
    db.client.close_event(ev).await.expect("close the sales");
    click(&page, "#again").await;
    click(&page, r#"circle.seat[data-seat="67"]"#).await;
    click(&page, "#hold").await;
    let closed = "Sales for this event have closed: no more seats can be bought.";
    assert!(
        eventually(WITHIN, || async { text(&page, "#message").await.starts_with(closed) }).await,
        "the refusal: {:?}",
        text(&page, "#message").await
    );
    assert_eq!(attribute(&page, "#message", "data-code").await.as_deref(), Some("sales_closed"));

    // The keyboard, on a desktop's page of another event: Tab from the
    // last link of the navigation reaches the first free seat, Space ticks
    // it, the right arrow moves to the next, Enter ticks that, and a
    // redraw keeps the focus and the ticks.
    let (kb, _) = theatre(&db, "Hamlet, matinée", None).await;
    let desk = chrome.browser.new_page(s.url(&format!("/shop/{kb}"))).await.expect("open the checkout page");
    desk.evaluate("document.querySelector('header.top nav a:last-child').focus()").await.expect("focus the nav");
    press(&desk, "Tab").await;
    assert_eq!(focused(&desk).await, "1", "Tab does not reach the first seat");
    press(&desk, " ").await;
    assert_eq!(attribute(&desk, r#"circle.seat[data-seat="1"]"#, "aria-checked").await.as_deref(), Some("true"));
    press(&desk, "ArrowRight").await;
    assert_eq!(focused(&desk).await, "2", "the arrow does not move to the next seat");
    press(&desk, "Enter").await;
    let chosen = text(&desk, "#selection").await;
    assert_eq!(chosen, "Stalls, row A, seat 1; Stalls, row A, seat 2 — total £90.00");
    assert!(refreshed(&desk).await, "the map is never redrawn");
    assert_eq!(focused(&desk).await, "2", "a redraw took the focus away");
    assert_eq!(count(&desk, r#"circle.seat.selected[aria-checked="true"]"#).await, 2, "a redraw lost the ticks");
    // Taken and unsellable seats are out of the tab order.
    assert_eq!(count(&desk, "circle.seat:not(.free)[tabindex]").await, 0);
    desk.evaluate(
        "{ const c = document.querySelector('#customer'); c.value = 'Kay Board'; c.dispatchEvent(new Event('input')); }",
    )
    .await
    .expect("the customer's name");
    desk.evaluate("document.querySelector('#hold').focus()").await.expect("focus Hold");
    press(&desk, "Enter").await;
    assert!(panel_in(&desk, "held", WITHIN).await, "no hold: {}", text(&desk, "#message").await);
    let held: Vec<i32> = sqlx::query_scalar(
        "SELECT s.seat_no FROM seatq.seats s JOIN seatq.bookings b ON b.id = s.booking_id
         WHERE s.event_id = $1 AND b.customer = 'Kay Board' ORDER BY 1",
    )
    .bind(kb)
    .fetch_all(&db.pool)
    .await
    .expect("held seats");
    assert_eq!(held, [1, 2]);

    // The dashboard on a phone: a worker's settings read in lines of words.
    let dash = phone(&chrome, &s.url("/dashboard")).await;
    assert!(
        eventually(WITHIN, || async { text(&dash, r#"[data-testid="worker-name"]"#).await == "phone-worker" }).await,
        "no worker on the dashboard"
    );
    let settings = rect(&dash, r#"[data-testid="worker-settings"]"#).await;
    assert!(settings.width >= width / 2.0, "the worker's settings squeezed into a column: {settings:?}");
    let dash_width: f64 = js(&dash, "document.documentElement.scrollWidth").await;
    assert!(dash_width <= width, "the dashboard scrolls sideways: {dash_width} px wide");
    dash.evaluate("document.querySelector('[data-testid=\"workers\"]').scrollIntoView()").await.expect("scroll");
    screen(&dash, "dashboard-phone.png").await;

    chrome.close().await;
    workers.stop().await;
    db.assert_invariants_and_close().await;
}

/// Sections, rows and seats named in every script a box office may use,
/// with markup among them: the seat map draws each name exactly as the venue
/// file gives it, as text (nothing of it read as markup), and a seat picked
/// is named so in the selection. A screenshot is saved as `scripts.png`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn labels_in_every_script_are_drawn_as_text() {
    const SECTIONS: [(&str, &str, [&str; 3]); 11] = [
        ("Партер", "Ряд А", ["один", "два", "три"]),
        ("Εξώστης", "Σειρά Β", ["ένα", "δύο", "τρία"]),
        ("الصالة", "صف أ", ["١", "٢", "٣"]),
        ("יציע", "שורה א", ["אחת", "שתיים", "שלוש"]),
        ("बालकनी", "पंक्ति क", ["एक", "दो", "तीन"]),
        ("ชั้นบน", "แถว ก", ["หนึ่ง", "สอง", "สาม"]),
        ("一楼", "甲排", ["一", "二", "三"]),
        ("二階席", "い列", ["いち", "に", "さん"]),
        ("발코니", "가열", ["하나", "둘", "셋"]),
        ("Loge \"Ø\" & Café", "Rang ½", ["1ᵉʳ", "2ᵉ", "3ᵉ"]),
        ("<b>Box</b>", "<script>x()</script>", ["<i>1</i>", "&amp;", "🎭"]),
    ];
    let mut csv = String::from("section,row,seat,pos,class,price,for_sale\n");
    for (section, row, seats) in SECTIONS {
        for (n, seat) in seats.iter().enumerate() {
            let quote = |s: &str| format!("\"{}\"", s.replace('"', "\"\""));
            csv.push_str(&format!("{},{},{},{},1,25,yes\n", quote(section), quote(row), quote(seat), n + 1));
        }
    }
    let venue = seatq::venue::parse_csv(csv.as_bytes()).expect("read the venue");
    assert!(venue.bad.is_empty(), "{:?}", venue.bad);
    let Some(chrome) = Chrome::launch().await else { return };
    let db = TestDb::new().await;
    let event = seatq::venue::NewEvent { name: "Babel <i>".into(), ..Default::default() };
    let ev = db.client.import_event(&event, &venue.seats).await.expect("import");
    let s = Served::start(&db, Settings::default()).await;
    let workers = Running::start(&db, 1, Config::default()).await;

    let page = chrome.browser.new_page(s.url(&format!("/shop/{ev}"))).await.expect("open the checkout page");
    let drawn: Vec<String> = page
        .evaluate("[...document.querySelectorAll('svg.seatmap text')].map(t => t.textContent)")
        .await
        .expect("the map's labels")
        .into_value()
        .expect("strings");
    let names: Vec<String> = page
        .evaluate("[...document.querySelectorAll('svg.seatmap circle.seat')].map(c => c.dataset.name)")
        .await
        .expect("the seats' names")
        .into_value()
        .expect("strings");
    assert_eq!(count(&page, "svg.seatmap b, svg.seatmap i, svg.seatmap script").await, 0, "markup was read");
    for (section, row, seats) in SECTIONS {
        assert!(drawn.iter().any(|t| t == section), "section {section:?} not drawn: {drawn:?}");
        assert!(drawn.iter().any(|t| t.contains(row)), "row {row:?} not drawn: {drawn:?}");
        for seat in seats {
            let name = format!("{section}, row {row}, seat {seat}");
            assert!(names.contains(&name), "{name:?} not among the seats: {names:?}");
        }
    }
    let title = page.get_title().await.ok().flatten().unwrap_or_default();
    assert!(title.contains("Babel <i>"), "the event's name in the title, as text: {title:?}");

    // Pick the Devanagari section's second seat and the marked-up one's third: named as given.
    // Typed keys are ASCII only (chromiumoxide's keyboard): the name is set as a paste would.
    page.evaluate(
        "{ const c = document.querySelector('#customer'); c.value = 'Zoë'; c.dispatchEvent(new Event('input')); }",
    )
    .await
    .expect("the customer's name");
    click(&page, r#"circle.seat[data-seat="14"]"#).await;
    click(&page, r#"circle.seat[data-seat="33"]"#).await;
    let chosen = text(&page, "#selection").await;
    assert!(chosen.contains("बालकनी, row पंक्ति क, seat दो"), "{chosen}");
    assert!(chosen.contains("<b>Box</b>, row <script>x()</script>, seat 🎭"), "{chosen}");
    click(&page, "#hold").await;
    assert!(panel_in(&page, "held", WITHIN).await, "no hold: {}", text(&page, "#message").await);
    screenshot(&page, "scripts.png").await;
    let held: Vec<i32> = sqlx::query_scalar(
        "SELECT s.seat_no FROM seatq.seats s JOIN seatq.bookings b ON b.id = s.booking_id
         WHERE s.event_id = $1 AND b.customer = 'Zoë' ORDER BY 1",
    )
    .bind(ev)
    .fetch_all(&db.pool)
    .await
    .expect("held seats");
    assert_eq!(held, [14, 33]);

    chrome.close().await;
    workers.stop().await;
    db.assert_invariants_and_close().await;
}

/// Markup and script as an attacker would type them: an element with a
/// handler, a script, an attribute broken out of (double and single quotes).
/// Each sets `window.__pwned` if it ever runs.
const PWNS: [&str; 4] = [
    r#"<img src=x onerror="window.__pwned=1">"#,
    "<script>window.__pwned=1</script>",
    r#""><svg onload=window.__pwned=1>"#,
    "' autofocus onfocus='window.__pwned=1",
];

/// What markup read as markup would have made.
const INJECTED: &str = "img, iframe, object, embed, [onerror], [onload], [onfocus], [autofocus], script:not([src])";

/// A new page at `url`, its own Content-Security-Policy bypassed: whatever
/// that policy forbids, the pages' escaping alone must keep markup inert.
async fn open(chrome: &Chrome, url: &str) -> Page {
    let page = chrome.browser.new_page("about:blank").await.expect("a new page");
    page.execute(SetBypassCspParams::new(true)).await.expect("bypass the page's CSP");
    page.goto(url).await.unwrap_or_else(|e| panic!("open {url}: {e}"));
    page
}

/// The page as its reader sees it: its title, its text (an SVG's drawn text
/// and tooltips included) and its attributes' values where they are shown
/// (a seat's name).
async fn shown(page: &Page) -> String {
    page.evaluate(
        "[document.title, document.body.innerText,
          ...[...document.querySelectorAll('svg text, svg title')].map(t => t.textContent),
          ...[...document.querySelectorAll('[data-name]')].map(e => e.dataset.name)].join('\\n')",
    )
    .await
    .expect("the page's text")
    .into_value()
    .expect("a string")
}

/// `page` (`what`) shows each of `texts` literally, as text; nothing of it
/// became an element, and no script of it ran.
async fn assert_inert(page: &Page, what: &str, texts: &[String]) {
    let text = shown(page).await;
    for t in texts {
        assert!(text.contains(t.as_str()), "{what}: {t:?} is not shown as text:\n{text}");
    }
    let injected: Vec<String> = page
        .evaluate(format!("[...document.querySelectorAll({})].map(e => e.outerHTML)", serde_json::json!(INJECTED)))
        .await
        .expect("elements")
        .into_value()
        .expect("strings");
    assert!(injected.is_empty(), "{what}: markup became elements: {injected:?}");
    let pwned: String =
        page.evaluate("typeof window.__pwned").await.expect("window.__pwned").into_value().expect("a string");
    assert_eq!(pwned, "undefined", "{what}: a script of the input ran");
}

/// Wait until the page's live part has been redrawn from the server at
/// least once since now (the elements there now are replaced).
async fn refreshed(page: &Page) -> bool {
    page.evaluate("document.querySelectorAll('#live *').forEach(e => e.__old = true)")
        .await
        .expect("mark the live part");
    eventually(WITHIN, || async {
        page.evaluate(
            "document.querySelector('#live').children.length > 0
             && [...document.querySelectorAll('#live *')].every(e => !e.__old)",
        )
        .await
        .ok()
        .and_then(|v| v.into_value::<bool>().ok())
        .unwrap_or(false)
    })
    .await
}

/// `s` percent-encoded whole, for a path segment.
fn encoded(s: &str) -> String {
    s.bytes().map(|b| if b.is_ascii_alphanumeric() { char::from(b).to_string() } else { format!("%{b:02X}") }).collect()
}

/// Every text field a page or an error shows, holding markup and script:
/// the event's name and venue, sections, rows and seats, customers' names
/// and errors, and input an error echoes. On the checkout page (before and
/// after its live part is redrawn, and through a hold and a confirmation
/// made on it), the index, the signed-in dashboard and an event's
/// dashboard page, and the API's errors opened in the browser, each shows
/// as text, makes no element and runs nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn markup_in_every_text_field_renders_inert() {
    let [img, script, svg, quote] = PWNS;
    let mut csv = String::from("section,row,seat,pos,class,price,for_sale\n");
    let q = |s: &str| format!("\"{}\"", s.replace('"', "\"\""));
    for (n, seat) in PWNS.iter().enumerate() {
        csv.push_str(&format!("{},{},{},{},1,25,yes\n", q(script), q(img), q(seat), n + 1));
    }
    for (n, seat) in ["1", "2", "3"].iter().enumerate() {
        csv.push_str(&format!("{},{},{},{},2,10,yes\n", q(quote), q(svg), seat, n + 1));
    }
    let venue = seatq::venue::parse_csv(csv.as_bytes()).expect("read the venue");
    assert!(venue.bad.is_empty(), "{:?}", venue.bad);
    let seat_names: Vec<String> =
        venue.seats.iter().map(|v| format!("{}, row {}, seat {}", v.section, v.row_label, v.label)).collect();
    assert_eq!(seat_names[0], format!("{script}, row {img}, seat {img}"));

    let Some(chrome) = Chrome::launch().await else { return };
    let db = TestDb::new().await;
    let name = format!("Gala {img} {quote}");
    let event = seatq::venue::NewEvent { name: name.clone(), venue: Some(svg.into()), ..Default::default() };
    let ev = db.client.import_event(&event, &venue.seats).await.expect("import");
    // Two dead requests whose customers and errors hold markup.
    let mut dead = Vec::new();
    for customer in [img, script] {
        let id = common::dead_request(&db, ev, 2, customer, &format!("test: died booking for {customer} {svg}")).await;
        dead.push(id);
    }
    let s = Served::start(&db, Settings { operator_token: Some(TOKEN.into()), ..Settings::default() }).await;
    let config = Config { sweep_interval: Duration::from_millis(200), name: Some(svg.into()), ..Config::default() };
    let workers = Running::start(&db, 1, config).await;
    let everywhere: Vec<String> = [name.clone(), svg.to_string()].into();

    // The checkout page: the event's name (title and heading), its venue,
    // the map's sections, rows and seats' names; then again once redrawn.
    let shop = open(&chrome, &s.url(&format!("/shop/{ev}"))).await;
    let title = shop.get_title().await.ok().flatten().unwrap_or_default();
    assert_eq!(title, format!("{name}: seats"));
    assert_eq!(text(&shop, "h1").await, name);
    let on_the_map: Vec<String> =
        everywhere.iter().chain(&seat_names).cloned().chain([script.into(), quote.into()]).collect();
    assert_inert(&shop, "the checkout page", &on_the_map).await;
    assert!(refreshed(&shop).await, "the checkout page's map is never redrawn");
    assert_inert(&shop, "the checkout page, redrawn", &on_the_map).await;

    // Hold and confirm the marked-up seats through the page, as a customer
    // whose name is markup: the page names them as text at every step.
    shop.evaluate(format!(
        "{{ const c = document.querySelector('#customer'); c.value = {}; c.dispatchEvent(new Event('input')); }}",
        serde_json::json!(img)
    ))
    .await
    .expect("the customer's name");
    for seat in 1..=4 {
        click(&shop, &format!(r#"circle.seat[data-seat="{seat}"]"#)).await;
    }
    let chosen = text(&shop, "#selection").await;
    for n in &seat_names[..4] {
        assert!(chosen.contains(n.as_str()), "{n:?} not in the selection: {chosen}");
    }
    click(&shop, "#hold").await;
    assert!(panel_in(&shop, "held", WITHIN).await, "no hold: {}", text(&shop, "#message").await);
    let held = text(&shop, "#hold-seats").await;
    assert_eq!(held, seat_names[..4].join("; "));
    assert_inert(&shop, "the checkout page, holding", &seat_names[..4]).await;
    click(&shop, "#confirm").await;
    assert!(panel_in(&shop, "booked", WITHIN).await, "not booked: {}", text(&shop, "#message").await);
    let booked = text(&shop, "#hold-message").await;
    assert!(booked.contains(&seat_names[..4].join("; ")), "{booked}");
    assert!(refreshed(&shop).await, "the checkout page's map is never redrawn");
    assert_inert(&shop, "the checkout page, booked", &on_the_map).await;
    let customers: Vec<(String, String, bool)> =
        sqlx::query_as("SELECT customer, state::text, token_hash IS NOT NULL FROM seatq.bookings WHERE event_id = $1")
            .bind(ev)
            .fetch_all(&db.pool)
            .await
            .expect("the booking");
    assert_eq!(customers, [(img.to_string(), "booked".to_string(), true)]);

    // An error the API answers to a bad field's value, fetched by the page:
    // JSON, not to be sniffed as anything else, quoting the value as given.
    let answer: (u16, String, String, String) = shop
        .evaluate(format!(
            "(async () => {{
                const r = await fetch('/api/requests', {{ method: 'POST', headers: {{ 'Content-Type': 'application/json' }},
                    body: JSON.stringify({{ kind: 'hold', payload: {{ event: {ev}, seats: [{svg}], customer: 'x' }} }}) }});
                return [r.status, r.headers.get('Content-Type'), r.headers.get('X-Content-Type-Options'),
                        (await r.json()).error.message];
            }})()",
            svg = serde_json::json!(svg)
        ))
        .await
        .expect("a refused hold")
        .into_value()
        .expect("its answer");
    assert_eq!((answer.0, answer.1.as_str(), answer.2.as_str()), (400, "application/json", "nosniff"), "{answer:?}");
    assert!(answer.3.contains(&seatq::validate::quoted(svg)), "{answer:?}");
    assert_inert(&shop, "the checkout page, after a refusal", &[]).await;
    screenshot(&shop, "markup-checkout.png").await;

    // The index: the event's name and venue.
    let index = open(&chrome, &s.url("/")).await;
    assert_inert(&index, "the index", &everywhere).await;

    // The dashboard, signed in (the operator's cookie), so that customers
    // show: their names in the dead requests' payloads and errors, the
    // worker's name, the event's name; then again once redrawn.
    let dash = chrome.browser.new_page("about:blank").await.expect("a new page");
    dash.execute(SetBypassCspParams::new(true)).await.expect("bypass the page's CSP");
    let cookie = CookieParam::builder().name("seatq_operator").value(TOKEN).url(s.url("/")).build().expect("a cookie");
    dash.set_cookie(cookie).await.expect("sign in");
    dash.goto(s.url("/dashboard")).await.expect("open the dashboard");
    assert!(text(&dash, ".signin").await.contains("Signed in"), "not signed in");
    assert_eq!(count(&dash, "tr[data-dead]").await, 2);
    let in_json = |s: &str| serde_json::json!(s).to_string().trim_matches('"').to_string();
    let customers_shown: Vec<String> = [
        in_json(img),
        in_json(script),
        format!("internal: test: died booking for {img} {svg}"),
        format!("internal: test: died booking for {script} {svg}"),
        name.clone(),
    ]
    .into();
    assert_inert(&dash, "the dashboard", &customers_shown).await;
    assert_eq!(text(&dash, r#"[data-testid="worker-name"]"#).await, svg);
    assert!(refreshed(&dash).await, "the dashboard is never redrawn");
    assert_inert(&dash, "the dashboard, redrawn", &customers_shown).await;
    screenshot(&dash, "markup-dashboard.png").await;

    // The event's dashboard page: its name, venue and map.
    let event_page = open(&chrome, &s.url(&format!("/dashboard/events/{ev}"))).await;
    assert_inert(&event_page, "the event's dashboard page", &on_the_map).await;
    assert!(refreshed(&event_page).await, "the event's page is never redrawn");
    assert_inert(&event_page, "the event's dashboard page, redrawn", &on_the_map).await;

    // The errors opened as pages: a path nothing serves, and ids that are
    // not numbers, whose errors quote them (one message for every route).
    for pwn in PWNS {
        let path = encoded(pwn);
        let echoed = in_json(&seatq::validate::quoted(pwn));
        for (url, echo) in [
            (format!("/{path}"), None),
            (format!("/shop/{path}"), Some(echoed.clone())),
            (format!("/api/requests/{path}"), Some(echoed.clone())),
            (format!("/api/holds/{path}/lapsed"), Some(echoed.clone())),
            (format!("/dashboard/events/{path}"), Some(echoed.clone())),
        ] {
            let error = open(&chrome, &s.url(&url)).await;
            let code = if echo.is_some() { "invalid_request" } else { "not_found" };
            assert_inert(&error, &url, &[code.to_string()].into_iter().chain(echo).collect::<Vec<_>>()).await;
            error.close().await.expect("close the page");
        }
    }

    // Nothing ran in any of the pages meanwhile (the live parts redrawn again).
    for (page, what) in [(&shop, "checkout"), (&dash, "dashboard"), (&event_page, "event")] {
        assert!(refreshed(page).await, "{what}: never redrawn");
        assert_inert(page, what, &[]).await;
    }
    assert_eq!(
        db.client.status(dead[0]).await.expect("the dead request").status,
        Status::Dead,
        "a dead request was retried by a script"
    );

    chrome.close().await;
    workers.stop().await;
    db.assert_invariants_and_close().await;
}
