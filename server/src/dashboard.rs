//! The operator dashboard (`/dashboard`): queue depth by status and the
//! oldest queued request's age, throughput and enqueue-to-outcome latency
//! over the last minutes (a chart), live workers with their heartbeats and
//! settings, dead requests with their last error and a retry action, and
//! per event the seats sold, held and free, its line and its waiting list
//! (parties, the seats they want, the longest wait, whether it is closed),
//! each with its seat map (`/dashboard/events/{id}`). Refreshed every two
//! seconds (`.../live`).
//!
//! Reading is open unless reads are protected; acting (retry) always needs
//! the operator token, which the sign-in form puts in an HttpOnly cookie.
//! With reads open, customers' names (in dead requests' payloads and
//! errors) are shown to a signed-in operator only: anyone may read the
//! figures, not who is booking.

use std::net::IpAddr;

use askama::Template;
use axum::Router;
use axum::extract::{Form, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use chrono::{DateTime, Utc};
use futures_util::stream::{self, StreamExt as _, TryStreamExt as _};
use seatq::{Status, WaitingList, WorkerInfo};
use serde::Deserialize;
use strum::VariantArray as _;

use crate::AppState;
use crate::api::{BUCKET_SECS, Bucket};
use crate::auth::{self, Access, Refusal, Verdict};
use crate::error::Id;
use crate::limits::ClientIp;
use crate::maps::{self, ClassRow, Drawing, EventSeats};
use crate::pages::{Nav, Page, PageError, render, when};

/// How far back the chart looks.
const CHART_MINUTES: u32 = 10;
/// How many dead requests and events the dashboard lists, the latest first.
const DEAD_SHOWN: i64 = 20;
const EVENTS_SHOWN: i64 = 30;

pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/dashboard", get(page))
        .route("/dashboard/live", get(live))
        .route("/dashboard/events/{id}", get(event_page))
        .route("/dashboard/events/{id}/live", get(event_live))
        .route("/dashboard/login", post(login))
        .route("/dashboard/logout", post(logout))
}

/// Who is looking, for the sign-in box.
struct Viewer {
    signed_in: bool,
    token_set: bool,
    protect_reads: bool,
}

impl Viewer {
    fn of(s: &AppState, headers: &HeaderMap, client: IpAddr) -> Viewer {
        Viewer {
            signed_in: auth::signed_in(s, headers, client),
            token_set: s.settings.operator_token.is_some(),
            protect_reads: s.settings.protect_reads,
        }
    }
}

#[derive(Template)]
#[template(path = "signin_page.html")]
struct SignInPage {
    nav: Nav,
    signed_in: bool,
    token_set: bool,
    protect_reads: bool,
}

/// The sign-in page (401, or 429 with `Retry-After` for an address slowed
/// down after wrong tokens) when reading is not allowed; none when it is.
fn denied(s: &AppState, headers: &HeaderMap, client: IpAddr) -> Option<Page> {
    let refused = auth::check(s, headers, client, Access::Read).err()?;
    let page = sign_in_page(s);
    Some(match refused {
        Refusal::SlowedDown(wait) => slowed_down_page(s, wait),
        Refusal::Error(_) => render(StatusCode::UNAUTHORIZED, &page),
    })
}

/// The sign-in page, 429 with `Retry-After`.
fn slowed_down_page(s: &AppState, wait: std::time::Duration) -> Page {
    let retry_after = auth::slowed_down(wait).headers().get(header::RETRY_AFTER).cloned();
    let mut page = render(StatusCode::TOO_MANY_REQUESTS, &sign_in_page(s))?;
    if let Some(retry_after) = retry_after {
        page.headers_mut().insert(header::RETRY_AFTER, retry_after);
    }
    Ok(page)
}

fn sign_in_page(s: &AppState) -> SignInPage {
    SignInPage {
        nav: Nav::of(s),
        signed_in: false,
        token_set: s.settings.operator_token.is_some(),
        protect_reads: s.settings.protect_reads,
    }
}

#[derive(Template)]
#[template(path = "dashboard.html")]
struct DashboardPage {
    nav: Nav,
    signed_in: bool,
    token_set: bool,
    protect_reads: bool,
    live: DashboardLive,
}

