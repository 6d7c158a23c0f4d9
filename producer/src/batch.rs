//! Batches: thousands of parties submitted at once (a tour operator's file),
//! each party's outcome given back next to the line that asked for it, and
//! the file safe to submit again. docs/group-bookings.md is the guide.
//!
//! A [`Batch`] is a name and its parties, each a [`NewRequest`] with its line
//! and the submitter's own reference for it (`ref`, optional). Each party is
//! enqueued under an idempotency key derived from the batch's name and its
//! ref (or, without a ref, its content: kind and payload, and which
//! occurrence of that content it is), unless the line names a key of its own.
//! Submitting the same batch again therefore enqueues only the parties not
//! in the queue yet ([`Client::enqueue_batch`]) and answers the rest from
//! their recorded outcomes.
//!
//! Each request also records its batch, ref and line (`seatq.requests.batch`,
//! `batch_ref`, `batch_line`), so a batch can be read back from the database
//! alone, on any machine: [`Client::batch_status`], [`Client::batch_results`].
//!
//! [`Client::enqueue_batch`]: crate::Client::enqueue_batch
//! [`Client::batch_status`]: crate::Client::batch_status
//! [`Client::batch_results`]: crate::Client::batch_results
//!
//! ```no_run
//! # async fn demo(client: seatq::Client) -> Result<(), seatq::Error> {
//! use futures_util::StreamExt as _;
//! use seatq::batch::{Batch, Summary};
//! use seatq::{Request, Retry, SeatRequest};
//!
//! let mut batch = Batch::new("tour-2027-05")?;
//! batch.push(Some("A-17".into()), Request::Book(SeatRequest::new(1, 2, 4, "Smith party")))?;
//! batch.push(Some("A-18".into()), Request::Book(SeatRequest::new(1, 2, 9, "Jones party")))?;
//! client.check_batch(&mut batch).await?;
//! let submitted = client.enqueue_batch(&batch, &Retry::NEVER).await?;
//! let mut summary = Summary::default();
//! let mut outcomes = client.batch_outcomes(&batch, &submitted);
//! while let Some(outcome) = outcomes.next().await {
//!     let outcome = outcome?;
//!     println!("{:?}: {}", outcome.reference, outcome.status);
//!     summary.add(&outcome);
//! }
//! # Ok(()) }
//! ```

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::RequestError;
use crate::bulk::{Parsed, Ref};
use crate::keys::{content_digest, content_key, ref_key};
use crate::lines::BadLine;
use crate::new_request::{InBatch, NewRequest, check_name, check_ref};
use crate::outcome::ErrorCode;
use crate::outcome_file::{NOT_SUBMITTED, PartyOutcome, PartyStatus, event_and_class};

/// The batch name a file gives by default: its name without directory and
/// extension (`/data/parties.jsonl` is `parties`); `None` for standard input
/// (`-`) or a name that is not a valid batch name.
pub fn default_name(path: &str) -> Option<String> {
    if path == "-" {
        return None;
    }
    let stem = std::path::Path::new(path).file_stem()?.to_str()?;
    check_name(stem).ok().map(|()| stem.to_string())
}

/// A batch of parties under one name; see the [module](self) docs.
#[derive(Debug)]
pub struct Batch {
    name: String,
    /// The parties (`good`, tagged with the batch and under their keys), the
    /// lines refused (`bad`), and every line's ref.
    lines: Parsed,
    /// Each ref used, with its line.
    refs: HashMap<String, usize>,
    /// How many parties so far had each content digest (parties without a
    /// ref or key of their own).
    occurrences: HashMap<String, u32>,
}

impl Batch {
    /// An empty batch; refused if the name is not valid ([`check_name`]).
    pub fn new(name: &str) -> Result<Batch, RequestError> {
        check_name(name)?;
        Ok(Batch {
            name: name.to_string(),
            lines: Parsed::default(),
            refs: HashMap::new(),
            occurrences: HashMap::new(),
        })
    }

