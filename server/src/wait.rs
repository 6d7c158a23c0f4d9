//! Waiting for outcomes over HTTP: a long-poll (`GET
//! /api/requests/{id}/wait`) and Server-Sent Events (`GET
//! /api/requests/{id}/events`). Both wait through [`seatq::Client::wait`],
//! so every waiter of the process shares the client's one listening
//! connection and one batched poll, however many customers wait at once.

use std::convert::Infallible;
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::stream::Stream;
use seatq::RequestRecord;
use seatq::outcome::Status;
use serde::Deserialize;

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

/// The request once finished, or as it stands after `secs` (cut to the
/// server's longest wait).
pub(crate) async fn outcome(s: &AppState, id: i64, secs: f64) -> Result<RequestRecord, seatq::Error> {
    let most = s.settings.max_wait();
    // Longer than the longest (infinity too) is the longest; NaN is nothing.
    let wait =
        if secs > 0.0 { Duration::try_from_secs_f64(secs).map_or(most, |w| w.min(most)) } else { Duration::ZERO };
    let answer = tokio::select! {
        answer = s.client.wait(id, Some(wait)) => answer,
        listed = listed(s, id) => listed,
    };
    match answer {
        Err(seatq::Error::Timeout(_)) => s.client.status(id).await,
        answer => answer,
    }
}

/// How often a request that asked to wait is read while it may be joining
/// its event's waiting list.
const LISTED_POLL: Duration = Duration::from_millis(100);

/// A request that asked to wait, once it is on its event's waiting list
/// (then answered with its place: its outcome may be hours away); never,
/// for any other request. (The waiter hub answers finished requests only.)
async fn listed(s: &AppState, id: i64) -> Result<RequestRecord, seatq::Error> {
    loop {
        tokio::time::sleep(LISTED_POLL).await;
        let record = s.client.status(id).await?;
        if !record.line {
            return std::future::pending().await;
        }
        if record.status == Status::Waiting {
            return Ok(record);
        }
    }
}

/// Wait for a request's outcome (long-poll; its hold token as
/// `Authorization: Bearer TOKEN`).
///
/// Answers as soon as the request is finished, or with the request still
/// queued when the wait runs out: ask again.
#[utoipa::path(get, path = "/api/requests/{id}/wait", tag = "requests",
    params(("id" = i64, Path, description = "The request's id"), Timeout),
    security(("hold_token" = [])),
    responses((status = 200, description = "Finished, or still queued when the wait ran out", body = RequestRecord),
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
    Ok(Json(outcome(&s, id, secs).await?))
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
/// Event `queued` (the request, if not yet finished), then `finished` (the
/// request once finished) and the stream ends; or `waiting` when the
/// server's longest wait runs out first (reconnect to wait on). An unknown
/// request is a 404 before the stream starts.
#[utoipa::path(get, path = "/api/requests/{id}/events", tag = "requests", operation_id = "request_events",
    params(("id" = i64, Path, description = "The request's id")),
    security(("hold_token" = [])),
    responses((status = 200, description = "text/event-stream: events queued, finished or waiting, each a request", content_type = "text/event-stream", body = RequestRecord),
        (status = 404, description = "not_found", body = crate::error::ErrorBody)))]
pub(crate) async fn events(
    State(s): State<AppState>,
    holder: Holder,
    Id(id): Id,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let first = holder.status(&s.client, id).await?;
    let most = s.settings.max_wait();
    let stream = async_stream(&s.shutdown.clone(), move |tx| async move {
        if first.status.is_terminal() {
            let _ = tx.send(event("finished", &first)).await;
            return;
        }
        if tx.send(event("queued", &first)).await.is_err() {
            return;
        }
        // A client gone leaves the hub at once, not at the end of the wait.
        let waited = tokio::select! {
            () = tx.closed() => return,
            waited = s.client.wait(id, Some(most)) => waited,
        };
        let sent = match waited {
            Ok(record) => event("finished", &record),
            Err(seatq::Error::Timeout(_)) => match s.client.status(id).await {
                Ok(record) => event(if record.status.is_terminal() { "finished" } else { "waiting" }, &record),
                Err(e) => error_event(e),
            },
            Err(e) => error_event(e),
        };
        let _ = tx.send(sent).await;
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
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
