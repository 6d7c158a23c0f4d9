//! Serving HTTP, for `seatq serve` and the worker's `/metrics` alike: an
//! axum router over hyper's HTTP/1 connections, each given a deadline for
//! its request head, with a graceful shutdown.
//!
//! `axum::serve` sets no deadline on reading a request's head: a client that
//! opens connections and never finishes its headers (slow loris) would hold
//! each of them, and a task, for as long as it likes. Here hyper's HTTP/1
//! connection closes one whose head is not complete within the header
//! timeout: the first request's, and between requests, an idle kept-alive
//! connection's. What a request then takes is the router's business (the
//! server's request timeout).
//!
//! HTTP/1 only, as the servers were: hyper-util's automatic builder would
//! also speak HTTP/2 and pull in the `h2` crate for nothing; its HTTP/1 half
//! is hyper's own builder, used directly.

use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// How long a client may take to send a request's head (request line and
/// headers), unless configured: ample for any real client, however slow its
/// network, and short enough that idle connections do not pile up.
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// Bounds of a configured header timeout, in seconds.
pub const HEADER_TIMEOUT_SECS: std::ops::RangeInclusive<u64> = 1..=300;

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

/// Serve `router` on `listener` until `shutdown` is cancelled: no new
/// connections then, each open one closes once its answer in progress is
/// sent (at once if it is idle after an answer; one yet to send its first
/// request head waits for it, up to the header timeout), and any still open
/// `abandon_after` later are abandoned. Errors accepting a connection are
/// logged and waited out by axum's listener (its `tracing` feature); serving
/// one connection never stops the others.
pub async fn serve(mut listener: TcpListener, router: Router, connections: Connections, shutdown: CancellationToken) {
    let mut http = http1::Builder::new();
    // The timer is what makes hyper keep the header timeout at all.
    http.timer(TokioTimer::new()).header_read_timeout(connections.header_timeout);
    let graceful = GracefulShutdown::new();
    loop {
        let (stream, peer) = tokio::select! {
            accepted = axum::serve::Listener::accept(&mut listener) => accepted,
            () = shutdown.cancelled() => break,
        };
        let service = TowerToHyperService::new(router.clone());
        let connection = graceful.watch(http.serve_connection(TokioIo::new(stream), service));
        tokio::spawn(async move {
            // A client that goes away, or is too slow with its head, ends
            // its own connection: nothing for the operator to act on.
            if let Err(e) = connection.await {
                tracing::debug!(%peer, error = %e, "connection ended");
            }
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
