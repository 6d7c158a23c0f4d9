//! Enqueueing: one request ([`Client::enqueue`], or [`enqueue_in`] in the
//! caller's own transaction), many in one statement
//! ([`Client::enqueue_many`]), any number in one transaction, retried
//! without ever storing them twice ([`Client::enqueue_all`]), unvalidated
//! ones ([`Client::enqueue_raw`]); and the idempotency conflicts a batch
//! would meet.

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::postgres::PgExecutor;

use super::Client;
use crate::new_request::{InBatch, NewRequest};
use crate::outcome::ErrorCode;
use crate::retry::Retry;
use crate::sql::queue::{Commit, CurrentXactId, Enqueue, EnqueueMany, Fate, IdempotencyConflicts, XactStatus};
use crate::{Error, RequestError, validate};

/// Rows per statement of [`Client::enqueue_all`] (all in one transaction).
const BULK_CHUNK: usize = 1000;

/// Enqueueing.
impl Client {
    /// Validate and enqueue one request; returns its id. An idempotency key
    /// already used for another kind or payload is refused with
    /// [`Error::Invalid`] ([`ErrorCode::IdempotencyConflict`]).
    pub async fn enqueue(&self, new: impl Into<NewRequest>) -> Result<i64, Error> {
        enqueue_in(&self.db, new).await
    }

    /// Validate and enqueue many requests in one statement; returns their ids
    /// in order. Nothing is enqueued if any request is invalid, or if any
    /// reuses an idempotency key for another kind or payload (the whole batch
    /// is refused with [`ErrorCode::IdempotencyConflict`], naming the key; see
    /// [`Client::idempotency_conflicts`] to find such requests first).
    pub async fn enqueue_many(&self, batch: &[NewRequest]) -> Result<Vec<i64>, Error> {
        for new in batch {
            new.check()?;
        }
        Ok(enqueue_chunk(&self.db, batch).await?)
    }

    /// The requests of `batch` (by position, from 0) whose idempotency key
    /// was first used for another kind or payload, by a stored request or an
    /// earlier request of the batch, each with the refusal enqueueing it
    /// would meet. A check before enqueueing, to report such requests one by
    /// one (`seatq enqueue --file` does, by line); a conflicting request
    /// stored meanwhile by someone else is still refused by the enqueue.
    pub async fn idempotency_conflicts(&self, batch: &[NewRequest]) -> Result<Vec<(usize, RequestError)>, Error> {
        Ok(self
            .conflicts(batch)
            .await?
            .into_iter()
            .map(|c| {
                let message = format!(
                    "idempotency key {} was first used by {} with another kind or payload",
                    validate::quoted(&c.key),
                    c.first
                );
                (c.position, RequestError { code: ErrorCode::IdempotencyConflict, message })
            })
            .collect())
    }

    /// The requests of `batch` whose key was first used for another kind or
    /// payload (see [`Client::idempotency_conflicts`]), unworded.
    pub(crate) async fn conflicts(&self, batch: &[NewRequest]) -> Result<Vec<Conflict>, Error> {
        if batch.iter().all(|n| n.idempotency_key.is_none()) {
            return Ok(Vec::new());
        }
        let kinds: Vec<&str> = batch.iter().map(|n| n.request.kind()).collect();
        let payloads: Vec<Value> = batch.iter().map(|n| n.request.payload()).collect();
        let keys: Vec<Option<&str>> = batch.iter().map(|n| n.idempotency_key.as_deref()).collect();
        let rows = IdempotencyConflicts { kinds: &kinds, payloads: &payloads, keys: &keys }
            .query()
            .fetch_all(&self.db)
            .await?;
        Ok(rows
            .into_iter()
            .map(|row| {
                let first = match (row.first_id, row.first_position) {
                    (Some(id), _) => format!("request {id}"),
                    (None, Some(p)) => format!("request {p} of this batch"),
                    (None, None) => "another request".to_string(),
                };
                Conflict { position: row.position as usize - 1, key: row.key, first }
            })
            .collect())
    }

