//! Managing a booking, one request at a time under its own savepoint:
//! owner-checked confirm, cancel and extend ([`process`]). The owner is who
//! holds the booking's hold token, or for a booking made without one, its
//! customer (in normal form); anyone else finds no such booking. A batch runs
//! these before its holds and bookings, so that those find the seats a
//! cancel gave back. Holds and bookings are allocated a batch at a time by
//! [`crate::allocate`], and come here only when a batch falls back to one
//! request at a time (or carries an injected fault); [`process`] hands them
//! on to it as a batch of one. Every lock is taken with SKIP LOCKED or
//! NOWAIT: a worker never waits on a row lock.

use crate::sql::bookings::{self, Booking};
use seatq_core::limits::MAX_HOLD_SECONDS;
use seatq_core::outcome::{BookingResult, BookingState, ErrorCode, SeatState};
use seatq_core::request::{BookingRef, HoldExtension, Request};
use seatq_core::sqlstate::is_lock_unavailable;
use seatq_core::{customer, token};
use sqlx::postgres::PgConnection;

use crate::Strategy;
use crate::allocate;
use crate::choose::Wanted;
use crate::decision::{Decision, ProcessError};
use crate::fault::{self, Fault};

/// Process one decoded request. `request_id` is recorded on a new booking;
/// `token_hash` is the hash of the hold token the request carried. `route`:
/// the request's event, on a database sharded by event
/// ([`seatq_core::sql::route`]).
pub async fn process(
    conn: &mut PgConnection,
    request_id: i64,
    producer: &str,
    token_hash: Option<&[u8]>,
    request: &Request,
    strategy: Strategy,
    route: Option<i64>,
) -> Result<Decision, ProcessError> {
    match fault::injected(request) {
        Some(Fault::Panic) => panic!("injected fault: panic while processing request {request_id}"),
        Some(Fault::Error) => return Err(ProcessError::Internal("injected fault: unexpected error".into())),
        Some(Fault::Hang) => tokio::time::sleep(std::time::Duration::from_secs(3600)).await,
        Some(Fault::Slow) => tokio::time::sleep(fault::SLOW).await,
        Some(Fault::Terminate) => {
            crate::sql::fault::TerminateOwnBackend.query().execute(&mut *conn).await?;
        }
        None => {}
    }
    let key = customer::normal_form(request.customer());
    if let Some(wanted) = Wanted::of(request_id, producer, token_hash, &key, request) {
        let mut decisions = allocate::allocate(conn, &[wanted], strategy, route).await?;
        return decisions.pop().ok_or_else(|| ProcessError::Internal("allocation gave no decision".into()));
    }
    match request {
        Request::Hold(_) | Request::Book(_) => Err(ProcessError::Internal("a hold or book took no seats".into())),
        Request::Confirm(r) => confirm(conn, Asking { request_id, token_hash, event: r.event, route }, r).await,
        Request::Cancel(r) => cancel(conn, Asking { request_id, token_hash, event: r.event, route }, r).await,
        Request::Extend(r) => extend(conn, Asking { request_id, token_hash, event: r.event, route }, r).await,
    }
}

/// The request asking to change a booking.
#[derive(Debug, Clone, Copy)]
struct Asking<'a> {
    request_id: i64,
    /// The hash of the hold token it carried.
    token_hash: Option<&'a [u8]>,
    /// The booking's event, if it named one: a booking of another is not found.
    event: Option<i64>,
    /// The request's event, on a database sharded by event.
    route: Option<i64>,
}

/// Lock booking `id` for the request asking and check that it is the
/// asker's ([`owned`]). A booking another producer's request made is not
/// found ([`bookings::LOCK_BOOKING`]). `Err(decision)` ends the request.
async fn lock_owned(
    conn: &mut PgConnection,
    asking: Asking<'_>,
    id: i64,
    customer: &str,
) -> Result<Result<Booking, Decision>, ProcessError> {
    let locked = bookings::LockBooking { booking: id, request: asking.request_id, route: asking.route }.query();
    let row = match locked.fetch_optional(&mut *conn).await {
        Ok(row) => row.filter(|b| asking.event.is_none_or(|event| event == b.event)),
        Err(e) if is_lock_unavailable(&e) => return Ok(Err(Decision::Contended)),
        Err(e) => return Err(e.into()),
    };
    Ok(owned(row, id, customer, asking.token_hash))
}

/// Whether the asker, naming `customer` and carrying a token hashed to
/// `token_hash`, may change booking `id`, as locked (`None`: not found): it
/// answers to that token ([`seatq_core::token::answers`]) and is that
/// customer's, and it is not a lapsed hold. `Err(decision)` ends the
/// request. A booking that is not the asker's is answered exactly as one
/// that does not exist, so that a stranger learns nothing from guessing ids.
fn owned(row: Option<Booking>, id: i64, customer: &str, token_hash: Option<&[u8]>) -> Result<Booking, Decision> {
    let not_found = || Decision::Reject(ErrorCode::BookingNotFound, format!("booking {id} does not exist"));
    let Some(booking) = row else {
        return Err(not_found());
    };
    // Both checks always run: how long a refusal takes says nothing of which failed.
    let answers = token::answers(booking.token_hash.as_deref(), token_hash);
    let theirs = customer::same(&booking.customer, customer);
    if !(answers & theirs) {
        return Err(not_found());
    }
    if booking.state == BookingState::Expired || booking.lapsed {
        let when = booking.held_until.map(|t| format!(" at {}", t.to_rfc3339())).unwrap_or_default();
        return Err(Decision::Reject(ErrorCode::HoldExpired, format!("the hold on booking {id} lapsed{when}")));
    }
    Ok(booking)
}

