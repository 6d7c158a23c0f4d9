//! Serving HTTP, for `seatq serve` and the worker's `/metrics` alike: an
//! axum router over hyper's HTTP/1 connections, each given a deadline for
//! its request head, a bound on how many one client address holds open, and
//! a graceful shutdown.
//!
//! `axum::serve` sets no deadline on reading a request's head: a client that
//! opens connections and never finishes its headers (slow loris) would hold
//! each of them, and a task, for as long as it likes. Here hyper's HTTP/1
//! connection closes one whose head is not complete within the header
//! timeout: the first request's, and between requests, an idle kept-alive
//! connection's. What a request then takes is the router's business (the
//! server's request timeout).
//!
//! The header timeout alone does not stop one client from opening
//! connections faster than they time out, until the process runs out of
//! files and nobody else is served. So each client address ([`address_key`])
//! may hold at most [`PerAddress::max_connections`] open at once; one more is
//! answered `503 too_many_connections` and closed at once, costing the
//! server nothing while it waits.
//!
//! hyper answers a request it cannot parse (headers over its buffer, a
//! malformed request line) by itself, before any router sees it, with a
//! status and an empty body. Every other error of these servers is JSON, so
//! the connection's writer turns those answers into the JSON error too
//! ([`ParseErrors`]).
//!
//! Each request carries, as extensions, axum's `ConnectInfo<SocketAddr>` (the
//! client's end of the connection) and [`LocalAddr`] (the server's end: the
//! address the client dialled).
//!
//! HTTP/1 only, as the servers were: hyper-util's automatic builder would
//! also speak HTTP/2 and pull in the `h2` crate for nothing; its HTTP/1 half
//! is hyper's own builder, used directly.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// How long a client may take to send a request's head (request line and
/// headers), unless configured: ample for any real client, however slow its
/// network, and short enough that idle connections do not pile up.
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// Bounds of a configured header timeout, in seconds.
pub const HEADER_TIMEOUT_SECS: std::ops::RangeInclusive<u64> = 1..=300;
/// How many connections one client address may hold open at once, unless
/// configured: a browser opens six to a server, so this leaves room for a
/// household or an office behind one address, and none for a flood.
pub const DEFAULT_CONNECTIONS_PER_ADDRESS: usize = 64;

/// How a listener treats its connections.
#[derive(Debug, Clone, Copy)]
pub struct Connections {
    /// A connection whose request head is not complete this long after the
    /// server started reading it is closed.
    pub header_timeout: Duration,
    /// After shutdown, how long connections still open (an answer in
    /// progress, or a client yet to send its request) may hold the server up
    /// before they are abandoned.
    pub abandon_after: Duration,
}

/// How many connections one client address may hold open at once.
#[derive(Clone)]
pub struct PerAddress {
    /// At most this many open at once from one address ([`address_key`]); 0
    /// for no bound.
    pub max_connections: usize,
    /// Whether an address is exempt: a reverse proxy in front, whose
    /// connections carry many clients.
    pub exempt: Arc<dyn Fn(IpAddr) -> bool + Send + Sync>,
}

impl Default for PerAddress {
    fn default() -> Self {
        PerAddress { max_connections: DEFAULT_CONNECTIONS_PER_ADDRESS, exempt: Arc::new(|_| false) }
    }
}

impl std::fmt::Debug for PerAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PerAddress").field("max_connections", &self.max_connections).finish_non_exhaustive()
    }
}

/// The server's end of a request's connection: the address the client
/// dialled (with a wildcard listener, the interface it came in on).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalAddr(pub SocketAddr);

/// A client address as limits count it: an IPv4 address as it is (an
/// IPv4-mapped IPv6 one as the IPv4 address it is), an IPv6 address by its
/// /64 network, which is what one subscriber is given: counting single IPv6
/// addresses would let one client be billions.
pub fn address_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(std::net::Ipv6Addr::from(u128::from(v6) & !((1u128 << 64) - 1))),
        },
    }
}

/// Serve `router` on `listener` until `shutdown` is cancelled, with the
/// default bound of connections per address ([`serve_bounded`]).
pub async fn serve(listener: TcpListener, router: Router, connections: Connections, shutdown: CancellationToken) {
    serve_bounded(listener, router, connections, PerAddress::default(), shutdown).await;
}