#[derive(Template)]
#[template(path = "dashboard_live.html")]
struct DashboardLive {
    requests: Vec<(&'static str, i64)>,
    oldest_queued: String,
    seats: Vec<(String, i64)>,
    chart: Chart,
    workers: Vec<WorkerRow>,
    dead: Vec<DeadRow>,
    dead_total: i64,
    events: Vec<EventRow>,
}

/// An event as the dashboard lists it: its seats, its line and waiting list.
struct EventRow {
    e: EventSeats,
    line: LineFigures,
}

/// How many waits to read at once: each is one statement, and the pool's
/// other connections serve customers meanwhile.
const LINES_AT_ONCE: usize = 4;

/// An event's line and waiting list as the dashboard shows them
/// ([`seatq::Client::waiting_list`]).
struct LineFigures {
    /// Requests queued in the event's line.
    in_line: String,
    /// Parties on its waiting list, and the seats they want.
    waiting: String,
    seats_wanted: String,
    /// How long the longest-waiting party has waited.
    oldest: String,
    /// Open or closed, and the order it is served in.
    list: String,
}

impl LineFigures {
    /// Event `e`'s figures from its waiting list `list`, read at `now`.
    fn of(e: &EventSeats, list: Option<&WaitingList>, now: DateTime<Utc>) -> LineFigures {
        // An event deleted between the reads: nothing to show.
        let Some(l) = list else {
            let none = || "–".to_string();
            return LineFigures {
                in_line: none(),
                waiting: none(),
                seats_wanted: none(),
                oldest: none(),
                list: none(),
            };
        };
        let list = match l.closed_at {
            Some(at) if at <= now => format!("closed {}", when(Some(at))),
            // Its parties were told `sales_closed`, and none joins since.
            _ if e.refusal.as_deref() == Some("sales_closed") => "closed with the sales".to_string(),
            _ => format!("open ({})", l.order.as_str().replace('_', " ")),
        };
        LineFigures {
            in_line: l.in_line.to_string(),
            waiting: l.waiting.to_string(),
            seats_wanted: l.seats_wanted.to_string(),
            oldest: l.oldest.map_or_else(|| "–".to_string(), |t| age(now - t)),
            list,
        }
    }

