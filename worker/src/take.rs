//! Taking the seats a batch granted, making them bookings: one statement
//! ([`allocation::TAKE_SEATS`]) creates every booking of the batch and marks
//! its seats held or booked. The last seat step of [`crate::allocate`]; the
//! seats were chosen by [`crate::choose`] and are locked by this
//! transaction.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use seatq_core::outcome::{BookingResult, BookingState, SeatInfo, SeatState};
use seatq_core::request::SeatRequest;
use sqlx::postgres::PgConnection;

use crate::decision::ProcessError;
use crate::sql::allocation;

/// Seats granted to one request, to be taken (with others) by [`take_seats`].
#[derive(Debug)]
pub struct Grant<'a> {
    pub request_id: i64,
    /// The request's producer, as claimed: the booking is its.
    pub producer: &'a str,
    /// The hash of the request's hold token: the booking answers to it.
    pub token_hash: Option<&'a [u8]>,
    /// The customer in normal form: who the per-customer limit counts.
    pub customer_key: &'a str,
    pub request: &'a SeatRequest,
    /// Hold for this long; `None` books.
    pub hold_secs: Option<u32>,
    /// Locked by this transaction, in seat-number order.
    pub seats: Vec<SeatInfo>,
    /// The event has a per-customer limit (as this batch read its rules):
    /// the booking counts toward it.
    pub limited: bool,
}

/// What a grant's booking costs in all.
fn total(g: &Grant) -> i64 {
    g.seats.iter().map(|s| i64::from(s.price_cents)).sum()
}

/// Held (with a hold time) or booked.
fn state(g: &Grant) -> BookingState {
    if g.hold_secs.is_some() { BookingState::Held } else { BookingState::Booked }
}

/// Per request, the booking made for it: its id, expiry and seats taken.
type Made = HashMap<i64, (i64, Option<DateTime<Utc>>, i64)>;

/// Create the bookings and take their (locked) seats, in one statement
/// (routed to one event, in two: [`take_routed`]). Returns the bookings in
/// the order of `grants`. `route`: their one event, on a database sharded
/// by event ([`seatq_core::sql::route`]).
pub async fn take_seats(
    conn: &mut PgConnection,
    grants: &[Grant<'_>],
    route: Option<i64>,
) -> Result<Vec<BookingResult>, ProcessError> {
    let made = match route {
        None => take_in_one(conn, grants).await?,
        Some(event) => take_routed(conn, grants, event).await?,
    };
    grants
        .iter()
        .map(|g| {
            let &(booking, held_until, taken) = made
                .get(&g.request_id)
                .ok_or_else(|| ProcessError::Internal(format!("no booking was made for request {}", g.request_id)))?;
            // The seats were locked a moment ago; anything else is a bug, and
            // the caller rolls back.
            if taken != g.seats.len() as i64 {
                return Err(ProcessError::Internal(format!("locked {} seats but changed {taken}", g.seats.len())));
            }
            Ok(BookingResult {
                booking,
                event: g.request.event,
                customer: g.request.customer.clone(),
                state: state(g),
                seats: g.seats.clone(),
                total_cents: total(g),
                held_until,
                capped: false,
            })
        })
        .collect()
}

/// A grant's customer key, unless it is the name itself (NULL stands for it,
/// so that it is not written twice).
fn key_of<'g>(g: &Grant<'g>) -> Option<&'g str> {
    (g.customer_key != g.request.customer).then_some(g.customer_key)
}