/// Serve `router` on `listener` until `shutdown` is cancelled: no new
/// connections then, each open one closes once its answer in progress is
/// sent (at once if it is idle after an answer; one yet to send its first
/// request head waits for it, up to the header timeout), and any still open
/// `abandon_after` later are abandoned. A connection over its address's
/// bound is answered `503 too_many_connections` and closed. Errors
/// accepting a connection are logged and waited out by axum's listener (its
/// `tracing` feature); serving one connection never stops the others.
pub async fn serve_bounded(
    mut listener: TcpListener,
    router: Router,
    connections: Connections,
    per_address: PerAddress,
    shutdown: CancellationToken,
) {
    let mut http = http1::Builder::new();
    // The timer is what makes hyper keep the header timeout at all.
    http.timer(TokioTimer::new()).header_read_timeout(connections.header_timeout);
    let graceful = GracefulShutdown::new();
    let open = OpenConnections::default();
    // Refusals lingering at once, at most: past that a refused connection
    // is dropped without its answer (see `refuse`).
    let refusals = Arc::new(tokio::sync::Semaphore::new(MAX_LINGERING_REFUSALS));
    loop {
        let (stream, peer) = tokio::select! {
            accepted = axum::serve::Listener::accept(&mut listener) => accepted,
            () = shutdown.cancelled() => break,
        };
        let slot = match per_address.max_connections {
            0 => None,
            _ if (per_address.exempt)(peer.ip()) => None,
            max => match open.take(address_key(peer.ip()), max) {
                Some(slot) => Some(slot),
                None => {
                    tracing::debug!(%peer, max, "too many connections from one address: refused");
                    if let Ok(permit) = refusals.clone().try_acquire_owned() {
                        tokio::spawn(async move {
                            refuse(stream).await;
                            drop(permit);
                        });
                    }
                    continue;
                }
            },
        };
        let local = stream.local_addr().unwrap_or(peer);
        let service = TowerToHyperService::new(Addressed { router: router.clone(), peer, local });
        let io = TokioIo::new(ParseErrors::new(stream));
        let connection = graceful.watch(http.serve_connection(io, service));
        tokio::spawn(async move {
            // A client that goes away, or is too slow with its head, ends
            // its own connection: nothing for the operator to act on.
            if let Err(e) = connection.await {
                tracing::debug!(%peer, error = %e, "connection ended");
            }
            drop(slot);
        });
    }
    drop(listener);
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(connections.abandon_after) => {
            tracing::info!("abandoning connections still open at shutdown");
        }
    }
}

/// The router, handed each request with its connection's addresses.
#[derive(Clone)]
struct Addressed {
    router: Router,
    peer: SocketAddr,
    local: SocketAddr,
}

impl<B> tower_service::Service<hyper::Request<B>> for Addressed
where
    B: hyper::body::Body<Data = axum::body::Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    type Response = axum::response::Response;
    type Error = std::convert::Infallible;
    type Future = <Router as tower_service::Service<hyper::Request<B>>>::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        tower_service::Service::<hyper::Request<B>>::poll_ready(&mut self.router, cx)
    }

    fn call(&mut self, mut request: hyper::Request<B>) -> Self::Future {
        request.extensions_mut().insert(ConnectInfo(self.peer));
        request.extensions_mut().insert(LocalAddr(self.local));
        self.router.call(request)
    }
}

/// Open connections per address.
#[derive(Clone, Default)]
struct OpenConnections(Arc<Mutex<HashMap<IpAddr, usize>>>);

impl OpenConnections {
    /// One more connection from `key`, unless it has `max` open already.
    fn take(&self, key: IpAddr, max: usize) -> Option<Slot> {
        // A poisoned lock means a panic while counting: the counts are
        // still numbers, so go on with them.
        let mut open = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let n = open.entry(key).or_insert(0);
        if *n >= max {
            return None;
        }
        *n += 1;
        Some(Slot { key, open: self.clone() })
    }
}

/// A connection counted against its address until dropped.
struct Slot {
    key: IpAddr,
    open: OpenConnections,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.open.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(n) = open.get_mut(&self.key) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.remove(&self.key);
            }
        }
    }
}

/// How many refused connections may be lingering at once.
const MAX_LINGERING_REFUSALS: usize = 64;
/// How long a refused connection lingers for its client's request.
const REFUSAL_LINGER: Duration = Duration::from_secs(1);

