//! The checkout page (`/shop/{event}`): the event's seat map as SVG, its
//! classes and prices, refreshed every two seconds (`/shop/{event}/live`);
//! the customer picks seats on the map (or a party size and class), holds
//! them, watches the countdown to `held_until`, then confirms or cancels.
//! Sold out, the customer may join the event's waiting list instead, and
//! the page shows their place until seats are held for them.
//! The page's script sends each step to the JSON API (`POST /api/requests`)
//! with an idempotency key, so a request the page makes is a request like
//! any other. A reference storefront to copy: server-rendered HTML, one
//! small script, no build step.

use askama::Template;
use axum::Router;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::routing::get;
use serde::Deserialize;

use crate::AppState;
use crate::error::{ApiError, Id};
use crate::maps::{self, ClassRow, Drawing, EventSeats};
use crate::pages::{Nav, Page, PageError, render, when};

/// How many events the index lists, the latest first.
const INDEX_EVENTS: i64 = 100;

pub(crate) fn routes() -> Router<AppState> {
    Router::new().route("/shop/{event}", get(page)).route("/shop/{event}/live", get(live))
}

#[derive(Template)]
#[template(path = "index.html")]
struct Index {
    nav: Nav,
    events: Vec<IndexEvent>,
}

struct IndexEvent {
    id: i64,
    name: String,
    venue: Option<String>,
    starts: String,
    free: i64,
    held: i64,
    sold: i64,
}

/// `/`: the events, with links to their pages.
pub(crate) async fn index(State(s): State<AppState>) -> Page {
    let events = maps::event_seats(&s.client, INDEX_EVENTS, None).await?;
    let events = events
        .into_iter()
        .rev()
        .map(|e| IndexEvent {
            starts: when(e.starts_at),
            id: e.id,
            name: e.name,
            venue: e.venue,
            free: e.free,
            held: e.held,
            sold: e.sold,
        })
        .collect();
    render(StatusCode::OK, &Index { nav: Nav::of(&s), events })
}

/// How long the page's customers wait on a waiting list, unless the page
/// is asked otherwise (`?wait_seconds=N`): half an hour, a customer's
/// patience with a page left open, and long enough for holds of the
/// default ten minutes to lapse and be handed on a few times.
pub(crate) const DEFAULT_WAIT_SECONDS: u32 = 1800;

/// `?hold_seconds=N`: how long the page's holds last; `?wait_seconds=N`:
/// how long its customers wait on a waiting list.
#[derive(Debug, Deserialize)]
struct ShopQuery {
    hold_seconds: Option<u32>,
    wait_seconds: Option<u32>,
}

#[derive(Template)]
#[template(path = "shop.html")]
struct ShopPage {
    nav: Nav,
    event: EventSeats,
    subtitle: String,
    hold_seconds: u32,
    wait_seconds: u32,
    parties: Vec<u32>,
    legend: Vec<(&'static str, &'static str)>,
    shop: bool,
    /// For the class picker.
    classes: Vec<ClassRow>,
    /// How the page's script writes money: the currency's sign or code.
    money_prefix: String,
    live: ShopLive,
}

#[derive(Template)]
#[template(path = "shop_live.html")]
struct ShopLive {
    classes: Vec<ClassRow>,
    drawing: Drawing,
}

/// The event, its classes and its map.
pub(crate) async fn event_view(s: &AppState, event: i64) -> Result<(EventSeats, Vec<ClassRow>, Drawing), PageError> {
    let Some(summary) = maps::event_seats(&s.client, 1, Some(event)).await?.pop() else {
        return Err(PageError(ApiError::new(StatusCode::NOT_FOUND, "unknown_event", format!("no event {event}"))));
    };
    let (classes, drawing) = classes_and_map(s, event).await?;
    Ok((summary, classes, drawing))
}

/// The event's classes (named, priced in the shop's currency) and its map.
async fn classes_and_map(s: &AppState, event: i64) -> Result<(Vec<ClassRow>, Drawing), PageError> {
    let classes = maps::availability(&s.client, event).await?;
    let seats = maps::seat_map(&s.client, event).await?;
    let currency = &s.settings.currency;
    Ok((maps::class_rows(&classes, &seats, currency), maps::draw(&seats, currency)))
}

async fn page(State(s): State<AppState>, Id(event): Id, Query(q): Query<ShopQuery>) -> Page {
    let hold_seconds = q.hold_seconds.unwrap_or(seatq::limits::DEFAULT_HOLD_SECONDS);
    if !(1..=seatq::limits::MAX_HOLD_SECONDS).contains(&hold_seconds) {
        let message = format!("hold_seconds: must be 1 to {}, not {hold_seconds}", seatq::limits::MAX_HOLD_SECONDS);
        return Err(PageError(ApiError::new(StatusCode::BAD_REQUEST, "hold_time_out_of_range", message)));
    }
    let wait_seconds = q.wait_seconds.unwrap_or(DEFAULT_WAIT_SECONDS);
    if !(1..=seatq::limits::MAX_WAIT_SECONDS).contains(&wait_seconds) {
        let message = format!("wait_seconds: must be 1 to {}, not {wait_seconds}", seatq::limits::MAX_WAIT_SECONDS);
        return Err(PageError(ApiError::invalid(message)));
    }
    let (event, classes, mut drawing) = event_view(&s, event).await?;
    drawing.pickable = true;
    let page = ShopPage {
        nav: Nav::of(&s),
        subtitle: crate::pages::subtitle(event.venue.as_deref(), event.starts_at),
        event,
        hold_seconds,
        wait_seconds,
        parties: (1..=seatq::limits::MAX_PARTY).collect(),
        legend: maps::legend(),
        shop: true,
        classes: classes.clone(),
        money_prefix: s.settings.currency.prefix(),
        live: ShopLive { classes, drawing },
    };
    render(StatusCode::OK, &page)
}

/// The part of the page that refreshes: classes and map.
async fn live(State(s): State<AppState>, Id(event): Id) -> Page {
    let (classes, mut drawing) = classes_and_map(&s, event).await?;
    drawing.pickable = true;
    render(StatusCode::OK, &ShopLive { classes, drawing })
}
