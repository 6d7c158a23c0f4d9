//! The seatq demo: seed two flights and import the sample theatre
//! (examples/venues/theatre.csv), start workers, enqueue a realistic mixed
//! batch (group bookings, named seats, side-by-side parties, checkout holds
//! that are confirmed, cancelled, extended or left to expire), and print what
//! happened, with seats as each venue names them, and the invariant check.
//! Safe to run again: each run makes its own events.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context as _, ensure};
use seatq::outcome::{booked_places, money};
use seatq::venue::NewEvent;
use seatq::{BookingRef, Client, HoldExtension, HoldToken, NewRequest, Request, SeatRequest, Status};
use seatq_worker::{Config, Worker};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

const FLIGHTS: i32 = 2;
const SEATS: i32 = 150;
/// The sample theatre: stalls, circle and boxes, some seats not for sale.
const THEATRE: &str = include_str!("../examples/venues/theatre.csv");
const WORKER_PROCESSES: usize = 4;
/// Checkout window of the demo's holds: short, so abandoned ones visibly lapse.
const HOLD_SECS: u32 = 4;

#[tokio::main]
async fn main() -> ExitCode {
    seatq_core::bin::init_tracing(false, "warn");
    match run().await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e:#}");
            if let Some(help) = e.chain().find_map(seatq_core::bin::help) {
                eprintln!("\n{help}");
            }
            ExitCode::from(2)
        }
    }
}

async fn run() -> anyhow::Result<bool> {
    let url = seatq::db::database_url();
    let client = Client::connect(&url).await?;
    let options = seatq::db::options(&url)?;
    println!(
        "seatq demo on postgres://{}:{}/{}",
        options.get_host(),
        options.get_port(),
        options.get_database().unwrap_or_default()
    );

    let stamp = chrono::Utc::now().format("%Y-%m-%d %H:%M:%S%.3f");
    let mut events = Vec::new();
    for k in 1..=FLIGHTS {
        let id = client.add_event(&format!("Demo {stamp} flight {k}"), SEATS, 6).await?;
        events.push(DemoEvent::flight(id, k));
    }
    println!("seeded {FLIGHTS} flights of {SEATS} seats: class 1 = seats 1-19, 2 = 20-49, 3 = 50+");
    let venue = seatq::venue::parse_csv(THEATRE.as_bytes())?;
    ensure!(venue.bad.is_empty(), "examples/venues/theatre.csv: {:?}", venue.bad);
    let event =
        NewEvent { name: format!("Demo {stamp} theatre"), venue: Some("The Playhouse".into()), ..Default::default() };
    let theatre = client.import_event(&event, &venue.seats).await?;
    let theatre = DemoEvent::theatre(&client, theatre).await?;
    println!(
        "imported the theatre from examples/venues/theatre.csv: {} seats ({} not for sale) in stalls, circle and boxes",
        venue.seats.len(),
        venue.seats.iter().filter(|s| !s.for_sale).count()
    );
    events.push(theatre);

    let shutdown = CancellationToken::new();
    let tracker = TaskTracker::new();
    let config = Config { concurrency: 2, sweep_interval: Duration::from_millis(250), ..Config::default() };
    for _ in 0..WORKER_PROCESSES {
        let worker = Worker::connect(&url, config.clone()).await.context("starting a worker")?;
        let token = shutdown.clone();
        tracker.spawn(async move { worker.run(token).await });
    }
    println!(
        "started {WORKER_PROCESSES} workers x {} batch loops, batch size {}",
        config.concurrency, config.batch_size
    );

    // Phase 1: the rush.
    let mut rng = fastrand::Rng::with_seed(2026);
    let batch = rush(&mut rng, &events)?;
    let started = Instant::now();
    let mut all_ids = enqueue(&client, &batch).await?;
    client.wait_all(&all_ids, Some(Duration::from_secs(300))).await?;
    let rush_secs = started.elapsed().as_secs_f64();
    println!("\n1. rush: {} requests enqueued and finished in {rush_secs:.2}s", batch.len());

    // Phase 2: checkout. Each held party confirms, cancels, asks for more
    // time (and confirms after the first window) or walks away.
    let mut checkout = Vec::new();
    let mut abandoned = Vec::new();
    let mut extended = Vec::new();
    for (id, sent) in all_ids.iter().zip(&batch) {
        let r = client.status(*id).await?;
        let Some(b) = r.booking().filter(|b| b.state == seatq::BookingState::Held) else {
            continue;
        };
        // The hold's token, kept by its customer since the hold was sent.
        let token = sent.request.token().cloned();
        let own = BookingRef { token: token.clone(), ..BookingRef::to(&b) };
        match rng.u8(0..100) {
            0..60 => checkout.push(NewRequest::from(Request::Confirm(own))),
            60..80 => checkout.push(NewRequest::from(Request::Cancel(own))),
            80..85 => {
                // Someone who learned the booking id and the name, but not the token.
                let stranger = BookingRef { token: None, ..own.clone() };
                checkout.push(NewRequest::from(Request::Cancel(stranger)));
                abandoned.push(own);
            }
            85..92 => {
                let more = HoldExtension {
                    event: None,
                    booking: b.booking,
                    customer: b.customer.clone(),
                    hold_seconds: Some(60),
                    token,
                };
                checkout.push(NewRequest::from(Request::Extend(more)));
                extended.push(own);
            }
            _ => abandoned.push(own),
        }
    }
    let ids = enqueue(&client, &checkout).await?;
    client.wait_all(&ids, Some(Duration::from_secs(300))).await?;
    all_ids.extend(&ids);
    println!(
        "2. checkout: {} confirms, cancels and extends ({} by a stranger without the hold's token, {} extends)",
        ids.len(),
        checkout.iter().filter(|n| matches!(&n.request, Request::Cancel(b) if b.token.is_none())).count(),
        extended.len()
    );

    // Phase 3: abandoned holds lapse; late confirms are refused, the sweeper
    // frees the seats; extended holds are still live and confirm.
    tokio::time::sleep(Duration::from_secs(u64::from(HOLD_SECS)) + Duration::from_millis(600)).await;
    let late: Vec<NewRequest> = abandoned.iter().take(5).cloned().map(|b| Request::Confirm(b).into()).collect();
    let ids = enqueue(&client, &late).await?;
    client.wait_all(&ids, Some(Duration::from_secs(300))).await?;
    all_ids.extend(&ids);
    let confirms: Vec<NewRequest> = extended.iter().cloned().map(|b| Request::Confirm(b).into()).collect();
    let extended_ids = enqueue(&client, &confirms).await?;
    client.wait_all(&extended_ids, Some(Duration::from_secs(300))).await?;
    all_ids.extend(&extended_ids);
    println!(
        "3. expiry: {} holds abandoned; {} late confirms after the {HOLD_SECS}s window; {} extended holds confirmed after it",
        abandoned.len(),
        ids.len(),
        extended_ids.len()
    );

    shutdown.cancel();
    tracker.close();
    tracker.wait().await;

    report(&client, &all_ids, &events, rush_secs, batch.len()).await
}

