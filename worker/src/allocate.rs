//! Allocating seats to the holds and bookings of a batch, all at once,
//! set-based: the cheapest seats of a class, seats named by number, and
//! parties seated side by side in one row. A handful of statements serve the
//! whole batch, whatever its size and mix, each run only when some request
//! of the batch needs it:
//!
//! 1. lock the cheapest free seats of every (event, class) that
//!    cheapest-first requests ask about, with each event's sales rules;
//! 2. the sales rules of the events that named and side-by-side requests
//!    ask about;
//! 3. lock every named seat (skipping those in-flight transactions hold);
//! 4. the runs of adjacent free seats of every (event, class) a side-by-side
//!    party asks about, by committed state;
//! 5. where a cheapest-first group came up short, count its free seats;
//! 6. the live seats of customers on events with a per-customer limit;
//!
//! then every request is decided in claim order, in memory
//! ([`crate::choose`]); the blocks chosen for side-by-side parties are
//! locked (7; a party whose block was partly locked elsewhere moves to its
//! next best, at most [`ROUNDS`] times); and one statement makes every
//! booking and takes its seats (8, [`crate::take`]). A batch of
//! cheapest-first bookings on events without a per-customer limit runs 1 and
//! 8. A refusal (`sold_out`, `seats_taken`, `no_adjacent_seats`, the sales
//! rules) costs no statement of its own.
//!
//! All or nothing per party (docs/design.md): a request gets all its seats
//! or none (but for `partial`). If it cannot have them and in-flight
//! transactions hold seats it could have used, it is *contended* and is
//! retried after the batch commits (its locks are never held while
//! sleeping); if nothing is held elsewhere, the answer is final. Seats locked
//! but not granted are released at commit, a few milliseconds later. Within
//! the batch, requests are decided in claim order: a seat granted to one is
//! taken for every later one.

use std::collections::{BTreeMap, HashMap};

use crate::sql::allocation;
use seatq_core::outcome::{ErrorCode, SeatInfo};
use sqlx::postgres::PgConnection;

use crate::Strategy;
use crate::choose::{self, Chosen, Customer, Events, Group, How, Key, NamedSeat, Rules, Run, Runs, Wanted, limited};
use crate::decision::{Decision, ProcessError};
use crate::take::{self, Grant};

/// How many times the blocks chosen for side-by-side parties are locked
/// before a party whose blocks were each partly held elsewhere counts as
/// contended.
const ROUNDS: usize = 3;

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

/// A seat of some event, as [`allocation::LOCK_FREE_SEATS`] returns it.
#[derive(sqlx::FromRow)]
struct EventSeat {
    event: i64,
    #[sqlx(flatten)]
    seat: SeatInfo,
}

/// A row of [`allocation::FREE_RUNS`]: a run of adjacent free seats in one
/// row, or none, for group `grp`.
#[derive(sqlx::FromRow)]
struct RunRow {
    grp: i64,
    row: Option<i32>,
    seats: Option<Vec<i32>>,
    positions: Option<Vec<i32>>,
    prices: Option<Vec<i32>>,
    has_class: bool,
}

