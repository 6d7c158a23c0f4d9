//! Processing one request under its own savepoint: named seats (all of them
//! or `seats_taken`), adjacent seats, and owner-checked confirm, cancel and
//! extend.
//! Cheapest-first holds and bookings are allocated a batch at a time by
//! [`crate::cheapest`], and come here only when a batch falls back to one
//! request at a time. Every lock is taken with SKIP LOCKED or NOWAIT: a
//! worker never waits on a row lock.

use crate::sql::{allocation, bookings};
use seatq_core::limits::MAX_HOLD_SECONDS;
use seatq_core::outcome::{BookingResult, BookingState, ErrorCode, SeatInfo, SeatState};
use seatq_core::request::{BookingRef, HoldExtension, Request, SeatRequest};
use seatq_core::sqlstate::is_lock_unavailable;
use sqlx::Connection;
use sqlx::postgres::PgConnection;

use crate::Strategy;
use crate::cheapest::{self, Wanted};
use crate::decision::{Decision, ProcessError};
use crate::fault::{self, Fault};
use crate::grant::{Grant, take_seats};

/// How many adjacent blocks a `together` request tries to lock before it
/// counts as contended.
const BLOCKS_TRIED: i64 = 16;

/// Process one decoded request. `request_id` is recorded on a new booking.
pub async fn process(
    conn: &mut PgConnection,
    request_id: i64,
    request: &Request,
    strategy: Strategy,
) -> Result<Decision, ProcessError> {
    match fault::injected(request) {
        Some(Fault::Panic) => panic!("injected fault: panic while processing request {request_id}"),
        Some(Fault::Error) => return Err(ProcessError::Internal("injected fault: unexpected error".into())),
        Some(Fault::Hang) => tokio::time::sleep(std::time::Duration::from_secs(3600)).await,
        Some(Fault::Slow) => tokio::time::sleep(fault::SLOW).await,
        Some(Fault::Terminate) => {
            sqlx::query(crate::sql::fault::TERMINATE_OWN_BACKEND).execute(&mut *conn).await?;
        }
        None => {}
    }
    if let Some(wanted) = Wanted::of(request_id, request) {
        let mut decisions = cheapest::allocate(conn, &[wanted], strategy).await?;
        return decisions.pop().ok_or_else(|| ProcessError::Internal("allocation gave no decision".into()));
    }
    match request {
        Request::Hold(r) => take(conn, request_id, r, Some(r.hold_secs())).await,
        Request::Book(r) => take(conn, request_id, r, None).await,
        Request::Confirm(r) => confirm(conn, request_id, r).await,
        Request::Cancel(r) => cancel(conn, request_id, r).await,
        Request::Extend(r) => extend(conn, request_id, r).await,
    }
}

/// The seats a request managed to lock, or why it got none.
enum Locked {
    Seats(Vec<SeatInfo>),
    No(Decision),
}

/// Named or adjacent seats: hold (`hold_secs` set) or book them.
async fn take(
    conn: &mut PgConnection,
    request_id: i64,
    r: &SeatRequest,
    hold_secs: Option<u32>,
) -> Result<Decision, ProcessError> {
    let rules: Option<(Option<String>, Option<i32>, bool, i64)> =
        sqlx::query_as(allocation::EVENT_RULES).bind(r.event).bind(&r.customer).fetch_optional(&mut *conn).await?;
    let Some((refusal, per_customer, customer_locked, used)) = rules else {
        return Ok(Decision::Reject(ErrorCode::UnknownEvent, format!("event {} does not exist", r.event)));
    };
    if let Some(code) = refusal {
        let code: ErrorCode = code.parse().map_err(|_| ProcessError::Internal(format!("unknown refusal {code}")))?;
        return Ok(Decision::Reject(code, cheapest::sales_message(code, r.event)));
    }
    if !customer_locked {
        // Another batch is booking for this customer on this event.
        return Ok(Decision::Contended);
    }
    let party = r.party_size() as usize;
    if let Some(limit) = per_customer
        && used + party as i64 > i64::from(limit)
    {
        return Ok(cheapest::limit_exceeded(limit, used, party, r.event));
    }
    let locked = if r.together { lock_together(conn, r).await? } else { lock_named(conn, r).await? };
    let mut seats = match locked {
        Locked::Seats(seats) => seats,
        Locked::No(decision) => return Ok(decision),
    };
    seats.sort_by_key(|s| s.seat);
    let grant = Grant { request_id, request: r, hold_secs, seats };
    let mut bookings = take_seats(conn, std::slice::from_ref(&grant)).await?;
    bookings.pop().map(Decision::Done).ok_or_else(|| ProcessError::Internal("no booking was made".into()))
}

