//! Where a request may come from, and what it may carry.
//!
//! - **Host**, on every route: the name the client used must be one the
//!   server answers to: a loopback address or `localhost`, the address the
//!   client reached it at, the public origin's host
//!   ([`crate::Settings::public_origin`]), or one of
//!   [`crate::Settings::allowed_hosts`]. A page of another site whose name
//!   was made to resolve to the server (DNS rebinding) sends its own name,
//!   and is refused, `400 host_not_allowed`.
//! - **Origin**, on operator actions (any post to `/api/ops/...` or
//!   `/dashboard/...`: retries, signing in and out): a browser names the
//!   page a post comes from, and it must be the server's own (the request's
//!   host, or the public origin). Browsers treat another port of the same
//!   host as the same site for `SameSite` cookies, so the operator cookie
//!   alone would let a page on another port act; `403 origin_not_allowed`.
//!   A request without `Origin` (curl, an API client) is not a browser's
//!   cross-site post, and goes on to the token check.
//! - **Content-Type**, on the API's posts: a body must be
//!   `application/json`, `415 unsupported_media_type` otherwise. A page of
//!   another site can post a form or plain text anywhere without asking,
//!   but not JSON; so no cross-site form reaches the API.

use std::net::IpAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use seatq_core::http::LocalAddr;

use crate::error::ApiError;

/// A configured origin (`https://tickets.example.com`) or host name
/// (`tickets.example.com`, `tickets.example.com:8443`) that does not parse.
#[derive(Debug, Clone, thiserror::Error)]
pub enum BadSite {
    #[error("{0:?} is not an origin: write the scheme and host customers use, as https://tickets.example.com")]
    Origin(String),
    #[error(
        "{0:?} is not a host name: write a name or address, with a port or not (tickets.example.com, 192.0.2.7:8080)"
    )]
    Host(String),
}

/// What the server answers to.
#[derive(Debug, Clone, Default)]
pub(crate) struct Site {
    /// The public origin: whether it is https, and its host and port.
    public: Option<(bool, Authority)>,
    hosts: Vec<Authority>,
}

/// A host (lower case, an IPv6 address without brackets) and a port, if given.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Authority {
    host: String,
    port: Option<u16>,
}

impl Authority {
    fn parse(text: &str) -> Option<Authority> {
        let text = text.trim();
        if text.is_empty() || text.contains(['/', '@', '?', '#', ' ']) {
            return None;
        }
        let (host, port) = match text.strip_prefix('[') {
            Some(rest) => {
                let (host, after) = rest.split_once(']')?;
                host.parse::<std::net::Ipv6Addr>().ok()?;
                match after {
                    "" => (host, None),
                    p => (host, Some(p.strip_prefix(':')?.parse().ok()?)),
                }
            }
            None => match text.rsplit_once(':') {
                Some((host, port)) if !host.contains(':') => (host, Some(port.parse().ok()?)),
                Some(_) => return None,
                None => (text, None),
            },
        };
        if host.is_empty() {
            return None;
        }
        Some(Authority { host: host.trim_end_matches('.').to_ascii_lowercase(), port })
    }

    fn ip(&self) -> Option<IpAddr> {
        self.host.parse().ok()
    }

    /// Whether `other` names this host, on this port if one is given.
    fn admits(&self, other: &Authority) -> bool {
        self.host == other.host && (self.port.is_none() || self.port == other.port)
    }
}

impl Site {
    pub fn new(public_origin: Option<&str>, hosts: &[String]) -> Result<Site, BadSite> {
        let public =
            public_origin.map(|o| parse_origin(o).ok_or_else(|| BadSite::Origin(o.to_string()))).transpose()?;
        let hosts = hosts
            .iter()
            .map(|h| Authority::parse(h).ok_or_else(|| BadSite::Host(h.clone())))
            .collect::<Result<_, _>>()?;
        Ok(Site { public, hosts })
    }

    /// Whether the public origin is served over TLS (by a proxy in front):
    /// the operator cookie is `Secure` then.
    pub fn is_https(&self) -> bool {
        self.public.as_ref().is_some_and(|(https, _)| *https)
    }

