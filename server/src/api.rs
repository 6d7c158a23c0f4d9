//! The JSON API. Producers' routes: enqueue (`POST /api/requests`), read and
//! wait for a request, read events, availability and seat maps, follow a
//! hold's lapse. Operators' routes (`/api/ops/...`): stats, workers,
//! throughput, dead requests and their retry. Every enqueue goes through
//! [`seatq::Client::enqueue`], validated like any producer's.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use chrono::{DateTime, Utc};
use seatq::{ClassAvailability, EventSummary, MapSeat, NewRequest, Request, RequestRecord, Stats, WorkerInfo};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Answer, ApiError, Id, Params};
use crate::holder::{Holder, TOKEN_HEADER};
use crate::identity::{self, Vouched};
use crate::limits::ClientIp;
use crate::sql::dashboard as sql;
use crate::{AppState, auth, maps, wait};

/// The header that makes an enqueue safe to retry.
pub const IDEMPOTENCY_KEY: &str = "idempotency-key";

/// The producers' routes.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/requests", post(enqueue))
        .route("/api/requests/{id}", get(request))
        .route("/api/requests/{id}/wait", get(wait::long_poll))
        .route("/api/requests/{id}/events", get(wait::events))
        .route("/api/events", get(events))
        .route("/api/events/{id}/availability", get(availability))
        .route("/api/events/{id}/seats", get(seats))
        .route("/api/holds/{booking}/lapsed", get(crate::lapsed::events))
}

/// The operators' routes: reading (open unless reads are protected) and
/// acting (always the operator token).
pub(crate) fn operator_routes(state: &AppState) -> Router<AppState> {
    let read = Router::new()
        .route("/api/ops/stats", get(stats))
        .route("/api/ops/workers", get(workers))
        .route("/api/ops/throughput", get(throughput))
        .route("/api/ops/dead", get(dead))
        .route_layer(axum::middleware::from_fn_with_state(state.clone(), auth::read));
    let act = Router::new()
        .route("/api/ops/dead/{id}/retry", post(retry))
        .route("/api/ops/dead/retry", post(retry_all))
        .route_layer(axum::middleware::from_fn_with_state(state.clone(), auth::act));
    read.merge(act)
}

/// The body of `POST /api/requests`: what `seatq.enqueue` takes.
#[derive(Debug, utoipa::ToSchema)]
#[allow(dead_code)] // described, never built: the body is read field by field, for each field's error code
pub struct EnqueueBody {
    /// hold, book, confirm, cancel or extend.
    pub kind: String,
    /// The request: a SeatRequest for hold and book, a BookingRef for
    /// confirm and cancel, a HoldExtension for extend.
    #[schema(value_type = Payload)]
    pub payload: Value,
    /// Higher runs first (default 0), -32768 to 32767.
    pub priority: Option<i16>,
    /// Not to be processed before this time (RFC 3339; default: at once).
    pub run_at: Option<DateTime<Utc>>,
}

/// A request's payload, by kind: a seat request (hold, book), a booking
/// reference (confirm, cancel) or a hold extension (extend).
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(untagged)]
#[allow(dead_code)] // described, never built: the payload is checked by seatq's own validation
pub enum Payload {
    Seats(seatq::SeatRequest),
    Booking(seatq::BookingRef),
    Extension(seatq::HoldExtension),
}

/// `?wait=SECS`: also wait up to this long for the outcome (or, for a
/// request that asked to wait for seats, until it is on the waiting list).
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct WaitParam {
    /// Seconds to wait for the outcome before answering (cut to the server's
    /// longest wait); a request that asked to wait for seats is answered
    /// as soon as it is on its event's waiting list, with its place.
    /// Absent: answer at once.
    pub wait: Option<f64>,
}

/// A request enqueued (without `?wait`).
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Enqueued {
    /// The request's id: read it at `/api/requests/{id}`.
    pub id: i64,
    /// The key it was enqueued under, if any.
    pub idempotency_key: Option<String>,
    /// The hold token the request carries (the body's, or one the server
    /// made): reading the request needs it (`Authorization: Bearer TOKEN`),
    /// and for a hold or book, confirming, cancelling and extending its
    /// booking. Also sent as the `Seatq-Hold-Token` header. The server
    /// keeps only its hash: keep it, it cannot be read back.
    pub token: String,
}

