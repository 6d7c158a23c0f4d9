//! The operator token. Operator actions (retrying dead requests) need it,
//! and so does reading operator figures when reads are protected
//! ([`crate::Settings::protect_reads`]). It comes as `Authorization: Bearer
//! TOKEN` (API clients) or in the `seatq_operator` cookie the dashboard's
//! sign-in sets (HttpOnly, SameSite=Strict, so no other site's page can act
//! with it). It is compared in constant time.
//!
//! Wrong tokens, from the sign-in form, a bearer header or a cookie, count
//! against the client's address ([`crate::limits`]): past the limit the
//! address is slowed down, `429` with `Retry-After`, and while it is, no
//! token it sends is compared at all, the right one included, so that
//! guessing learns nothing.

use std::net::IpAddr;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq as _;

use crate::AppState;
use crate::error::ApiError;
use crate::limits::ClientIp;

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
fn is_operator_token(state: &AppState, token: &str) -> bool {
    state.settings.operator_token.as_deref().is_some_and(|t| bool::from(t.as_bytes().ct_eq(token.as_bytes())))
}

/// What a token presented by a client turns out to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Right,
    Wrong,
    /// Not compared: the client sent too many wrong ones, and may try again
    /// after this long.
    SlowedDown(Duration),
}

/// Compare `token`, from `client`, with the operator token, counting a
/// wrong one against the client's address.
pub fn verify(state: &AppState, token: &str, client: IpAddr) -> Verdict {
    if let Err(wait) = state.guard.may_try_token(client) {
        return Verdict::SlowedDown(wait);
    }
    if is_operator_token(state, token) {
        return Verdict::Right;
    }
    match state.guard.wrong_token(client) {
        Ok(()) => Verdict::Wrong,
        Err(wait) => Verdict::SlowedDown(wait),
    }
}

/// The answer to a client slowed down after wrong tokens.
pub fn slowed_down(wait: Duration) -> Response {
    crate::limits::too_many("wrong operator tokens from this address", wait)
}

/// Why a request may not do what it wants.
#[derive(Debug)]
pub enum Refusal {
    /// 401 without a token, 403 with a wrong one or when actions are off.
    Error(ApiError),
    /// 429: too many wrong tokens from this address; again after this long.
    SlowedDown(Duration),
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        match self {
            Refusal::Error(e) => e.into_response(),
            Refusal::SlowedDown(wait) => slowed_down(wait),
        }
    }
}

/// Whether a request may do what it wants; 401 without a token, 403 with a
/// wrong one, or for an action when no token is set (actions are off), 429
/// after too many wrong ones.
pub fn check(state: &AppState, headers: &HeaderMap, client: IpAddr, access: Access) -> Result<(), Refusal> {
    if access == Access::Read && !state.settings.protect_reads {
        return Ok(());
    }
    if state.settings.operator_token.is_none() {
        return Err(Refusal::Error(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            "operator actions are off: the server has no operator token (SEATQ_OPERATOR_TOKEN or --operator-token-file)",
        )));
    }
    let Some(token) = presented(headers) else {
        return Err(Refusal::Error(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "this needs the operator token: send Authorization: Bearer TOKEN, or sign in on the dashboard",
        )));
    };
    match verify(state, token, client) {
        Verdict::Right => Ok(()),
        Verdict::Wrong => {
            Err(Refusal::Error(ApiError::new(StatusCode::FORBIDDEN, "forbidden", "the operator token is wrong")))
        }
        Verdict::SlowedDown(wait) => Err(Refusal::SlowedDown(wait)),
    }
}

fn client_of(request: &Request) -> IpAddr {
    request.extensions().get::<ClientIp>().map_or(IpAddr::from([0, 0, 0, 0]), |c| c.0)
}

/// Middleware: reading operator figures.
pub async fn read(State(state): State<AppState>, request: Request, next: Next) -> Response {
    match check(&state, request.headers(), client_of(&request), Access::Read) {
        Ok(()) => next.run(request).await,
        Err(refused) => refused.into_response(),
    }
}

/// Middleware: operator actions.
pub async fn act(State(state): State<AppState>, request: Request, next: Next) -> Response {
    match check(&state, request.headers(), client_of(&request), Access::Act) {
        Ok(()) => next.run(request).await,
        Err(refused) => refused.into_response(),
    }
}

/// Whether a page request is signed in (carries the right token; a wrong
/// one counts as any wrong token does).
pub fn signed_in(state: &AppState, headers: &HeaderMap, client: IpAddr) -> bool {
    presented(headers).is_some_and(|t| verify(state, t, client) == Verdict::Right)
}

/// The operator cookie holding `value` (empty, with `Max-Age=0`, to clear
/// it): HttpOnly, SameSite=Strict, and Secure when the public origin is
/// https. seatq serve speaks plain HTTP itself, so TLS is a proxy's in
/// front, and the configured origin is how the server knows of it.
pub fn cookie(state: &AppState, value: Option<&str>) -> String {
    let secure = if state.site.is_https() { "; Secure" } else { "" };
    match value {
        Some(token) => format!("{COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/{secure}"),
        None => format!("{COOKIE}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0{secure}"),
    }
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
