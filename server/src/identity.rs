//! Who the customer is, when the shop vouches for it rather than the body
//! saying so ([`CustomerIdentity`]). With an identity configured, `POST
//! /api/requests` needs it, and a payload naming another customer (in
//! seatq's normal form) is refused: a signed-in customer cannot act as
//! another by writing another name.
//!
//! Two ways, chosen by configuration:
//!
//! - a **signed assertion** in the `Seatq-Customer` header: a JSON Web
//!   Token signed with HMAC-SHA256 under a key the shop and seatq share
//!   (`{"alg":"HS256"}`; claims `sub`, the customer, and `exp`, when it
//!   expires, in seconds since the epoch). Any JWT library makes one. The
//!   signature is checked in constant time, the algorithm must be HS256
//!   (never `none`), and an expired one is refused. Written here on `hmac`
//!   and `sha2` rather than with a JWT crate, which would bring a second
//!   cryptography library for one HMAC;
//! - a **header set by the shop's proxy** (`X-Customer: ann`), believed only
//!   on connections from a trusted proxy ([`crate::Settings::trusted_proxies`]):
//!   a client reaching the server another way could write it itself.
//!
//! Every refusal is the same `401 unauthenticated`, whatever was wrong.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderName, StatusCode};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, KeyInit as _, Mac as _};
use serde::Deserialize;
use sha2::Sha256;

use crate::AppState;
use crate::error::ApiError;

/// The header a signed assertion travels in.
pub const ASSERTION_HEADER: &str = "seatq-customer";

/// The shortest signing key taken, in bytes: HMAC-SHA256's own strength.
pub const MIN_KEY_BYTES: usize = 32;

/// The longest assertion read: a customer name is at most 200 characters.
const MAX_ASSERTION_BYTES: usize = 4096;

/// Where the customer comes from.
#[derive(Debug, Clone, Default)]
pub enum CustomerIdentity {
    /// The body names the customer: nothing vouches for it (the default; for
    /// a shop whose own backend calls the API).
    #[default]
    Body,
    /// A header set by a trusted proxy in front.
    Header(HeaderName),
    /// A signed assertion, under this key.
    Signed(SigningKey),
}

/// The key assertions are signed with. Its `Debug` hides it.
#[derive(Clone)]
pub struct SigningKey(Arc<[u8]>);

impl SigningKey {
    /// A key of at least [`MIN_KEY_BYTES`] bytes.
    pub fn new(key: &[u8]) -> Result<SigningKey, ShortKey> {
        if key.len() < MIN_KEY_BYTES {
            return Err(ShortKey(key.len()));
        }
        Ok(SigningKey(key.into()))
    }

    /// An HS256 assertion that `customer` is signed in until `exp` (seconds
    /// since the epoch): what a shop's backend makes, for tests and tools.
    pub fn assert(&self, customer: &str, exp: i64) -> String {
        let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"HS256","typ":"JWT"}"#);
        let claims = URL_SAFE_NO_PAD.encode(serde_json::json!({"sub": customer, "exp": exp}).to_string());
        let signed = format!("{header}.{claims}");
        let signature = URL_SAFE_NO_PAD.encode(self.mac(signed.as_bytes()).finalize().into_bytes());
        format!("{signed}.{signature}")
    }

    fn mac(&self, data: &[u8]) -> Hmac<Sha256> {
        // HMAC takes a key of any length; new_from_slice cannot fail for it.
        let mut mac = <Hmac<Sha256>>::new_from_slice(&self.0).unwrap_or_else(|_| unreachable!("HMAC takes any key"));
        mac.update(data);
        mac
    }

    /// The customer an assertion vouches for, if it is well formed, signed
    /// with this key (compared in constant time), HS256 and not expired at
    /// `now` (seconds since the epoch).
    fn verify(&self, assertion: &str, now: i64) -> Option<String> {
        if assertion.len() > MAX_ASSERTION_BYTES {
            return None;
        }
        let mut parts = assertion.split('.');
        let (header, claims, signature) = (parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() {
            return None;
        }
        let signature = URL_SAFE_NO_PAD.decode(signature).ok()?;
        let signed = &assertion[..header.len() + 1 + claims.len()];
        self.mac(signed.as_bytes()).verify_slice(&signature).ok()?;
        #[derive(Deserialize)]
        struct Header {
            alg: String,
        }
        #[derive(Deserialize)]
        struct Claims {
            sub: String,
            exp: i64,
        }
        let header: Header = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(header).ok()?).ok()?;
        let claims: Claims = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(claims).ok()?).ok()?;
        (header.alg == "HS256" && claims.exp > now && !claims.sub.trim().is_empty()).then_some(claims.sub)
    }
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SigningKey(…)")
    }
}