/// Enqueue a request.
///
/// The same checks as every producer's: a malformed request is refused with
/// its error code (400), nothing stored. Every request carries a hold token:
/// the payload's `token`, or one the server makes, answered in the body and
/// the `Seatq-Hold-Token` header; only its holder can read the request, and
/// a hold's booking answers to it alone. With an `Idempotency-Key` header,
/// sending the same request (and token) again returns the first one's id;
/// the key reused for another kind, payload or token is refused (409
/// `idempotency_conflict`), and a keyed request must carry its own token,
/// so that its retry can present the same one. Where the server takes the
/// customer from the shop (a signed `Seatq-Customer` assertion, or a
/// trusted proxy's header), a request without it is `401 unauthenticated`
/// and a payload naming another customer `403 customer_mismatch`.
#[utoipa::path(post, path = "/api/requests", tag = "requests",
    request_body = EnqueueBody,
    params(WaitParam, ("Idempotency-Key" = Option<String>, Header, description = "Makes a retry safe: the same key and request enqueue once"),
        ("Seatq-Customer" = Option<String>, Header, description = "Where the server takes the customer from the shop: an HS256 JSON Web Token of the shop's key, claims sub (the customer) and exp")),
    responses(
        (status = 202, description = "Enqueued (without ?wait)", body = Enqueued,
            headers(("Seatq-Hold-Token" = String, description = "The request's hold token"))),
        (status = 200, description = "With ?wait: the request after the wait, finished (succeeded, failed or dead), on its event's waiting list (waiting, with its place), or still queued", body = RequestRecord,
            headers(("Seatq-Hold-Token" = String, description = "The request's hold token"))),
        (status = 400, description = "Refused: the code names why (invalid_json, missing_field, wrong_type, party_out_of_range, ...)", body = crate::error::ErrorBody),
        (status = 401, description = "unauthenticated: the server takes the customer from the shop, and this request has no valid word for it", body = crate::error::ErrorBody),
        (status = 403, description = "customer_mismatch: the payload names another customer than the shop vouches for", body = crate::error::ErrorBody),
        (status = 409, description = "idempotency_conflict", body = crate::error::ErrorBody),
        (status = 413, description = "payload_too_large", body = crate::error::ErrorBody),
        (status = 503, description = "The database cannot be reached", body = crate::error::ErrorBody),
    ))]
pub(crate) async fn enqueue(
    State(s): State<AppState>,
    Params(q): Params<WaitParam>,
    vouched: Vouched,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    // A bad wait is refused before anything is stored.
    let wait = q.wait.map(|secs| wait::seconds("wait", secs)).transpose()?;
    let mut new = new_request(&headers, &body)?;
    if let Vouched(Some(customer)) = &vouched
        && !seatq::customer::same(new.request.customer(), customer)
    {
        return Err(identity::another_customer());
    }
    let token = match new.request.token() {
        Some(token) => token.clone(),
        None if new.idempotency_key.is_some() => {
            return Err(ApiError::refused(seatq::RequestError {
                code: seatq::ErrorCode::MissingField,
                message: "token: required with an Idempotency-Key, so that a retry presents the same token \
                          (make one: 32 random bytes in URL-safe base64 without padding)"
                    .into(),
            }));
        }
        None => {
            let token = seatq::HoldToken::new()
                .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string()))?;
            new.request = new.request.with_token(token.clone());
            token
        }
    };
    let key = new.idempotency_key.clone();
    let id = s.client.enqueue(new).await?;
    let headers = [
        (header::LOCATION, format!("/api/requests/{id}")),
        (header::HeaderName::from_static(TOKEN_HEADER), token.to_string()),
    ];
    let Some(secs) = wait else {
        let enqueued = Enqueued { id, idempotency_key: key, token: token.to_string() };
        return Ok((StatusCode::ACCEPTED, headers, Json(enqueued)).into_response());
    };
    let record = wait::outcome(&s, id, secs).await?;
    Ok((StatusCode::OK, headers, Json(record)).into_response())
}

