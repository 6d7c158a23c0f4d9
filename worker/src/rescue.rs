//! Rescue: a dead worker's requests taken over within milliseconds.
//!
//! A worker process that dies mid-batch releases its claimed requests the
//! moment its connections go (the claim is a row lock of the batch
//! transaction), but an idle survivor would look only at its next poll. So
//! every worker holds an advisory lock of its own, its *life lock*
//! (`seatq.worker_lock(host, pid)`), on a connection of its own for as long
//! as it runs; and on a second connection it waits for the life lock of the
//! worker before it in the ring of registered workers (each is watched by
//! one, whatever the size of the fleet). PostgreSQL grants the wait the
//! instant the dead worker's session ends, and this worker wakes its idle
//! loops to claim. A lock wait costs nothing while nothing happens: no
//! polling, no CPU on either side.
//!
//! The two are separate sessions: one session holding its own lock while
//! waiting for the next worker's would close a cycle round the ring, which
//! PostgreSQL's deadlock detector would break. A worker that starts
//! announces itself (`seatq_workers`, once it holds its life lock and again
//! once it is registered); the worker's listener passes that on, and the
//! watchers stop waiting and read the ring again, so a new worker is watched
//! from its first moment: crash loops, rolling deploys and autoscaling are
//! when workers are new. The wait is also bounded by the session's
//! `lock_timeout` ([`ROUND`]), after which the ring is read again, for
//! announcements lost while the listener reconnects. A worker found dead
//! while reading the ring after an announcement (it joined and died before
//! it could be watched) is rescued too. A dead worker's sessions end at
//! about the same moment, but a batch session busy with a statement ends
//! only once it finishes, so the loops are woken again a little later
//! ([`AGAIN_AFTER`]).
//!
//! Rescue only makes recovery faster: the fallback poll still finds every
//! released request. A worker that cannot take its life lock (another
//! session has it: a second worker in the same process) is simply not
//! watched; one that cannot reach the database retries with backoff.

use std::sync::Arc;
use std::time::Duration;

use seatq_core::retry::Jitter;
use seatq_core::sqlstate::{is_lock_unavailable, is_query_canceled};
use sqlx::postgres::{PgConnectOptions, PgConnection};
use sqlx::{ConnectOptions, Connection};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::periodic::{Messages, Periodic, Round, Task};
use crate::sql::{metrics, rescue};
use crate::wake::Wake;

/// Longest single wait for a watched worker's life lock: the ring is read
/// again after it, so a worker whose announcement was lost is watched
/// within this.
pub const ROUND: Duration = Duration::from_secs(10);

/// After a rescue wake-up, the loops are woken once more after this long:
/// a batch session of the dead worker that was running a statement ends only
/// when the statement does.
pub const AGAIN_AFTER: Duration = Duration::from_millis(25);

/// The name the rescue sessions show in `pg_stat_activity`.
pub const APPLICATION_NAME: &str = "seatq-worker-rescue";

/// Hold this process's life lock and watch the worker before it until
/// `shutdown`, waking `wake`'s loops when that worker dies. `options` are
/// the worker's connection options; `host` and `pid` name this process;
/// `joined` is notified when another worker announces itself.
pub async fn run(
    options: PgConnectOptions,
    synchronous_standby: bool,
    host: String,
    pid: u32,
    wake: Arc<Wake>,
    joined: Arc<Notify>,
    shutdown: CancellationToken,
) {
    let periodic = Periodic {
        interval: Duration::ZERO,
        backoff: Some(Jitter::reconnect()),
        messages: Messages {
            failed: "cannot watch the other workers; a dead one's requests wait for the poll",
            failed_again: Some("still cannot watch the other workers"),
            recovered: Some("watching the other workers again"),
        },
    };
    // The wait is a statement that lasts up to a round: not a slow one to log.
    let options = options.application_name(APPLICATION_NAME).disable_statement_logging();
    let mut rescuer = Rescuer {
        options,
        synchronous_standby,
        host,
        pid: pid as i32,
        wake,
        joined,
        life: None,
        holds: false,
        watch: None,
        watched: None,
        news: false,
    };
    periodic.run(&mut rescuer, &shutdown).await;
    // Leave politely (the server would end the sessions, and free the life
    // lock, when the sockets close anyway).
    for conn in [rescuer.life.take(), rescuer.watch.take().map(|(conn, _)| conn)].into_iter().flatten() {
        let _ = tokio::time::timeout(Duration::from_secs(1), conn.close()).await;
    }
}

