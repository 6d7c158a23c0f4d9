//! Hold tokens: what proves a hold (or a booking) is the caller's.
//!
//! A hold or book may carry a token; the booking it makes then answers to
//! that token alone: confirm, cancel and extend must present it, and a
//! wrong or missing one is answered exactly as a booking that does not
//! exist. `seatq serve` gives every request it enqueues a token and lets
//! only its holder read the request.
//!
//! A token is 32 bytes from the operating system's CSPRNG, written in
//! URL-safe base64 without padding (43 characters). The database never
//! stores one: the insert trigger keeps its SHA-256 in `token_hash` and
//! takes it out of the payload (migrations/0009_hold_tokens.sql), and a
//! presented token is hashed and compared with the stored hash in constant
//! time ([`TokenHash::matches`]). A token cannot be derived from its hash,
//! so whoever reads the tables (an operator, the producer's own reports)
//! cannot act with it.

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sha2::{Digest as _, Sha256};
use subtle::ConstantTimeEq as _;

/// Characters in a token: 32 bytes in URL-safe base64 without padding.
pub const TOKEN_CHARS: usize = 43;

/// Random bytes in a token.
const TOKEN_BYTES: usize = 32;

/// What a token must look like, for error messages.
pub const TOKEN_FORM: &str = "43 characters of A-Z, a-z, 0-9, - and _ (a hold token)";

/// A hold token. Its `Debug` hides it, so that it is not logged by accident.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct HoldToken(String);

/// Why a text is not a hold token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("must be {TOKEN_FORM}")]
pub struct NotAToken;

/// The operating system could not give random bytes (it always can on a
/// supported system; reported rather than answered with a weak token).
#[derive(Debug, thiserror::Error)]
#[error("the operating system's random number generator failed: {0}")]
pub struct NoRandomness(getrandom::Error);

impl HoldToken {
    /// A new token, from the operating system's CSPRNG.
    pub fn new() -> Result<HoldToken, NoRandomness> {
        let mut bytes = [0u8; TOKEN_BYTES];
        getrandom::fill(&mut bytes).map_err(NoRandomness)?;
        Ok(HoldToken(URL_SAFE_NO_PAD.encode(bytes)))
    }

    /// A token as text, if it has a token's form.
    pub fn parse(text: &str) -> Result<HoldToken, NotAToken> {
        if is_token(text) { Ok(HoldToken(text.to_string())) } else { Err(NotAToken) }
    }

    /// The token's text, to hand to its holder.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Its SHA-256, as the database keeps it.
    pub fn hash(&self) -> TokenHash {
        TokenHash(Sha256::digest(self.0.as_bytes()).into())
    }
}

/// Whether `text` has a token's form: [`TOKEN_CHARS`] URL-safe base64
/// characters (the database checks the same, `seatq.token_error`).
pub fn is_token(text: &str) -> bool {
    text.len() == TOKEN_CHARS && text.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

impl fmt::Debug for HoldToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("HoldToken(…)")
    }
}

impl fmt::Display for HoldToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::str::FromStr for HoldToken {
    type Err = NotAToken;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        HoldToken::parse(s)
    }
}

impl Serialize for HoldToken {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for HoldToken {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        HoldToken::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// Whether a request that carried a token hashed to `given` (none: it
/// carried no token) may act on a booking that answers to `stored` (none:
/// the booking was made without a token and answers to its customer's
/// name alone). A booking made with a token needs that token; one made
/// without needs none, and a request carrying one finds it not (`seatq
/// serve` gives every request a token, so no request over HTTP acts by name
/// alone). Compared in constant time.
pub fn answers(stored: Option<&[u8]>, given: Option<&[u8]>) -> bool {
    match (stored, given) {
        (None, None) => true,
        (Some(stored), Some(given)) => bool::from(stored.ct_eq(given)),
        _ => false,
    }
}

/// A token's SHA-256, as stored in `token_hash`.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct TokenHash([u8; 32]);

impl TokenHash {
    /// Whether `stored` (a `token_hash` column) is this hash, compared in
    /// constant time; `None` (no token was stored) never matches.
    pub fn matches(&self, stored: Option<&[u8]>) -> bool {
        stored.is_some_and(|stored| bool::from(self.0.as_slice().ct_eq(stored)))
    }

    /// The hash's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Debug for TokenHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TokenHash(…)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_token_has_the_form_and_is_new() {
        let a = HoldToken::new().expect("randomness");
        let b = HoldToken::new().expect("randomness");
        assert_ne!(a, b);
        assert!(is_token(a.as_str()), "{a}");
        assert_eq!(HoldToken::parse(a.as_str()), Ok(a.clone()));
        assert_eq!(format!("{a:?}"), "HoldToken(…)");
    }

    #[test]
    fn only_the_form_parses() {
        assert_eq!(HoldToken::parse("short"), Err(NotAToken));
        assert_eq!(HoldToken::parse(&"a".repeat(44)), Err(NotAToken));
        assert_eq!(HoldToken::parse(&format!("{}=", "a".repeat(42))), Err(NotAToken));
        assert!(HoldToken::parse(&"a-_9".repeat(11)[..43]).is_ok());
    }

    #[test]
    fn a_hash_matches_its_own_token_only() {
        let a = HoldToken::new().expect("randomness");
        let b = HoldToken::new().expect("randomness");
        let stored = a.hash();
        assert!(a.hash().matches(Some(stored.as_bytes())));
        assert!(!b.hash().matches(Some(stored.as_bytes())));
        assert!(!a.hash().matches(None));
        assert!(!a.hash().matches(Some(&stored.as_bytes()[..31])));
    }

    #[test]
    fn a_booking_answers_to_its_token_or_to_none() {
        let a = HoldToken::new().expect("randomness").hash();
        let b = HoldToken::new().expect("randomness").hash();
        assert!(answers(Some(a.as_bytes()), Some(a.as_bytes())));
        assert!(!answers(Some(a.as_bytes()), Some(b.as_bytes())));
        assert!(!answers(Some(a.as_bytes()), None));
        assert!(!answers(None, Some(a.as_bytes())));
        assert!(answers(None, None));
    }

    #[test]
    fn the_hash_is_sha256_of_the_text() {
        // The database computes sha256(convert_to(token, 'UTF8')) the same.
        let t = HoldToken::parse(&"A".repeat(43)).expect("form");
        let want = Sha256::digest("A".repeat(43).as_bytes());
        assert_eq!(t.hash().as_bytes(), want.as_slice());
    }
}