/// The request a body and its headers describe, checked as any producer's.
fn new_request(headers: &HeaderMap, body: &[u8]) -> Result<NewRequest, ApiError> {
    let refused = |code: seatq::ErrorCode, message: String| ApiError::refused(seatq::RequestError { code, message });
    use seatq::ErrorCode as C;
    // Text that is not JSON is `invalid_json`, as in the CLI and bulk files.
    let not_json = |why: String| refused(C::InvalidJson, format!("{why}; expected {{\"kind\", \"payload\"}}"));
    let text = std::str::from_utf8(body).map_err(|e| not_json(format!("the body is not UTF-8: {e}")))?;
    // A field named twice is refused, as the client and the CLI refuse it,
    // rather than one of the two kept silently.
    let body: Value = seatq::json::from_str(text).map_err(|e| match e {
        seatq::json::JsonError::Duplicate { .. } => refused(C::DuplicateField, e.reason()),
        seatq::json::JsonError::Invalid(_) => not_json(format!("the body is not JSON: {}", e.reason())),
    })?;
    let Value::Object(mut fields) = body else {
        return Err(refused(C::WrongType, "the body must be a JSON object: {\"kind\", \"payload\"}".into()));
    };
    let kind = match fields.remove("kind") {
        Some(Value::String(kind)) => kind,
        Some(_) => {
            return Err(refused(C::WrongType, "kind: must be a string (hold, book, confirm, cancel, extend)".into()));
        }
        None => return Err(refused(C::MissingField, "kind: required (hold, book, confirm, cancel, extend)".into())),
    };
    let payload = fields.remove("payload").ok_or_else(|| refused(C::MissingField, "payload: required".into()))?;
    let priority = match fields.remove("priority") {
        None | Some(Value::Null) => 0,
        Some(p) => p.as_i64().and_then(|p| i16::try_from(p).ok()).ok_or_else(|| {
            refused(C::WrongType, format!("priority: must be an integer from -32768 to 32767, not {p}"))
        })?,
    };
    let run_at = match fields.remove("run_at") {
        None | Some(Value::Null) => None,
        Some(Value::String(t)) => Some(
            DateTime::parse_from_rfc3339(&t)
                .map_err(|e| refused(C::WrongType, format!("run_at: {e}: expected an RFC 3339 time")))?
                .with_timezone(&Utc),
        ),
        Some(t) => return Err(refused(C::WrongType, format!("run_at: must be an RFC 3339 time, not {t}"))),
    };
    if let Some(field) = fields.keys().next() {
        return Err(refused(C::UnknownField, format!("{field}: unknown field (kind, payload, priority, run_at)")));
    }
    let request = Request::decode(&kind, &payload).map_err(ApiError::refused)?;
    let idempotency_key = match headers.get(IDEMPOTENCY_KEY) {
        None => None,
        Some(v) => Some(
            v.to_str()
                .map_err(|_| refused(C::InvalidRequest, "idempotency_key: the header must be visible ASCII".into()))?
                .to_string(),
        ),
    };
    // The key is checked by the enqueue, as any producer's.
    Ok(NewRequest { request, idempotency_key, priority, run_at, batch: None })
}

/// Read a request as it stands (its hold token as `Authorization: Bearer TOKEN`).
///
/// Without the token the request was made with, or with another, the
/// answer is the one for a request that does not exist.
#[utoipa::path(get, path = "/api/requests/{id}", tag = "requests",
    params(("id" = i64, Path, description = "The request's id")),
    security(("hold_token" = [])),
    responses((status = 200, description = "OK", body = RequestRecord), (status = 404, description = "not_found: no such request, or not with this token", body = crate::error::ErrorBody)))]
pub(crate) async fn request(State(s): State<AppState>, holder: Holder, Id(id): Id) -> Answer<RequestRecord> {
    Ok(Json(holder.status(&s.client, id).await?))
}

/// Every event, with its sales window and seat counts.
#[utoipa::path(get, path = "/api/events", tag = "events", operation_id = "list_events", responses((status = 200, description = "OK", body = Vec<EventSummary>)))]
pub(crate) async fn events(State(s): State<AppState>) -> Answer<Vec<EventSummary>> {
    Ok(Json(s.client.events(None).await?))
}