    /// Validate and enqueue any number of requests in one transaction (a
    /// thousand rows per statement), all or nothing; returns their ids in
    /// order. Nothing is enqueued if any request is invalid.
    ///
    /// A connection-level failure is retried under `retry`, the whole
    /// transaction again: until COMMIT is sent nothing is stored, so that is
    /// safe even for requests without an idempotency key. If the connection
    /// is lost during COMMIT itself, the outcome is unknown to the client:
    ///
    /// - when every request carries an idempotency key, it enqueues again,
    ///   which the keys make once-only on any server (the same one, or a
    ///   promoted standby after a failover), and returns the requests' ids;
    /// - otherwise it asks the server that ran the transaction whether it
    ///   committed (`pg_xact_status`), and enqueues again only if it did not,
    ///   so a file is never enqueued twice. Only that server can say: after a
    ///   failover (another server answers: the cluster's identifier or
    ///   timeline differs) the new primary's transaction ids say nothing of the
    ///   lost one.
    ///
    /// When it cannot be told (another server answers, the login may not read
    /// the server's identity, or no answer comes in time) the answer is
    /// [`Error::CommitUnknown`], saying why.
    pub async fn enqueue_all(&self, batch: &[NewRequest], retry: &Retry) -> Result<Vec<i64>, Error> {
        for new in batch {
            new.check()?;
        }
        let keyed = batch.iter().all(|n| n.idempotency_key.is_some());
        let mut backoff = retry.backoff();
        let mut lost: Option<LostCommit> = None;
        loop {
            if let Some(commit) = lost.take() {
                let Some(server) = commit.server.clone() else {
                    return Err(commit.unknown(
                        "this login may not read the server's identity (pg_control_system), so an answer could \
                         come from another server after a failover; give every request an idempotency key, and \
                         a lost COMMIT is settled by enqueueing again"
                            .into(),
                    ));
                };
                let fate = XactStatus { xid: &commit.xid, server: &server }.query().fetch_one(&self.db).await;
                let again = match fate {
                    Ok(Fate { status: Some(status), .. }) if status == "committed" => return Ok(commit.ids),
                    // Nothing was stored: enqueue again.
                    Ok(Fate { status: Some(status), .. }) if status == "aborted" => None,
                    // The lost session has not ended yet.
                    Ok(Fate { status: Some(status), .. }) if status == "in progress" => {
                        Some(format!("transaction {} is still in progress", commit.xid))
                    }
                    // A standby answers (promotion under way, or the route
                    // not yet moved): ask again once a primary does.
                    Ok(Fate { standby: true, .. }) => Some("a standby answers, not a primary".to_string()),
                    Ok(Fate { status: None, server: now, .. }) if now.as_deref() != Some(server.as_str()) => {
                        let now = now.unwrap_or_else(|| "one whose identity this login may not read".into());
                        let why = format!(
                            "another server answers now (a failover: {now}, was {server}), and it cannot know; \
                             without an idempotency key on every request, enqueueing again could store them twice"
                        );
                        return Err(commit.unknown(why));
                    }
                    Err(e) if crate::sqlstate::is_connection_level(&e) => Some(crate::error::db_text(&e)),
                    Ok(_) => return Err(commit.unknown("the server can no longer tell (too old)".into())),
                    Err(e) => return Err(commit.unknown(format!("asking failed: {}", crate::error::db_text(&e)))),
                };
                if let Some(why) = again {
                    if !backoff.sleep("asking whether the lost COMMIT committed; asking again", &why).await {
                        return Err(commit.unknown(format!("no answer in time ({why})")));
                    }
                    lost = Some(commit);
                    continue;
                }
            }
            match self.enqueue_all_once(batch).await {
                Ok(ids) => return Ok(ids),
                Err(Attempt::Failed(e)) => {
                    if !backoff.pause("enqueueing", &e).await {
                        return Err(e);
                    }
                }
                // Every request has a key: enqueueing again is once-only
                // whatever became of the lost COMMIT, on whichever server.
                Err(Attempt::CommitLost(commit)) if keyed => {
                    let what = "the connection was lost during COMMIT; enqueueing again (once-only by the keys)";
                    if !backoff.sleep(what, &commit.source).await {
                        return Err(commit.unknown("no connection again in time".into()));
                    }
                }
                Err(Attempt::CommitLost(commit)) => {
                    let what = "the connection was lost during COMMIT; asking the server whether it committed";
                    if !backoff.sleep(what, &commit.source).await {
                        return Err(commit.unknown("no answer in time".into()));
                    }
                    lost = Some(commit);
                }
            }
        }
    }

    /// One attempt of [`Client::enqueue_all`].
    async fn enqueue_all_once(&self, batch: &[NewRequest]) -> Result<Vec<i64>, Attempt> {
        let failed = |e: sqlx::Error| Attempt::Failed(Error::from(e));
        let mut tx = self.db.begin().await.map_err(failed)?;
        let mut ids = Vec::with_capacity(batch.len());
        for chunk in batch.chunks(BULK_CHUNK) {
            ids.extend(enqueue_chunk(&mut tx, chunk).await.map_err(failed)?);
        }
        let Commit { xid, server } = CurrentXactId.query().fetch_one(&mut tx).await.map_err(failed)?;
        match tx.commit().await {
            Ok(()) => Ok(ids),
            Err(source) if crate::sqlstate::is_connection_level(&source) => {
                Err(Attempt::CommitLost(LostCommit { xid, server, ids, source }))
            }
            // The server answered: it did not commit.
            Err(e) => Err(failed(e)),
        }
    }

