//! Producers that book one request at a time and wait for its outcome, as a
//! shop's backend does: through the producer library (`direct`: `Client::
//! enqueue`, then `Client::wait`) or through `seatq serve`'s HTTP API
//! (`http`: `POST /api/requests?wait=`, to a server this process runs on
//! 127.0.0.1). Both use the same client set-up (`seatq_server::connect`, the
//! pool `seatq serve` uses by default) and the same idempotency keys, so
//! the difference between the two is what HTTP costs.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::{Context as _, bail};
use seatq::{Client, NewRequest, Request};
use serde_json::{Value, json};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// The server's pool, as `seatq serve` opens it by default.
const CONNECTIONS: u32 = 16;
/// The longest one request may take from enqueue to outcome.
const PATIENCE: Duration = Duration::from_secs(120);

/// How the producers send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    Direct,
    Http,
}

impl Via {
    pub fn name(self) -> &'static str {
        match self {
            Via::Direct => "direct",
            Via::Http => "http",
        }
    }
}

/// The producers' client, as `seatq serve` connects.
pub async fn connect(url: &str) -> anyhow::Result<Client> {
    seatq_server::connect(&seatq_server::Urls { database: url, ..Default::default() }, CONNECTIONS, PATIENCE)
        .await
        .context("connecting the producers")
}

/// Send every request of `requests` through `producers` concurrent
/// producers, each one request at a time, waiting for its outcome.
pub async fn produce(
    client: Client,
    via: Via,
    requests: Vec<(&'static str, Value)>,
    producers: usize,
) -> anyhow::Result<()> {
    let shutdown = CancellationToken::new();
    let base = match via {
        Via::Direct => None,
        Via::Http => {
            let loopback = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
            let listener = tokio::net::TcpListener::bind(loopback).await.context("binding the server")?;
            let base = format!("http://{}", listener.local_addr()?);
            // Many producers from one address, as the benchmark means: no abuse limits.
            let limits = seatq_server::Limits::off();
            let settings = seatq_server::Settings { shop: false, dashboard: false, limits, ..Default::default() };
            let router = seatq_server::router(client.clone(), settings, shutdown.clone())?;
            tokio::spawn(seatq_server::serve(
                listener,
                router,
                seatq_core::http::DEFAULT_HEADER_TIMEOUT,
                shutdown.clone(),
            ));
            Some(base)
        }
    };
    let http = reqwest::Client::builder().pool_max_idle_per_host(producers).build()?;
    let requests = Arc::new(requests);
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = JoinSet::new();
    for _ in 0..producers.max(1) {
        let (client, http, base, requests, next) =
            (client.clone(), http.clone(), base.clone(), requests.clone(), next.clone());
        tasks.spawn(async move {
            loop {
                let n = next.fetch_add(1, Ordering::Relaxed);
                let Some((kind, payload)) = requests.get(n) else { return Ok(()) };
                let key = format!("bench-{n}");
                match &base {
                    None => direct(&client, kind, payload, key).await?,
                    Some(base) => over_http(&http, base, kind, payload, &key).await?,
                }
            }
        });
    }
    let mut outcome = Ok(());
    while let Some(done) = tasks.join_next().await {
        if let Err(e) = done.context("a producer panicked").and_then(|r: anyhow::Result<()>| r) {
            outcome = Err(e);
            tasks.abort_all();
        }
    }
    shutdown.cancel();
    outcome
}

async fn direct(client: &Client, kind: &str, payload: &Value, key: String) -> anyhow::Result<()> {
    let request = Request::decode(kind, payload)?;
    let id = client.enqueue(NewRequest { idempotency_key: Some(key), ..request.into() }).await?;
    client.wait(id, Some(PATIENCE)).await?;
    Ok(())
}

async fn over_http(http: &reqwest::Client, base: &str, kind: &str, payload: &Value, key: &str) -> anyhow::Result<()> {
    let wait = PATIENCE.as_secs();
    // A keyed request brings its own hold token, as a shop's client does.
    let token = seatq::HoldToken::new()?;
    let mut payload = payload.clone();
    payload["token"] = json!(token.as_str());
    let sent = http
        .post(format!("{base}/api/requests?wait={wait}"))
        .header("Idempotency-Key", key)
        .json(&json!({"kind": kind, "payload": payload}))
        .send()
        .await?;
    let status = sent.status();
    let mut record: Value = sent.json().await?;
    if status != reqwest::StatusCode::OK {
        bail!("POST /api/requests answered {status}: {record}");
    }
    // Still queued when the server's longest wait ran out: wait on.
    while record["status"] == "queued" {
        let id = record["id"].as_i64().context("the request's id")?;
        record =
            http.get(format!("{base}/api/requests/{id}/wait")).bearer_auth(token.as_str()).send().await?.json().await?;
    }
    Ok(())
}
