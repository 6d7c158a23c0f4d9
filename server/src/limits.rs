//! Abuse limits: who the client is, and how much it may ask.
//!
//! The client is the connection's peer address, unless that peer is a
//! trusted reverse proxy ([`crate::Settings::trusted_proxies`]): then it is
//! the address the proxy names in its header (`X-Forwarded-For` unless
//! configured), read from the right, past every trusted proxy, so that what
//! a client wrote into the header itself is never believed. Addresses are
//! counted as [`seatq_core::http::address_key`] has them (an IPv6 client by
//! its /64).
//!
//! Each limit is a [`governor`] quota (GCRA: a burst, then an even rate),
//! keyed by what it limits ([`Limits`]):
//!
//! - every request, per client address;
//! - `POST /api/requests`, per client address, and per customer (the
//!   payload's `customer` in seatq's normal form,
//!   [`seatq_core::customer::normal_form`], so that "Ann" and " ann" are one);
//! - holds and bookings (kinds `hold` and `book`, which take seats), per
//!   client address and event: varying the customer's name does not let one
//!   client take every seat of an on-sale;
//! - wrong operator tokens, per client address: while an address is slowed
//!   down, no token it sends is even compared, so guessing gains nothing.
//!
//! Over a limit, the answer is `429 rate_limited` with `Retry-After`, and
//! nothing is stored. Addresses in [`crate::Settings::rate_limit_exempt`]
//! (the shop's own backends) are never limited.

use std::collections::HashMap;
use std::hash::Hash;
use std::net::{IpAddr, SocketAddr};
use std::num::NonZeroU32;
use std::str::FromStr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{ConnectInfo, FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use governor::clock::{Clock as _, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota};
use ipnet::IpNet;
use seatq_core::http::address_key;
use tokio_util::sync::CancellationToken;

use crate::Settings;
use crate::error::ApiError;

/// A quota: `count` requests at once, and `count` more every `per`, evenly
/// (`60/min` is a burst of 60, then one a second).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    pub count: NonZeroU32,
    pub per: Duration,
}

impl Rate {
    /// `count` every `per` (neither zero).
    pub const fn new(count: NonZeroU32, per: Duration) -> Rate {
        Rate { count, per }
    }

    fn quota(self) -> Option<Quota> {
        Quota::with_period(self.per / self.count.get()).map(|q| q.allow_burst(self.count))
    }
}

/// A quota written `COUNT/PERIOD`: `20/s`, `60/min`, `10/10min`, `500/h`,
/// `5/30s`; or `off`.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0:?} is not a rate: write COUNT/PERIOD (20/s, 60/min, 10/10min, 500/h), or off")]
pub struct BadRate(pub String);

impl FromStr for Rate {
    type Err = BadRate;

    fn from_str(text: &str) -> Result<Rate, BadRate> {
        let bad = || BadRate(text.to_string());
        let (count, period) = text.trim().split_once('/').ok_or_else(bad)?;
        let count: NonZeroU32 = count.trim().parse().map_err(|_| bad())?;
        let period = period.trim();
        let digits = period.find(|c: char| !c.is_ascii_digit()).unwrap_or(period.len());
        let times: u64 = match &period[..digits] {
            "" => 1,
            n => n.parse().map_err(|_| bad())?,
        };
        let unit = match &period[digits..] {
            "s" | "sec" | "second" => 1,
            "min" | "minute" => 60,
            "h" | "hour" => 3600,
            _ => return Err(bad()),
        };
        let per = Duration::from_secs(times.checked_mul(unit).filter(|s| (1..=86_400).contains(s)).ok_or_else(bad)?);
        Ok(Rate { count, per })
    }
}

impl std::fmt::Display for Rate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let secs = self.per.as_secs();
        match secs {
            1 => write!(f, "{}/s", self.count),
            3600 => write!(f, "{}/h", self.count),
            s if s % 60 == 0 && s != 60 => write!(f, "{}/{}min", self.count, s / 60),
            60 => write!(f, "{}/min", self.count),
            s => write!(f, "{}/{s}s", self.count),
        }
    }
}

