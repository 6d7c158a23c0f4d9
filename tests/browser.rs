//! The pages in a real browser: headless Chromium (Debian's `chromium`)
//! driven over the DevTools protocol (`chromiumoxide`). The checkout page
//! holds, counts down and confirms exactly the seats clicked (checked in the
//! database), cancels a hold, shows a short hold lapsing, and the dashboard's figures match
//! the database while a worker runs; its retry button requeues a dead
//! request. Screenshots of both pages are saved under `target/browser/`.
//!
//! Without Chromium this test fails, saying how to install it: it never
//! passes by skipping.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use chromiumoxide::browser::{Browser, BrowserConfig};
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
/// names on the `PATH`.
fn chromium() -> PathBuf {
    if let Some(path) = std::env::var_os("SEATQ_CHROMIUM").map(PathBuf::from) {
        assert!(path.is_file(), "SEATQ_CHROMIUM names {}, which is not a file", path.display());
        return path;
    }
    let names = ["chromium", "chromium-browser", "google-chrome", "google-chrome-stable"];
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .flat_map(|dir| names.iter().map(move |n| dir.join(n)))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "no Chromium found for the browser test (looked for {names:?} on PATH): install Debian's \
                 package (apt-get install -y chromium, as .ci/run does) or set SEATQ_CHROMIUM to its path"
            )
        })
}

/// A headless Chromium with a fresh profile, closed when dropped.
struct Chrome {
    browser: Browser,
    handler: tokio::task::JoinHandle<()>,
    profile: PathBuf,
}

impl Chrome {
    async fn launch() -> Chrome {
        // A profile of its own per browser: tests run side by side, and
        // Chromium refuses a profile another instance holds.
        static LAUNCHES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = LAUNCHES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let profile = std::env::temp_dir().join(format!("seatq-chromium-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&profile);
        let config = BrowserConfig::builder()
            .chrome_executable(chromium())
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
        Chrome { browser, handler, profile }
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
        let element = page.find_element(selector).await.unwrap_or_else(|e| panic!("{selector}: {e}"));
        match element.click().await {
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checkout_and_dashboard_in_chromium() {
    let chrome = Chrome::launch().await;
    let db = TestDb::new().await;
    let venue = seatq::venue::parse_csv(std::io::BufReader::new(
        std::fs::File::open("examples/venues/theatre.csv").expect("the sample theatre"),
    ))
    .expect("read the venue");
    let hamlet =
        seatq::venue::NewEvent { name: "Hamlet".into(), venue: Some("The Globe".into()), ..Default::default() };
    let ev = db.client.import_event(&hamlet, &venue.seats).await.expect("import");
    let s = Served::start(&db, Settings { operator_token: Some(TOKEN.into()), ..Settings::default() }).await;
    let config =
        Config { sweep_interval: Duration::from_millis(200), name: Some("browser-worker".into()), ..Config::default() };
    let workers = Running::start(&db, 1, config).await;

    // Checkout: pick three seats on the map, hold, see the countdown, confirm.
    let page = chrome.browser.new_page(s.url(&format!("/shop/{ev}"))).await.expect("open the checkout page");
    assert_eq!(count(&page, "svg.seatmap circle.seat").await, venue.seats.len());
    click(&page, "#customer").await;
    page.find_element("#customer").await.expect("name field").type_str("Ann Browser").await.expect("type");
    let wanted = [45, 46, 47];
    for seat in wanted {
        click(&page, &format!(r#"circle.seat[data-seat="{seat}"]"#)).await;
    }
    let chosen = text(&page, "#selection").await;
    for seat in wanted {
        let v = &venue.seats[seat as usize - 1];
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
    let chrome = Chrome::launch().await;
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