/// A signing key too short to be safe.
#[derive(Debug, thiserror::Error)]
#[error("the customer signing key is {0} bytes; at least {MIN_KEY_BYTES} (random) are needed")]
pub struct ShortKey(usize);

/// The customer the shop vouches for: `None` when the body is taken at its
/// word ([`CustomerIdentity::Body`]).
#[derive(Debug, Clone)]
pub(crate) struct Vouched(pub Option<String>);

impl FromRequestParts<AppState> for Vouched {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Vouched, ApiError> {
        let peer = parts.extensions.get::<ConnectInfo<SocketAddr>>().map(|ConnectInfo(a)| a.ip());
        let from_proxy = peer.is_some_and(|ip| state.settings.trusted_proxies.iter().any(|net| net.contains(&ip)));
        let now = chrono::Utc::now().timestamp();
        vouched(&state.settings.customer_identity, &parts.headers, from_proxy, now).map(Vouched)
    }
}

/// The customer `identity` finds in `headers` (`from_proxy`: the connection
/// is a trusted proxy's), or the one refusal.
fn vouched(
    identity: &CustomerIdentity,
    headers: &HeaderMap,
    from_proxy: bool,
    now: i64,
) -> Result<Option<String>, ApiError> {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim);
    let customer = match identity {
        CustomerIdentity::Body => return Ok(None),
        CustomerIdentity::Header(name) => {
            text(name.as_str()).filter(|c| from_proxy && !c.is_empty()).map(str::to_string)
        }
        CustomerIdentity::Signed(key) => text(ASSERTION_HEADER).and_then(|a| key.verify(a, now)),
    };
    customer.map(Some).ok_or_else(unauthenticated)
}

fn unauthenticated() -> ApiError {
    ApiError::new(
        StatusCode::UNAUTHORIZED,
        "unauthenticated",
        "this server takes the customer from the shop's sign-in: the customer assertion is missing, or not valid",
    )
}

/// The refusal of a payload naming another customer than the one vouched for.
pub(crate) fn another_customer() -> ApiError {
    ApiError::new(
        StatusCode::FORBIDDEN,
        "customer_mismatch",
        "payload.customer: names another customer than the one signed in",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> SigningKey {
        SigningKey::new(&[7u8; 32]).expect("long enough")
    }

    #[test]
    fn a_signed_assertion_vouches_until_it_expires() {
        let assertion = key().assert("Ann", 1_000);
        assert_eq!(key().verify(&assertion, 999).as_deref(), Some("Ann"));
        assert_eq!(key().verify(&assertion, 1_000), None, "expired");
        let other = SigningKey::new(&[8u8; 32]).expect("long enough");
        assert_eq!(other.verify(&assertion, 999), None, "another key");
    }

    #[test]
    fn a_tampered_or_unsigned_assertion_vouches_for_no_one() {
        let assertion = key().assert("ann", 1_000);
        let (signed, _) = assertion.rsplit_once('.').expect("three parts");
        let (header, _) = signed.split_once('.').expect("three parts");
        let eve = URL_SAFE_NO_PAD.encode(br#"{"sub":"eve","exp":1000}"#);
        let sig = assertion.rsplit('.').next().expect("a signature");
        assert_eq!(key().verify(&format!("{header}.{eve}.{sig}"), 999), None, "claims changed");
        let none = URL_SAFE_NO_PAD.encode(br#"{"alg":"none"}"#);
        let claims = signed.split('.').nth(1).expect("claims");
        assert_eq!(key().verify(&format!("{none}.{claims}."), 999), None, "alg none");
        assert_eq!(key().verify("a.b", 999), None);
        assert_eq!(key().verify(&format!("{assertion}.x"), 999), None);
        assert!(SigningKey::new(b"short").is_err());
    }

    #[test]
    fn a_proxy_header_is_believed_from_a_trusted_proxy_only() {
        let identity = CustomerIdentity::Header(HeaderName::from_static("x-customer"));
        let mut headers = HeaderMap::new();
        headers.insert("x-customer", "ann".parse().expect("value"));
        assert_eq!(vouched(&identity, &headers, true, 0).ok().flatten().as_deref(), Some("ann"));
        assert_eq!(
            vouched(&identity, &headers, false, 0).map_err(|e| e.code).err().as_deref(),
            Some("unauthenticated")
        );
        assert!(vouched(&identity, &HeaderMap::new(), true, 0).is_err());
        assert_eq!(vouched(&CustomerIdentity::Body, &headers, false, 0).ok().flatten(), None);
    }
}
