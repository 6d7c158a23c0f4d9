//! Waiting for outcomes over HTTP: a long-poll (`GET
//! /api/requests/{id}/wait`) and Server-Sent Events (`GET
//! /api/requests/{id}/events`). Both wait through [`seatq::Client::wait`],
//! so every waiter of the process shares the client's one listening
//! connection and one batched poll, however many customers wait at once.
//! A request that asked to wait for seats (`wait_seconds`) has news before
//! its outcome, its place in its event's line or on its waiting list, which
//! nothing announces: while followed, it is read for that every 2 s.

use std::convert::Infallible;
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::stream::Stream;
use seatq::RequestRecord;
use seatq::outcome::Status;
use serde::Deserialize;
use tokio::time::Instant;

use crate::AppState;
use crate::error::{Answer, ApiError, Id, Params};
use crate::holder::Holder;

/// `?timeout=SECS`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct Timeout {
    /// Seconds to wait at most (default and most: the server's longest wait,
    /// a little under its request timeout).
    pub timeout: Option<f64>,
}

/// The longest wait of `secs` seconds the server allows: cut to its
/// longest wait (infinity too); `NaN` is none.
fn cut(s: &AppState, secs: f64) -> Duration {
    let most = s.settings.max_wait();
    if secs > 0.0 { Duration::try_from_secs_f64(secs).map_or(most, |w| w.min(most)) } else { Duration::ZERO }
}

/// How often a queued line request is read while `?wait` waits for it to
/// join its event's waiting list (a batch that claims it decides at once).
const LISTED_POLL: Duration = Duration::from_millis(100);
/// How often a request in its event's line or on its waiting list is read
/// for its place while a long-poll or an event stream follows it: a read
/// (two statements) per follower every 2 s, as often as the checkout page
/// redraws its map, however long the customer waits (a line may form hours
/// before the sales open). Its finish needs no read: the waiter hub hears
/// it (`seatq_done`).
const PLACE_POLL: Duration = Duration::from_secs(2);

/// `POST /api/requests?wait=SECS`: the request once finished or on its
/// event's waiting list (then with its place: its outcome may be hours
/// away), or as it stands after `secs` (cut to the server's longest wait).
pub(crate) async fn outcome(s: &AppState, id: i64, secs: f64) -> Result<RequestRecord, seatq::Error> {
    let answer = tokio::select! {
        answer = s.client.wait(id, Some(cut(s, secs))) => answer,
        listed = listed(s, id) => listed,
    };
    match answer {
        Err(seatq::Error::Timeout(_)) => s.client.status(id).await,
        answer => answer,
    }
}

/// A request that asked to wait, once it is no longer queued (on its
/// event's waiting list, or finished); never, for any other request, which
/// the waiter hub answers alone. Not read before [`LISTED_POLL`]: most
/// requests are finished by then, and cost no read of their own.
async fn listed(s: &AppState, id: i64) -> Result<RequestRecord, seatq::Error> {
    tokio::time::sleep(LISTED_POLL).await;
    let first = s.client.status(id).await?;
    if first.status != Status::Queued {
        return Ok(first);
    }
    read_until(s, &first, LISTED_POLL, |r| r.status != Status::Queued).await
}

/// `first` (not finished) once there is news of it for its maker, or as it
/// stands when `wait` runs out: finished, or, in its event's line or on its
/// waiting list, moved ([`moved`]).
async fn follow(s: &AppState, first: &RequestRecord, wait: Duration) -> Result<RequestRecord, seatq::Error> {
    if wait.is_zero() {
        return Ok(first.clone());
    }
    match news(s, first, Instant::now() + wait).await? {
        Some(record) => Ok(record),
        None => s.client.status(first.id).await,
    }
}

/// What became of `last` (not finished) by `deadline`: the request once it
/// is finished or has moved ([`moved`]), or `None` when the deadline came
/// first.
async fn news(s: &AppState, last: &RequestRecord, deadline: Instant) -> Result<Option<RequestRecord>, seatq::Error> {
    let wait = deadline.saturating_duration_since(Instant::now());
    let answer = tokio::select! {
        answer = s.client.wait(last.id, Some(wait)) => answer,
        moved = moved(s, last) => moved,
    };
    match answer {
        Err(seatq::Error::Timeout(_)) => Ok(None),
        answer => answer.map(Some),
    }
}

/// `last`, a request in its event's line, once it stands otherwise: on the
/// waiting list, or with another place in the line or on the list (or
/// finished). Never for a request not in a line: the waiter hub answers
/// finished requests, and nothing else about them changes.
async fn moved(s: &AppState, last: &RequestRecord) -> Result<RequestRecord, seatq::Error> {
    read_until(s, last, PLACE_POLL, |r| r.status != last.status || r.place != last.place).await
}

/// Request `last` read every `every` until `news` says it has some; never
/// for a request not in a line (the waiter hub alone answers those).
async fn read_until(
    s: &AppState,
    last: &RequestRecord,
    every: Duration,
    news: impl Fn(&RequestRecord) -> bool,
) -> Result<RequestRecord, seatq::Error> {
    if !last.line {
        return std::future::pending().await;
    }
    loop {
        tokio::time::sleep(every).await;
        let record = s.client.status(last.id).await?;
        if news(&record) {
            return Ok(record);
        }
    }
}