/// Named seats: all of them, or `seats_taken`. Locked with NOWAIT: a seat
/// that an in-flight transaction holds is contention (it may be given back),
/// retried with backoff; `seats_taken` is answered from committed state.
async fn lock_named(conn: &mut PgConnection, r: &SeatRequest) -> Result<Locked, ProcessError> {
    let named = sqlx::query_as::<_, NamedSeat>(allocation::LOCK_NAMED).bind(r.event).bind(&r.seats);
    let rows = match named.fetch_all(&mut *conn).await {
        Ok(rows) => rows,
        Err(e) if is_lock_unavailable(&e) => return Ok(Locked::No(Decision::Contended)),
        Err(e) => return Err(e.into()),
    };
    let blocked: Vec<i32> = rows.iter().filter(|r| r.blocked).map(|r| r.seat.seat).collect();
    let taken: Vec<i32> = rows.iter().filter(|r| !r.free).map(|r| r.seat.seat).collect();
    let seats: Vec<SeatInfo> = rows.into_iter().map(|r| r.seat).collect();
    let unknown: Vec<i32> = r.seats.iter().copied().filter(|n| !seats.iter().any(|s| s.seat == *n)).collect();
    if !unknown.is_empty() {
        return Ok(Locked::No(Decision::Reject(
            ErrorCode::UnknownSeat,
            format!("event {} has no seat(s) {}", r.event, list(&unknown)),
        )));
    }
    if !blocked.is_empty() {
        return Ok(Locked::No(Decision::Reject(
            ErrorCode::SeatNotForSale,
            format!("seat(s) {} of event {} are not for sale", list(&blocked), r.event),
        )));
    }
    if !taken.is_empty() {
        return Ok(Locked::No(Decision::Reject(ErrorCode::SeatsTaken, format!("seat(s) {} are taken", list(&taken)))));
    }
    Ok(Locked::Seats(seats))
}

/// Adjacent seats in one row: find blocks by committed state, then lock one
/// block whole, giving back a partly locked block before trying the next.
async fn lock_together(conn: &mut PgConnection, r: &SeatRequest) -> Result<Locked, ProcessError> {
    let party = r.party_size() as i32;
    let class = r.class.unwrap_or_default();
    let blocks: Vec<Vec<i32>> = sqlx::query_scalar(allocation::ADJACENT_BLOCKS)
        .bind(r.event)
        .bind(class)
        .bind(party)
        .bind(BLOCKS_TRIED)
        .fetch_all(&mut *conn)
        .await?;
    if blocks.is_empty() {
        let has_class: bool =
            sqlx::query_scalar(allocation::HAS_CLASS).bind(r.event).bind(class).fetch_one(&mut *conn).await?;
        if !has_class {
            return Ok(Locked::No(cheapest::unknown_class(r.event, class)));
        }
        return Ok(Locked::No(Decision::Reject(
            ErrorCode::NoAdjacentSeats,
            format!("no row of event {} has {party} adjacent free seats of class {class}", r.event),
        )));
    }
    for block in blocks {
        let mut savepoint = conn.begin().await?;
        let seats: Vec<SeatInfo> =
            sqlx::query_as(allocation::LOCK_FREE_SEATS).bind(r.event).bind(&block).fetch_all(&mut *savepoint).await?;
        if seats.len() == block.len() {
            savepoint.commit().await?;
            return Ok(Locked::Seats(seats));
        }
        savepoint.rollback().await?;
    }
    Ok(Locked::No(Decision::Contended))
}

/// A named seat, locked, and whether it is free by committed state.
#[derive(sqlx::FromRow)]
struct NamedSeat {
    #[sqlx(flatten)]
    seat: SeatInfo,
    /// Not for sale.
    blocked: bool,
    free: bool,
}

/// Loaded and locked booking row.
#[derive(sqlx::FromRow)]
struct Booking {
    id: i64,
    #[sqlx(rename = "event_id")]
    event: i64,
    customer: String,
    state: BookingState,
    seats: Vec<i32>,
    total_cents: i64,
    held_until: Option<chrono::DateTime<chrono::Utc>>,
    lapsed: bool,
}

