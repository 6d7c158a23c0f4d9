//! Storefront readers during a run: page views of an event, each reading its
//! availability per class and its whole seat map, at a steady rate while the
//! workers book, on connections of their own. What they cost the bookings is
//! the difference between a run with readers and one without.

use std::time::Duration;

use seatq::Client;
use serde::Serialize;
use sqlx::postgres::PgPoolOptions;
use tokio::sync::oneshot;
use tokio::task::JoinSet;
use tokio::time::{Instant, MissedTickBehavior};

/// Connections the readers share: enough that a read never waits for one at
/// the rates asked for, and few beside the workers' own.
const CONNECTIONS: u32 = 8;

/// What the readers measured.
#[derive(Debug, Clone, Serialize)]
pub struct Reads {
    /// Page views asked for per second.
    pub rate: f64,
    /// Page views completed, and per second of the run.
    pub reads: usize,
    pub reads_per_sec: f64,
    /// Latency of the availability summary and of the whole seat map (each
    /// from asking for a connection to the last row).
    pub summary_p50_ms: f64,
    pub summary_p99_ms: f64,
    pub map_p50_ms: f64,
    pub map_p99_ms: f64,
    /// Seats on the map read.
    pub map_seats: usize,
}

/// Readers running until [`Readers::stop`].
pub struct Readers {
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<anyhow::Result<Reads>>,
}

impl Readers {
    /// Start reading `event` of the database at `url`, `rate` page views a second.
    pub async fn start(url: &str, event: i64, rate: f64) -> anyhow::Result<Readers> {
        let options = seatq::db::options(url)?.application_name("seatq-bench-readers");
        let pool = PgPoolOptions::new().max_connections(CONNECTIONS).connect_with(options).await?;
        let client = Client::from_pool(pool);
        // One read before the clock starts: connections and plans warm, as a
        // storefront's are.
        page_view(&client, event).await?;
        let (stop, stopped) = oneshot::channel();
        let task = tokio::spawn(read(client, event, rate, stopped));
        Ok(Readers { stop, task })
    }

    /// Stop, and say what was measured.
    pub async fn stop(self) -> anyhow::Result<Reads> {
        let _ = self.stop.send(());
        self.task.await?
    }
}

async fn read(client: Client, event: i64, rate: f64, mut stopped: oneshot::Receiver<()>) -> anyhow::Result<Reads> {
    let mut interval = tokio::time::interval(Duration::from_secs_f64(1.0 / rate.max(0.001)));
    // A late page view is still made; those missed meanwhile are not
    // crowded in after it (a storefront's visitors do not wait for it).
    interval.set_missed_tick_behavior(MissedTickBehavior::Skip);
    let started = Instant::now();
    let mut views = JoinSet::new();
    loop {
        tokio::select! {
            _ = &mut stopped => break,
            _ = interval.tick() => {
                let client = client.clone();
                views.spawn(async move { page_view(&client, event).await });
            }
        }
    }
    let mut summary = Vec::new();
    let mut map = Vec::new();
    let mut map_seats = 0;
    while let Some(view) = views.join_next().await {
        let (s, m, seats) = view??;
        summary.push(s);
        map.push(m);
        map_seats = seats;
    }
    let secs = started.elapsed().as_secs_f64();
    client.pool().close().await;
    Ok(Reads {
        rate,
        reads: map.len(),
        reads_per_sec: if secs > 0.0 { map.len() as f64 / secs } else { 0.0 },
        summary_p50_ms: percentile(&mut summary, 0.50),
        summary_p99_ms: percentile(&mut summary, 0.99),
        map_p50_ms: percentile(&mut map, 0.50),
        map_p99_ms: percentile(&mut map, 0.99),
        map_seats,
    })
}

/// One page view: the summary, then the map. Returns their latencies in
/// milliseconds (each from asking the pool for a connection to the last row)
/// and the seats on the map.
async fn page_view(client: &Client, event: i64) -> Result<(f64, f64, usize), seatq::Error> {
    let start = Instant::now();
    client.availability(event).await?;
    let summary_ms = start.elapsed().as_secs_f64() * 1e3;
    let start = Instant::now();
    let map = client.seat_map(event).await?;
    let map_ms = start.elapsed().as_secs_f64() * 1e3;
    Ok((summary_ms, map_ms, map.len()))
}

/// The `q` quantile (nearest rank) of `values`; 0 when there are none.
fn percentile(values: &mut [f64], q: f64) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => 0.0,
        n => values[((n as f64 * q).ceil() as usize).clamp(1, n) - 1],
    }
}