/// A rate, or none (`off`), as the command line and environment give it.
pub fn parse_rate(text: &str) -> Result<Option<Rate>, BadRate> {
    match text.trim() {
        "off" | "none" => Ok(None),
        text => text.parse().map(Some),
    }
}

/// A rate or `off`, read from text as the command line gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MaybeRate(pub Option<Rate>);

impl FromStr for MaybeRate {
    type Err = BadRate;

    fn from_str(text: &str) -> Result<MaybeRate, BadRate> {
        parse_rate(text).map(MaybeRate)
    }
}

const fn rate(count: u32, secs: u64) -> Option<Rate> {
    match NonZeroU32::new(count) {
        Some(count) => Some(Rate::new(count, Duration::from_secs(secs))),
        None => None,
    }
}

/// The abuse limits; `None` turns one off. The defaults leave a household
/// or an office behind one address room to shop, and a flood none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Every request, per client address: `50/s`.
    pub requests_per_address: Option<Rate>,
    /// `POST /api/requests`, per client address: `60/min`.
    pub enqueues_per_address: Option<Rate>,
    /// `POST /api/requests`, per customer (its normal form): `20/min`.
    pub enqueues_per_customer: Option<Rate>,
    /// Holds and bookings (kinds `hold` and `book`), per client address and
    /// event: `10/10min`, so ten at once, then one a minute.
    pub holds_per_address_and_event: Option<Rate>,
    /// Wrong operator tokens (sign-ins, bearer tokens, cookies), per client
    /// address: `5/min`.
    pub failed_signins_per_address: Option<Rate>,
    /// Connections open at once, per client address (0: no bound):
    /// [`seatq_core::http::DEFAULT_CONNECTIONS_PER_ADDRESS`].
    pub connections_per_address: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            requests_per_address: rate(50, 1),
            enqueues_per_address: rate(60, 60),
            enqueues_per_customer: rate(20, 60),
            holds_per_address_and_event: rate(10, 600),
            failed_signins_per_address: rate(5, 60),
            connections_per_address: seatq_core::http::DEFAULT_CONNECTIONS_PER_ADDRESS,
        }
    }
}

impl Limits {
    /// No limits at all: for a benchmark, or a server only the shop's own
    /// backends reach.
    pub fn off() -> Limits {
        Limits {
            requests_per_address: None,
            enqueues_per_address: None,
            enqueues_per_customer: None,
            holds_per_address_and_event: None,
            failed_signins_per_address: None,
            connections_per_address: 0,
        }
    }
}

/// A trusted proxy or exempt client written as an address (`10.0.0.7`,
/// `::1`) or a network (`10.0.0.0/8`).
pub fn parse_net(text: &str) -> Result<IpNet, String> {
    let text = text.trim();
    text.parse::<IpNet>()
        .or_else(|_| text.parse::<IpAddr>().map(IpNet::from))
        .map_err(|_| format!("{text:?} is not an address or a network (10.0.0.7, 10.0.0.0/8, ::1, fd00::/8)"))
}

/// The client a request comes from, as the limits count it (before
/// [`address_key`]). Unspecified (`0.0.0.0`) when the router is served
/// without [`seatq_core::http::serve`], which hands each request its peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientIp(pub IpAddr);

impl<S: Send + Sync> FromRequestParts<S> for ClientIp {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<ClientIp, Self::Rejection> {
        Ok(parts.extensions.get::<ClientIp>().copied().unwrap_or(ClientIp(IpAddr::from([0, 0, 0, 0]))))
    }
}

type Keyed<K> = DefaultKeyedRateLimiter<K>;

fn keyed<K: Hash + Eq + Clone>(rate: Option<Rate>) -> Option<Keyed<K>> {
    rate.and_then(Rate::quota).map(Keyed::keyed)
}

