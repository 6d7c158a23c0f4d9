//! Taking the seats a batch granted, making them bookings: one statement
//! ([`allocation::TAKE_SEATS`]) creates every booking of the batch and marks
//! its seats held or booked. The last seat step of [`crate::allocate`]; the
//! seats were chosen by [`crate::choose`] and are locked by this
//! transaction.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use seatq_core::outcome::{BookingResult, BookingState, SeatInfo};
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

/// Create the bookings and take their (locked) seats, in one statement.
/// Returns the bookings in the order of `grants`. `route`: their one event,
/// on a database sharded by event ([`seatq_core::sql::route`]).
pub async fn take_seats(
    conn: &mut PgConnection,
    grants: &[Grant<'_>],
    route: Option<i64>,
) -> Result<Vec<BookingResult>, ProcessError> {
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
    let total = |g: &Grant| -> i64 { g.seats.iter().map(|s| i64::from(s.price_cents)).sum() };
    let state = |g: &Grant| if g.hold_secs.is_some() { BookingState::Held } else { BookingState::Booked };
    let requests: Vec<i64> = grants.iter().map(|g| g.request_id).collect();
    let events: Vec<i64> = grants.iter().map(|g| g.request.event).collect();
    let customers: Vec<&str> = grants.iter().map(|g| g.request.customer.as_str()).collect();
    let states: Vec<BookingState> = grants.iter().map(state).collect();
    let total_cents: Vec<i64> = grants.iter().map(total).collect();
    let hold_secs: Vec<Option<i32>> = grants.iter().map(|g| g.hold_secs.map(|s| s as i32)).collect();
    let producers: Vec<&str> = grants.iter().map(|g| g.producer).collect();
    let limited: Vec<bool> = grants.iter().map(|g| g.limited).collect();
    let token_hashes: Vec<Option<&[u8]>> = grants.iter().map(|g| g.token_hash).collect();
    // A key that is the name itself is not written twice: NULL stands for it.
    let customer_keys: Vec<Option<&str>> =
        grants.iter().map(|g| (g.customer_key != g.request.customer).then_some(g.customer_key)).collect();
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
        route,
    };
    let rows = take.query().fetch_all(&mut *conn).await?;
    let made: HashMap<i64, (i64, Option<DateTime<Utc>>, i64)> =
        rows.into_iter().map(|r| (r.request_id, (r.booking, r.held_until, r.taken))).collect();
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