/// Free seats and prices of an event, per class.
#[utoipa::path(get, path = "/api/events/{id}/availability", tag = "events",
    params(("id" = i64, Path, description = "The event's id")),
    responses((status = 200, description = "OK", body = Vec<ClassAvailability>), (status = 404, description = "unknown_event: no such event, or no seats", body = crate::error::ErrorBody)))]
pub(crate) async fn availability(State(s): State<AppState>, Id(id): Id) -> Answer<Vec<ClassAvailability>> {
    Ok(Json(maps::availability(&s.client, id).await?))
}

/// Every seat of an event: free, held, booked or not for sale (never whose).
#[utoipa::path(get, path = "/api/events/{id}/seats", tag = "events",
    params(("id" = i64, Path, description = "The event's id")),
    responses((status = 200, description = "OK", body = Vec<MapSeat>), (status = 404, description = "unknown_event: no such event, or no seats", body = crate::error::ErrorBody)))]
pub(crate) async fn seats(State(s): State<AppState>, Id(id): Id) -> Answer<Vec<MapSeat>> {
    Ok(Json(maps::seat_map(&s.client, id).await?))
}

/// Queue depth by status, the oldest queued request's age, seats by state.
#[utoipa::path(get, path = "/api/ops/stats", tag = "operators",
    responses((status = 200, description = "OK", body = Stats), (status = 401, description = "unauthorized: the operator token is needed and was not sent", body = crate::error::ErrorBody), (status = 403, description = "forbidden: the operator token is wrong, or the server has none", body = crate::error::ErrorBody)))]
pub(crate) async fn stats(State(s): State<AppState>) -> Answer<Stats> {
    Ok(Json(s.client.stats().await?))
}

/// Live workers, with their heartbeats and settings.
#[utoipa::path(get, path = "/api/ops/workers", tag = "operators",
    responses((status = 200, description = "OK", body = Vec<WorkerInfo>), (status = 401, description = "unauthorized: the operator token is needed and was not sent", body = crate::error::ErrorBody), (status = 403, description = "forbidden: the operator token is wrong, or the server has none", body = crate::error::ErrorBody)))]
pub(crate) async fn workers(State(s): State<AppState>) -> Answer<Vec<WorkerInfo>> {
    Ok(Json(s.client.workers().await?))
}

/// `?minutes=N`: the window to look at.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct Window {
    /// Minutes back from now, 1 to 60 (default 10).
    pub minutes: Option<u32>,
}

/// `?limit=N`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct Limit {
    /// At most this many, 1 to 1000 (default 50), the latest first.
    pub limit: Option<i64>,
}

/// Requests finished per 10-second bucket over the last minutes, with the
/// enqueue-to-outcome latency of each bucket.
#[utoipa::path(get, path = "/api/ops/throughput", tag = "operators", params(Window),
    responses((status = 200, description = "OK", body = Vec<Bucket>), (status = 401, description = "unauthorized: the operator token is needed and was not sent", body = crate::error::ErrorBody), (status = 403, description = "forbidden: the operator token is wrong, or the server has none", body = crate::error::ErrorBody)))]
pub(crate) async fn throughput(State(s): State<AppState>, Params(w): Params<Window>) -> Answer<Vec<Bucket>> {
    let minutes = within("minutes", w.minutes.unwrap_or(10), 1..=60)?;
    Ok(Json(throughput_buckets(&s, minutes).await?))
}

/// `value` of query parameter `name`, if within `range` (else 400
/// `invalid_request`).
fn within<T: PartialOrd + std::fmt::Display>(
    name: &str,
    value: T,
    range: std::ops::RangeInclusive<T>,
) -> Result<T, ApiError> {
    if range.contains(&value) {
        return Ok(value);
    }
    Err(ApiError::invalid(format!("{name}: must be {} to {}, not {value}", range.start(), range.end())))
}

pub use crate::sql::dashboard::Bucket;