    /// A batch of a parsed file ([`Format::parse`](crate::bulk::Format::parse)): its good lines are the
    /// parties, its bad lines stay refused, and lines that share a ref are
    /// refused too (each naming the others: which of them was meant cannot
    /// be told).
    pub fn from_file(name: &str, parsed: Parsed) -> Result<Batch, RequestError> {
        let mut batch = Batch::new(name)?;
        let mut lines_of: HashMap<&str, Vec<usize>> = HashMap::new();
        for (line, reference) in &parsed.refs {
            lines_of.entry(reference.as_str()).or_default().push(*line);
        }
        let duplicates: HashMap<usize, RequestError> = lines_of
            .iter()
            .filter(|(_, lines)| lines.len() > 1)
            .flat_map(|(reference, lines)| {
                lines.iter().map(move |line| {
                    let others: Vec<String> = lines.iter().filter(|l| *l != line).map(usize::to_string).collect();
                    let message = format!("ref {reference:?} is also on line {}", others.join(", "));
                    (*line, RequestError { code: ErrorCode::DuplicateRef, message })
                })
            })
            .collect();
        let Parsed { good, lines, bad, refs } = parsed;
        batch.lines.bad = bad;
        batch.lines.refs = refs;
        for (new, line) in good.into_iter().zip(lines) {
            match duplicates.get(&line) {
                Some(e) => batch.lines.bad.push(BadLine { line, code: e.code(), reason: e.message.clone() }),
                None => {
                    let reference = batch.lines.refs.get(&line).map(|r| r.to_string());
                    batch.add(line, reference, new);
                }
            }
        }
        batch.lines.bad.sort_by_key(|b| b.line);
        Ok(batch)
    }

    /// Add a party on the next line, with its ref if it has one; refused if
    /// the request or the ref is not valid, or the ref is taken in this batch.
    pub fn push(&mut self, reference: Option<String>, new: impl Into<NewRequest>) -> Result<(), RequestError> {
        let new = new.into();
        new.check()?;
        if let Some(reference) = &reference {
            check_ref(reference)?;
            if let Some(line) = self.refs.get(reference) {
                let message = format!("ref {reference:?} is also on line {line}");
                return Err(RequestError { code: ErrorCode::DuplicateRef, message });
            }
        }
        let line = self.next_line();
        if let Some(reference) = &reference {
            self.lines.refs.insert(line, Ref::from(reference.as_str()));
        }
        self.add(line, reference, new);
        Ok(())
    }

    /// The line after every line so far.
    fn next_line(&self) -> usize {
        let last = self.lines.lines.last().copied().unwrap_or(0);
        last.max(self.lines.bad.iter().map(|b| b.line).max().unwrap_or(0)) + 1
    }

    /// Tag a party with the batch, its line and ref, and (unless it has one
    /// of its own) its key; add it.
    fn add(&mut self, line: usize, reference: Option<String>, mut new: NewRequest) {
        if new.idempotency_key.is_none() {
            new.idempotency_key = Some(match &reference {
                Some(reference) => ref_key(&self.name, reference),
                None => {
                    let digest = content_digest(&new.request);
                    let occurrence = self.occurrences.entry(digest.clone()).or_default();
                    *occurrence += 1;
                    content_key(&self.name, &digest, *occurrence)
                }
            });
        }
        if let Some(reference) = &reference {
            self.refs.insert(reference.clone(), line);
        }
        new.batch = Some(InBatch { name: self.name.clone(), reference, line });
        self.lines.good.push(new);
        self.lines.lines.push(line);
    }

    /// Move the parties at these positions of [`Batch::parties`] to
    /// [`Batch::bad`], each with why it is refused.
    pub(crate) fn refuse(&mut self, refused: Vec<(usize, RequestError)>) {
        self.lines.refuse(refused);
    }

    /// The ref of line `line`, as the line gave it.
    pub(crate) fn reference(&self, line: usize) -> Option<&Ref> {
        self.lines.refs.get(&line)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The parties, in line order, each under its idempotency key and tagged
    /// with its batch, line and ref.
    pub fn parties(&self) -> &[NewRequest] {
        &self.lines.good
    }

    /// The lines refused (not readable, not a valid request, a ref used
    /// twice, a key first used for another request), in line order.
    pub fn bad(&self) -> &[BadLine] {
        &self.lines.bad
    }

    /// Each party as an outcome not known yet: status `queued`, with its
    /// request id from `submitted`, line, ref, event and class. What a wait
    /// that ends early reports for the parties not finished.
    pub fn pending<'a>(&'a self, submitted: &'a Submitted) -> impl Iterator<Item = PartyOutcome> + 'a {
        self.parties().iter().zip(&submitted.ids).map(|(party, id)| {
            let (event, class) = event_and_class(&party.request.payload());
            let line = party.batch.as_ref().map(|b| b.line);
            PartyOutcome {
                line,
                reference: line.and_then(|l| self.lines.refs.get(&l)).cloned(),
                id: Some(*id),
                status: PartyStatus::Queued,
                event,
                class,
                booking: None,
                error_code: None,
                error_message: None,
            }
        })
    }

    /// Each refused line as an outcome (status `refused`, no request), with
    /// its ref when the line gave one.
    pub fn refused(&self) -> impl Iterator<Item = PartyOutcome> + '_ {
        self.lines.bad.iter().map(|b| PartyOutcome {
            line: Some(b.line),
            reference: self.lines.refs.get(&b.line).cloned(),
            id: None,
            status: PartyStatus::Refused,
            event: None,
            class: None,
            booking: None,
            error_code: Some(b.code.as_str().into()),
            error_message: Some(b.reason.clone()),
        })
    }

