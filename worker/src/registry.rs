//! The worker registry: each process registers in `seatq.workers` and
//! heartbeats, so `seatq workers` lists the live ones; each live worker drops
//! the rows of dead ones.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::sql::{registry, rescue};
use serde_json::Value;
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use crate::metrics::Metrics;
use crate::periodic::{Messages, Periodic, Round, Task};
use seatq_core::retry::Jitter;

/// Who this worker is.
#[derive(Debug, Clone)]
pub struct Identity {
    pub name: String,
    pub host: String,
    pub pid: u32,
    /// The settings it runs with, for `seatq workers`.
    pub settings: Value,
}

impl Identity {
    /// This process, named `name` or `host-pid`.
    pub fn this_process(name: Option<String>, settings: Value) -> Identity {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .ok()
            .filter(|h| !h.is_empty())
            .or_else(|| std::env::var("HOSTNAME").ok())
            .unwrap_or_else(|| "unknown-host".into());
        let pid = std::process::id();
        Identity { name: name.unwrap_or_else(|| format!("{host}-{pid}")), host, pid, settings }
    }
}

/// The registry's background task: a round registers (or heartbeats, once
/// registered) and drops the rows of dead workers.
struct Heartbeat {
    pool: PgPool,
    me: Identity,
    metrics: Arc<Metrics>,
    /// This worker's row, once registered.
    id: Option<i64>,
}

impl Task for Heartbeat {
    async fn round(&mut self, shutdown: &CancellationToken) -> Round {
        let (pool, me) = (&self.pool, &self.me);
        let beat = async {
            match self.id {
                None => {
                    let register = registry::RegisterWorker {
                        name: &me.name,
                        host: &me.host,
                        pid: me.pid as i32,
                        settings: &me.settings,
                    };
                    register.query().fetch_one(pool).await.map(Some)
                }
                Some(current) => registry::Heartbeat { worker: current }
                    .query()
                    .fetch_optional(pool)
                    .await
                    .map(|alive| alive.map(|_| current)),
            }
        };
        let now = match shutdown.run_until_cancelled(beat).await {
            None => return Round::Stopped,
            Some(Ok(now)) => now,
            Some(Err(e)) => return Round::Failed(e),
        };
        if now.is_none() {
            tracing::warn!("this worker's registration was dropped as dead; registering again");
        } else if self.id.is_none() {
            tracing::info!(worker = now, name = %me.name, "registered");
            // The others read the ring again and watch this worker now
            // (`crate::rescue`); should this fail, they do within a round.
            if let Err(e) = rescue::Announce.query().execute(pool).await {
                tracing::debug!(error = %e, "could not announce this worker");
            }
        }
        self.id = now;
        if self.id.is_some() {
            Metrics::add(&self.metrics.heartbeats, 1);
            let ms = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0);
            self.metrics.last_heartbeat_ms.store(ms, std::sync::atomic::Ordering::Relaxed);
        }
        let dead_after = seatq_core::WORKER_DEAD_AFTER.as_secs_f64();
        let drop_dead = registry::DropDeadWorkers { after_secs: dead_after }.query().execute(pool);
        match shutdown.run_until_cancelled(drop_dead).await {
            None => return Round::Stopped,
            Some(Err(e)) => tracing::debug!(error = %e, "dropping dead workers failed"),
            Some(Ok(_)) => {}
        }
        Round::Done
    }
}

/// How long a worker leaving tries to delete its row before giving up (the
/// row then expires by itself after [`seatq_core::WORKER_DEAD_AFTER`]).
const DEREGISTER_WITHIN: Duration = Duration::from_secs(2);

/// Register, heartbeat every `interval` until cancelled, then deregister.
/// Every database call races the shutdown token, and the final deregister is
/// bounded by [`DEREGISTER_WITHIN`], so an outage never holds up shutdown.
/// A failed heartbeat is the first sign of an outage: it is logged at once.
pub async fn run(pool: PgPool, me: Identity, interval: Duration, metrics: Arc<Metrics>, shutdown: CancellationToken) {
    let periodic = Periodic {
        interval,
        backoff: Some(Jitter::reconnect()),
        messages: Messages {
            failed: "heartbeat failed: is the database down?",
            failed_again: None,
            recovered: Some("database reachable again; heartbeat resumed"),
        },
    };
    let mut heartbeat = Heartbeat { pool, me, metrics, id: None };
    periodic.run(&mut heartbeat, &shutdown).await;
    let Heartbeat { pool, id, .. } = heartbeat;
    let Some(id) = id else { return };
    let deregister = registry::DeregisterWorker { worker: id }.query().execute(&pool);
    match tokio::time::timeout(DEREGISTER_WITHIN, deregister).await {
        Ok(Ok(_)) => tracing::debug!(worker = id, "deregistered"),
        Ok(Err(e)) => tracing::warn!(error = %e, "could not deregister; the row expires by itself"),
        Err(_) => {
            tracing::warn!(within = ?DEREGISTER_WITHIN, "could not deregister in time; the row expires by itself")
        }
    }
}
