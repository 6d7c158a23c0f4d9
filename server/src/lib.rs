//! seatq-server: `seatq serve`, one process on tokio and axum offering three
//! things, each of which can be turned off ([`Settings`]):
//!
//! - an HTTP JSON API for producers that cannot or should not hold a database
//!   connection: enqueue each request kind (with an `Idempotency-Key` header),
//!   read a request, wait for its outcome (long-poll or Server-Sent Events),
//!   read availability and seat maps; its OpenAPI description, generated from
//!   the handlers, at `/api/openapi.json`;
//! - a checkout page (`/shop/{event}`): the event's seat map as SVG, refreshed
//!   live; pick seats (or a party size and class), hold, a countdown, confirm
//!   or cancel;
//! - an operator dashboard (`/dashboard`): queue depth, throughput and
//!   latency, workers, dead requests with a retry action, events with their
//!   seat maps.
//!
//! Every action goes through the producer library ([`seatq::Client`]), with
//! the same validation and queue as any producer: a request the page makes
//! shows in `seatq stats` like any other. No SQL is built from input.
//!
//! # Layout
//!
//! - [`api`]: the JSON API's handlers;
//! - `wait`: long-poll and Server-Sent Events of outcomes, served by the
//!   client's waiter hub (one listening connection for every waiter);
//! - `lapsed`: the `seatq_hold_lapsed` announcements, one listener for the
//!   process, fanned out to the pages' event streams;
//! - `maps`: reading availability and seat maps (one function each), and
//!   laying a seat map out as SVG;
//! - `shop`, `dashboard`: the pages (templates in `templates/`, checked at
//!   compile time; one script and one style sheet in `assets/`);
//! - `auth`: the operator token;
//! - `holder`: the hold token that lets a customer read their own requests;
//! - [`identity`]: the customer the shop vouches for (a signed assertion, or
//!   a trusted proxy's header), when the body's word is not enough;
//! - [`limits`]: who the client is (behind trusted proxies too), and the
//!   abuse limits per client address and per customer (`governor`);
//! - `origin`: the Host every request names, the Origin of operator
//!   actions, the Content-Type of the API's posts;
//! - [`error`]: the one JSON error type, seatq's error codes mapped to HTTP
//!   statuses;
//! - `openapi`: the generated API description;
//! - `sql`: the server's own statements (the dashboard's).

pub mod api;
mod auth;
mod dashboard;
pub mod error;
mod holder;
pub mod identity;
mod lapsed;
pub mod limits;
mod maps;
mod openapi;
mod origin;
mod pages;
mod shop;
mod sql;
mod wait;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use seatq::Client;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tower_http::compression::CompressionLayer;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::set_header::SetResponseHeaderLayer;
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::TraceLayer;

pub use axum::http::HeaderName as Header;
pub use error::ApiError;
pub use holder::TOKEN_HEADER;
pub use identity::{CustomerIdentity, SigningKey};
pub use ipnet::IpNet;
pub use limits::{Limits, MaybeRate, Rate};
pub use openapi::openapi_json;
pub use origin::BadSite;
pub use pages::{BadCurrency, Currency};