    /// Each party as an outcome of a batch not enqueued at all: status
    /// `refused` (no request), error code [`NOT_SUBMITTED`] and `why`, with
    /// its ref, event and class. What a run that enqueues nothing because
    /// some lines are bad (`seatq enqueue --strict`) reports for the good
    /// ones, so that every line still has its outcome, and a good line is
    /// never taken for a bad one.
    pub fn not_submitted<'a>(&'a self, why: &'a str) -> impl Iterator<Item = PartyOutcome> + 'a {
        self.parties().iter().map(move |party| {
            let (event, class) = event_and_class(&party.request.payload());
            let line = party.batch.as_ref().map(|b| b.line);
            PartyOutcome {
                line,
                reference: line.and_then(|l| self.lines.refs.get(&l)).cloned(),
                id: None,
                status: PartyStatus::Refused,
                event,
                class,
                booking: None,
                error_code: Some(NOT_SUBMITTED.to_string()),
                error_message: Some(why.to_string()),
            }
        })
    }
}

/// A batch enqueued: each party's request id, in the order of
/// [`Batch::parties`], and how many were new.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Submitted {
    pub ids: Vec<i64>,
    /// Parties enqueued now; the others were in the queue already (a batch
    /// submitted again).
    pub enqueued: usize,
}

/// Parties of one kind of outcome.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    pub parties: u64,
    /// Succeeded: the party got its seats (held or booked).
    pub booked: u64,
    /// Seats the booked parties hold or have booked.
    pub seats: u64,
    /// Failed `sold_out`: too few seats of the class left.
    pub sold_out: u64,
    /// Every other failure (failed with another code, or dead).
    pub failed: u64,
    /// Not finished yet (queued, or on a waiting list).
    pub queued: u64,
}

impl Counts {
    fn add(&mut self, status: PartyStatus, error_code: Option<&str>, parties: u64, seats: u64) {
        self.parties += parties;
        match status {
            PartyStatus::Succeeded => {
                self.booked += parties;
                self.seats += seats;
            }
            PartyStatus::Failed if error_code == Some(ErrorCode::SoldOut.as_str()) => self.sold_out += parties,
            PartyStatus::Failed | PartyStatus::Dead => self.failed += parties,
            PartyStatus::Queued | PartyStatus::Waiting => self.queued += parties,
            PartyStatus::Refused => {}
        }
    }
}

/// The counts of one event and class (as the requests name them: none for
/// a request that names no event, or names seats rather than a class).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Group {
    pub event: Option<i64>,
    pub class: Option<i16>,
    #[serde(flatten)]
    pub counts: Counts,
}

/// A batch's outcomes counted: in all, by event and class, by status and by
/// error code.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    /// Every party enqueued (refused lines are not parties).
    pub total: Counts,
    /// Lines refused, never enqueued.
    pub refused: u64,
    /// By event and class, in that order.
    pub groups: Vec<Group>,
    /// Lines by status (`refused` included).
    pub statuses: BTreeMap<String, u64>,
    /// Failed, dead and refused lines by error code.
    pub errors: BTreeMap<String, u64>,
}

impl Summary {
    /// Count one line's outcome.
    pub fn add(&mut self, outcome: &PartyOutcome) {
        self.add_many(
            outcome.event,
            outcome.class,
            outcome.status,
            outcome.error_code.as_deref(),
            1,
            outcome.seats() as u64,
        );
    }

    /// Count `parties` lines of one event, class, status and error code,
    /// holding `seats` seats between them.
    pub(crate) fn add_many(
        &mut self,
        event: Option<i64>,
        class: Option<i16>,
        status: PartyStatus,
        error_code: Option<&str>,
        parties: u64,
        seats: u64,
    ) {
        *self.statuses.entry(status.to_string()).or_default() += parties;
        if let Some(code) = error_code {
            *self.errors.entry(code.to_string()).or_default() += parties;
        }
        if status == PartyStatus::Refused {
            self.refused += parties;
            return;
        }
        self.total.add(status, error_code, parties, seats);
        let at = match self.groups.binary_search_by_key(&(event, class), |g| (g.event, g.class)) {
            Ok(at) => at,
            Err(at) => {
                self.groups.insert(at, Group { event, class, counts: Counts::default() });
                at
            }
        };
        self.groups[at].counts.add(status, error_code, parties, seats);
    }