/// Allocate seats for these requests (in claim order) inside the caller's
/// transaction (or savepoint). Returns one decision per request, in order.
/// An error leaves seat changes half made: the caller rolls back.
pub async fn allocate(
    conn: &mut PgConnection,
    wanted: &[Wanted<'_>],
    strategy: Strategy,
) -> Result<Vec<Decision>, ProcessError> {
    let mut events = Events::new();
    let mut groups = lock_cheapest(conn, wanted, strategy, &mut events).await?;
    let others: Vec<i64> = wanted.iter().filter(|w| w.how() != How::Cheapest).map(|w| w.request.event).collect();
    if !others.is_empty() {
        event_rules(conn, others, &mut events).await?;
    }
    let on_sale = |w: &&Wanted| events.get(&w.request.event).copied().flatten().is_some_and(|r| r.refusal.is_none());
    let named = lock_named(conn, wanted.iter().filter(|w| w.how() == How::Named).filter(on_sale)).await?;
    let runs = free_runs(conn, wanted.iter().filter(|w| w.how() == How::Together).filter(on_sale)).await?;
    count_free(conn, &mut groups).await?;
    let used = customer_seats(conn, wanted, &events).await?;
    let mut chosen = choose::in_claim_order(wanted, &events, &mut groups, &named, &runs, used)?;
    lock_blocks(conn, wanted, &runs, &mut chosen).await?;
    let (mut decisions, grants) = chosen.settled();

    if !grants.is_empty() {
        let (indexes, grants): (Vec<usize>, Vec<Grant>) = grants
            .into_iter()
            .map(|(i, mut mine)| {
                mine.sort_by_key(|s| s.seat);
                let w = wanted[i];
                (
                    i,
                    Grant {
                        request_id: w.request_id,
                        producer: w.producer,
                        request: w.request,
                        hold_secs: w.hold_secs,
                        seats: mine,
                        limited: limited(&events, w.request.event),
                    },
                )
            })
            .unzip();
        let bookings = take::take_seats(conn, &grants).await?;
        for (i, booking) in indexes.into_iter().zip(bookings) {
            decisions[i] = Some(Decision::Done(booking));
        }
    }
    decisions
        .into_iter()
        .map(|d| d.ok_or_else(|| ProcessError::Internal("a request of the batch got no decision".into())))
        .collect()
}

/// Statement 1: lock the cheapest free seats of every (event, class) the
/// cheapest-first requests ask about, and note those events' rules.
async fn lock_cheapest(
    conn: &mut PgConnection,
    wanted: &[Wanted<'_>],
    strategy: Strategy,
    events: &mut Events,
) -> Result<Vec<Group>, ProcessError> {
    // Groups in (event, class) order, so that strategies that wait for locks
    // take them in the same order in every worker.
    let mut needs: BTreeMap<(i64, i16), i32> = BTreeMap::new();
    for w in wanted.iter().filter(|w| w.how() == How::Cheapest) {
        *needs.entry((w.request.event, w.class())).or_default() += w.request.party_size() as i32;
    }
    // Other requests of the batch may take some of these seats first (those
    // claimed earlier do): lock that many more, so that the group is not
    // short for it.
    let mut others: HashMap<(i64, Option<i16>), i32> = HashMap::new();
    for w in wanted.iter() {
        match w.how() {
            How::Cheapest => {}
            How::Together => {
                *others.entry((w.request.event, Some(w.class()))).or_default() += w.request.party_size() as i32
            }
            How::Named => *others.entry((w.request.event, None)).or_default() += w.request.seats.len() as i32,
        }
    }
    let mut groups: Vec<Group> = needs
        .into_iter()
        .map(|((event, class), need)| {
            let spare = others.get(&(event, Some(class))).copied().unwrap_or(0)
                + others.get(&(event, None)).copied().unwrap_or(0);
            Group { event, class, lock: need + spare, locked: Vec::new(), next: 0, contended: false, has_class: true }
        })
        .collect();
    if groups.is_empty() {
        return Ok(groups);
    }
    let rows = cheapest_rows(conn, &groups, strategy).await?;
    for row in rows {
        let group = usize::try_from(row.grp - 1)
            .ok()
            .and_then(|g| groups.get_mut(g))
            .ok_or_else(|| unexpected_group(row.grp))?;
        let rules = match row.known {
            true => Some(Rules { refusal: refusal(row.refusal.as_deref())?, per_customer: row.per_customer }),
            false => None,
        };
        events.insert(group.event, rules);
        group.locked.extend(row.seat());
    }
    Ok(groups)
}

/// The rows of [`allocation::LOCK_CHEAPEST`] (or the strategy's variant) for
/// these groups.
async fn cheapest_rows(
    conn: &mut PgConnection,
    groups: &[Group],
    strategy: Strategy,
) -> Result<Vec<LockedRow>, ProcessError> {
    let sql = match strategy {
        Strategy::SkipLocked => allocation::LOCK_CHEAPEST,
        Strategy::Blocking => allocation::LOCK_CHEAPEST_WAIT,
        Strategy::Nowait => allocation::LOCK_CHEAPEST_NOWAIT,
        Strategy::Serializable => allocation::PICK_CHEAPEST,
    };
    let mut query = bind_groups(sqlx::query_as(sql), groups);
    if strategy == Strategy::SkipLocked {
        query = query.bind(allocation::SPREAD_FROM_NEED);
    }
    Ok(query.fetch_all(&mut *conn).await?)
}

/// Run every statement above once, with nothing to lock or read, so that a
/// new connection has them prepared and planned before its first batch (see
/// `crate::warm`).
pub async fn warm(conn: &mut PgConnection, strategy: Strategy) -> Result<(), ProcessError> {
    let none: &[i64] = &[];
    cheapest_rows(conn, &[], strategy).await?;
    sqlx::query(allocation::COUNT_FREE).bind(none).bind(&[] as &[i16]).bind(&[] as &[i32]).execute(&mut *conn).await?;
    sqlx::query(allocation::EVENT_RULES).bind(none).execute(&mut *conn).await?;
    sqlx::query(allocation::LOCK_NAMED).bind(none).bind(&[] as &[i32]).execute(&mut *conn).await?;
    sqlx::query(allocation::FREE_RUNS).bind(none).bind(&[] as &[i16]).bind(&[] as &[i32]).execute(&mut *conn).await?;
    sqlx::query(allocation::LOCK_FREE_SEATS).bind(none).bind(&[] as &[i32]).execute(&mut *conn).await?;
    sqlx::query(allocation::CUSTOMER_SEATS)
        .bind(none)
        .bind(&[] as &[&str])
        .bind(&[] as &[&str])
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// Statement 2: the rules of these events.
async fn event_rules(conn: &mut PgConnection, mut ids: Vec<i64>, events: &mut Events) -> Result<(), ProcessError> {
    ids.sort_unstable();
    ids.dedup();
    let rows: Vec<(i64, Option<String>, Option<i32>)> =
        sqlx::query_as(allocation::EVENT_RULES).bind(&ids).fetch_all(&mut *conn).await?;
    for id in ids {
        events.entry(id).or_insert(None);
    }
    for (id, refusal_code, per_customer) in rows {
        events.insert(id, Some(Rules { refusal: refusal(refusal_code.as_deref())?, per_customer }));
    }
    Ok(())
}

/// Statement 3: lock the seats these requests name.
async fn lock_named<'w>(
    conn: &mut PgConnection,
    wanted: impl Iterator<Item = &'w Wanted<'w>>,
) -> Result<HashMap<Key, NamedSeat>, ProcessError> {
    let (events, seat_nos): (Vec<i64>, Vec<i32>) =
        wanted.flat_map(|w| w.request.seats.iter().map(|&s| (w.request.event, s))).unzip();
    if events.is_empty() {
        return Ok(HashMap::new());
    }
    let rows: Vec<NamedSeat> =
        sqlx::query_as(allocation::LOCK_NAMED).bind(events).bind(seat_nos).fetch_all(&mut *conn).await?;
    Ok(rows.into_iter().map(|s| ((s.event, s.seat.seat), s)).collect())
}

/// Statement 4: the runs of adjacent free seats for these side-by-side
/// parties, by (event, class).
async fn free_runs<'w>(
    conn: &mut PgConnection,
    wanted: impl Iterator<Item = &'w Wanted<'w>>,
) -> Result<Runs, ProcessError> {
    // The smallest party of each (event, class): no shorter run serves any.
    let mut smallest: BTreeMap<(i64, i16), i32> = BTreeMap::new();
    for w in wanted {
        let party = w.request.party_size() as i32;
        smallest.entry((w.request.event, w.class())).and_modify(|p| *p = (*p).min(party)).or_insert(party);
    }
    let mut runs = Runs::default();
    if smallest.is_empty() {
        return Ok(runs);
    }
    let keys: Vec<(i64, i16)> = smallest.keys().copied().collect();
    let rows: Vec<RunRow> = sqlx::query_as(allocation::FREE_RUNS)
        .bind(keys.iter().map(|k| k.0).collect::<Vec<_>>())
        .bind(keys.iter().map(|k| k.1).collect::<Vec<_>>())
        .bind(smallest.values().copied().collect::<Vec<_>>())
        .fetch_all(&mut *conn)
        .await?;
    for r in rows {
        let key = usize::try_from(r.grp - 1).ok().and_then(|k| keys.get(k)).copied();
        let key = key.ok_or_else(|| unexpected_group(r.grp))?;
        if !r.has_class {
            runs.missing.insert(key);
        }
        let (Some(row), Some(seats), Some(positions), Some(prices)) = (r.row, r.seats, r.positions, r.prices) else {
            continue;
        };
        if seats.len() != positions.len() || seats.len() != prices.len() {
            return Err(ProcessError::Internal(format!("a run of adjacent seats of group {} is ragged", r.grp)));
        }
        runs.runs.entry(key).or_default().push(Run { row, seats, positions, prices });
    }
    Ok(runs)
}

/// Statement 5: for each cheapest-first group that came up short, whether
/// more of its seats are free by committed state than it locked (others
/// hold some: contention, not a sell-out), and whether the event has the
/// class at all.
async fn count_free(conn: &mut PgConnection, groups: &mut [Group]) -> Result<(), ProcessError> {
    let short: Vec<usize> = (0..groups.len()).filter(|&g| (groups[g].locked.len() as i32) < groups[g].lock).collect();
    if short.is_empty() {
        return Ok(());
    }
    let subset: Vec<&Group> = short.iter().map(|&g| &groups[g]).collect();
    let free: Vec<(i64, i64, bool)> =
        bind_groups(sqlx::query_as(allocation::COUNT_FREE), subset.iter().copied()).fetch_all(&mut *conn).await?;
    for (k, free, has_class) in free {
        let g = usize::try_from(k - 1).ok().and_then(|k| short.get(k)).copied();
        let group = g.and_then(|g| groups.get_mut(g)).ok_or_else(|| unexpected_group(k))?;
        group.contended = free > group.locked.len() as i64;
        group.has_class = has_class;
    }
    Ok(())
}

/// Statement 6: live seats each customer of the batch already has on each
/// event with a per-customer limit, `None` where another batch holds the
/// customer's lock (see [`allocation::CUSTOMER_SEATS`]); no statement when
/// no event of the batch has a limit.
async fn customer_seats<'w>(
    conn: &mut PgConnection,
    wanted: &[Wanted<'w>],
    events: &Events,
) -> Result<HashMap<Customer<'w>, Option<i64>>, ProcessError> {
    let mut customers: Vec<Customer<'w>> = wanted
        .iter()
        .filter(|w| limited(events, w.request.event))
        .map(|w| (w.request.event, w.producer, w.request.customer.as_str()))
        .collect();
    customers.sort_unstable();
    customers.dedup();
    if customers.is_empty() {
        return Ok(HashMap::new());
    }
    let rows: Vec<(i64, bool, i64)> = sqlx::query_as(allocation::CUSTOMER_SEATS)
        .bind(customers.iter().map(|c| c.0).collect::<Vec<_>>())
        .bind(customers.iter().map(|c| c.1).collect::<Vec<_>>())
        .bind(customers.iter().map(|c| c.2).collect::<Vec<_>>())
        .fetch_all(&mut *conn)
        .await?;
    rows.into_iter()
        .map(|(k, locked, used)| {
            let customer = usize::try_from(k - 1).ok().and_then(|k| customers.get(k)).copied();
            customer
                .map(|c| (c, locked.then_some(used)))
                .ok_or_else(|| ProcessError::Internal(format!("no customer {k}")))
        })
        .collect()
}