/// What `seatq serve` offers, and how.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The JSON API (`/api/...`). The checkout page needs it.
    pub api: bool,
    /// The checkout page (`/shop/{event}`).
    pub shop: bool,
    /// The operator dashboard (`/dashboard`).
    pub dashboard: bool,
    /// The operator token: operator actions (retrying dead requests) need it;
    /// without one they are off.
    pub operator_token: Option<String>,
    /// Whether reading operator figures (the dashboard, `/api/ops/...`) needs
    /// the token too.
    pub protect_reads: bool,
    /// How long one HTTP request may take (a long-poll wait is cut to fit).
    pub request_timeout: Duration,
    /// The largest request body, in bytes.
    pub body_limit: usize,
    /// Abuse limits per client address and per customer ([`Limits`]).
    pub limits: Limits,
    /// Reverse proxies in front whose word on the client's address is
    /// taken (addresses or networks). None by default: the client is the
    /// connection's peer. Their connections are not bounded per address.
    pub trusted_proxies: Vec<IpNet>,
    /// The header a trusted proxy names the client in (a list of
    /// addresses, the nearest hop last): `X-Forwarded-For` by default.
    pub client_ip_header: HeaderName,
    /// Clients never rate limited nor bounded in connections: the shop's
    /// own backends, which enqueue for many customers.
    pub rate_limit_exempt: Vec<IpNet>,
    /// The origin customers and operators reach the server at, as
    /// `https://tickets.example.com`: the server answers to its host, takes
    /// operator actions from its pages, and with `https` (TLS ended by a
    /// proxy in front) marks the operator cookie `Secure`.
    pub public_origin: Option<String>,
    /// Host names the server answers to besides loopback, `localhost`, the
    /// address it is reached at and the public origin's host (`name` on any
    /// port, or `name:port`).
    pub allowed_hosts: Vec<String>,
    /// Where the customer comes from: the body (the default), or the shop's
    /// word for it ([`CustomerIdentity`]); then a body naming another
    /// customer is refused.
    pub customer_identity: CustomerIdentity,
    /// The currency the venues' prices are in, as the pages show them
    /// (`GBP` by default: "£45.00").
    pub currency: Currency,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            api: true,
            shop: true,
            dashboard: true,
            operator_token: None,
            protect_reads: false,
            request_timeout: Duration::from_secs(30),
            body_limit: 64 * 1024,
            limits: Limits::default(),
            trusted_proxies: Vec::new(),
            client_ip_header: HeaderName::from_static("x-forwarded-for"),
            rate_limit_exempt: Vec::new(),
            public_origin: None,
            allowed_hosts: Vec::new(),
            customer_identity: CustomerIdentity::Body,
            currency: Currency::default(),
        }
    }
}

/// Settings that do not combine.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error("the checkout page needs the API: turn the page off too (--no-shop), or keep the API on")]
    ShopWithoutApi,
    #[error(
        "protecting reads needs an operator token: set SEATQ_OPERATOR_TOKEN or --operator-token-file, or leave reads open"
    )]
    ProtectedWithoutToken,
    #[error("the operator token is empty")]
    EmptyToken,
    #[error(
        "the operator token may hold only printable ASCII without spaces, quotes, commas, semicolons or backslashes \
         (it travels in a cookie)"
    )]
    TokenNotCookieSafe,
    #[error("everything is turned off: keep at least one of the API, the checkout page and the dashboard")]
    NothingToServe,
    #[error(transparent)]
    Site(#[from] BadSite),
    #[error(
        "a customer header is believed only from a trusted proxy: name the proxy in front with --trusted-proxy, \
         or take the customer from a signed assertion (--customer-key-file)"
    )]
    CustomerHeaderWithoutProxy,
}

impl Settings {
    /// Refuse settings that do not combine.
    pub fn check(&self) -> Result<(), SettingsError> {
        if self.shop && !self.api {
            return Err(SettingsError::ShopWithoutApi);
        }
        if self.operator_token.as_deref().is_some_and(|t| t.trim().is_empty()) {
            return Err(SettingsError::EmptyToken);
        }
        let cookie_safe = |t: &str| t.bytes().all(|b| b.is_ascii_graphic() && !b"\",;\\".contains(&b));
        if self.operator_token.as_deref().is_some_and(|t| !cookie_safe(t)) {
            return Err(SettingsError::TokenNotCookieSafe);
        }
        if self.protect_reads && self.operator_token.is_none() {
            return Err(SettingsError::ProtectedWithoutToken);
        }
        if !(self.api || self.shop || self.dashboard) {
            return Err(SettingsError::NothingToServe);
        }
        origin::Site::new(self.public_origin.as_deref(), &self.allowed_hosts)?;
        if matches!(self.customer_identity, CustomerIdentity::Header(_)) && self.trusted_proxies.is_empty() {
            return Err(SettingsError::CustomerHeaderWithoutProxy);
        }
        Ok(())
    }