    /// Whether any line failed, died or was refused.
    pub fn any_failed(&self) -> bool {
        self.refused + self.total.sold_out + self.total.failed > 0
    }
}

/// A batch as the database holds it ([`Client::batch_status`](crate::Client::batch_status)).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchStatus {
    pub name: String,
    /// When its first request was enqueued (none: no such batch).
    pub first_enqueued: Option<DateTime<Utc>>,
    /// When its last finished request finished.
    pub last_finished: Option<DateTime<Utc>>,
    pub summary: Summary,
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;
    use crate::SeatRequest;
    use crate::bulk::Format;
    use crate::limits::MAX_BATCH_NAME_CHARS;
    use crate::outcome_file::{OutcomeWriter, csv_record};
    use crate::request::Request;

    fn book(customer: &str) -> Request {
        Request::Book(SeatRequest::new(1, 2, 3, customer))
    }

    #[test]
    fn keys_derive_from_the_name_and_the_ref_or_the_content() {
        let mut batch = Batch::new("tour").expect("name");
        batch.push(Some("A-1".into()), book("ann")).expect("A-1");
        batch.push(None, book("bob")).expect("bob");
        batch.push(None, book("bob")).expect("bob again");
        batch.push(None, book("cat")).expect("cat");
        let keys: Vec<&str> = batch.parties().iter().filter_map(|p| p.idempotency_key.as_deref()).collect();
        assert_eq!(keys[0], r#"batch:["tour","A-1"]"#);
        // The same content twice is two parties, numbered by occurrence.
        assert!(keys[1].ends_with(",1]") && keys[2].ends_with(",2]"), "{keys:?}");
        assert_eq!(keys[1].trim_end_matches(",1]"), keys[2].trim_end_matches(",2]"));
        assert_ne!(keys[1].trim_end_matches(",1]"), keys[3].trim_end_matches(",1]"));

        // The same lines in another batch object: the same keys.
        let mut again = Batch::new("tour").expect("name");
        for (r, customer) in [(Some("A-1"), "ann"), (None, "bob"), (None, "bob"), (None, "cat")] {
            again.push(r.map(String::from), book(customer)).expect("push");
        }
        let same: Vec<&str> = again.parties().iter().filter_map(|p| p.idempotency_key.as_deref()).collect();
        assert_eq!(keys, same);

        // A name and a ref cannot run into each other.
        assert_ne!(ref_key("a:b", "c"), ref_key("a", "b:c"));
        let lines: Vec<usize> = batch.parties().iter().filter_map(|p| p.batch.as_ref().map(|b| b.line)).collect();
        assert_eq!(lines, [1, 2, 3, 4]);
    }

    #[test]
    fn a_ref_used_twice_refuses_every_line_with_it() {
        let file = [
            r#"{"kind": "book", "ref": "A", "payload": {"event": 1, "class": 1, "party": 2, "customer": "a"}}"#,
            r#"{"kind": "book", "ref": "B", "payload": {"event": 1, "class": 1, "party": 2, "customer": "b"}}"#,
            r#"{"kind": "book", "ref": "A", "payload": {"event": 1, "class": 1, "party": 3, "customer": "c"}}"#,
            r#"{"kind": "book", "ref": 7, "payload": {"event": 1, "class": 1, "party": 30, "customer": "d"}}"#,
        ]
        .join("\n");
        let batch = Batch::from_file("f", crate::bulk::parse(file.as_bytes()).expect("parse")).expect("batch");
        let bad: Vec<(usize, &str, &str)> =
            batch.bad().iter().map(|b| (b.line, b.code.as_str(), b.reason.as_str())).collect();
        assert_eq!(
            bad,
            [
                (1, "duplicate_ref", "ref \"A\" is also on line 3"),
                (3, "duplicate_ref", "ref \"A\" is also on line 1"),
                (4, "party_out_of_range", "party: 30 is out of range 1 to 9"),
            ]
        );
        assert_eq!(batch.parties().len(), 1);
        let refused: Vec<Option<Ref>> = batch.refused().map(|o| o.reference).collect();
        assert_eq!(refused, [Some("A".into()), Some("A".into()), Some(7i64.into())]);

        let mut batch = Batch::new("f").expect("name");
        batch.push(Some("A".into()), book("a")).expect("first");
        let e = batch.push(Some("A".into()), book("b")).expect_err("second");
        assert_eq!((e.code, e.message.as_str()), (ErrorCode::DuplicateRef, "ref \"A\" is also on line 1"));
    }

    #[test]
    fn an_integer_ref_comes_back_as_an_integer() {
        let line = |reference: &str, party: u32| {
            format!(
                r#"{{"ref": {reference}, "kind": "book", "payload": {{"event": 1, "class": 1, "party": {party}, "customer": "c"}}}}"#
            )
        };
        let file = [line("7", 2), line("8", 30), line("\"9\"", 2), line("18446744073709551615", 2)].join("\n");
        let batch = Batch::from_file("f", crate::bulk::parse(file.as_bytes()).expect("parse")).expect("batch");
        let submitted = Submitted { ids: vec![11, 12, 13], enqueued: 3 };
        let mut outcomes: Vec<PartyOutcome> = batch.pending(&submitted).chain(batch.refused()).collect();
        outcomes.sort_by_key(|o| o.line);
        let mut out = OutcomeWriter::new(Format::Jsonl, Vec::new()).expect("writer");
        for o in &outcomes {
            out.write(o).expect("write");
        }
        let text = String::from_utf8(out.finish().expect("finish")).expect("UTF-8");
        let refs: Vec<Value> =
            text.lines().map(|l| serde_json::from_str::<Value>(l).expect("JSON")["ref"].clone()).collect();
        assert_eq!(refs, [serde_json::json!(7), 8.into(), "9".into(), u64::MAX.into()]);
        // Read back as given.
        let read: Vec<PartyOutcome> = text.lines().map(|l| serde_json::from_str(l).expect("an outcome")).collect();
        assert_eq!(read, outcomes);
        // The same ref as text: the same key, and CSV has only text.
        let keys: Vec<&str> = batch.parties().iter().filter_map(|p| p.idempotency_key.as_deref()).collect();
        assert_eq!(keys[0], ref_key("f", "7"));
        assert_eq!(csv_record(&outcomes[0])[1], "7");
        let texts: Vec<Option<&str>> = outcomes.iter().map(|o| o.reference.as_deref()).collect();
        assert_eq!(texts, [Some("7"), Some("8"), Some("9"), Some("18446744073709551615")]);
    }

    #[test]
    fn names_and_refs_are_checked() {
        assert!(Batch::new("").is_err());
        assert!(Batch::new("a\nb").is_err());
        assert!(Batch::new(&"x".repeat(MAX_BATCH_NAME_CHARS + 1)).is_err());
        assert!(Batch::new(&"é".repeat(MAX_BATCH_NAME_CHARS)).is_ok());
        assert_eq!(default_name("/data/parties.jsonl").as_deref(), Some("parties"));
        assert_eq!(default_name("parties-2027.csv").as_deref(), Some("parties-2027"));
        assert_eq!(default_name("-"), None);
        let e = check_ref(" ").expect_err("blank");
        assert_eq!(e.message, "ref: must not be empty");
    }

    #[test]
    fn outcomes_are_counted_by_event_and_class() {
        let outcome = |event, class, status, code: Option<&str>| PartyOutcome {
            line: None,
            reference: None,
            id: Some(1),
            status,
            event,
            class,
            booking: None,
            error_code: code.map(String::from),
            error_message: None,
        };
        let mut summary = Summary::default();
        summary.add(&outcome(Some(2), Some(1), PartyStatus::Failed, Some("sold_out")));
        summary.add(&outcome(Some(1), Some(3), PartyStatus::Failed, Some("seats_taken")));
        summary.add(&outcome(Some(1), Some(3), PartyStatus::Queued, None));
        summary.add(&outcome(None, None, PartyStatus::Refused, Some("invalid_json")));
        assert_eq!(summary.total.parties, 3);
        assert_eq!((summary.total.sold_out, summary.total.failed, summary.total.queued), (1, 1, 1));
        assert_eq!(summary.refused, 1);
        let groups: Vec<(Option<i64>, Option<i16>, u64)> =
            summary.groups.iter().map(|g| (g.event, g.class, g.counts.parties)).collect();
        assert_eq!(groups, [(Some(1), Some(3), 2), (Some(2), Some(1), 1)]);
        assert_eq!(summary.errors.get("invalid_json"), Some(&1));
        assert!(summary.any_failed());
    }
}