/// Answer a connection over its address's bound with a JSON 503 and close
/// it. Its client may already have sent its request: closing with that
/// unread would reset the connection, and the client might lose the answer
/// before reading it; so the request is read and dropped for a moment
/// first (at most [`REFUSAL_LINGER`], a few kilobytes).
async fn refuse(mut stream: TcpStream) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let answer = json_answer(
        "503 Service Unavailable",
        "too_many_connections",
        "this address has too many connections open to the server: close some, then try again",
        &[("retry-after", "1")],
    );
    if stream.write_all(&answer).await.is_err() || stream.shutdown().await.is_err() {
        return;
    }
    let mut sink = [0u8; 4096];
    let drain = async {
        let mut left = 16 * 1024;
        while left > 0 {
            match stream.read(&mut sink).await {
                Ok(0) | Err(_) => break,
                Ok(n) => left -= n.min(left),
            }
        }
    };
    let _ = tokio::time::timeout(REFUSAL_LINGER, drain).await;
}

/// A whole HTTP/1.1 answer carrying the JSON error `{"error": {"code",
/// "message"}}`, closing the connection.
fn json_answer(status: &str, code: &str, message: &str, extra: &[(&str, &str)]) -> Vec<u8> {
    let body = serde_json::json!({ "error": { "code": code, "message": message } }).to_string();
    let mut head = format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\
         x-content-type-options: nosniff\r\n",
        body.len()
    );
    for (name, value) in extra {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    let mut answer = head.into_bytes();
    answer.extend_from_slice(body.as_bytes());
    answer
}

/// A connection's stream whose writer turns hyper's own bodyless answers to
/// a request it could not parse (`400`, `414`, `431`) into the JSON error.
///
/// Only hyper writes such an answer: every answer of the routers has a body
/// (JSON or a page), and a bodyless 4xx never comes from them, so an answer
/// beginning `HTTP/1.1 4` with `content-length: 0` is hyper's, written in
/// one piece (this writer does not take vectored writes, so hyper flattens
/// each answer into one buffer).
#[derive(Debug)]
pub struct ParseErrors<S> {
    inner: S,
    /// A replacement being written, and how much of hyper's answer it stands for.
    replacing: Option<(Vec<u8>, usize, usize)>,
}

impl<S> ParseErrors<S> {
    pub fn new(inner: S) -> Self {
        ParseErrors { inner, replacing: None }
    }

