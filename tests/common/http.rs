//! `seatq serve` in the test process: the server on a free port of
//! 127.0.0.1 over a test database, and an HTTP client for it.

use seatq::Client;
use tokio_util::sync::CancellationToken;

use super::TestDb;

/// A server running until dropped.
pub struct Served {
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    pub http: reqwest::Client,
    shutdown: CancellationToken,
}

impl Served {
    /// Serve `db` with `settings`.
    pub async fn start(db: &TestDb, settings: seatq_server::Settings) -> Served {
        Served::start_with(Client::from_pool(db.pool.clone()), settings).await
    }

    /// Serve whatever `client` reaches.
    pub async fn start_with(client: Client, settings: seatq_server::Settings) -> Served {
        let shutdown = CancellationToken::new();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind a free port");
        let base = format!("http://{}", listener.local_addr().expect("local address"));
        let router = seatq_server::router(client, settings.clone(), shutdown.clone()).expect("settings");
        let (timeout, stop) = (seatq_core::http::DEFAULT_HEADER_TIMEOUT, shutdown.clone());
        tokio::spawn(async move { seatq_server::serve_with(listener, router, &settings, timeout, stop).await });
        Served { base, http: reqwest::Client::new(), shutdown }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// GET `path`: the status and the body as JSON (`Null` when it is not JSON).
    pub async fn get(&self, path: &str) -> (u16, serde_json::Value) {
        answer(self.http.get(self.url(path)).send().await).await
    }

    /// POST `body` (JSON) to `path`, with these headers.
    pub async fn post(
        &self,
        path: &str,
        headers: &[(&str, &str)],
        body: &serde_json::Value,
    ) -> (u16, serde_json::Value) {
        let mut request = self.http.post(self.url(path)).json(body);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        answer(request.send().await).await
    }
}

/// A response's status and JSON body.
pub async fn answer(sent: reqwest::Result<reqwest::Response>) -> (u16, serde_json::Value) {
    let response = sent.expect("an HTTP answer");
    let status = response.status().as_u16();
    let body = response.bytes().await.expect("the body");
    (status, serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null))
}

impl Drop for Served {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}
