//! The one JSON error of the HTTP API: `{"error": {"code", "message"}}`, with
//! the codes seatq gives everywhere else ([`seatq::ErrorCode`] for a refused
//! request, [`seatq::Error::code`] for the rest) and a fitting HTTP status.

use axum::body::Body;
use axum::extract::{FromRequestParts, Path, Query};
use axum::http::request::Parts;
use axum::http::{HeaderValue, Request, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use seatq::ErrorCode;
use serde::Serialize;

/// An error answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: String,
    pub message: String,
}

/// A JSON handler's answer: the value, or the error.
pub type Answer<T> = Result<axum::Json<T>, ApiError>;

/// How an error is sent (for the OpenAPI description).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

/// The error itself.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ErrorDetail {
    /// A stable code: a refused request's error code (`sold_out`,
    /// `missing_field`, `idempotency_conflict`, ...), or `not_found`,
    /// `unauthorized`, `forbidden`, `unreachable`, `database`, `timeout`, ...
    pub code: String,
    /// What went wrong, naming the field at fault.
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, code: impl Into<String>, message: impl Into<String>) -> ApiError {
        ApiError { status, code: code.into(), message: message.into() }
    }

    /// A refused request (400, or 409 for a reused idempotency key, 413 for
    /// a payload too large).
    pub fn refused(e: seatq::RequestError) -> ApiError {
        let status = match e.code {
            ErrorCode::IdempotencyConflict => StatusCode::CONFLICT,
            ErrorCode::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ErrorCode::UnknownEvent | ErrorCode::BookingNotFound => StatusCode::NOT_FOUND,
            _ => StatusCode::BAD_REQUEST,
        };
        ApiError::new(status, e.code.as_str(), e.message)
    }

    /// Malformed input that is not a request's payload (a query parameter,
    /// the body's envelope): 400 `invalid_request`.
    pub fn invalid(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, ErrorCode::InvalidRequest.as_str(), message)
    }
}

impl From<seatq::Error> for ApiError {
    fn from(e: seatq::Error) -> ApiError {
        use seatq::Error as E;
        let status = match &e {
            E::Invalid(refused) => return ApiError::refused(refused.clone()),
            E::NotFound(_) => StatusCode::NOT_FOUND,
            E::Timeout(_) => StatusCode::GATEWAY_TIMEOUT,
            // The database is down or out of reach: try again later.
            e if e.is_connection_error() => StatusCode::SERVICE_UNAVAILABLE,
            E::Unreachable { .. } | E::CommitUnknown { .. } => StatusCode::SERVICE_UNAVAILABLE,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        let code =
            if status == StatusCode::SERVICE_UNAVAILABLE && matches!(e, E::Db(_)) { "unreachable" } else { e.code() };
        if status.is_server_error() {
            tracing::warn!(error = %e, code, "answering with an error");
        }
        ApiError::new(status, code, e.to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody { error: ErrorDetail { code: self.code, message: self.message } };
        let mut response = (self.status, axum::Json(body)).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

/// The path's id (`/api/requests/{id}`, `/api/events/{id}/...`): a path
/// that is not an integer there is refused as `invalid_request`, naming the
/// parameter, not in axum's words about Rust types.
#[derive(Debug, Clone, Copy)]
pub struct Id(pub i64);

impl<S: Send + Sync> FromRequestParts<S> for Id {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Id, ApiError> {
        let Path(params) = Path::<Vec<(String, String)>>::from_request_parts(parts, state)
            .await
            .map_err(|e| ApiError::invalid(e.body_text()))?;
        let (name, value) = params.last().ok_or_else(|| ApiError::invalid("the path names no id"))?;
        value
            .parse()
            .map(Id)
            .map_err(|_| ApiError::invalid(format!("{name}: {} is not an integer", seatq::validate::quoted(value))))
    }
}

/// A query string read into `T`, refused as `invalid_request` with the
/// parameter at fault named first (`wait: invalid float literal`).
#[derive(Debug, Clone, Copy)]
pub struct Params<T>(pub T);

impl<T: serde::de::DeserializeOwned, S: Send + Sync> FromRequestParts<S> for Params<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Params<T>, ApiError> {
        match Query::<T>::from_request_parts(parts, state).await {
            Ok(Query(params)) => Ok(Params(params)),
            // The rejection's source is serde's error with its field path;
            // its own text prefixes that with axum's account of itself.
            Err(e) => Err(ApiError::invalid(
                std::error::Error::source(&e).map_or_else(|| e.body_text(), |source| source.to_string()),
            )),
        }
    }
}

/// Any path nothing serves.
pub async fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "not_found", "nothing here: see /api/openapi.json for the API")
}

/// Errors made outside the handlers (axum's rejections of a path or query,
/// a method not allowed, tower-http's timeout and body limit) are plain text
/// or empty: make them the JSON error too, with the code their status means.
pub async fn json_errors(request: Request<Body>, next: Next) -> Response {
    let response = next.run(request).await;
    let status = response.status();
    let typed = response.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default();
    if !(status.is_client_error() || status.is_server_error()) || typed.starts_with("application/json") {
        return response;
    }
    if typed.starts_with("text/html") {
        return response;
    }
    let code = match status {
        StatusCode::NOT_FOUND => "not_found",
        StatusCode::METHOD_NOT_ALLOWED => "method_not_allowed",
        StatusCode::PAYLOAD_TOO_LARGE => ErrorCode::PayloadTooLarge.as_str(),
        StatusCode::SERVICE_UNAVAILABLE | StatusCode::REQUEST_TIMEOUT => "timeout",
        StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported_media_type",
        s if s.is_client_error() => ErrorCode::InvalidRequest.as_str(),
        _ => "internal",
    };
    let text = match axum::body::to_bytes(response.into_body(), 4096).await {
        Ok(bytes) if !bytes.is_empty() => String::from_utf8_lossy(&bytes).trim().to_string(),
        _ => match status {
            StatusCode::PAYLOAD_TOO_LARGE => "the request body is larger than the server takes".to_string(),
            StatusCode::SERVICE_UNAVAILABLE => "the request took longer than the server allows".to_string(),
            s => s.canonical_reason().unwrap_or("error").to_string(),
        },
    };
    ApiError::new(status, code, text).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_get_their_status() {
        let refused = |code| ApiError::refused(seatq::RequestError { code, message: "m".into() }).status;
        assert_eq!(refused(ErrorCode::MissingField), StatusCode::BAD_REQUEST);
        assert_eq!(refused(ErrorCode::IdempotencyConflict), StatusCode::CONFLICT);
        assert_eq!(refused(ErrorCode::PayloadTooLarge), StatusCode::PAYLOAD_TOO_LARGE);
        let missing = ApiError::from(seatq::Error::NotFound(7));
        assert_eq!((missing.status, missing.code.as_str()), (StatusCode::NOT_FOUND, "not_found"));
        let down = ApiError::from(seatq::Error::from(sqlx::Error::PoolTimedOut));
        assert_eq!((down.status, down.code.as_str()), (StatusCode::SERVICE_UNAVAILABLE, "unreachable"));
    }
}
