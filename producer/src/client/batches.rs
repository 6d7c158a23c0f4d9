//! Batches ([`crate::batch`]): checked against the keys submitted before,
//! enqueued (only the parties not in the queue yet), their outcomes streamed
//! as they finish, and read back from the database by name.

use std::collections::{HashMap, HashSet};

use futures_util::stream::{self, BoxStream, StreamExt as _};

use super::Client;
use crate::batch::{Batch, BatchStatus, Submitted};
use crate::bulk::Ref;
use crate::keys::ref_key;
use crate::new_request::NewRequest;
use crate::outcome::ErrorCode;
use crate::outcome_file::{PartyOutcome, event_and_class};
use crate::retry::Retry;
use crate::sql::batch::{self as sql, BatchCount};
use crate::{Error, RequestError, validate};

/// Batches.
impl Client {
    /// Refuse the parties of `batch` whose key was first used for another
    /// kind or payload (a ref submitted before with another request, or a
    /// line's own key reused): they move to [`Batch::bad`], each naming the
    /// request it conflicts with. One statement for the whole batch.
    pub async fn check_batch(&self, batch: &mut Batch) -> Result<(), Error> {
        let conflicts = self.conflicts(batch.parties()).await?;
        let refused = conflicts
            .into_iter()
            .map(|c| {
                let party = &batch.parties()[c.position];
                let reference = party.batch.as_ref().and_then(|b| b.reference.as_deref());
                let message = match reference {
                    Some(r) if c.key == ref_key(batch.name(), r) => format!(
                        "ref {r:?} of batch {:?} was first submitted as {} with another kind or payload: \
                         give the line a new ref, or submit the file as a new batch",
                        batch.name(),
                        c.first
                    ),
                    _ => format!(
                        "idempotency key {} was first used by {} with another kind or payload",
                        validate::quoted(&c.key),
                        c.first
                    ),
                };
                (c.position, RequestError { code: ErrorCode::IdempotencyConflict, message })
            })
            .collect();
        batch.refuse(refused);
        Ok(())
    }

    /// Enqueue the parties of `batch` that are not in the queue yet, in one
    /// transaction (see [`Client::enqueue_all`], which also says how
    /// `retry` applies); the others keep the request they have. One
    /// statement finds which are in, so a batch submitted again with
    /// nothing new writes nothing. Returns every party's request id.
    ///
    /// Refused with [`ErrorCode::IdempotencyConflict`] if a party's key was
    /// first used for another request: [`Client::check_batch`] first.
    pub async fn enqueue_batch(&self, batch: &Batch, retry: &Retry) -> Result<Submitted, Error> {
        let parties = batch.parties();
        let keys: Vec<&str> = parties.iter().filter_map(|p| p.idempotency_key.as_deref()).collect();
        let taken: HashMap<String, i64> = retry
            .run("looking up the batch's requests", || async {
                let rows = sql::KeysTaken { keys: &keys }.query().fetch_all(&self.db).await?;
                Ok(rows.into_iter().map(|r| (r.idempotency_key, r.id)).collect())
            })
            .await?;
        let id_of = |p: &NewRequest| p.idempotency_key.as_ref().and_then(|k| taken.get(k)).copied();
        let missing: Vec<NewRequest> = parties.iter().filter(|p| id_of(p).is_none()).cloned().collect();
        let mut new_ids =
            if missing.is_empty() { Vec::new() } else { self.enqueue_all(&missing, retry).await? }.into_iter();
        let ids = parties.iter().map(|p| id_of(p).or_else(|| new_ids.next()).unwrap_or_default()).collect();
        Ok(Submitted { ids, enqueued: missing.len() })
    }

    /// Each party's outcome as it finishes (those finished already first),
    /// with its line and ref in `batch`, until all have: one listening
    /// connection and batched reads however many parties
    /// ([`Client::wait_each`]). No deadline: wrap each `next()` in a timeout
    /// for one.
    pub fn batch_outcomes(
        &self,
        batch: &Batch,
        submitted: &Submitted,
    ) -> BoxStream<'static, Result<PartyOutcome, Error>> {
        // Each request's lines, with their refs as the lines gave them.
        let mut places: HashMap<i64, Vec<(usize, Option<Ref>)>> = HashMap::new();
        for (party, id) in batch.parties().iter().zip(&submitted.ids) {
            let line = party.batch.as_ref().map_or(0, |b| b.line);
            places.entry(*id).or_default().push((line, batch.reference(line).cloned()));
        }
        let ids: Vec<i64> = {
            let mut seen = HashSet::new();
            submitted.ids.iter().copied().filter(|id| seen.insert(*id)).collect()
        };
        self.wait_each(&ids)
            .flat_map(move |finished| {
                let outcomes: Vec<Result<PartyOutcome, Error>> = match finished {
                    Err(e) => vec![Err(e)],
                    Ok(record) => {
                        let outcome = PartyOutcome::of(&record);
                        places
                            .get(&record.id)
                            .into_iter()
                            .flatten()
                            .map(|(line, reference)| {
                                Ok(PartyOutcome { line: Some(*line), reference: reference.clone(), ..outcome.clone() })
                            })
                            .collect()
                    }
                };
                stream::iter(outcomes)
            })
            .boxed()
    }

    /// The batch `name` as the database holds it: its requests counted by
    /// event and class, status and error code, in one statement. Empty
    /// (no first enqueue) if there is no such batch.
    pub async fn batch_status(&self, name: &str) -> Result<BatchStatus, Error> {
        let rows = sql::BatchCounts { batch: name }.query().fetch_all(&self.db).await?;
        let mut status = BatchStatus { name: name.to_string(), ..BatchStatus::default() };
        for BatchCount {
            event,
            class,
            status: request_status,
            error_code,
            parties,
            seats,
            first_enqueued: first,
            last_finished: last,
        } in rows
        {
            let (event, class) = event_and_class(&serde_json::json!({ "event": event, "class": class }));
            status.summary.add_many(
                event,
                class,
                request_status.into(),
                error_code.as_deref(),
                parties as u64,
                seats as u64,
            );
            status.first_enqueued = Some(status.first_enqueued.map_or(first, |f| f.min(first)));
            status.last_finished = status.last_finished.max(last);
        }
        Ok(status)
    }

    /// Every request of the batch `name` as an outcome, in the order of the
    /// lines they were first submitted from, read as they come (however
    /// large the batch, it is never all in memory).
    pub fn batch_results(&self, name: &str) -> BoxStream<'_, Result<PartyOutcome, Error>> {
        sql::BatchRequests { batch: name }
            .query()
            .fetch(&self.db)
            .map(|row| row.map(|record| PartyOutcome::of(&record)).map_err(Error::from))
            .boxed()
    }
}
