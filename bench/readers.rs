//! Storefront readers during a run: page views of an event, each reading
//! its availability per class and its whole seat map as a storefront would,
//! from the client's shared cache (`Client::cached_availability`), at a
//! steady rate while the workers book, on connections of their own. What
//! they cost the bookings is the difference between a run with readers and
//! one without; what a page view costs, and what each database read the
//! cache made cost, are measured apart.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use seatq::{AvailabilityView, Client, SeatAvailability, ViewCacheStats};
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
    /// The cache's maximum age (how old a view served may be; twice that
    /// while a newer one is read).
    pub max_age_ms: f64,
    /// Page views completed, and per second of the run.
    pub reads: usize,
    pub reads_per_sec: f64,
    /// Latency of a page view: the cached view (served, or read if none
    /// young enough), its summary and a pass over its whole seat map.
    pub view_p50_ms: f64,
    pub view_p99_ms: f64,
    /// Page views served a fresh view, an older one while a newer was read,
    /// or that waited for a read.
    pub fresh: u64,
    pub stale: u64,
    pub waited: u64,
    /// Database reads the cache made during the run, and the latency of
    /// those whose views were served (each from asking for a connection to
    /// the last row).
    pub db_reads: u64,
    pub db_read_p50_ms: f64,
    pub db_read_p99_ms: f64,
    /// Seats on the map read.
    pub map_seats: usize,
}

/// Readers running until [`Readers::stop`].
pub struct Readers {
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<anyhow::Result<Reads>>,
}

impl Readers {
    /// Start reading `event` of the database at `url`, `rate` page views a
    /// second, from a cache whose views are at most `max_age` old.
    pub async fn start(url: &str, event: i64, rate: f64, max_age: Duration) -> anyhow::Result<Readers> {
        let options = seatq::db::options(url)?.application_name("seatq-bench-readers");
        let pool = PgPoolOptions::new().max_connections(CONNECTIONS).connect_with(options).await?;
        let client = Client::from_pool(pool).with_view_max_age(max_age);
        // One page view before the clock starts: connections and plans warm,
        // and the layout read, as a storefront's are.
        let (warm, _, _) = page_view(&client, event).await?;
        let (stop, stopped) = oneshot::channel();
        let task = tokio::spawn(read(client, event, rate, warm, stopped));
        Ok(Readers { stop, task })
    }

    /// Stop, and say what was measured.
    pub async fn stop(self) -> anyhow::Result<Reads> {
        let _ = self.stop.send(());
        self.task.await?
    }
}

async fn read(
    client: Client,
    event: i64,
    rate: f64,
    warm: Arc<AvailabilityView>,
    mut stopped: oneshot::Receiver<()>,
) -> anyhow::Result<Reads> {
    let mut interval = tokio::time::interval(Duration::from_secs_f64(1.0 / rate.max(0.001)));
    // A late page view is still made; those missed meanwhile are not
    // crowded in after it (a storefront's visitors do not wait for it).
    interval.set_missed_tick_behavior(MissedTickBehavior::Skip);
    let before = client.view_cache_stats();
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
    let mut latency = Vec::new();
    // Each view served, by address (each kept, so that no address is used
    // twice), but the warm-up's, read before the clock.
    let mut served: HashMap<usize, Arc<AvailabilityView>> = HashMap::new();
    let mut map_seats = 0;
    while let Some(view) = views.join_next().await {
        let (view, ms, seats) = view??;
        latency.push(ms);
        if !Arc::ptr_eq(&view, &warm) {
            served.insert(Arc::as_ptr(&view) as usize, view);
        }
        map_seats = seats;
    }
    let secs = started.elapsed().as_secs_f64();
    let after = client.view_cache_stats();
    let delta = |f: fn(&ViewCacheStats) -> u64| f(&after) - f(&before);
    let mut db: Vec<f64> = served.values().map(|v| v.read_took().as_secs_f64() * 1e3).collect();
    client.pool().close().await;
    Ok(Reads {
        rate,
        max_age_ms: client.view_max_age().as_secs_f64() * 1e3,
        reads: latency.len(),
        reads_per_sec: if secs > 0.0 { latency.len() as f64 / secs } else { 0.0 },
        view_p50_ms: percentile(&mut latency, 0.50),
        view_p99_ms: percentile(&mut latency, 0.99),
        fresh: delta(|s| s.fresh),
        stale: delta(|s| s.stale),
        waited: delta(|s| s.waited),
        db_reads: delta(|s| s.reads),
        db_read_p50_ms: percentile(&mut db, 0.50),
        db_read_p99_ms: percentile(&mut db, 0.99),
        map_seats,
    })
}

/// One page view: the event's cached view, its summary, and a pass over
/// its seat map (counting the free seats, as drawing it would visit each).
/// Returns the view, the page view's latency in milliseconds and the seats
/// on the map.
async fn page_view(client: &Client, event: i64) -> Result<(Arc<AvailabilityView>, f64, usize), seatq::Error> {
    let start = Instant::now();
    let view = client.cached_availability(event).await?;
    let classes = view.classes().len();
    let free = view.seats().filter(|(_, state)| *state == SeatAvailability::Free).count();
    let ms = start.elapsed().as_secs_f64() * 1e3;
    std::hint::black_box((classes, free));
    let seats = view.seats().len();
    Ok((view, ms, seats))
}

/// The `q` quantile (nearest rank) of `values`; 0 when there are none.
fn percentile(values: &mut [f64], q: f64) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => 0.0,
        n => values[((n as f64 * q).ceil() as usize).clamp(1, n) - 1],
    }
}