    /// Event `e`'s figures, read now.
    async fn read(client: &seatq::Client, e: &EventSeats) -> Result<LineFigures, seatq::Error> {
        Ok(LineFigures::of(e, client.waiting_list(e.id).await?.as_ref(), Utc::now()))
    }
}

/// A wait as an operator reads it: `42 s`, `12 min 5 s`, `3 h 7 min`.
fn age(d: chrono::TimeDelta) -> String {
    // A party that joined by the database's clock, a little ahead of the
    // server's, has waited 0 s, not a negative time.
    let secs = d.num_seconds().max(0);
    match secs {
        0..60 => format!("{secs} s"),
        60..3600 => format!("{} min {} s", secs / 60, secs % 60),
        _ => format!("{} h {} min", secs / 3600, secs % 3600 / 60),
    }
}

/// Each event's line and waiting list, a few read at once, in their order.
async fn lines(client: &seatq::Client, events: &[EventSeats]) -> Result<Vec<LineFigures>, seatq::Error> {
    let ids: Vec<i64> = events.iter().map(|e| e.id).collect();
    let lists: Vec<Option<WaitingList>> =
        stream::iter(ids).map(|id| client.waiting_list(id)).buffered(LINES_AT_ONCE).try_collect().await?;
    let now = Utc::now();
    Ok(events.iter().zip(&lists).map(|(e, l)| LineFigures::of(e, l.as_ref(), now)).collect())
}

/// Everything the dashboard shows, read at once; customers' names only to
/// a signed-in operator (`show_customers`).
async fn figures(s: &AppState, show_customers: bool) -> Result<DashboardLive, PageError> {
    let (stats, workers, buckets, dead, events) = tokio::try_join!(
        s.client.stats(),
        s.client.workers(),
        crate::api::throughput_buckets(s, CHART_MINUTES),
        s.client.dead_requests(DEAD_SHOWN),
        maps::event_seats(&s.client, EVENTS_SHOWN, None),
    )?;
    let waits = lines(&s.client, &events).await?;
    let count = |status: Status| stats.requests.get(status.as_str()).copied().unwrap_or(0);
    Ok(DashboardLive {
        requests: Status::VARIANTS.iter().map(|st| (st.as_str(), count(*st))).collect(),
        oldest_queued: stats.oldest_queued_secs.map_or_else(|| "–".to_string(), |s| format!("{s:.1} s")),
        seats: stats.seats.into_iter().collect(),
        chart: Chart::of(&buckets),
        workers: workers.iter().map(WorkerRow::of).collect(),
        dead: dead.iter().map(|d| DeadRow::of(d, show_customers)).collect(),
        dead_total: count(Status::Dead),
        events: events.into_iter().zip(waits).map(|(e, line)| EventRow { e, line }).collect(),
    })
}

async fn page(State(s): State<AppState>, ClientIp(client): ClientIp, headers: HeaderMap) -> Page {
    if let Some(page) = denied(&s, &headers, client) {
        return page;
    }
    let v = Viewer::of(&s, &headers, client);
    let live = figures(&s, v.signed_in).await?;
    let page = DashboardPage {
        nav: Nav::of(&s),
        signed_in: v.signed_in,
        token_set: v.token_set,
        protect_reads: v.protect_reads,
        live,
    };
    render(StatusCode::OK, &page)
}

async fn live(State(s): State<AppState>, ClientIp(client): ClientIp, headers: HeaderMap) -> Page {
    if let Some(page) = denied(&s, &headers, client) {
        return page;
    }
    let signed_in = auth::signed_in(&s, &headers, client);
    render(StatusCode::OK, &figures(&s, signed_in).await?)
}

/// A worker as the table shows it.
struct WorkerRow {
    name: String,
    host: String,
    pid: i32,
    started: String,
    heartbeat: String,
    settings: String,
}

impl WorkerRow {
    fn of(w: &WorkerInfo) -> WorkerRow {
        WorkerRow {
            name: w.name.clone(),
            host: w.host.clone(),
            pid: w.pid,
            started: when(Some(w.started_at)),
            heartbeat: format!("{:.1} s ago", w.heartbeat_age_secs),
            settings: w.settings.to_string(),
        }
    }
}

/// A dead request as the table shows it.
struct DeadRow {
    id: i64,
    kind: String,
    payload: String,
    attempts: i32,
    error: String,
    finished: String,
}

/// What stands for a customer's name the viewer may not see.
const MASKED: &str = "(customer hidden: sign in to see it)";

/// `d` without its customer's name, for a viewer who may not see it: the
/// payload's `customer` (and any `token`) and the name where the error
/// quotes it (a validation message) stand masked.
pub(crate) fn hide_customer(d: &mut seatq::RequestRecord) {
    let customer = d.payload.get("customer").and_then(|c| c.as_str()).map(str::to_string);
    if let Some(fields) = d.payload.as_object_mut() {
        for (name, value) in fields.iter_mut() {
            if name == "customer" || name == "token" {
                *value = serde_json::Value::from(MASKED);
            }
        }
    }
    if let (Some(name), Some(message)) = (customer.filter(|c| !c.trim().is_empty()), d.error_message.as_mut()) {
        *message = message.replace(&name, MASKED);
    }
}

impl DeadRow {
    fn of(d: &seatq::RequestRecord, show_customers: bool) -> DeadRow {
        let mut d = d.clone();
        if !show_customers {
            hide_customer(&mut d);
        }
        let error = format!("{}: {}", d.error_code.as_deref().unwrap_or("?"), d.error_message.as_deref().unwrap_or(""));
        let mut payload = d.payload.to_string();
        if payload.chars().count() > 120 {
            payload = payload.chars().take(119).chain(['…']).collect();
        }
        DeadRow { id: d.id, kind: d.kind.clone(), payload, attempts: d.attempts, error, finished: when(d.finished_at) }
    }
}

/// The throughput and latency chart, laid out for SVG: a bar per bucket
/// (requests finished), lines for p50 and p95 latency on a scale of their own.
struct Chart {
    minutes: u32,
    bucket_secs: i64,
    total: i64,
    width: i32,
    height: i32,
    left: i32,
    right: i32,
    top: i32,
    bottom: i32,
    max_count: i64,
    max_latency: String,
    first_label: String,
    last_label: String,
    bars: Vec<Bar>,
    p50: String,
    p95: String,
    /// The same points, each drawn too (a line of one point shows nothing).
    p50_dots: Vec<(i32, i32)>,
    p95_dots: Vec<(i32, i32)>,
}

struct Bar {
    x: i32,
    y: i32,
    width: i32,
    height: i32,
    title: String,
}

impl Chart {
    fn of(buckets: &[Bucket]) -> Chart {
        let (width, height, left, right, top, bottom) = (720, 180, 56, 664, 10, 160);
        let max_count = buckets.iter().map(|b| b.finished).max().unwrap_or(0).max(1);
        let max_ms = buckets.iter().filter_map(|b| b.p95_ms.or(b.p50_ms)).fold(0.0_f64, f64::max).max(1.0);
        let step = (right - left) as f64 / buckets.len().max(1) as f64;
        let y_of = |fraction: f64| bottom - ((bottom - top) as f64 * fraction).round() as i32;
        let bars = buckets
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let y = y_of(b.finished as f64 / max_count as f64);
                Bar {
                    x: left + (i as f64 * step).round() as i32 + 1,
                    y,
                    width: (step - 2.0).max(1.0) as i32,
                    height: bottom - y,
                    title: format!(
                        "{}: {} finished, p50 {}, p95 {}",
                        b.at.format("%H:%M:%S"),
                        b.finished,
                        ms(b.p50_ms),
                        ms(b.p95_ms)
                    ),
                }
            })
            .collect();
        let dots = |pick: fn(&Bucket) -> Option<f64>| -> Vec<(i32, i32)> {
            buckets
                .iter()
                .enumerate()
                .filter_map(|(i, b)| {
                    let x = left + ((i as f64 + 0.5) * step).round() as i32;
                    pick(b).map(|v| (x, y_of(v / max_ms)))
                })
                .collect()
        };
        let line = |dots: &[(i32, i32)]| dots.iter().map(|(x, y)| format!("{x},{y}")).collect::<Vec<_>>().join(" ");
        let (p50_dots, p95_dots) = (dots(|b| b.p50_ms), dots(|b| b.p95_ms));
        Chart {
            minutes: CHART_MINUTES,
            bucket_secs: BUCKET_SECS,
            total: buckets.iter().map(|b| b.finished).sum(),
            width,
            height,
            left,
            right,
            top,
            bottom,
            max_count,
            max_latency: ms(Some(max_ms)),
            first_label: buckets.first().map(|b| b.at.format("%H:%M:%S").to_string()).unwrap_or_default(),
            last_label: buckets.last().map(|b| b.at.format("%H:%M:%S").to_string()).unwrap_or_default(),
            bars,
            p50: line(&p50_dots),
            p95: line(&p95_dots),
            p50_dots,
            p95_dots,
        }
    }
}