/// The limiters of one server, and who counts as whom.
pub(crate) struct Guard {
    trusted: Vec<IpNet>,
    header: HeaderName,
    exempt: Vec<IpNet>,
    body_limit: usize,
    requests: Option<Keyed<IpAddr>>,
    enqueues: Option<Keyed<IpAddr>>,
    customers: Option<Keyed<String>>,
    holds: Option<Keyed<(IpAddr, i64)>>,
    signins: Option<Keyed<IpAddr>>,
    /// Addresses slowed down after wrong tokens, until when: while one is,
    /// its tokens are not compared at all.
    slowed: Mutex<HashMap<IpAddr, Instant>>,
    clock: DefaultClock,
}

impl std::fmt::Debug for Guard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Guard").field("trusted", &self.trusted).field("exempt", &self.exempt).finish_non_exhaustive()
    }
}

/// How often the limiters forget clients they no longer limit.
const FORGET_EVERY: Duration = Duration::from_secs(60);

impl Guard {
    pub fn new(settings: &Settings) -> Guard {
        let limits = &settings.limits;
        Guard {
            trusted: settings.trusted_proxies.clone(),
            header: settings.client_ip_header.clone(),
            exempt: settings.rate_limit_exempt.clone(),
            body_limit: settings.body_limit,
            requests: keyed(limits.requests_per_address),
            enqueues: keyed(limits.enqueues_per_address),
            customers: keyed(limits.enqueues_per_customer),
            holds: keyed(limits.holds_per_address_and_event),
            signins: keyed(limits.failed_signins_per_address),
            slowed: Mutex::new(HashMap::new()),
            clock: DefaultClock::default(),
        }
    }

    /// Forget, now and then, the clients no limit holds any more, so that
    /// the limiters' memory follows the clients of the last minutes, not
    /// every client ever seen; until `shutdown`.
    pub fn start_forgetting(self: &Arc<Guard>, shutdown: CancellationToken) {
        let guard = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut every = tokio::time::interval(FORGET_EVERY);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = every.tick() => {}
                    () = shutdown.cancelled() => return,
                }
                let Some(guard) = guard.upgrade() else { return };
                guard.forget();
            }
        });
    }

    fn forget(&self) {
        fn shrink<K: Hash + Eq + Clone>(limiter: &Option<Keyed<K>>) {
            if let Some(l) = limiter {
                l.retain_recent();
                l.shrink_to_fit();
            }
        }
        shrink(&self.requests);
        shrink(&self.enqueues);
        shrink(&self.customers);
        shrink(&self.holds);
        shrink(&self.signins);
        let now = Instant::now();
        self.slowed.lock().unwrap_or_else(PoisonError::into_inner).retain(|_, until| *until > now);
    }

    /// Whether `ip` is a trusted proxy.
    pub fn is_trusted(&self, ip: IpAddr) -> bool {
        self.trusted.iter().any(|net| net.contains(&ip))
    }

    /// Whether `ip` is never limited.
    pub fn is_exempt(&self, ip: IpAddr) -> bool {
        self.exempt.iter().any(|net| net.contains(&ip))
    }

    /// The client of a request from `peer` with `headers`.
    pub fn client(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        if !self.is_trusted(peer) {
            return peer;
        }
        // Every hop the header names, the last (the nearest proxy's) first.
        let hops: Vec<&str> = headers
            .get_all(&self.header)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(str::trim)
            .collect();
        let mut client = peer;
        for hop in hops.iter().rev() {
            match hop_address(hop) {
                // What the nearest untrusted hop says it is, is not believed:
                // it is the client.
                Some(ip) if self.is_trusted(ip) => client = ip,
                Some(ip) => return ip,
                None => return client,
            }
        }
        client
    }

    fn check<K: Hash + Eq + Clone>(&self, limiter: &Option<Keyed<K>>, key: &K) -> Result<(), Duration> {
        match limiter {
            Some(l) => l.check_key(key).map_err(|not_until| not_until.wait_time_from(self.clock.now())),
            None => Ok(()),
        }
    }

    /// Whether `client` may present a token now: `Err(wait)` while it is
    /// slowed down after wrong ones.
    pub fn may_try_token(&self, client: IpAddr) -> Result<(), Duration> {
        let slowed = self.slowed.lock().unwrap_or_else(PoisonError::into_inner);
        match slowed.get(&address_key(client)) {
            Some(until) => match until.checked_duration_since(Instant::now()) {
                Some(left) if !left.is_zero() => Err(left),
                _ => Ok(()),
            },
            None => Ok(()),
        }
    }

    /// `client` presented a wrong token: `Err(wait)` when that was one too
    /// many, and it is slowed down for that long.
    pub fn wrong_token(&self, client: IpAddr) -> Result<(), Duration> {
        let key = address_key(client);
        self.check(&self.signins, &key).inspect_err(|wait| {
            tracing::info!(client = %client, wait_secs = wait.as_secs_f64(), "wrong operator tokens: slowed down");
            self.slowed.lock().unwrap_or_else(PoisonError::into_inner).insert(key, Instant::now() + *wait);
        })
    }
}