/// An event of the demo, and what its customers ask for.
struct DemoEvent {
    id: i64,
    name: String,
    /// Requests of each kind, as a multiple of a flight's.
    scale: usize,
    /// Each class, with the share of requests (in percent) that ask for it.
    classes: &'static [(i16, u8)],
    /// The seats customers name, each with the seat beside it if any:
    /// popular ones, so that collisions are likely.
    popular: Vec<(i32, Option<i32>)>,
}

impl DemoEvent {
    fn flight(id: i64, k: i32) -> DemoEvent {
        // Window seats of the front rows, and the seat beside each.
        let popular = (0..12).map(|row| (6 * row + 1, Some(6 * row + 2))).collect();
        DemoEvent { id, name: format!("flight {k}"), scale: 1, classes: &[(1, 15), (2, 25), (3, 60)], popular }
    }

    /// The theatre: the centre of the circle's front rows and of the first
    /// stalls row are popular, and some customers name a house seat (not for
    /// sale).
    async fn theatre(client: &Client, id: i64) -> anyhow::Result<DemoEvent> {
        let layout = client.seat_layout(id).await?;
        let wanted = |s: &seatq::LayoutSeat| match (s.section.as_str(), s.row_label.as_str()) {
            ("Circle", "A" | "B" | "C") => (5..=12).contains(&s.pos),
            ("Stalls", "A") => (7..=14).contains(&s.pos),
            ("Stalls", "F") => (10..=11).contains(&s.pos),
            _ => false,
        };
        let popular = layout
            .iter()
            .enumerate()
            .filter(|(_, s)| wanted(s))
            .map(|(i, s)| {
                let beside = layout.get(i + 1).filter(|n| n.section == s.section && n.row_label == s.row_label);
                (s.seat, beside.map(|n| n.seat))
            })
            .collect();
        let classes = &[(1, 15), (2, 40), (3, 40), (4, 5)];
        Ok(DemoEvent { id, name: "the theatre".into(), scale: 2, classes, popular })
    }

    fn class(&self, rng: &mut fastrand::Rng) -> i16 {
        let mut roll = rng.u8(0..100);
        for &(class, share) in self.classes {
            if roll < share {
                return class;
            }
            roll -= share;
        }
        self.classes[0].0
    }
}

