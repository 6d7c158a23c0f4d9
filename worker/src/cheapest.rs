//! Cheapest-first holds and bookings for a whole batch at once: one statement
//! locks seats for every (event, class) the batch asks about, one more counts
//! free seats where a group came up short, and one creates every booking and
//! takes its seats. A batch of a hundred parties costs three round trips, not
//! three hundred.
//!
//! All or nothing per party (docs/design.md): the locked seats of a group
//! go to its requests in claim order; a request that does not fit gets no
//! seats. If the group is short and other transactions hold some of its free
//! seats, such a request is *contended* and is retried after the batch
//! commits (its locks are never held while sleeping); if nothing is held
//! elsewhere, the event is genuinely short: `sold_out`, or what is left with
//! `partial`. Seats locked but not granted are released at commit, a few
//! milliseconds later.

use std::collections::{BTreeMap, HashMap};

use crate::sql::allocation;
use seatq_core::outcome::{ErrorCode, SeatInfo};
use seatq_core::request::{Request, SeatRequest};
use sqlx::postgres::PgConnection;

use crate::Strategy;
use crate::decision::{Decision, ProcessError};
use crate::grant::{self, Grant};

/// A hold (`hold_secs` set) or book of the cheapest seats of a class.
#[derive(Debug, Clone, Copy)]
pub struct Wanted<'a> {
    pub request_id: i64,
    pub request: &'a SeatRequest,
    pub hold_secs: Option<u32>,
}