/// Statement 7: lock the blocks chosen for side-by-side parties, in up to
/// [`ROUNDS`] rounds; after each, [`Chosen::settle_blocks`] says who got
/// theirs and who moves to the next best block.
async fn lock_blocks(
    conn: &mut PgConnection,
    wanted: &[Wanted<'_>],
    runs: &Runs,
    chosen: &mut Chosen,
) -> Result<(), ProcessError> {
    for round in 1..=ROUNDS {
        if chosen.pending.is_empty() {
            break;
        }
        let (events, seat_nos): (Vec<i64>, Vec<i32>) = chosen
            .pending
            .iter()
            .flat_map(|(i, block)| block.iter().map(move |&s| (wanted[*i].request.event, s)))
            .unzip();
        let rows: Vec<EventSeat> =
            sqlx::query_as(allocation::LOCK_FREE_SEATS).bind(events).bind(seat_nos).fetch_all(&mut *conn).await?;
        let locked: HashMap<Key, SeatInfo> = rows.into_iter().map(|s| ((s.event, s.seat.seat), s.seat)).collect();
        chosen.settle_blocks(wanted, runs, locked, round == ROUNDS);
    }
    Ok(())
}

/// Bind the groups' events, classes and seats to lock as three arrays.
fn bind_groups<'q, 'g, O>(
    query: sqlx::query::QueryAs<'q, sqlx::Postgres, O, sqlx::postgres::PgArguments>,
    groups: impl IntoIterator<Item = &'g Group> + Clone,
) -> sqlx::query::QueryAs<'q, sqlx::Postgres, O, sqlx::postgres::PgArguments> {
    let events: Vec<i64> = groups.clone().into_iter().map(|g| g.event).collect();
    let classes: Vec<i16> = groups.clone().into_iter().map(|g| g.class).collect();
    let needs: Vec<i32> = groups.into_iter().map(|g| g.lock).collect();
    query.bind(events).bind(classes).bind(needs)
}

fn unexpected_group(grp: i64) -> ProcessError {
    ProcessError::Internal(format!("allocation returned a row for group {grp}, which the batch does not have"))
}

/// A refusal code as the database names it (`seatq.sale_refusal`).
fn refusal(code: Option<&str>) -> Result<Option<ErrorCode>, ProcessError> {
    code.map(|c| c.parse().map_err(|_| ProcessError::Internal(format!("unknown refusal {c}")))).transpose()
}