struct Rescuer {
    options: PgConnectOptions,
    /// [`crate::Config::synchronous_standby`], for its sessions' settings.
    synchronous_standby: bool,
    host: String,
    pid: i32,
    wake: Arc<Wake>,
    /// Notified when another worker announces itself.
    joined: Arc<Notify>,
    /// The session holding (or trying to hold) the life lock.
    life: Option<PgConnection>,
    /// Whether `life` holds it.
    holds: bool,
    /// The session that waits, and its server process (to cancel the wait).
    watch: Option<(PgConnection, i32)>,
    /// The life lock watched in the last round.
    watched: Option<i64>,
    /// Whether a worker announced itself since the ring was last read.
    news: bool,
}

impl Task for Rescuer {
    async fn round(&mut self, shutdown: &CancellationToken) -> Round {
        match shutdown.run_until_cancelled(self.watch_once()).await {
            None => Round::Stopped,
            Some(Ok(())) => Round::Done,
            Some(Err(e)) => {
                // Connect both anew; the life lock went with its session, if it did.
                self.life = None;
                self.watch = None;
                Round::Failed(e)
            }
        }
    }
}

impl Rescuer {
    /// Make sure the life lock is held, find the worker to watch, and wait
    /// for it to end, for at most a [`ROUND`].
    async fn watch_once(&mut self) -> Result<(), sqlx::Error> {
        // An announcement from here on means the ring read below may be
        // stale; one from before is answered by this very read.
        let joined = Arc::clone(&self.joined);
        let announced = joined.notified();
        tokio::pin!(announced);
        announced.as_mut().enable();
        self.hold().await?;
        let (watch, watch_pid) = match &mut self.watch {
            Some((conn, pid)) => (conn, *pid),
            None => {
                let mut conn = self.options.connect().await?;
                crate::worker::settle(&mut conn, self.synchronous_standby).await?;
                let timeout = format!("{}ms", ROUND.as_millis());
                rescue::SetLockTimeout { timeout: &timeout }.query().execute(&mut conn).await?;
                let pid = rescue::BackendPid.query().fetch_one(&mut conn).await?;
                let (conn, pid) = self.watch.insert((conn, pid));
                (conn, *pid)
            }
        };
        let ring = rescue::Ring { host: &self.host, pid: self.pid }.query().fetch_all(&mut *watch).await?;
        let mut target = None;
        for key in ring {
            let free = rescue::LifeLockFree { key }.query().fetch_one(&mut *watch).await?;
            if !free {
                target = Some(key);
                break;
            }
            // The worker watched last round ended between two rounds; or a
            // worker announced itself and is gone already (or has not taken
            // its life lock yet: a wake-up too many costs one claim).
            if self.watched == Some(key) || self.news {
                rescue(&self.wake);
            }
        }
        self.news = false;
        self.watched = target;
        let Some(key) = target else {
            // Nobody else to watch: look again in a round, or when one comes.
            tokio::select! {
                _ = tokio::time::sleep(ROUND) => {}
                _ = announced => self.news = true,
            }
            return Ok(());
        };
        let wait = rescue::AwaitLifeLock { key }.query().execute(&mut *watch);
        tokio::pin!(wait);
        let waited = tokio::select! {
            waited = &mut wait => waited,
            _ = announced => {
                // Another worker joined, perhaps just before this one in the
                // ring: stop waiting and read the ring again. The life
                // session is idle meanwhile and of the same login.
                self.news = true;
                if let Some(life) = &mut self.life {
                    rescue::CancelWait { pid: watch_pid }.query().execute(&mut *life).await?;
                }
                wait.await
            }
        };
        match waited {
            Ok(_) => {
                tracing::info!(life_lock = key, "a worker ended; taking over its requests");
                rescue(&self.wake);
                Ok(())
            }
            // The wait ran out, or was cut short for a ring read.
            Err(e) if is_lock_unavailable(&e) || is_query_canceled(&e) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Take the life lock if this process does not hold it yet, and check
    /// that the session holding it is still there.
    async fn hold(&mut self) -> Result<(), sqlx::Error> {
        let life = match &mut self.life {
            Some(conn) => conn,
            None => {
                self.holds = false;
                let mut conn = self.options.connect().await?;
                crate::worker::settle(&mut conn, self.synchronous_standby).await?;
                self.life.insert(conn)
            }
        };
        if self.holds {
            metrics::Ping.query().execute(&mut *life).await?;
        } else {
            self.holds = rescue::HoldLifeLock { host: &self.host, pid: self.pid }.query().fetch_one(&mut *life).await?;
            if self.holds {
                rescue::Announce.query().execute(&mut *life).await?;
            } else {
                tracing::debug!("another session holds this process's life lock; this worker is not watched");
            }
        }
        Ok(())
    }
}

/// Wake every idle loop to claim now, and again a little later.
fn rescue(wake: &Arc<Wake>) {
    wake.everyone();
    let wake = Arc::clone(wake);
    tokio::spawn(async move {
        tokio::time::sleep(AGAIN_AFTER).await;
        wake.everyone();
    });
}
