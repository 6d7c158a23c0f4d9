//! Lapsed holds, as the workers' sweeper announces them on
//! `seatq_hold_lapsed` (the booking id; no customer). One listening
//! connection for the whole process, started with the server, fans each
//! announcement out to the checkout pages following that booking
//! (`GET /api/holds/{booking}/lapsed`, Server-Sent Events).
//!
//! An announcement is a hint sent as the sweeper marks the hold `expired`:
//! one sent while the listener reconnects is lost. The page also counts down
//! to `held_until` itself, which is when the hold lapses whether or not the
//! sweeper has run (passive expiry), so a lost hint costs nothing but the
//! confirmation.

use std::convert::Infallible;

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::stream::Stream;
use seatq::reach::Db;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use crate::AppState;
use crate::error::{ApiError, Id};
use crate::holder::Holder;
use axum::http::StatusCode;

/// The announcements heard, for every page following one.
#[derive(Clone)]
pub(crate) struct Lapsed {
    heard: broadcast::Sender<i64>,
}

impl Lapsed {
    /// Listen until `shutdown`, reconnecting on the shared schedule; not
    /// at all when `db` has no session to listen on (a transaction pooler
    /// without a session URL): pages then see a lapse when their countdown
    /// ends.
    pub(crate) fn start(db: Db, shutdown: CancellationToken) -> Lapsed {
        let (heard, _) = broadcast::channel(1024);
        let lapsed = Lapsed { heard: heard.clone() };
        tokio::spawn(async move {
            tokio::select! {
                () = shutdown.cancelled() => {}
                () = listen(db, heard) => {}
            }
        });
        lapsed
    }

    /// No listener: the API, which follows holds, is off.
    pub(crate) fn off() -> Lapsed {
        Lapsed { heard: broadcast::channel(1).0 }
    }
}

async fn listen(db: Db, heard: broadcast::Sender<i64>) {
    let channel = seatq_core::sql::notify::HOLD_LAPSED_CHANNEL;
    loop {
        let Some(mut listener) = seatq::db::listen_until_connected(&db, channel, "lapsed holds").await else {
            return;
        };
        loop {
            match listener.recv().await {
                Ok(n) => {
                    if let Ok(booking) = n.payload().parse::<i64>() {
                        // No page following is not an error.
                        let _ = heard.send(booking);
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "lost the connection listening for lapsed holds");
                    break;
                }
            }
        }
    }
}

/// Follow a hold: Server-Sent Events (the hold's token as `Authorization:
/// Bearer TOKEN`).
///
/// Event `lapsed` (`{"booking": id}`) once the sweeper announces that the
/// hold lapsed, and the stream ends; keep-alive comments meanwhile. A hint:
/// the hold lapses at its `held_until` whether or not this comes. A booking
/// that does not answer to the token is a 404, as one that does not exist.
#[utoipa::path(get, path = "/api/holds/{booking}/lapsed", tag = "requests", operation_id = "hold_lapsed_events",
    params(("booking" = i64, Path, description = "The hold's booking id")),
    security(("hold_token" = [])),
    responses((status = 200, description = "text/event-stream: event lapsed", content_type = "text/event-stream"),
        (status = 404, description = "not_found: no such booking, or not with this token", body = crate::error::ErrorBody)))]
pub(crate) async fn events(
    State(s): State<AppState>,
    Holder(token): Holder,
    Id(booking): Id,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let answers = match &token {
        Some(token) => s.client.booking_answers_to(booking, token).await?,
        None => false,
    };
    if !answers {
        return Err(ApiError::new(StatusCode::NOT_FOUND, "not_found", format!("no booking {booking}")));
    }
    let mut heard = s.lapsed.heard.subscribe();
    let stream = crate::wait::async_stream(&s.shutdown, move |tx| async move {
        loop {
            let next = tokio::select! {
                () = tx.closed() => return,
                next = heard.recv() => next,
            };
            match next {
                Ok(id) if id == booking => {
                    let data = serde_json::json!({ "booking": booking }).to_string();
                    let _ = tx.send(Event::default().event("lapsed").data(data)).await;
                    return;
                }
                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => return,
            }
        }
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}
