//! The hold token a request to the API carries: `Authorization: Bearer
//! TOKEN` ([`Holder`]). Reading a request, waiting for it and following a
//! hold need the token the request (or the hold) was made with; without it,
//! or with another, the answer is the one for a request that does not
//! exist, so that ids, which are sequential, tell a stranger nothing.

use axum::extract::FromRequestParts;
use axum::http::header;
use axum::http::request::Parts;
use seatq::HoldToken;
use std::convert::Infallible;

/// The response header that hands a request's token to its maker, beside
/// the body (which, with `?wait`, is the request itself).
pub const TOKEN_HEADER: &str = "seatq-hold-token";

/// The hold token presented, if any (one not of a token's form is none:
/// it could match nothing).
#[derive(Debug, Clone)]
pub(crate) struct Holder(pub Option<HoldToken>);

impl<S: Send + Sync> FromRequestParts<S> for Holder {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let token = parts
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .and_then(|t| HoldToken::parse(t.trim()).ok());
        Ok(Holder(token))
    }
}

impl Holder {
    /// The request `id` as it stands, if this holder may read it; else
    /// [`seatq::Error::NotFound`], as for no such request.
    pub(crate) async fn status(&self, client: &seatq::Client, id: i64) -> Result<seatq::RequestRecord, seatq::Error> {
        match &self.0 {
            Some(token) => client.status_for(id, token).await,
            None => Err(seatq::Error::NotFound(id)),
        }
    }
}