/// Seconds per bucket of the throughput chart.
pub const BUCKET_SECS: i64 = 10;

/// Every bucket of the last `minutes`, the empty ones too, oldest first.
pub(crate) async fn throughput_buckets(s: &AppState, minutes: u32) -> Result<Vec<Bucket>, seatq::Error> {
    let window = i64::from(minutes) * 60;
    let (now, rows): (DateTime<Utc>, Vec<Bucket>) = {
        let now: DateTime<Utc> = sql::Now.query().fetch_one(s.client.db()).await?;
        let rows =
            sql::Throughput { bucket_secs: BUCKET_SECS, window_secs: window }.query().fetch_all(s.client.db()).await?;
        (now, rows)
    };
    let last = now.timestamp() - now.timestamp().rem_euclid(BUCKET_SECS);
    let first = last - window + BUCKET_SECS;
    Ok((first..=last)
        .step_by(BUCKET_SECS as usize)
        .filter_map(|t| DateTime::from_timestamp(t, 0))
        .map(|at| {
            rows.iter().find(|b| b.at == at).cloned().unwrap_or(Bucket { at, finished: 0, p50_ms: None, p95_ms: None })
        })
        .collect())
}

/// Dead requests, the latest first, with their last error (with reads open,
/// their customers hidden unless the operator token comes too).
#[utoipa::path(get, path = "/api/ops/dead", tag = "operators", params(Limit),
    responses((status = 200, description = "OK", body = Vec<RequestRecord>), (status = 401, description = "unauthorized: the operator token is needed and was not sent", body = crate::error::ErrorBody), (status = 403, description = "forbidden: the operator token is wrong, or the server has none", body = crate::error::ErrorBody)))]
pub(crate) async fn dead(
    State(s): State<AppState>,
    ClientIp(client): ClientIp,
    headers: HeaderMap,
    Params(l): Params<Limit>,
) -> Answer<Vec<RequestRecord>> {
    let limit = within("limit", l.limit.unwrap_or(50), 1..=1000)?;
    let mut dead = s.client.dead_requests(limit).await?;
    // With reads open, customers are an operator's to see.
    if !auth::signed_in(&s, &headers, client) {
        dead.iter_mut().for_each(crate::dashboard::hide_customer);
    }
    Ok(Json(dead))
}

/// Requests put back in the queue.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Requeued {
    pub requeued: Vec<i64>,
}

/// Put a dead request back in the queue (the operator token).
#[utoipa::path(post, path = "/api/ops/dead/{id}/retry", tag = "operators",
    params(("id" = i64, Path, description = "The dead request's id")),
    security(("operator_token" = [])),
    responses((status = 200, description = "OK", body = Requeued), (status = 404, description = "not_found: no dead request with this id", body = crate::error::ErrorBody),
        (status = 401, description = "unauthorized: the operator token is needed and was not sent", body = crate::error::ErrorBody), (status = 403, description = "forbidden: the operator token is wrong, or the server has none", body = crate::error::ErrorBody)))]
pub(crate) async fn retry(State(s): State<AppState>, Id(id): Id) -> Answer<Requeued> {
    let requeued = s.client.retry_dead(Some(id)).await?;
    if requeued.is_empty() {
        return Err(ApiError::new(StatusCode::NOT_FOUND, "not_found", format!("no dead request with id {id}")));
    }
    tracing::info!(id, "dead request requeued by an operator");
    Ok(Json(Requeued { requeued }))
}

/// Put every dead request back in the queue (the operator token).
#[utoipa::path(post, path = "/api/ops/dead/retry", tag = "operators", security(("operator_token" = [])),
    responses((status = 200, description = "OK", body = Requeued), (status = 401, description = "unauthorized: the operator token is needed and was not sent", body = crate::error::ErrorBody), (status = 403, description = "forbidden: the operator token is wrong, or the server has none", body = crate::error::ErrorBody)))]
pub(crate) async fn retry_all(State(s): State<AppState>) -> Answer<Requeued> {
    let requeued = s.client.retry_dead(None).await?;
    tracing::info!(count = requeued.len(), "dead requests requeued by an operator");
    Ok(Json(Requeued { requeued }))
}