/// Wait for a request's outcome (long-poll; its hold token as
/// `Authorization: Bearer TOKEN`).
///
/// Answers as soon as the request is finished; a request that asked to
/// wait (`wait_seconds`) also once it joins its event's waiting list, and
/// whenever its place in the line or on the list changes (`place`, read
/// every 2 s); otherwise with the request still queued (or waiting) when
/// the wait runs out: ask again.
#[utoipa::path(get, path = "/api/requests/{id}/wait", tag = "requests",
    params(("id" = i64, Path, description = "The request's id"), Timeout),
    security(("hold_token" = [])),
    responses((status = 200, description = "Finished; on the waiting list, or with a new place on it; or still queued or waiting when the wait ran out", body = RequestRecord),
        (status = 404, description = "not_found", body = crate::error::ErrorBody)))]
pub(crate) async fn long_poll(
    State(s): State<AppState>,
    holder: Holder,
    Id(id): Id,
    Params(t): Params<Timeout>,
) -> Answer<RequestRecord> {
    let secs = seconds("timeout", t.timeout.unwrap_or(f64::INFINITY))?;
    let first = holder.status(&s.client, id).await?;
    if first.status.is_terminal() {
        return Ok(Json(first));
    }
    Ok(Json(follow(&s, &first, cut(&s, secs)).await?))
}

/// A wait of `secs` seconds given as the parameter `name`, or why not: a
/// number, 0 or more (`NaN` and negative waits are refused, not stored).
pub(crate) fn seconds(name: &str, secs: f64) -> Result<f64, ApiError> {
    if secs.is_nan() || secs < 0.0 {
        return Err(ApiError::invalid(format!("{name}: must be a number of seconds, 0 or more, not {secs}")));
    }
    Ok(secs)
}

/// A request's outcome as Server-Sent Events (its hold token as
/// `Authorization: Bearer TOKEN`).
///
/// Each event is the request as it stands, named by its status: `queued`
/// (sent first, if not yet finished; for a request in its event's line,
/// again whenever its place there changes), `waiting` (on the event's
/// waiting list: when it joins, and again whenever its place changes), then
/// `finished`, and the stream ends. When the server's longest wait runs out
/// first, `timeout` (the request as it stands) ends it: reconnect to follow
/// on. An unknown request is a 404 before the stream starts.
#[utoipa::path(get, path = "/api/requests/{id}/events", tag = "requests", operation_id = "request_events",
    params(("id" = i64, Path, description = "The request's id")),
    security(("hold_token" = [])),
    responses((status = 200, description = "text/event-stream: events queued, waiting (with its place), finished or timeout, each a request", content_type = "text/event-stream", body = RequestRecord),
        (status = 404, description = "not_found", body = crate::error::ErrorBody)))]
pub(crate) async fn events(
    State(s): State<AppState>,
    holder: Holder,
    Id(id): Id,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let first = holder.status(&s.client, id).await?;
    // Bounded: the whole stream lasts at most the server's longest wait,
    // and a waiting request's place is read at most every PLACE_POLL.
    let deadline = Instant::now() + s.settings.max_wait();
    let stream = async_stream(&s.shutdown.clone(), move |tx| async move {
        let mut last = first;
        loop {
            if last.status.is_terminal() {
                let _ = tx.send(event("finished", &last)).await;
                return;
            }
            if tx.send(event(pending_name(last.status), &last)).await.is_err() {
                return;
            }
            // A client gone leaves the hub at once, not at the end of the wait.
            let news = tokio::select! {
                () = tx.closed() => return,
                news = news(&s, &last, deadline) => news,
            };
            last = match news {
                Ok(Some(record)) => record,
                Ok(None) => {
                    let sent = match s.client.status(id).await {
                        Ok(r) => event(if r.status.is_terminal() { "finished" } else { "timeout" }, &r),
                        Err(e) => error_event(e),
                    };
                    let _ = tx.send(sent).await;
                    return;
                }
                Err(e) => {
                    let _ = tx.send(error_event(e)).await;
                    return;
                }
            };
        }
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}

/// The event a request not yet finished is sent as: its status.
fn pending_name(status: Status) -> &'static str {
    match status {
        Status::Waiting => "waiting",
        _ => "queued",
    }
}

fn event(name: &str, record: &RequestRecord) -> Event {
    Event::default().event(name).json_data(record).unwrap_or_else(|_| Event::default().event(name))
}

fn error_event(e: seatq::Error) -> Event {
    let e = ApiError::from(e);
    let body = serde_json::json!({ "error": { "code": e.code, "message": e.message } });
    Event::default().event("error").data(body.to_string())
}

/// A stream fed by a task through a channel: it ends when the task returns
/// or the server shuts down; the task sees the client gone as its channel
/// closed.
pub(crate) fn async_stream<F, Fut>(
    shutdown: &tokio_util::sync::CancellationToken,
    task: F,
) -> impl Stream<Item = Result<Event, Infallible>> + use<F, Fut>
where
    F: FnOnce(tokio::sync::mpsc::Sender<Event>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    tokio::spawn(task(tx));
    futures_util::stream::unfold((rx, shutdown.clone()), |(mut rx, shutdown)| async move {
        let next = tokio::select! {
            next = rx.recv() => next,
            () = shutdown.cancelled() => None,
        };
        next.map(|e| (Ok(e), (rx, shutdown)))
    })
}