/// A hop of the client address header: an address, maybe with a port
/// (`203.0.113.7`, `203.0.113.7:4711`, `2001:db8::1`, `[2001:db8::1]:4711`).
fn hop_address(hop: &str) -> Option<IpAddr> {
    let hop = hop.trim().trim_matches('"');
    hop.parse::<IpAddr>().ok().or_else(|| hop.parse::<SocketAddr>().ok().map(|a| a.ip()))
}

/// The answer over a limit: `429 rate_limited`, with `Retry-After` in whole
/// seconds (at least one).
pub(crate) fn too_many(what: &str, wait: Duration) -> Response {
    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    let secs = secs.max(1);
    let message = format!("too many {what}: try again in {secs} s");
    let mut response = ApiError::new(StatusCode::TOO_MANY_REQUESTS, "rate_limited", message).into_response();
    response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(secs));
    response
}

/// Middleware, outermost of the limits: who the client is (a [`ClientIp`]
/// in the request's extensions), and its requests per second.
pub(crate) async fn identify(State(guard): State<Arc<Guard>>, mut request: Request, next: Next) -> Response {
    let peer = request.extensions().get::<ConnectInfo<SocketAddr>>().map(|ConnectInfo(a)| a.ip());
    let client = match peer {
        Some(peer) => guard.client(peer, request.headers()),
        None => IpAddr::from([0, 0, 0, 0]),
    };
    request.extensions_mut().insert(ClientIp(client));
    if !guard.is_exempt(client)
        && let Err(wait) = guard.check(&guard.requests, &address_key(client))
    {
        tracing::debug!(%client, "requests over the address's rate");
        return too_many("requests from this address", wait);
    }
    next.run(request).await
}

/// Middleware: `POST /api/requests`'s limits, per address, per customer, and
/// per address and event for holds and bookings. The body is read here (up
/// to the server's limit) to find the customer and the event, and handed on
/// unchanged; a body that does not parse is left to the handler to refuse.
pub(crate) async fn enqueues(State(guard): State<Arc<Guard>>, request: Request, next: Next) -> Response {
    if request.method() != Method::POST || request.uri().path() != "/api/requests" {
        return next.run(request).await;
    }
    let client = request.extensions().get::<ClientIp>().map_or(IpAddr::from([0, 0, 0, 0]), |c| c.0);
    if guard.is_exempt(client) {
        return next.run(request).await;
    }
    let key = address_key(client);
    if let Err(wait) = guard.check(&guard.enqueues, &key) {
        return too_many("requests enqueued from this address", wait);
    }
    let (parts, body) = request.into_parts();
    let bytes = match axum::body::to_bytes(body, guard.body_limit).await {
        Ok(bytes) => bytes,
        Err(_) => {
            return ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                seatq::ErrorCode::PayloadTooLarge.as_str(),
                "the request body is larger than the server takes, or did not arrive whole",
            )
            .into_response();
        }
    };
    let (kind, customer, event) = what_is_asked(&bytes);
    if let Some(customer) = customer
        && let Err(wait) = guard.check(&guard.customers, &customer)
    {
        return too_many("requests for this customer", wait);
    }
    if let (Some("hold" | "book"), Some(event)) = (kind.as_deref(), event)
        && let Err(wait) = guard.check(&guard.holds, &(key, event))
    {
        return too_many("holds and bookings of this event from this address", wait);
    }
    next.run(Request::from_parts(parts, Body::from(bytes))).await
}