/// Milliseconds as the chart labels them.
fn ms(v: Option<f64>) -> String {
    match v {
        None => "–".into(),
        Some(v) if v >= 1000.0 => format!("{:.1} s", v / 1000.0),
        Some(v) => format!("{v:.0} ms"),
    }
}

#[derive(Template)]
#[template(path = "event.html")]
struct EventPage {
    nav: Nav,
    event: EventSeats,
    subtitle: String,
    legend: Vec<(&'static str, &'static str)>,
    shop: bool,
    live: EventLive,
}

#[derive(Template)]
#[template(path = "event_live.html")]
struct EventLive {
    event: EventSeats,
    line: LineFigures,
    classes: Vec<ClassRow>,
    drawing: Drawing,
}

async fn event_page(State(s): State<AppState>, ClientIp(client): ClientIp, Id(id): Id, headers: HeaderMap) -> Page {
    if let Some(page) = denied(&s, &headers, client) {
        return page;
    }
    let (event, classes, drawing) = crate::shop::event_view(&s, id).await?;
    let line = LineFigures::read(&s.client, &event).await?;
    let page = EventPage {
        nav: Nav::of(&s),
        subtitle: crate::pages::subtitle(event.venue.as_deref(), event.starts_at),
        event: event.clone(),
        legend: maps::legend(),
        shop: false,
        live: EventLive { event, line, classes, drawing },
    };
    render(StatusCode::OK, &page)
}