/// Lock the seats the booking owns in `state`; `None` if another transaction
/// holds one of them. Fewer than the booking lists means the hold lapsed and
/// someone else took a seat.
async fn lock_seats_of(conn: &mut PgConnection, b: &Booking, state: SeatState) -> Result<Option<usize>, ProcessError> {
    let lock = bookings::LockBookingSeats { booking: b.id, event: b.event, seats: &b.seats, state };
    match lock.query().fetch_all(&mut *conn).await {
        Ok(rows) => Ok(Some(rows.iter().filter(|r| r.owned).count())),
        Err(e) if is_lock_unavailable(&e) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

async fn confirm(conn: &mut PgConnection, asking: Asking<'_>, r: &BookingRef) -> Result<Decision, ProcessError> {
    let b = match lock_owned(conn, asking, r.booking, &r.customer).await? {
        Ok(b) => b,
        Err(decision) => return Ok(decision),
    };
    match b.state {
        BookingState::Booked => return booking_result(conn, &b, BookingState::Booked).await,
        BookingState::Cancelled => return Ok(cancelled(&b)),
        BookingState::Held | BookingState::Expired => {}
    }
    if let Some(ended) = lock_hold(conn, &b).await? {
        return Ok(ended);
    }
    bookings::Confirm { booking: b.id, event: b.event, seats: &b.seats }.query().execute(&mut *conn).await?;
    booking_result(conn, &b, BookingState::Booked).await
}

/// Lock a hold's seats, for confirm and extend: `Some` ends the request
/// (another transaction holds a seat, or the hold lapsed), `None` goes on.
async fn lock_hold(conn: &mut PgConnection, b: &Booking) -> Result<Option<Decision>, ProcessError> {
    Ok(hold_broken(b, lock_seats_of(conn, b, SeatState::Held).await?))
}

/// What the seats locked of a hold say, as [`lock_seats_of`] counts those
/// still the booking's (`None`: another transaction holds one): `Some` ends
/// the request, `None` goes on.
fn hold_broken(b: &Booking, owned: Option<usize>) -> Option<Decision> {
    match owned {
        None => Some(Decision::Contended),
        Some(n) if n != b.seats.len() => {
            Some(Decision::Reject(ErrorCode::HoldExpired, format!("the hold on booking {} lapsed", b.id)))
        }
        Some(_) => None,
    }
}

fn cancelled(b: &Booking) -> Decision {
    Decision::Reject(ErrorCode::BookingCancelled, format!("booking {} was cancelled", b.id))
}

async fn cancel(conn: &mut PgConnection, asking: Asking<'_>, r: &BookingRef) -> Result<Decision, ProcessError> {
    let b = match lock_owned(conn, asking, r.booking, &r.customer).await? {
        Ok(b) => b,
        Err(decision) => return Ok(decision),
    };
    if b.state == BookingState::Cancelled {
        return booking_result(conn, &b, BookingState::Cancelled).await;
    }
    // Live (lock_owned turned an expired one away), so it owns its seats.
    let Some(seats) = b.state.seats() else {
        return Err(ProcessError::Internal(format!("booking {} is {} and owns no seats", b.id, b.state)));
    };
    if lock_seats_of(conn, &b, seats).await?.is_none() {
        return Ok(Decision::Contended);
    }
    // The seats go to the event's waiting list first, later in this
    // transaction (`crate::batch`: once per event, at the end of the batch).
    bookings::Cancel { booking: b.id, event: b.event, seats: &b.seats }.query().execute(&mut *conn).await?;
    booking_result(conn, &b, BookingState::Cancelled).await
}

/// Lengthen a live hold (the rule is in [`bookings::EXTEND`]). The same owner
/// and expiry checks as confirm; a booked booking has no hold to lengthen.
async fn extend(conn: &mut PgConnection, asking: Asking<'_>, r: &HoldExtension) -> Result<Decision, ProcessError> {
    let b = match lock_owned(conn, asking, r.booking, &r.customer).await? {
        Ok(b) => b,
        Err(decision) => return Ok(decision),
    };
    match b.state {
        BookingState::Booked => {
            return Ok(Decision::Reject(
                ErrorCode::NotHeld,
                format!("booking {} is booked, not held: there is no hold to extend", b.id),
            ));
        }
        BookingState::Cancelled => return Ok(cancelled(&b)),
        BookingState::Held | BookingState::Expired => {}
    }
    if let Some(ended) = lock_hold(conn, &b).await? {
        return Ok(ended);
    }
    let extend = bookings::Extend {
        booking: b.id,
        event: b.event,
        seats: &b.seats,
        hold_secs: f64::from(r.hold_secs()),
        max_hold_secs: f64::from(MAX_HOLD_SECONDS),
    };
    let extended = extend.query().fetch_one(&mut *conn).await?;
    let result = result_of(conn, &b, BookingState::Held).await?;
    Ok(Decision::Done(BookingResult { held_until: Some(extended.until), capped: extended.capped, ..result }))
}

async fn booking_result(conn: &mut PgConnection, b: &Booking, state: BookingState) -> Result<Decision, ProcessError> {
    Ok(Decision::Done(result_of(conn, b, state).await?))
}

/// The booking as it now stands, in `state`.
async fn result_of(conn: &mut PgConnection, b: &Booking, state: BookingState) -> Result<BookingResult, ProcessError> {
    let seats = bookings::SeatDetails { event: b.event, seats: &b.seats }.query().fetch_all(&mut *conn).await?;
    Ok(BookingResult {
        booking: b.id,
        event: b.event,
        customer: b.customer.clone(),
        state,
        seats,
        total_cents: b.total_cents,
        held_until: None,
        capped: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn booking(state: BookingState, lapsed: bool) -> Booking {
        Booking {
            id: 41,
            event: 7,
            customer: "ann".into(),
            state,
            seats: vec![3, 4],
            total_cents: 2000,
            held_until: chrono::DateTime::from_timestamp(1_800_000_000, 0),
            lapsed,
            token_hash: None,
        }
    }

    fn refusal(d: Decision) -> (ErrorCode, String) {
        match d {
            Decision::Reject(code, message) => (code, message),
            other => panic!("not a refusal: {other:?}"),
        }
    }

    #[test]
    fn only_the_customer_changes_a_booking_made_without_a_token() {
        let (code, message) = refusal(owned(None, 41, "ann", None).expect_err("not found"));
        assert_eq!((code, message.as_str()), (ErrorCode::BookingNotFound, "booking 41 does not exist"));
        // Another customer hears what a stranger to every booking hears,
        // before that it lapsed.
        for lapsed in [false, true] {
            let other =
                refusal(owned(Some(booking(BookingState::Held, lapsed)), 41, "bob", None).expect_err("not his"));
            assert_eq!((other.0, other.1.as_str()), (code, message.as_str()));
        }
        for state in [BookingState::Held, BookingState::Booked, BookingState::Cancelled] {
            let b = owned(Some(booking(state, false)), 41, "ann", None).expect("hers");
            assert_eq!(b.state, state);
            // Her name in any case or width is her name.
            assert!(owned(Some(booking(state, false)), 41, " ANN ", None).is_ok());
        }
    }

    #[test]
    fn a_booking_made_with_a_token_answers_to_that_token_alone() {
        let token = seatq_core::HoldToken::new().expect("randomness").hash();
        let other = seatq_core::HoldToken::new().expect("randomness").hash();
        let made = || Booking { token_hash: Some(token.as_bytes().to_vec()), ..booking(BookingState::Held, false) };
        assert!(owned(Some(made()), 41, "ann", Some(token.as_bytes())).is_ok());
        let missing = refusal(owned(Some(made()), 41, "ann", None).expect_err("no token"));
        let wrong = refusal(owned(Some(made()), 41, "ann", Some(other.as_bytes())).expect_err("wrong token"));
        let nameless = refusal(owned(Some(made()), 41, "bob", Some(token.as_bytes())).expect_err("another name"));
        let absent = refusal(owned(None, 41, "ann", Some(token.as_bytes())).expect_err("none"));
        // A token on a booking made without one proves nothing.
        let untokened = refusal(
            owned(Some(booking(BookingState::Held, false)), 41, "ann", Some(token.as_bytes()))
                .expect_err("no token kept"),
        );
        for refused in [missing, wrong, nameless, untokened] {
            assert_eq!(refused, absent);
        }
    }

    #[test]
    fn a_lapsed_hold_is_expired_whether_or_not_the_sweeper_came() {
        for (state, lapsed) in
            [(BookingState::Held, true), (BookingState::Expired, false), (BookingState::Expired, true)]
        {
            let (code, message) = refusal(owned(Some(booking(state, lapsed)), 41, "ann", None).expect_err("lapsed"));
            assert_eq!(code, ErrorCode::HoldExpired);
            assert_eq!(message, "the hold on booking 41 lapsed at 2027-01-15T08:00:00+00:00");
        }
    }

    #[test]
    fn a_hold_goes_on_only_with_every_seat_still_its_own() {
        let b = booking(BookingState::Held, false);
        assert!(hold_broken(&b, Some(2)).is_none());
        assert!(matches!(hold_broken(&b, None), Some(Decision::Contended)), "a seat locked elsewhere");
        let (code, message) = refusal(hold_broken(&b, Some(1)).expect("a seat taken since"));
        assert_eq!((code, message.as_str()), (ErrorCode::HoldExpired, "the hold on booking 41 lapsed"));
        let (code, message) = refusal(cancelled(&b));
        assert_eq!((code, message.as_str()), (ErrorCode::BookingCancelled, "booking 41 was cancelled"));
    }
}