    /// Whether the server answers to `host`, reached at `local`.
    fn admits_host(&self, host: &Authority, local: Option<LocalAddr>) -> bool {
        let loopback = host.host == "localhost"
            || host.host.ends_with(".localhost")
            || host.ip().is_some_and(|ip| ip.is_loopback());
        loopback
            || local.is_some_and(|LocalAddr(a)| host.ip() == Some(a.ip()))
            || self.public.as_ref().is_some_and(|(_, public)| public.host == host.host)
            || self.hosts.iter().any(|h| h.admits(host))
    }

    /// Whether a post naming `origin`, to `host`, comes from the server's
    /// own pages: the public origin, or the request's own host and port (a
    /// host named without a port is on the scheme's).
    fn admits_origin(&self, origin: &str, host: &Authority) -> bool {
        let Some((https, origin)) = parse_origin(origin) else { return false };
        let port = |a: &Authority, https: bool| a.port.unwrap_or(if https { 443 } else { 80 });
        let origin_port = port(&origin, https);
        let public = self.public.as_ref().is_some_and(|(public_https, public)| {
            *public_https == https && public.host == origin.host && port(public, https) == origin_port
        });
        public || (origin.host == host.host && port(host, https) == origin_port)
    }
}

/// `scheme://host[:port]` with nothing after: whether it is https, and the host.
fn parse_origin(text: &str) -> Option<(bool, Authority)> {
    let uri: Uri = text.trim().trim_end_matches('/').parse().ok()?;
    let https = match uri.scheme_str()? {
        "https" => true,
        "http" => false,
        _ => return None,
    };
    if uri.path_and_query().is_some_and(|p| !p.as_str().is_empty() && p.as_str() != "/") {
        return None;
    }
    Some((https, Authority::parse(uri.authority()?.as_str())?))
}

/// The host a request names: its target's authority if it has one, else
/// its `Host` header.
fn requested_host(request: &Request) -> Option<Authority> {
    match request.uri().authority() {
        Some(a) => Authority::parse(a.as_str()),
        None => request.headers().get(header::HOST).and_then(|h| h.to_str().ok()).and_then(Authority::parse),
    }
}

/// Whether a post to `path` is an operator's action.
fn is_operator_action(method: &Method, path: &str) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
        && (path.starts_with("/api/ops/") || path == "/dashboard" || path.starts_with("/dashboard/"))
}

/// Whether a request carries a body (by its framing, not by reading it).
fn has_body(headers: &HeaderMap) -> bool {
    if headers.contains_key(header::TRANSFER_ENCODING) {
        return true;
    }
    match headers.get(header::CONTENT_LENGTH) {
        None => false,
        Some(v) => v.to_str().ok().and_then(|v| v.trim().parse::<u64>().ok()) != Some(0),
    }
}

/// Whether a content type is JSON (`application/json`, with parameters or not).
fn is_json(value: &str) -> bool {
    value.split(';').next().is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"))
}