async fn event_live(State(s): State<AppState>, ClientIp(client): ClientIp, Id(id): Id, headers: HeaderMap) -> Page {
    if let Some(page) = denied(&s, &headers, client) {
        return page;
    }
    let (event, classes, drawing) = crate::shop::event_view(&s, id).await?;
    let line = LineFigures::read(&s.client, &event).await?;
    render(StatusCode::OK, &EventLive { event, line, classes, drawing })
}

#[derive(Debug, Deserialize)]
struct SignIn {
    token: String,
}

/// Sign in: the right token goes into the cookie; back to the dashboard.
/// A wrong one shows the form again (403); too many wrong ones from one
/// address slow it down (429, `Retry-After`), the right one not compared
/// meanwhile.
async fn login(State(s): State<AppState>, ClientIp(client): ClientIp, Form(form): Form<SignIn>) -> Response {
    let token = form.token.trim();
    let status = match auth::verify(&s, token, client) {
        Verdict::Right => {
            let cookie = auth::cookie(&s, Some(token));
            return ([(header::SET_COOKIE, cookie)], Redirect::to("/dashboard")).into_response();
        }
        Verdict::Wrong => StatusCode::FORBIDDEN,
        Verdict::SlowedDown(wait) => return slowed_down_page(&s, wait).unwrap_or_else(IntoResponse::into_response),
    };
    render(status, &sign_in_page(&s)).unwrap_or_else(IntoResponse::into_response)
}

/// Sign out: the cookie is cleared.
async fn logout(State(s): State<AppState>) -> Response {
    ([(header::SET_COOKIE, auth::cookie(&s, None))], Redirect::to("/dashboard")).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(refusal: Option<&str>) -> EventSeats {
        EventSeats {
            id: 1,
            name: "e".into(),
            venue: None,
            starts_at: None,
            refusal: refusal.map(Into::into),
            seats: 4,
            sold: 4,
            held: 0,
            free: 0,
            not_for_sale: 0,
        }
    }

    #[test]
    fn waits_read_in_seconds_minutes_and_hours() {
        let ages: Vec<String> = [-3, 0, 59, 60, 754, 3600, 11_220].map(|s| age(chrono::TimeDelta::seconds(s))).into();
        assert_eq!(ages, ["0 s", "0 s", "59 s", "1 min 0 s", "12 min 34 s", "1 h 0 min", "3 h 7 min"]);
    }

    #[test]
    fn a_list_reads_open_closed_or_closed_with_the_sales() {
        let now = Utc::now();
        let list = |closed_at: Option<DateTime<Utc>>| WaitingList {
            order: seatq::WaitlistOrder::FirstFit,
            closed_at,
            in_line: 1,
            waiting: 2,
            seats_wanted: 5,
            oldest: Some(now - chrono::TimeDelta::seconds(90)),
        };
        let open = LineFigures::of(&event(None), Some(&list(None)), now);
        assert_eq!(
            [open.in_line, open.waiting, open.seats_wanted, open.oldest, open.list],
            ["1", "2", "5", "1 min 30 s", "open (first fit)"]
        );
        // Closed from a time to come: open until then.
        let later = LineFigures::of(&event(None), Some(&list(Some(now + chrono::TimeDelta::hours(1)))), now);
        assert_eq!(later.list, "open (first fit)");
        let closed = LineFigures::of(&event(None), Some(&list(Some(now))), now);
        assert!(closed.list.starts_with("closed 20"), "{}", closed.list);
        let sales = LineFigures::of(&event(Some("sales_closed")), Some(&list(None)), now);
        assert_eq!(sales.list, "closed with the sales");
        let gone = LineFigures::of(&event(None), None, now);
        assert_eq!([gone.waiting, gone.list], ["–", "–"]);
    }
}
