//! The operator token. Operator actions (retrying dead requests) need it,
//! and so does reading operator figures when reads are protected
//! ([`crate::Settings::protect_reads`]). It comes as `Authorization: Bearer
//! TOKEN` (API clients) or in the `seatq_operator` cookie the dashboard's
//! sign-in sets (HttpOnly, SameSite=Strict, so no other site's page can act
//! with it). It is compared in constant time.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use subtle::ConstantTimeEq as _;

use crate::AppState;
use crate::error::ApiError;

/// The dashboard's cookie.
pub const COOKIE: &str = "seatq_operator";

/// What a request wants to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Read operator figures: open unless reads are protected.
    Read,
    /// Act (retry dead requests): always needs the token.
    Act,
}

/// The token a request carries, if any: the bearer token, else the cookie.
fn presented(headers: &HeaderMap) -> Option<&str> {
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    bearer.or_else(|| {
        headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|pair| pair.trim().split_once('='))
            .find(|(name, _)| *name == COOKIE)
            .map(|(_, value)| value)
    })
}

/// Whether `token` is the operator token (false when none is set).
pub fn is_operator_token(state: &AppState, token: &str) -> bool {
    state.settings.operator_token.as_deref().is_some_and(|t| bool::from(t.as_bytes().ct_eq(token.as_bytes())))
}

/// Whether a request may do what it wants; 401 without a token, 403 with a
/// wrong one, or for an action when no token is set (actions are off).
pub fn check(state: &AppState, headers: &HeaderMap, access: Access) -> Result<(), ApiError> {
    if access == Access::Read && !state.settings.protect_reads {
        return Ok(());
    }
    if state.settings.operator_token.is_none() {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            "operator actions are off: the server has no operator token (SEATQ_OPERATOR_TOKEN or --operator-token-file)",
        ));
    }
    match presented(headers) {
        None => Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "this needs the operator token: send Authorization: Bearer TOKEN, or sign in on the dashboard",
        )),
        Some(token) if is_operator_token(state, token) => Ok(()),
        Some(_) => Err(ApiError::new(StatusCode::FORBIDDEN, "forbidden", "the operator token is wrong")),
    }
}

/// Middleware: reading operator figures.
pub async fn read(State(state): State<AppState>, request: Request, next: Next) -> Result<Response, ApiError> {
    check(&state, request.headers(), Access::Read)?;
    Ok(next.run(request).await)
}

/// Middleware: operator actions.
pub async fn act(State(state): State<AppState>, request: Request, next: Next) -> Result<Response, ApiError> {
    check(&state, request.headers(), Access::Act)?;
    Ok(next.run(request).await)
}

/// Whether a page request is signed in (carries the right token).
pub fn signed_in(state: &AppState, headers: &HeaderMap) -> bool {
    presented(headers).is_some_and(|t| is_operator_token(state, t))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn the_bearer_token_comes_first_then_the_cookie() {
        let mut headers = HeaderMap::new();
        assert_eq!(presented(&headers), None);
        headers.insert(header::COOKIE, HeaderValue::from_static("a=1; seatq_operator=from-cookie; b=2"));
        assert_eq!(presented(&headers), Some("from-cookie"));
        headers.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer from-header"));
        assert_eq!(presented(&headers), Some("from-header"));
    }
}