    /// The JSON answer for hyper's bodyless one, if `written` is that.
    fn replacement(written: &[u8]) -> Option<Vec<u8>> {
        let head_end = written.windows(4).position(|w| w == b"\r\n\r\n")?;
        let head = std::str::from_utf8(&written[..head_end]).ok()?;
        if head_end + 4 != written.len() || !head.lines().any(|l| l.eq_ignore_ascii_case("content-length: 0")) {
            return None;
        }
        let (status, code, message) = match head.lines().next()? {
            l if l.starts_with("HTTP/1.1 431") => (
                "431 Request Header Fields Too Large",
                "headers_too_large",
                "the request's headers are larger than the server takes",
            ),
            l if l.starts_with("HTTP/1.1 414") => {
                ("414 URI Too Long", "uri_too_long", "the request's path and query are longer than the server takes")
            }
            l if l.starts_with("HTTP/1.1 400") => {
                ("400 Bad Request", "invalid_request", "the request is not well-formed HTTP/1.1")
            }
            _ => return None,
        };
        Some(json_answer(status, code, message, &[]))
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for ParseErrors<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for ParseErrors<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        let this = &mut *self;
        if this.replacing.is_none() {
            match Self::replacement(buf) {
                Some(answer) => this.replacing = Some((answer, 0, buf.len())),
                None => return Pin::new(&mut this.inner).poll_write(cx, buf),
            }
        }
        // Write the replacement whole; hyper offers the same buffer again
        // after `Pending`, and learns it was written once all of ours is.
        while let Some((answer, sent, stands_for)) = this.replacing.as_mut() {
            if *sent == answer.len() {
                let n = *stands_for;
                this.replacing = None;
                return Poll::Ready(Ok(n));
            }
            match Pin::new(&mut this.inner).poll_write(cx, &answer[*sent..]) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(std::io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => *sent += n,
                other => return other,
            }
        }
        Poll::Ready(Ok(0))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    /// A server of one route with a header timeout of one second; its
    /// address, and the task serving it.
    async fn start(shutdown: &CancellationToken) -> (std::net::SocketAddr, tokio::task::JoinHandle<()>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        let router = Router::new().route("/", axum::routing::get(|| async { "hello\n" }));
        let connections = Connections { header_timeout: Duration::from_secs(1), abandon_after: Duration::from_secs(1) };
        (addr, tokio::spawn(serve(listener, router, connections, shutdown.clone())))
    }

    /// Everything the server sends on `stream` until it closes it (with a
    /// generous bound, so that a server that never closes fails the test).
    async fn read_until_closed(stream: &mut TcpStream) -> String {
        let mut out = Vec::new();
        tokio::time::timeout(Duration::from_secs(30), stream.read_to_end(&mut out))
            .await
            .expect("the server closes the connection")
            .expect("read");
        String::from_utf8_lossy(&out).into_owned()
    }

    #[tokio::test]
    async fn an_unfinished_request_head_is_closed_and_a_whole_one_answered() {
        let shutdown = CancellationToken::new();
        let (addr, served) = start(&shutdown).await;

        let mut slow = TcpStream::connect(addr).await.expect("connect");
        slow.write_all(b"GET / HTT").await.expect("write");
        let silent = TcpStream::connect(addr).await.expect("connect");
        let mut normal = TcpStream::connect(addr).await.expect("connect");
        normal.write_all(b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").await.expect("write");

        let answer = read_until_closed(&mut normal).await;
        assert!(answer.starts_with("HTTP/1.1 200") && answer.ends_with("hello\n"), "{answer}");
        // Closed without an answer: no request was ever read.
        assert_eq!(read_until_closed(&mut slow).await, "");
        let mut silent = silent;
        assert_eq!(read_until_closed(&mut silent).await, "");

        shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(30), served).await.expect("stops").expect("no panic");
    }

    #[tokio::test]
    async fn headers_too_large_and_a_malformed_request_are_answered_in_json() {
        let shutdown = CancellationToken::new();
        let (addr, served) = start(&shutdown).await;
        let huge = format!("GET / HTTP/1.1\r\nhost: x\r\nx-big: {}\r\n\r\n", "a".repeat(1 << 20));
        for (request, status, code) in [
            (huge.as_bytes(), "431", "headers_too_large"),
            (&b"GET / HTTP/1.1\r\nhost: x\r\nbad header\r\n\r\n"[..], "400", "invalid_request"),
        ] {
            let mut stream = TcpStream::connect(addr).await.expect("connect");
            // The server may answer before it has read all of a huge head.
            let (mut reader, mut writer) = stream.split();
            let (_, answer) = tokio::join!(writer.write_all(request), read_until_closed_half(&mut reader));
            let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
            assert!(head.starts_with(&format!("HTTP/1.1 {status}")), "{answer}");
            assert!(head.contains("content-type: application/json"), "{head}");
            let json: serde_json::Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"));
            assert_eq!(json["error"]["code"], code, "{json}");
        }
        // A request that parses is answered by the router as ever.
        let mut normal = TcpStream::connect(addr).await.expect("connect");
        normal.write_all(b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").await.expect("write");
        assert!(read_until_closed(&mut normal).await.ends_with("hello\n"));
        shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(30), served).await.expect("stops").expect("no panic");
    }

    async fn read_until_closed_half(stream: &mut tokio::net::tcp::ReadHalf<'_>) -> String {
        let mut out = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(30), stream.read_to_end(&mut out)).await;
        String::from_utf8_lossy(&out).into_owned()
    }

    #[tokio::test]
    async fn shutdown_lets_an_answer_in_progress_finish_and_takes_no_new_connections() {
        let shutdown = CancellationToken::new();
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        let (started_tx, started_rx) = tokio::sync::oneshot::channel::<()>();
        let started_tx = std::sync::Arc::new(std::sync::Mutex::new(Some(started_tx)));
        let router = Router::new().route(
            "/",
            axum::routing::get(move || async move {
                if let Some(tx) = started_tx.lock().ok().and_then(|mut s| s.take()) {
                    let _ = tx.send(());
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
                "done\n"
            }),
        );
        let connections =
            Connections { header_timeout: Duration::from_secs(5), abandon_after: Duration::from_secs(30) };
        let served = tokio::spawn(serve(listener, router, connections, shutdown.clone()));

        let mut stream = TcpStream::connect(addr).await.expect("connect");
        stream.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n").await.expect("write");
        started_rx.await.expect("the handler started");
        shutdown.cancel();
        // Kept alive was asked for, but the answer closes the connection.
        let answer = read_until_closed(&mut stream).await;
        assert!(answer.starts_with("HTTP/1.1 200") && answer.ends_with("done\n"), "{answer}");
        tokio::time::timeout(Duration::from_secs(30), served).await.expect("stops").expect("no panic");
        assert!(TcpStream::connect(addr).await.is_err(), "the listener is closed");
    }
}