/// Lock booking `id` for request `request_id` and check that it is
/// `customer`'s. A booking another producer's request made is not found
/// ([`bookings::LOCK_BOOKING`]). `Err(decision)` ends the request.
async fn lock_owned(
    conn: &mut PgConnection,
    request_id: i64,
    id: i64,
    customer: &str,
) -> Result<Result<Booking, Decision>, ProcessError> {
    let locked = sqlx::query_as::<_, Booking>(bookings::LOCK_BOOKING).bind(id).bind(request_id);
    let row = match locked.fetch_optional(&mut *conn).await {
        Ok(row) => row,
        Err(e) if is_lock_unavailable(&e) => return Ok(Err(Decision::Contended)),
        Err(e) => return Err(e.into()),
    };
    let Some(booking) = row else {
        return Ok(Err(Decision::Reject(ErrorCode::BookingNotFound, format!("booking {id} does not exist"))));
    };
    if booking.customer != customer {
        return Ok(Err(Decision::Reject(ErrorCode::NotYourHold, format!("booking {id} belongs to another customer"))));
    }
    if booking.state == BookingState::Expired || booking.lapsed {
        let when = booking.held_until.map(|t| format!(" at {}", t.to_rfc3339())).unwrap_or_default();
        return Ok(Err(Decision::Reject(ErrorCode::HoldExpired, format!("the hold on booking {id} lapsed{when}"))));
    }
    Ok(Ok(booking))
}

/// Lock the seats the booking owns in `state`; `None` if another transaction
/// holds one of them. Fewer than the booking lists means the hold lapsed and
/// someone else took a seat.
async fn lock_seats_of(conn: &mut PgConnection, b: &Booking, state: SeatState) -> Result<Option<usize>, ProcessError> {
    match sqlx::query_as::<_, (i32, bool)>(bookings::LOCK_BOOKING_SEATS)
        .bind(b.id)
        .bind(b.event)
        .bind(&b.seats)
        .bind(state)
        .fetch_all(&mut *conn)
        .await
    {
        Ok(rows) => Ok(Some(rows.iter().filter(|(_, owned)| *owned).count())),
        Err(e) if is_lock_unavailable(&e) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

async fn confirm(conn: &mut PgConnection, request_id: i64, r: &BookingRef) -> Result<Decision, ProcessError> {
    let b = match lock_owned(conn, request_id, r.booking, &r.customer).await? {
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
    sqlx::query(bookings::CONFIRM).bind(b.id).bind(b.event).bind(&b.seats).execute(&mut *conn).await?;
    booking_result(conn, &b, BookingState::Booked).await
}

/// Lock a hold's seats, for confirm and extend: `Some` ends the request
/// (another transaction holds a seat, or the hold lapsed), `None` goes on.
async fn lock_hold(conn: &mut PgConnection, b: &Booking) -> Result<Option<Decision>, ProcessError> {
    Ok(match lock_seats_of(conn, b, SeatState::Held).await? {
        None => Some(Decision::Contended),
        Some(n) if n != b.seats.len() => {
            Some(Decision::Reject(ErrorCode::HoldExpired, format!("the hold on booking {} lapsed", b.id)))
        }
        Some(_) => None,
    })
}

fn cancelled(b: &Booking) -> Decision {
    Decision::Reject(ErrorCode::BookingCancelled, format!("booking {} was cancelled", b.id))
}

async fn cancel(conn: &mut PgConnection, request_id: i64, r: &BookingRef) -> Result<Decision, ProcessError> {
    let b = match lock_owned(conn, request_id, r.booking, &r.customer).await? {
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
    sqlx::query(bookings::CANCEL).bind(b.id).bind(b.event).bind(&b.seats).execute(&mut *conn).await?;
    booking_result(conn, &b, BookingState::Cancelled).await
}

/// Lengthen a live hold (the rule is in [`bookings::EXTEND`]). The same owner
/// and expiry checks as confirm; a booked booking has no hold to lengthen.
async fn extend(conn: &mut PgConnection, request_id: i64, r: &HoldExtension) -> Result<Decision, ProcessError> {
    let b = match lock_owned(conn, request_id, r.booking, &r.customer).await? {
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
    let (held_until, capped): (chrono::DateTime<chrono::Utc>, bool) = sqlx::query_as(bookings::EXTEND)
        .bind(b.id)
        .bind(b.event)
        .bind(&b.seats)
        .bind(f64::from(r.hold_secs()))
        .bind(f64::from(MAX_HOLD_SECONDS))
        .fetch_one(&mut *conn)
        .await?;
    let result = result_of(conn, &b, BookingState::Held).await?;
    Ok(Decision::Done(BookingResult { held_until: Some(held_until), capped, ..result }))
}

async fn booking_result(conn: &mut PgConnection, b: &Booking, state: BookingState) -> Result<Decision, ProcessError> {
    Ok(Decision::Done(result_of(conn, b, state).await?))
}

/// The booking as it now stands, in `state`.
async fn result_of(conn: &mut PgConnection, b: &Booking, state: BookingState) -> Result<BookingResult, ProcessError> {
    let seats = sqlx::query_as(bookings::SEAT_DETAILS).bind(b.event).bind(&b.seats).fetch_all(&mut *conn).await?;
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

fn list(seats: &[i32]) -> String {
    seats.iter().map(i32::to_string).collect::<Vec<_>>().join(", ")
}