    /// The longest a long-poll or an event stream waits for an outcome
    /// before answering "not yet": a little under the request timeout.
    pub fn max_wait(&self) -> Duration {
        self.request_timeout.saturating_sub(Duration::from_secs(2)).max(Duration::from_secs(1))
    }
}

/// What the handlers share.
#[derive(Clone)]
pub(crate) struct AppState {
    pub client: Client,
    pub settings: Arc<Settings>,
    pub lapsed: lapsed::Lapsed,
    /// Cancelled when the server shuts down: event streams end then.
    pub shutdown: CancellationToken,
    /// The abuse limits.
    pub guard: Arc<limits::Guard>,
    /// What the server answers to.
    pub site: Arc<origin::Site>,
}

/// The whole application: the parts `settings` turn on, with tracing,
/// timeouts, compression and a body limit. Fails if the settings do not
/// combine.
pub fn router(client: Client, settings: Settings, shutdown: CancellationToken) -> Result<Router, SettingsError> {
    settings.check()?;
    let lapsed = match settings.api {
        true => lapsed::Lapsed::start(client.db().clone(), shutdown.clone()),
        false => lapsed::Lapsed::off(),
    };
    let site = Arc::new(origin::Site::new(settings.public_origin.as_deref(), &settings.allowed_hosts)?);
    let guard = Arc::new(limits::Guard::new(&settings));
    guard.start_forgetting(shutdown.clone());
    let state = AppState {
        client,
        settings: Arc::new(settings.clone()),
        lapsed,
        shutdown,
        guard: guard.clone(),
        site: site.clone(),
    };
    let mut app = Router::new().route("/healthz", get(health));
    if settings.api {
        app = app.merge(api::routes()).route("/api/openapi.json", get(openapi::serve));
    }
    if settings.api || settings.dashboard {
        app = app.merge(api::operator_routes(&state));
    }
    if settings.shop {
        app = app.merge(shop::routes());
    }
    if settings.dashboard {
        app = app.merge(dashboard::routes());
    }
    if settings.shop || settings.dashboard {
        // The icon where browsers look for it unasked, too: a page's
        // favicon that answers 404 is an error in every customer's console.
        app = app
            .route("/", get(shop::index))
            .route("/assets/{file}", get(asset))
            .route("/favicon.ico", get(|| asset(axum::extract::Path("favicon.svg".into()))));
    }
    let mut app = app
        .fallback(error::not_found)
        // Inside the body limit: it reads the enqueue's body, under that limit.
        .layer(axum::middleware::from_fn_with_state(guard.clone(), limits::enqueues))
        .layer(RequestBodyLimitLayer::new(settings.body_limit))
        .layer(TimeoutLayer::with_status_code(StatusCode::SERVICE_UNAVAILABLE, settings.request_timeout))
        .layer(axum::middleware::from_fn_with_state(guard, limits::identify))
        // Before anything is counted: a request for another host is no one's.
        .layer(axum::middleware::from_fn_with_state(site, origin::check))
        // Outside the limits, so that their answers become JSON errors too.
        .layer(axum::middleware::from_fn(error::json_errors))
        .layer(CompressionLayer::new());
    for (name, value) in SECURITY_HEADERS {
        app = app.layer(SetResponseHeaderLayer::if_not_present(name, HeaderValue::from_static(value)));
    }
    Ok(app.layer(TraceLayer::new_for_http()).with_state(state))
}