/// [`allocation::TAKE_SEATS`]: every booking and seat in one statement.
async fn take_in_one(conn: &mut PgConnection, grants: &[Grant<'_>]) -> Result<Made, ProcessError> {
    let seat_count: usize = grants.iter().map(|g| g.seats.len()).sum();
    let mut seat_requests = Vec::with_capacity(seat_count);
    let mut seat_events = Vec::with_capacity(seat_count);
    let mut seat_numbers = Vec::with_capacity(seat_count);
    for g in grants {
        for s in &g.seats {
            seat_requests.push(g.request_id);
            seat_events.push(g.request.event);
            seat_numbers.push(s.seat);
        }
    }
    let requests: Vec<i64> = grants.iter().map(|g| g.request_id).collect();
    let events: Vec<i64> = grants.iter().map(|g| g.request.event).collect();
    let customers: Vec<&str> = grants.iter().map(|g| g.request.customer.as_str()).collect();
    let states: Vec<BookingState> = grants.iter().map(state).collect();
    let total_cents: Vec<i64> = grants.iter().map(total).collect();
    let hold_secs: Vec<Option<i32>> = grants.iter().map(|g| g.hold_secs.map(|s| s as i32)).collect();
    let producers: Vec<&str> = grants.iter().map(|g| g.producer).collect();
    let limited: Vec<bool> = grants.iter().map(|g| g.limited).collect();
    let token_hashes: Vec<Option<&[u8]>> = grants.iter().map(|g| g.token_hash).collect();
    let customer_keys: Vec<Option<&str>> = grants.iter().map(key_of).collect();
    let take = allocation::TakeSeats {
        requests: &requests,
        events: &events,
        customers: &customers,
        states: &states,
        total_cents: &total_cents,
        hold_secs: &hold_secs,
        seat_requests: &seat_requests,
        seat_events: &seat_events,
        seat_numbers: &seat_numbers,
        producers: &producers,
        limited: &limited,
        token_hashes: &token_hashes,
        customer_keys: &customer_keys,
    };
    let rows = take.query().fetch_all(&mut *conn).await?;
    Ok(rows.into_iter().map(|r| (r.request_id, (r.booking, r.held_until, r.taken))).collect())
}

/// Routed to one event (Citus): the bookings in multi-row inserts (a few,
/// of powers of two: [`allocation::insert_bookings`]), then their seats
/// ([`allocation::TAKE_BOOKED_SEATS`]), each on the event's node alone. A
/// hold lasts its time from the transaction's, and never past the event's
/// sales ([`allocation::SALES_END`]), as in `TAKE_SEATS`.
async fn take_routed(conn: &mut PgConnection, grants: &[Grant<'_>], event: i64) -> Result<Made, ProcessError> {
    if grants.is_empty() {
        return Ok(Made::new());
    }
    let sales = allocation::SalesEnd { event }.query().fetch_one(&mut *conn).await?;
    let seats: Vec<Vec<i32>> = grants.iter().map(|g| g.seats.iter().map(|s| s.seat).collect()).collect();
    let bookings: Vec<allocation::NewBooking> = grants
        .iter()
        .zip(&seats)
        .map(|(g, seats)| allocation::NewBooking {
            event: g.request.event,
            customer: &g.request.customer,
            state: state(g),
            seats,
            total_cents: total(g),
            held_until: g.hold_secs.map(|secs| {
                let until = sales.now + chrono::Duration::seconds(i64::from(secs));
                sales.ends.map_or(until, |ends| until.min(ends))
            }),
            request: g.request_id,
            producer: g.producer,
            limited: g.limited,
            token_hash: g.token_hash,
            customer_key: key_of(g),
        })
        .collect();
    let mut made = Made::new();
    for chunk in allocation::InsertBookings::chunks(&bookings) {
        for r in chunk.query().fetch_all(&mut *conn).await? {
            made.insert(r.request_id, (r.booking, r.held_until, 0));
        }
    }
    let (mut events, mut numbers, mut owners, mut states, mut until) = (vec![], vec![], vec![], vec![], vec![]);
    for g in grants {
        let Some(&(booking, held_until, _)) = made.get(&g.request_id) else { continue };
        for s in &g.seats {
            events.push(g.request.event);
            numbers.push(s.seat);
            owners.push(booking);
            states.push(if held_until.is_some() { SeatState::Held } else { SeatState::Booked });
            until.push(held_until);
        }
    }
    let give = allocation::TakeBookedSeats {
        events: &events,
        seats: &numbers,
        bookings: &owners,
        states: &states,
        held_until: &until,
        route: Some(event),
    };
    let mut taken: HashMap<i64, i64> = HashMap::new();
    for booking in give.query().fetch_all(&mut *conn).await?.into_iter().flatten() {
        *taken.entry(booking).or_default() += 1;
    }
    for (booking, _, count) in made.values_mut() {
        *count = taken.get(booking).copied().unwrap_or(0);
    }
    Ok(made)
}