/// Middleware, on every route: the Host check; on operator actions, the
/// Origin check; on the API's posts, the Content-Type check.
pub(crate) async fn check(State(site): State<Arc<Site>>, request: Request, next: Next) -> Response {
    let local = request.extensions().get::<LocalAddr>().copied();
    let Some(host) = requested_host(&request).filter(|h| site.admits_host(h, local)) else {
        let named = request.headers().get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("");
        tracing::debug!(host = named, "a host the server does not answer to");
        return ApiError::new(
            StatusCode::BAD_REQUEST,
            "host_not_allowed",
            format!(
                "this server does not answer to the host {}: use its own address, or add the name to its allowed \
                 hosts (--allowed-host, --public-origin)",
                seatq::validate::quoted(named)
            ),
        )
        .into_response();
    };
    let (method, path, headers) = (request.method(), request.uri().path(), request.headers());
    if is_operator_action(method, path) {
        let origin = headers.get(header::ORIGIN).map(|o| o.to_str().unwrap_or("null"));
        let cross_site = headers
            .get("sec-fetch-site")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.eq_ignore_ascii_case("cross-site") || v.eq_ignore_ascii_case("same-site"));
        let refused = match origin {
            Some(origin) => !site.admits_origin(origin, &host),
            None => cross_site,
        };
        if refused {
            return ApiError::new(
                StatusCode::FORBIDDEN,
                "origin_not_allowed",
                format!(
                    "operator actions are taken from the server's own pages only, not from {}",
                    seatq::validate::quoted(origin.unwrap_or("another site"))
                ),
            )
            .into_response();
        }
    }
    if path.starts_with("/api/") && !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS) {
        let typed = headers.get(header::CONTENT_TYPE).map(|v| v.to_str().unwrap_or(""));
        let refused = match typed {
            Some(t) => !is_json(t),
            None => has_body(headers),
        };
        if refused {
            return ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                format!(
                    "the API takes JSON bodies only: send Content-Type: application/json (not {})",
                    seatq::validate::quoted(typed.unwrap_or("none"))
                ),
            )
            .into_response();
        }
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddr;

    fn host(text: &str) -> Authority {
        Authority::parse(text).unwrap_or_else(|| panic!("{text}"))
    }

    #[test]
    fn hosts_the_server_answers_to() {
        let site = Site::new(Some("https://Tickets.Example.com"), &["shop.example.org".into(), "10.9.8.7:81".into()])
            .expect("site");
        let local = Some(LocalAddr(SocketAddr::from(([192, 0, 2, 5], 8080))));
        for ok in [
            "localhost",
            "localhost:8080",
            "app.localhost:3000",
            "127.0.0.1:8080",
            "127.0.0.2",
            "[::1]:8080",
            "192.0.2.5:8080",
            "tickets.example.com",
            "TICKETS.example.com.",
            "shop.example.org:8443",
            "10.9.8.7:81",
        ] {
            assert!(site.admits_host(&host(ok), local), "{ok}");
        }
        for refused in ["evil.example", "evil.example:8080", "192.0.2.6:8080", "10.9.8.7:80", "localhost.evil.example"]
        {
            assert!(!site.admits_host(&host(refused), local), "{refused}");
        }
        for bad in ["", "a b", "x/y", "user@host", "[::1", "[zz]:80", "host:port", "::1:80"] {
            assert!(Authority::parse(bad).is_none(), "{bad}");
        }
        assert!(site.is_https());
        assert!(Site::new(Some("tickets.example.com"), &[]).is_err());
        assert!(Site::new(Some("https://tickets.example.com/shop"), &[]).is_err());
        assert!(Site::new(None, &["a/b".into()]).is_err());
    }

    #[test]
    fn origins_of_the_servers_own_pages() {
        let site = Site::new(Some("https://tickets.example.com"), &[]).expect("site");
        let at = host("127.0.0.1:8080");
        assert!(site.admits_origin("http://127.0.0.1:8080", &at));
        assert!(site.admits_origin("https://tickets.example.com", &at));
        assert!(site.admits_origin("https://tickets.example.com:443", &at));
        for refused in ["null", "http://127.0.0.1:8081", "http://localhost:8080", "https://evil.example", "garbage"] {
            assert!(!site.admits_origin(refused, &at), "{refused}");
        }
        // Behind a TLS proxy the host has no port, the origin is https.
        assert!(site.admits_origin("https://tickets.example.com", &host("tickets.example.com")));
    }

    #[test]
    fn json_and_bodies() {
        assert!(is_json("application/json") && is_json("Application/JSON; charset=utf-8"));
        assert!(!is_json("text/plain") && !is_json("application/x-www-form-urlencoded"));
        let mut headers = HeaderMap::new();
        assert!(!has_body(&headers));
        headers.insert(header::CONTENT_LENGTH, "0".parse().expect("value"));
        assert!(!has_body(&headers));
        headers.insert(header::CONTENT_LENGTH, "12".parse().expect("value"));
        assert!(has_body(&headers));
        headers.clear();
        headers.insert(header::TRANSFER_ENCODING, "chunked".parse().expect("value"));
        assert!(has_body(&headers));
    }
}
