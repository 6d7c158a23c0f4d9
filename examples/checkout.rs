//! A web shop's checkout on seatq, from the first screen to the ticket:
//! show what is free, hold, pay (simulated), confirm; and the two other
//! endings, a customer who cancels and one whose hold lapses. Each hold
//! carries a hold token, kept in the customer's session: confirming,
//! extending and cancelling need it, and a stranger who guesses the booking
//! id and the customer's name is told there is no such booking.
//!
//! Run it against a local PostgreSQL (with `DATABASE_URL` unset it uses
//! `postgres://postgres@localhost:5432/seatq`, creating it if need be):
//!
//! ```sh
//! cargo run --example checkout
//! ```
//!
//! It starts a worker in-process so that it runs on its own; a shop runs
//! `seatq-worker` processes beside it instead. See docs/checkout.md.

use std::time::Duration;

use anyhow::{Context as _, bail};
use seatq::outcome::{booked_places, money};
use seatq::{
    BookingRef, BookingResult, Client, HoldExtension, HoldToken, NewRequest, Request, RequestRecord, SeatRequest,
};
use seatq_worker::{Config, Worker};
use tokio_util::sync::CancellationToken;

/// How long an answer may take before the shop gives up on it.
const ANSWER_WITHIN: Duration = Duration::from_secs(10);

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let url = seatq::db::database_url();
    let client = Client::connect(&url).await?;

    // The venue (a shop loads its own; see `seatq event import`), and a worker.
    let event = client.add_event(&format!("Checkout example {}", chrono::Utc::now()), 60, 6).await?;
    let shutdown = CancellationToken::new();
    let worker = Worker::connect(&url, Config { sweep_interval: Duration::from_millis(200), ..Config::default() })
        .await
        .context("starting a worker")?;
    let token = shutdown.clone();
    let running = tokio::spawn(async move { worker.run(token).await });

    // The first screen: what is free, per class, on every page view, from
    // the client's cache (page views share one read; a view is at most a
    // moment old, and a hold re-checks the seats anyway).
    let view = client.cached_availability(event).await?;
    for class in view.classes() {
        let from = class.prices.cheapest_free().unwrap_or_else(|| "-".to_string());
        println!("class {}: {} of {} seats free, from {from}", class.class, class.free, class.seats);
    }

    // 1. Ann holds two seats of class 2, pays, and confirms.
    let order = format!("ex-{}-{event}", std::process::id());
    let (held, ann) = hold(&client, event, "ann", &format!("{order}-ann"), 600).await?;
    let until = held.held_until.map(|t| t.format("%H:%M:%S UTC").to_string()).unwrap_or_default();
    println!("ann holds {} until {until} ({})", booked_places(&held.seats), money(held.total_cents));
    // A stranger who learned the booking id and her name, without her token.
    let stranger = BookingRef { token: Some(HoldToken::new()?), ..own(&held, &ann) };
    let refused = send(&client, Request::Cancel(stranger), &format!("{order}-stranger")).await?;
    println!("a stranger cancels ann's hold: {}", outcome(&refused));
    pay(&held).await;
    let done = send(&client, Request::Confirm(own(&held, &ann)), &format!("{order}-ann-confirm")).await?;
    println!("ann confirms: {}", outcome(&done));

    // 2. Bob holds, needs more time, then cancels.
    let (held, bob) = hold(&client, event, "bob", &format!("{order}-bob"), 600).await?;
    let more = HoldExtension {
        event: Some(event),
        booking: held.booking,
        customer: "bob".into(),
        hold_seconds: Some(900),
        token: Some(bob.clone()),
    };
    let extended = send(&client, Request::Extend(more), &format!("{order}-bob-extend")).await?;
    println!("bob extends his hold: {}", outcome(&extended));
    let cancelled = send(&client, Request::Cancel(own(&held, &bob)), &format!("{order}-bob-cancel")).await?;
    println!("bob cancels: {}", outcome(&cancelled));

    // 3. Cat holds for one second and walks away; her late confirm is refused.
    let (held, cat) = hold(&client, event, "cat", &format!("{order}-cat"), 1).await?;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let late = send(&client, Request::Confirm(own(&held, &cat)), &format!("{order}-cat-confirm")).await?;
    println!("cat confirms too late: {}", outcome(&late));

    // Every seat is where it should be.
    let violations = client.check_invariants(false).await?;
    shutdown.cancel();
    running.await.context("the worker task")?;
    if !violations.is_empty() {
        bail!("invariants broken: {violations:?}");
    }
    // An exact read (not the cache), to show the end state.
    let map = client.seat_map(event).await?;
    let taken: Vec<String> = map
        .iter()
        .filter(|s| s.state != seatq::SeatAvailability::Free)
        .map(|s| format!("{} {}", s.label, s.state))
        .collect();
    println!("invariants hold; seats not free now: {}", taken.join(", "));
    Ok(())
}

/// Hold two seats of class 2 for `customer`, under the order's key, with a
/// new hold token (a shop keeps it in the customer's session, and sends
/// the same one if it retries the hold).
async fn hold(
    client: &Client,
    event: i64,
    customer: &str,
    key: &str,
    secs: u32,
) -> anyhow::Result<(BookingResult, HoldToken)> {
    let token = HoldToken::new()?;
    let hold =
        SeatRequest { hold_seconds: Some(secs), token: Some(token.clone()), ..SeatRequest::new(event, 2, 2, customer) };
    let record = send(client, Request::Hold(hold), key).await?;
    let held = record.booking().with_context(|| format!("no hold for {customer}: {}", outcome(&record)))?;
    Ok((held, token))
}

/// Enqueue under an idempotency key (a retried click books once) and wait
/// for the answer.
async fn send(client: &Client, request: Request, key: &str) -> anyhow::Result<RequestRecord> {
    let new = NewRequest { idempotency_key: Some(key.to_string()), ..NewRequest::from(request) };
    let id = client.enqueue(new).await?;
    Ok(client.wait(id, Some(ANSWER_WITHIN)).await?)
}

/// The payment step: outside seatq, with no lock held while it runs.
async fn pay(held: &BookingResult) {
    println!("  paying {} for booking {} ...", money(held.total_cents), held.booking);
    tokio::time::sleep(Duration::from_millis(100)).await;
}

/// The booking of `held`, as its holder names it.
fn own(held: &BookingResult, token: &HoldToken) -> BookingRef {
    BookingRef { token: Some(token.clone()), ..BookingRef::to(held) }
}

fn outcome(r: &RequestRecord) -> String {
    match (r.booking(), &r.error_code) {
        (Some(b), _) => format!("booking {} {}", b.booking, b.state),
        (None, Some(code)) => format!("{code}: {}", r.error_message.as_deref().unwrap_or_default()),
        (None, None) => format!("{:?}", r.status),
    }
}
