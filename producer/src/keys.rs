//! Idempotency keys: a fresh one for a request of its own
//! ([`new_idempotency_key`]), and a batch party's, derived from the batch's
//! name and the party's ref or content, so that a file submitted again finds
//! its parties under the same keys. Imports nothing of this crate's.

use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

use seatq_core::request::Request;
use sha2::{Digest as _, Sha256};

/// A fresh idempotency key, `{prefix}-` and 32 random hex digits.
pub fn new_idempotency_key(prefix: &str) -> String {
    format!("{prefix}-{:016x}{:016x}", random_u64(), random_u64())
}

/// 64 random bits from the standard library: SipHash under the process's
/// random keys, over a counter, the time and the process id.
fn random_u64() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    h.write_u128(now.as_nanos());
    h.write_u32(std::process::id());
    h.finish()
}

/// The key of a party with a ref: the batch's name and the ref, as a JSON
/// array, so that no choice of either can make two pairs one key.
pub(crate) fn ref_key(name: &str, reference: &str) -> String {
    format!("batch:{}", serde_json::json!([name, reference]))
}

/// The key of a party without a ref or key of its own: the batch's name,
/// its content's digest ([`content_digest`]) and which occurrence of that
/// content in the batch it is, from 1.
pub(crate) fn content_key(name: &str, digest: &str, occurrence: u32) -> String {
    format!("batch:{}", serde_json::json!([name, null, digest, occurrence]))
}

/// What a party without a ref asks for (its kind and payload, not its queue
/// options), as 32 hex digits of SHA-256: the same request gives the same
/// digest in any run of any version that encodes it the same.
pub(crate) fn content_digest(request: &Request) -> String {
    let mut hasher = Sha256::new();
    hasher.update(request.kind().as_bytes());
    hasher.update(b"\n");
    hasher.update(request.payload().to_string().as_bytes());
    hasher.finalize().iter().take(16).map(|b| format!("{b:02x}")).collect()
}