impl<'a> Wanted<'a> {
    /// The request as a cheapest-first allocation, if it is one: a hold or
    /// book naming no seats and not asking for adjacent ones.
    pub fn of(request_id: i64, request: &'a Request) -> Option<Wanted<'a>> {
        let (r, hold_secs) = match request {
            Request::Hold(r) => (r, Some(r.hold_secs())),
            Request::Book(r) => (r, None),
            Request::Confirm(_) | Request::Cancel(_) | Request::Extend(_) => return None,
        };
        (r.seats.is_empty() && !r.together).then_some(Wanted { request_id, request: r, hold_secs })
    }
}

/// One row of [`allocation::LOCK_CHEAPEST`]: a locked seat of group `grp`
/// (1-based), or a NULL seat for a group that got none.
#[derive(sqlx::FromRow)]
struct LockedRow {
    grp: i64,
    known: bool,
    refusal: Option<String>,
    per_customer: Option<i32>,
    seat: Option<i32>,
    class: Option<i16>,
    row: Option<i32>,
    pos: Option<i32>,
    price_cents: Option<i32>,
    section: Option<String>,
    row_label: Option<String>,
    label: Option<String>,
}

impl LockedRow {
    fn seat(self) -> Option<SeatInfo> {
        Some(SeatInfo {
            seat: self.seat?,
            class: self.class?,
            row: self.row?,
            pos: self.pos?,
            price_cents: self.price_cents?,
            section: self.section?,
            row_label: self.row_label?,
            label: self.label?,
        })
    }
}

/// The requests of one (event, class), and what the batch found for them.
struct Group {
    event: i64,
    class: i16,
    /// Indexes into the batch's requests, in claim order.
    members: Vec<usize>,
    /// Seats the members ask for in all.
    need: i32,
    known: bool,
    /// Why the event's sales refuse now (`not_on_sale`, `sales_closed`).
    refusal: Option<ErrorCode>,
    /// The event's per-customer limit.
    per_customer: Option<i32>,
    /// Seats locked, cheapest first.
    locked: Vec<SeatInfo>,
    /// Short, with free seats held by in-flight transactions.
    contended: bool,
    /// The event has seats of the class (known only for a short group; true
    /// otherwise).
    has_class: bool,
}

/// Allocate seats for these requests inside the caller's transaction (or
/// savepoint). Returns one decision per request, in order. An error leaves
/// seat changes half made: the caller rolls back.
pub async fn allocate(
    conn: &mut PgConnection,
    wanted: &[Wanted<'_>],
    strategy: Strategy,
) -> Result<Vec<Decision>, ProcessError> {
    // Groups in (event, class) order, so that strategies that wait for locks
    // take them in the same order in every worker.
    let mut by_key: BTreeMap<(i64, i16), Vec<usize>> = BTreeMap::new();
    for (i, w) in wanted.iter().enumerate() {
        by_key.entry((w.request.event, w.request.class.unwrap_or_default())).or_default().push(i);
    }
    let mut groups: Vec<Group> = by_key
        .into_iter()
        .map(|((event, class), members)| Group {
            event,
            class,
            need: members.iter().map(|&i| wanted[i].request.party_size() as i32).sum(),
            members,
            known: false,
            refusal: None,
            per_customer: None,
            locked: Vec::new(),
            contended: false,
            has_class: true,
        })
        .collect();

    let sql = match strategy {
        Strategy::SkipLocked => allocation::LOCK_CHEAPEST,
        Strategy::Blocking => allocation::LOCK_CHEAPEST_WAIT,
        Strategy::Nowait => allocation::LOCK_CHEAPEST_NOWAIT,
        Strategy::Serializable => allocation::PICK_CHEAPEST,
    };
    let mut query = bind_groups(sqlx::query_as(sql), &groups);
    if strategy == Strategy::SkipLocked {
        query = query.bind(allocation::SPREAD_FROM_NEED);
    }
    let rows: Vec<LockedRow> = query.fetch_all(&mut *conn).await?;
    for row in rows {
        let group = group_mut(&mut groups, row.grp)?;
        group.known = row.known;
        group.refusal = match row.refusal.as_deref() {
            None => None,
            Some(code) => Some(code.parse().map_err(|_| ProcessError::Internal(format!("unknown refusal {code}")))?),
        };
        group.per_customer = row.per_customer;
        group.locked.extend(row.seat());
    }

    let short: Vec<usize> = (0..groups.len())
        .filter(|&g| groups[g].known && groups[g].refusal.is_none() && (groups[g].locked.len() as i32) < groups[g].need)
        .collect();
    if !short.is_empty() {
        let subset: Vec<&Group> = short.iter().map(|&g| &groups[g]).collect();
        let free: Vec<(i64, i64, bool)> =
            bind_groups(sqlx::query_as(allocation::COUNT_FREE), subset.iter().copied()).fetch_all(&mut *conn).await?;
        for (k, free, has_class) in free {
            let g = usize::try_from(k - 1).ok().and_then(|k| short.get(k)).copied();
            let group = g.and_then(|g| groups.get_mut(g)).ok_or_else(|| unexpected_group(k))?;
            group.contended = free > group.locked.len() as i64;
            group.has_class = has_class;
        }
    }

    let mut used = customer_seats(conn, wanted, &groups).await?;
    let mut decisions: Vec<Option<Decision>> = (0..wanted.len()).map(|_| None).collect();
    let mut grants: Vec<(usize, Grant)> = Vec::new();
    for group in &groups {
        let mut left = group.locked.as_slice();
        for &i in &group.members {
            let w = wanted[i];
            let party = w.request.party_size() as usize;
            let customer = (group.event, w.request.customer.as_str());
            let take = if !group.known {
                decisions[i] =
                    Some(Decision::Reject(ErrorCode::UnknownEvent, format!("event {} does not exist", group.event)));
                continue;
            } else if let Some(code) = group.refusal {
                decisions[i] = Some(Decision::Reject(code, sales_message(code, group.event)));
                continue;
            } else if group.per_customer.is_some() && used.get(&customer) == Some(&None) {
                // Another batch holds this customer's lock: its bookings
                // are not counted yet.
                decisions[i] = Some(Decision::Contended);
                continue;
            } else if let Some(limit) = group.per_customer
                && used.get(&customer).copied().flatten().unwrap_or(0) + party as i64 > i64::from(limit)
            {
                let so_far = used.get(&customer).copied().flatten().unwrap_or(0);
                decisions[i] = Some(limit_exceeded(limit, so_far, party, group.event));
                continue;
            } else if left.len() >= party {
                party
            } else if group.contended {
                decisions[i] = Some(Decision::Contended);
                continue;
            } else if w.request.partial && !left.is_empty() {
                left.len()
            } else if !group.has_class {
                decisions[i] = Some(unknown_class(group.event, group.class));
                continue;
            } else {
                decisions[i] = Some(Decision::Reject(
                    ErrorCode::SoldOut,
                    format!(
                        "{} seat(s) of class {} left on event {}, {party} requested",
                        left.len(),
                        group.class,
                        group.event
                    ),
                ));
                continue;
            };
            let (mine, rest) = left.split_at(take);
            left = rest;
            if group.per_customer.is_some() {
                *used.entry(customer).or_insert(Some(0)).get_or_insert(0) += take as i64;
            }
            let mut seats = mine.to_vec();
            seats.sort_by_key(|s| s.seat);
            grants.push((i, Grant { request_id: w.request_id, request: w.request, hold_secs: w.hold_secs, seats }));
        }
    }

    if !grants.is_empty() {
        let (indexes, grants): (Vec<usize>, Vec<Grant>) = grants.into_iter().unzip();
        let bookings = grant::take_seats(conn, &grants).await?;
        for (i, booking) in indexes.into_iter().zip(bookings) {
            decisions[i] = Some(Decision::Done(booking));
        }
    }
    decisions
        .into_iter()
        .map(|d| d.ok_or_else(|| ProcessError::Internal("a request of the batch got no decision".into())))
        .collect()
}

/// Bind the groups' events, classes and needs as three arrays.
fn bind_groups<'q, 'g, O>(
    query: sqlx::query::QueryAs<'q, sqlx::Postgres, O, sqlx::postgres::PgArguments>,
    groups: impl IntoIterator<Item = &'g Group> + Clone,
) -> sqlx::query::QueryAs<'q, sqlx::Postgres, O, sqlx::postgres::PgArguments> {
    let events: Vec<i64> = groups.clone().into_iter().map(|g| g.event).collect();
    let classes: Vec<i16> = groups.clone().into_iter().map(|g| g.class).collect();
    let needs: Vec<i32> = groups.into_iter().map(|g| g.need).collect();
    query.bind(events).bind(classes).bind(needs)
}

fn group_mut(groups: &mut [Group], grp: i64) -> Result<&mut Group, ProcessError> {
    usize::try_from(grp - 1).ok().and_then(|g| groups.get_mut(g)).ok_or_else(|| unexpected_group(grp))
}

fn unexpected_group(grp: i64) -> ProcessError {
    ProcessError::Internal(format!("allocation returned a row for group {grp}, which the batch does not have"))
}

/// Live seats each customer of the batch already has on each event with a
/// per-customer limit: one statement for the batch, none when no event of
/// it has a limit.
async fn customer_seats<'w>(
    conn: &mut PgConnection,
    wanted: &[Wanted<'w>],
    groups: &[Group],
) -> Result<HashMap<(i64, &'w str), Option<i64>>, ProcessError> {
    let mut pairs: Vec<(i64, &'w str)> = groups
        .iter()
        .filter(|g| g.per_customer.is_some() && g.refusal.is_none())
        .flat_map(|g| g.members.iter().map(|&i| (g.event, wanted[i].request.customer.as_str())))
        .collect();
    pairs.sort_unstable();
    pairs.dedup();
    if pairs.is_empty() {
        return Ok(HashMap::new());
    }
    let rows: Vec<(i64, bool, i64)> = sqlx::query_as(allocation::CUSTOMER_SEATS)
        .bind(pairs.iter().map(|p| p.0).collect::<Vec<_>>())
        .bind(pairs.iter().map(|p| p.1).collect::<Vec<_>>())
        .fetch_all(&mut *conn)
        .await?;
    rows.into_iter()
        .map(|(k, locked, used)| {
            let pair = usize::try_from(k - 1).ok().and_then(|k| pairs.get(k)).copied();
            pair.map(|p| (p, locked.then_some(used)))
                .ok_or_else(|| ProcessError::Internal(format!("no customer pair {k}")))
        })
        .collect()
}

/// An `unknown_class` refusal.
pub(crate) fn unknown_class(event: i64, class: i16) -> Decision {
    Decision::Reject(ErrorCode::UnknownClass, format!("event {event} has no seats of class {class}"))
}

/// The message of a `not_on_sale` or `sales_closed` refusal.
pub(crate) fn sales_message(code: ErrorCode, event: i64) -> String {
    match code {
        ErrorCode::NotOnSale => format!("event {event} is not on sale yet"),
        _ => format!("sales of event {event} are closed"),
    }
}

/// A `customer_limit_exceeded` refusal.
pub(crate) fn limit_exceeded(limit: i32, used: i64, party: usize, event: i64) -> Decision {
    Decision::Reject(
        ErrorCode::CustomerLimitExceeded,
        format!("event {event} sells at most {limit} seat(s) per customer; the customer has {used}, {party} requested"),
    )
}