/// A well-formed enqueue body's kind, customer (in normal form) and event.
/// A malformed request is refused by the handler and stores nothing: it
/// counts against its address only, not against a customer or an event.
fn what_is_asked(body: &[u8]) -> (Option<String>, Option<String>, Option<i64>) {
    let Ok(serde_json::Value::Object(envelope)) = serde_json::from_slice::<serde_json::Value>(body) else {
        return (None, None, None);
    };
    let kind = envelope.get("kind").and_then(|k| k.as_str()).map(str::to_string);
    let payload = envelope.get("payload");
    let well_formed = match (kind.as_deref(), payload) {
        (Some(kind), Some(payload)) => seatq_core::request::Request::decode(kind, payload).is_ok(),
        _ => false,
    };
    if !well_formed {
        return (None, None, None);
    }
    let customer = payload
        .and_then(|p| p.get("customer"))
        .and_then(|c| c.as_str())
        .map(|c| seatq_core::customer::normal_form(c).into_owned())
        .filter(|c| !c.is_empty());
    let event = payload.and_then(|p| p.get("event")).and_then(|e| e.as_i64());
    (kind, customer, event)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_read_and_print() {
        let r: Rate = "60/min".parse().expect("rate");
        assert_eq!((r.count.get(), r.per), (60, Duration::from_secs(60)));
        for text in ["20/s", "60/min", "10/10min", "500/h", "5/30s"] {
            assert_eq!(text.parse::<Rate>().expect(text).to_string(), text);
        }
        for bad in ["", "10", "0/s", "x/s", "10/", "10/week", "10/0s", "-1/s", "10/100000h"] {
            assert!(bad.parse::<Rate>().is_err(), "{bad}");
        }
        assert_eq!(parse_rate("off").expect("off"), None);
    }

    #[test]
    fn the_client_is_the_peer_unless_a_trusted_proxy_names_it() {
        let settings = Settings {
            trusted_proxies: vec![parse_net("10.0.0.0/8").expect("net"), parse_net("::1").expect("addr")],
            ..Settings::default()
        };
        let guard = Guard::new(&settings);
        let ip = |s: &str| s.parse::<IpAddr>().expect("address");
        let mut headers = HeaderMap::new();
        headers.insert("x-forwarded-for", HeaderValue::from_static("6.6.6.6, 203.0.113.7, 10.1.1.1"));
        // An untrusted peer's header is not read at all.
        assert_eq!(guard.client(ip("198.51.100.1"), &headers), ip("198.51.100.1"));
        // Through two trusted proxies: the first untrusted hop from the right;
        // what the client wrote itself (6.6.6.6) is not believed.
        assert_eq!(guard.client(ip("10.0.0.2"), &headers), ip("203.0.113.7"));
        headers.insert("x-forwarded-for", HeaderValue::from_static("[2001:db8::7]:4711"));
        assert_eq!(guard.client(ip("::1"), &headers), ip("2001:db8::7"));
        headers.insert("x-forwarded-for", HeaderValue::from_static("garbage"));
        assert_eq!(guard.client(ip("10.0.0.2"), &headers), ip("10.0.0.2"));
        headers.clear();
        assert_eq!(guard.client(ip("10.0.0.2"), &headers), ip("10.0.0.2"));
    }

    #[test]
    fn a_body_names_its_kind_customer_and_event() {
        let body = br#"{"kind": "hold", "payload": {"event": 7, "class": 1, "customer": "  ANN  Lee ", "party": 2}}"#;
        assert_eq!(what_is_asked(body), (Some("hold".into()), Some("ann lee".into()), Some(7)));
        assert_eq!(what_is_asked(b"not json"), (None, None, None));
        let malformed = br#"{"kind": "hold", "payload": {"event": 7, "customer": "ann", "party": 20}}"#;
        assert_eq!(what_is_asked(malformed), (None, None, None));
    }
}