/// The headers every answer carries, pages and API alike: no content-type
/// sniffing, never framed by another site (clickjacking), no referrer to
/// other sites, and a content security policy that lets a page load
/// scripts, styles, images and connections from the server itself only:
/// no inline script or style (the pages have none; their script and style
/// sheet are `/assets`), so markup that slipped through escaping could not
/// run; no plugins, no `<base>`, no form posting elsewhere.
const SECURITY_HEADERS: [(header::HeaderName, &str); 4] = [
    (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
    (header::X_FRAME_OPTIONS, "DENY"),
    (header::REFERRER_POLICY, "same-origin"),
    (
        header::CONTENT_SECURITY_POLICY,
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; object-src 'none'; \
         base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    ),
];

/// After shutdown, how long connections still open (a long-poll in
/// progress, or a client yet to send its request) may hold the server up.
const ABANDON_AFTER: Duration = Duration::from_secs(5);

/// Where `seatq serve` connects: the database URL (with
/// `?pool_mode=transaction` through a transaction pooler), the session URL
/// for what needs a session, and a hot standby to read availability from.
#[derive(Debug, Clone, Default)]
pub struct Urls<'a> {
    pub database: &'a str,
    pub session: Option<&'a str>,
    pub reads: Option<&'a str>,
}

/// Connect to `urls` (creating the database and applying migrations if
/// needed, where a session allows) with a pool of `connections`, each wait
/// for one bounded by `acquire_timeout` so that a database outage answers
/// 503 soon.
pub async fn connect(urls: &Urls<'_>, connections: u32, acquire_timeout: Duration) -> Result<Client, seatq::Error> {
    let pool = sqlx::postgres::PgPoolOptions::new().max_connections(connections).acquire_timeout(acquire_timeout);
    let target = seatq::reach::Target::parse(urls.database, urls.session)?;
    let client = Client::from_db(seatq::db::connect_target(&target, pool).await?);
    match urls.reads {
        Some(reads) => client.with_reads_from(reads).await,
        None => Ok(client),
    }
}

/// Serve `router` on `listener` until `shutdown` is cancelled: no new
/// connections then, event streams end, answers in progress finish, and
/// connections still open [`ABANDON_AFTER`] later are abandoned. A
/// connection whose request head is not complete within `header_timeout`
/// (a slow or idle client) is closed ([`seatq_core::http`]).
pub async fn serve(listener: TcpListener, router: Router, header_timeout: Duration, shutdown: CancellationToken) {
    serve_with(listener, router, &Settings::default(), header_timeout, shutdown).await;
}

/// [`serve`], with the bound of connections per client address
/// ([`Limits::connections_per_address`]) of `settings`, which do not bind
/// trusted proxies and exempt clients.
pub async fn serve_with(
    listener: TcpListener,
    router: Router,
    settings: &Settings,
    header_timeout: Duration,
    shutdown: CancellationToken,
) {
    let connections = seatq_core::http::Connections { header_timeout, abandon_after: ABANDON_AFTER };
    let unbounded: Vec<IpNet> = settings.trusted_proxies.iter().chain(&settings.rate_limit_exempt).copied().collect();
    let per_address = seatq_core::http::PerAddress {
        max_connections: settings.limits.connections_per_address,
        exempt: Arc::new(move |ip| unbounded.iter().any(|net| net.contains(&ip))),
    };
    seatq_core::http::serve_bounded(listener, router, connections, per_address, shutdown).await;
}

/// 200 when the database answers, else 503 (a JSON error).
async fn health(axum::extract::State(s): axum::extract::State<AppState>) -> Result<&'static str, ApiError> {
    sql::dashboard::Ping.query().execute(s.client.db()).await.map_err(seatq::Error::from)?;
    Ok("ok\n")
}

/// The page assets, compiled in: one script, one style sheet, the icon.
async fn asset(axum::extract::Path(file): axum::extract::Path<String>) -> axum::response::Response {
    let (body, kind) = match file.as_str() {
        "seatq.js" => (include_str!("../assets/seatq.js"), "text/javascript; charset=utf-8"),
        "seatq.css" => (include_str!("../assets/seatq.css"), "text/css; charset=utf-8"),
        "favicon.svg" => (include_str!("../assets/favicon.svg"), "image/svg+xml"),
        _ => return error::not_found().await.into_response(),
    };
    let headers = [
        (header::CONTENT_TYPE, HeaderValue::from_static(kind)),
        (header::CACHE_CONTROL, HeaderValue::from_static("max-age=300")),
    ];
    (headers, body).into_response()
}