    /// Enqueue requests exactly as given, unvalidated (the worker will fail
    /// bad ones with a clear error). For tools that pass JSON straight through.
    pub async fn enqueue_raw(
        &self,
        kinds: &[&str],
        payloads: &[Value],
        options: impl Iterator<Item = (Option<String>, i16)>,
    ) -> Result<Vec<i64>, Error> {
        let (keys, priorities): (Vec<Option<String>>, Vec<i32>) = options.map(|(k, p)| (k, i32::from(p))).unzip();
        let keys: Vec<Option<&str>> = keys.iter().map(Option::as_deref).collect();
        let run_at: Vec<Option<DateTime<Utc>>> = vec![None; kinds.len()];
        let none: Vec<Option<&str>> = vec![None; kinds.len()];
        let ids = EnqueueMany {
            kinds,
            payloads,
            keys: &keys,
            priorities: &priorities,
            run_at: &run_at,
            batches: &none,
            batch_refs: &none,
            batch_lines: &vec![None; kinds.len()],
        }
        .query()
        .fetch_all(&self.db)
        .await?;
        Ok(ids)
    }
}

/// Validate and enqueue one request on `executor`: a connection, a pool, or
/// the caller's own transaction (`seatq::enqueue_in(&mut *tx, request)`),
/// so that, say, a shop's order row and its booking request commit together
/// or not at all. Returns the request's id; the request is processed once
/// the transaction commits (workers never see it before).
///
/// Refused like [`Client::enqueue`]: an invalid request before anything is
/// sent, and an idempotency key first used for another kind or payload with
/// [`Error::Invalid`] ([`ErrorCode::IdempotencyConflict`]). The database
/// raises the latter, which aborts the caller's transaction (PostgreSQL
/// aborts a transaction on any error); enqueue under a savepoint
/// (`tx.begin()`) to carry on after one.
pub async fn enqueue_in<'c>(executor: impl PgExecutor<'c>, new: impl Into<NewRequest>) -> Result<i64, Error> {
    let new = new.into();
    new.check()?;
    let batch = new.batch.as_ref();
    let id = Enqueue {
        kind: new.request.kind(),
        payload: &new.request.payload(),
        key: new.idempotency_key.as_deref(),
        priority: i32::from(new.priority),
        run_at: new.run_at,
        batch: batch.map(|b| b.name.as_str()),
        batch_ref: batch.and_then(|b| b.reference.as_deref()),
        batch_line: batch.and_then(InBatch::line_number),
    }
    .query()
    .fetch_one(executor)
    .await?;
    Ok(id)
}

/// Enqueue one chunk of requests on `executor` in one statement.
async fn enqueue_chunk<'c>(executor: impl PgExecutor<'c>, chunk: &[NewRequest]) -> Result<Vec<i64>, sqlx::Error> {
    let kinds: Vec<&str> = chunk.iter().map(|n| n.request.kind()).collect();
    let payloads: Vec<Value> = chunk.iter().map(|n| n.request.payload()).collect();
    let keys: Vec<Option<&str>> = chunk.iter().map(|n| n.idempotency_key.as_deref()).collect();
    let priorities: Vec<i32> = chunk.iter().map(|n| i32::from(n.priority)).collect();
    let run_at: Vec<Option<DateTime<Utc>>> = chunk.iter().map(|n| n.run_at).collect();
    let batches: Vec<Option<&str>> = chunk.iter().map(|n| n.batch.as_ref().map(|b| b.name.as_str())).collect();
    let refs: Vec<Option<&str>> = chunk.iter().map(|n| n.batch.as_ref().and_then(|b| b.reference.as_deref())).collect();
    let lines: Vec<Option<i32>> = chunk.iter().map(|n| n.batch.as_ref().and_then(InBatch::line_number)).collect();
    EnqueueMany {
        kinds: &kinds,
        payloads: &payloads,
        keys: &keys,
        priorities: &priorities,
        run_at: &run_at,
        batches: &batches,
        batch_refs: &refs,
        batch_lines: &lines,
    }
    .query()
    .fetch_all(executor)
    .await
}

/// A request of a batch whose idempotency key was first used for another
/// kind or payload.
pub(crate) struct Conflict {
    /// Its place in the batch, from 0.
    pub(crate) position: usize,
    pub(crate) key: String,
    /// The first use: `request N`, or `request N of this batch`.
    pub(crate) first: String,
}

/// How one attempt of [`Client::enqueue_all`] failed.
enum Attempt {
    /// Before COMMIT, or refused by the server: nothing was stored.
    Failed(Error),
    /// The connection was lost during COMMIT: it may have committed.
    CommitLost(LostCommit),
}

/// A transaction whose COMMIT was sent but not answered.
struct LostCommit {
    /// Its id, as `pg_current_xact_id()` gave it.
    xid: String,
    /// The server it ran on (`queue::CURRENT_XACT_ID`'s identity), if the
    /// login may read it.
    server: Option<String>,
    /// The ids its statements returned (valid if it committed).
    ids: Vec<i64>,
    /// How the connection was lost.
    source: sqlx::Error,
}

impl LostCommit {
    fn unknown(self, why: String) -> Error {
        Error::CommitUnknown { xid: self.xid, why, source: self.source }
    }
}