/// The rush: per event, group bookings of 1-9 (some accepting a partial
/// allocation), parties wanting adjacent seats, customers naming seats (some
/// the same seats), and checkout holds, each with a hold token. Demand is
/// about three times supply.
fn rush(rng: &mut fastrand::Rng, events: &[DemoEvent]) -> anyhow::Result<Vec<NewRequest>> {
    let mut batch = Vec::new();
    let mut customer = 0;
    let mut next = || {
        customer += 1;
        format!("customer-{customer}")
    };
    for event in events {
        let (id, n) = (event.id, event.scale);
        for _ in 0..50 * n {
            let mut r = SeatRequest::new(id, event.class(rng), rng.u32(1..=9), next());
            r.partial = rng.u8(0..100) < 10;
            batch.push(Request::Book(r).into());
        }
        for _ in 0..20 * n {
            let mut r = SeatRequest::new(id, event.class(rng), rng.u32(2..=4), next());
            r.together = true;
            batch.push(Request::Book(r).into());
        }
        for _ in 0..40 * n {
            let (seat, beside) = event.popular[rng.usize(0..event.popular.len())];
            let seats = match beside {
                Some(beside) if rng.bool() => vec![seat, beside],
                _ => vec![seat],
            };
            batch.push(Request::Book(SeatRequest::named(id, seats, next())).into());
        }
        for _ in 0..60 * n {
            let mut r = SeatRequest::new(id, event.class(rng), rng.u32(1..=4), next());
            r.hold_seconds = Some(HOLD_SECS);
            r.token = Some(HoldToken::new()?);
            batch.push(Request::Hold(r).into());
        }
    }
    rng.shuffle(&mut batch);
    Ok(batch)
}

async fn enqueue(client: &Client, batch: &[NewRequest]) -> anyhow::Result<Vec<i64>> {
    let mut ids = Vec::with_capacity(batch.len());
    for chunk in batch.chunks(500) {
        ids.extend(client.enqueue_many(chunk).await?);
    }
    Ok(ids)
}

/// Print the outcomes, latency, seats and invariant check; true if healthy.
async fn report(
    client: &Client,
    ids: &[i64],
    events: &[DemoEvent],
    rush_secs: f64,
    rush_len: usize,
) -> anyhow::Result<bool> {
    println!("\noutcomes by kind:");
    let mut by_kind: BTreeMap<String, Vec<(String, i64)>> = BTreeMap::new();
    for (kind, outcome, n) in client.outcomes(ids).await? {
        by_kind.entry(kind).or_default().push((outcome, n));
    }
    for (kind, outcomes) in &by_kind {
        let cells: Vec<String> = outcomes.iter().map(|(o, n)| format!("{o} {n}")).collect();
        println!("  {kind:<8} {}", cells.join(", "));
    }

    println!("\nan example of each outcome:");
    let mut seen = std::collections::HashSet::new();
    for id in ids {
        let r = client.status(*id).await?;
        let outcome = r.error_code.clone().unwrap_or_else(|| r.status.as_str().to_string());
        if !seen.insert((r.kind.clone(), outcome.clone())) {
            continue;
        }
        let answer = match r.booking() {
            Some(b) => {
                format!("booking {} {}: {} for {}", b.booking, b.state, booked_places(&b.seats), money(b.total_cents))
            }
            // A refusal of named seats names them as the venue does.
            None => format!("{outcome}: {}", r.error_message.unwrap_or_default()),
        };
        println!("  #{} {} {} -> {answer}", r.id, r.kind, r.payload);
    }

    let latency = client.latency(ids).await?;
    let ms = |v: Option<f64>| v.map(|v| format!("{v:.1}")).unwrap_or_else(|| "-".into());
    println!(
        "\nlatency, enqueue to outcome (ms): p50 {} p95 {} p99 {} max {}",
        ms(latency.p50),
        ms(latency.p95),
        ms(latency.p99),
        ms(latency.max)
    );
    println!("rush throughput: {:.0} requests/s", rush_len as f64 / rush_secs);

    println!("\nseats per event (held = live holds; lapsed = expired, not yet swept; blocked = not for sale):");
    let mut taken = 0;
    for e in events {
        let seats = client.seats_by_state(e.id).await?;
        taken += client.seats_taken(e.id).await?;
        let cells: Vec<String> = seats.iter().map(|(s, n)| format!("{s} {n}")).collect();
        println!("  {} (event {}): {}", e.name, e.id, cells.join(", "));
    }
    if let Some(theatre) = events.last() {
        // What the theatre's storefront shows now, from the client's cache.
        println!("\n{} as its storefront shows it, by class:", theatre.name);
        let view = client.cached_availability(theatre.id).await?;
        for c in view.classes() {
            let price = c.prices.cheapest_free().map_or("-".to_string(), |p| format!("from {p}"));
            println!("  class {}: {} of {} seats free, {price}", c.class, c.free, c.seats);
        }
    }

    let mut granted = 0;
    for e in events {
        granted += client.seats_granted(e.id).await?;
    }
    let mut unfinished = 0;
    for id in ids {
        if client.status(*id).await?.status == Status::Queued {
            unfinished += 1;
        }
    }
    let violations = client.check_invariants(false).await?;
    println!("\ninvariants:");
    println!("  every demo request finished exactly once: {}", pass(unfinished == 0));
    println!("  seats taken {taken} = seats granted to live bookings {granted}: {}", pass(taken == granted));
    println!("  no seat in two bookings, every booking backed by its outcome: {}", pass(violations.is_empty()));
    for v in &violations {
        println!("    {}: {}", v.violation, v.detail);
    }
    Ok(unfinished == 0 && taken == granted && violations.is_empty())
}

fn pass(ok: bool) -> &'static str {
    if ok { "PASS" } else { "FAIL" }
}
