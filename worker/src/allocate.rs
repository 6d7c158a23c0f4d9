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

use crate::sql::allocation::{self, EventSeat, LockedSeat, NamedSeat};
use seatq_core::outcome::{ErrorCode, SeatInfo};
use sqlx::postgres::PgConnection;

use crate::Strategy;
use crate::choose::{self, Chosen, Customer, Events, Group, How, Key, Lined, Rules, Run, Runs, Wanted, limited};
use crate::decision::{Decision, ProcessError};
use crate::line;
use crate::take::{self, Grant};

/// How many times the blocks chosen for side-by-side parties are locked
/// before a party whose blocks were each partly held elsewhere counts as
/// contended.
const ROUNDS: usize = 3;

/// Allocate seats for these requests (in claim order) inside the caller's
/// transaction (or savepoint). Returns one decision per request, in order.
/// An error leaves seat changes half made: the caller rolls back. `route`:
/// every request is of this one event, on a database sharded by event
/// ([`seatq_core::sql::route`]); each statement then goes to its shard.
pub async fn allocate(
    conn: &mut PgConnection,
    wanted: &[Wanted<'_>],
    strategy: Strategy,
    route: Option<i64>,
) -> Result<Vec<Decision>, ProcessError> {
    let mut events = Events::new();
    let mut groups = lock_cheapest(conn, wanted, strategy, route, &mut events).await?;
    let mut lined: Lined = groups.iter().filter(|g| g.lined).map(|g| (g.event, g.class)).collect();
    let others: Vec<i64> = wanted.iter().filter(|w| w.how() != How::Cheapest).map(|w| w.request.event).collect();
    if !others.is_empty() {
        let others = event_rules(conn, others, &mut events).await?;
        lined.extend(allocation::LinedClasses { events: &others, route }.query().fetch_all(&mut *conn).await?);
    }
    let on_sale = |w: &&Wanted| events.get(&w.request.event).copied().flatten().is_some_and(|r| r.refusal.is_none());
    let named = lock_named(conn, wanted.iter().filter(|w| w.how() == How::Named).filter(on_sale), route).await?;
    let runs = free_runs(conn, wanted.iter().filter(|w| w.how() == How::Together).filter(on_sale), route).await?;
    count_free(conn, &mut groups, route).await?;
    let used = customer_seats(conn, wanted, &events).await?;
    let mut chosen = choose::in_claim_order(wanted, &events, &mut groups, &named, &runs, &lined, used)?;
    lock_blocks(conn, wanted, &runs, &mut chosen, route).await?;
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
                        token_hash: w.token_hash,
                        customer_key: w.customer_key,
                        request: w.request,
                        hold_secs: w.hold_secs,
                        seats: mine,
                        limited: limited(&events, w.request.event),
                    },
                )
            })
            .unzip();
        let bookings = take::take_seats(conn, &grants, route).await?;
        for (i, booking) in indexes.into_iter().zip(bookings) {
            decisions[i] = Some(Decision::Done(booking));
        }
    }
    // Those refused for want of seats that asked to wait join the waiting list.
    if wanted.iter().any(|w| w.request.wait_seconds.is_some()) {
        line::join(conn, wanted, &mut decisions).await?;
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
    route: Option<i64>,
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
            Group {
                event,
                class,
                lock: need + spare,
                locked: Vec::new(),
                next: 0,
                contended: false,
                has_class: true,
                lined: false,
            }
        })
        .collect();
    if groups.is_empty() {
        return Ok(groups);
    }
    let rows = cheapest_rows(conn, &groups, strategy, route).await?;
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
        group.lined = row.lined;
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
    route: Option<i64>,
) -> Result<Vec<LockedSeat>, ProcessError> {
    let (events, classes, need) = columns(groups);
    let lock = allocation::LockCheapest { strategy, events: &events, classes: &classes, need: &need, route };
    Ok(lock.query().fetch_all(&mut *conn).await?)
}

/// Statement 2: the rules of these events (which it returns, sorted and
/// without repeats); and then which of their classes have a waiting list.
async fn event_rules(
    conn: &mut PgConnection,
    mut ids: Vec<i64>,
    events: &mut Events,
) -> Result<Vec<i64>, ProcessError> {
    ids.sort_unstable();
    ids.dedup();
    let rows = allocation::EventRules { events: &ids }.query().fetch_all(&mut *conn).await?;
    for &id in &ids {
        events.entry(id).or_insert(None);
    }
    for r in rows {
        events.insert(r.id, Some(Rules { refusal: refusal(r.refusal.as_deref())?, per_customer: r.per_customer }));
    }
    Ok(ids)
}

/// Statement 3: lock the seats these requests name.
async fn lock_named<'w>(
    conn: &mut PgConnection,
    wanted: impl Iterator<Item = &'w Wanted<'w>>,
    route: Option<i64>,
) -> Result<HashMap<Key, NamedSeat>, ProcessError> {
    let (events, seat_nos): (Vec<i64>, Vec<i32>) =
        wanted.flat_map(|w| w.request.seats.iter().map(|&s| (w.request.event, s))).unzip();
    if events.is_empty() {
        return Ok(HashMap::new());
    }
    let rows: Vec<NamedSeat> =
        allocation::LockNamed { events: &events, seats: &seat_nos, route }.query().fetch_all(&mut *conn).await?;
    Ok(rows.into_iter().map(|s| ((s.event, s.seat.seat), s)).collect())
}

/// Statement 4: the runs of adjacent free seats for these side-by-side
/// parties, by (event, class).
async fn free_runs<'w>(
    conn: &mut PgConnection,
    wanted: impl Iterator<Item = &'w Wanted<'w>>,
    route: Option<i64>,
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
    let events: Vec<i64> = keys.iter().map(|k| k.0).collect();
    let classes: Vec<i16> = keys.iter().map(|k| k.1).collect();
    let party: Vec<i32> = smallest.values().copied().collect();
    let runs_of = allocation::FreeRuns { events: &events, classes: &classes, party: &party, route };
    let rows = runs_of.query().fetch_all(&mut *conn).await?;
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
async fn count_free(conn: &mut PgConnection, groups: &mut [Group], route: Option<i64>) -> Result<(), ProcessError> {
    // (A group of a class with a waiting list locked nothing on purpose.)
    let short: Vec<usize> =
        (0..groups.len()).filter(|&g| !groups[g].lined && (groups[g].locked.len() as i32) < groups[g].lock).collect();
    if short.is_empty() {
        return Ok(());
    }
    let subset: Vec<&Group> = short.iter().map(|&g| &groups[g]).collect();
    let (events, classes, need) = columns(subset.iter().copied());
    let counts = allocation::CountFree { events: &events, classes: &classes, need: &need, route };
    for c in counts.query().fetch_all(&mut *conn).await? {
        let g = usize::try_from(c.grp - 1).ok().and_then(|k| short.get(k)).copied();
        let group = g.and_then(|g| groups.get_mut(g)).ok_or_else(|| unexpected_group(c.grp))?;
        group.contended = c.free > group.locked.len() as i64;
        group.has_class = c.has_class;
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
        .map(|w| (w.request.event, w.producer, w.customer_key))
        .collect();
    customers.sort_unstable();
    customers.dedup();
    if customers.is_empty() {
        return Ok(HashMap::new());
    }
    let events: Vec<i64> = customers.iter().map(|c| c.0).collect();
    let producers: Vec<&str> = customers.iter().map(|c| c.1).collect();
    let names: Vec<&str> = customers.iter().map(|c| c.2).collect();
    let counts = allocation::CustomerSeats { events: &events, producers: &producers, customers: &names };
    let rows = counts.query().fetch_all(&mut *conn).await?;
    rows.into_iter()
        .map(|r| {
            let customer = usize::try_from(r.idx - 1).ok().and_then(|k| customers.get(k)).copied();
            customer
                .map(|c| (c, r.locked.then_some(r.used)))
                .ok_or_else(|| ProcessError::Internal(format!("no customer {}", r.idx)))
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
    route: Option<i64>,
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
        let rows: Vec<EventSeat> = allocation::LockFreeSeats { events: &events, seats: &seat_nos, route }
            .query()
            .fetch_all(&mut *conn)
            .await?;
        let locked: HashMap<Key, SeatInfo> = rows.into_iter().map(|s| ((s.event, s.seat.seat), s.seat)).collect();
        chosen.settle_blocks(wanted, runs, locked, round == ROUNDS);
    }
    Ok(())
}

/// The groups' events, classes and seats to lock, as three arrays (for
/// [`allocation::LockCheapest`] and [`allocation::CountFree`]).
fn columns<'g>(groups: impl IntoIterator<Item = &'g Group> + Clone) -> (Vec<i64>, Vec<i16>, Vec<i32>) {
    let events: Vec<i64> = groups.clone().into_iter().map(|g| g.event).collect();
    let classes: Vec<i16> = groups.clone().into_iter().map(|g| g.class).collect();
    let need: Vec<i32> = groups.into_iter().map(|g| g.lock).collect();
    (events, classes, need)
}

fn unexpected_group(grp: i64) -> ProcessError {
    ProcessError::Internal(format!("allocation returned a row for group {grp}, which the batch does not have"))
}

/// A refusal code as the database names it (`seatq.sale_refusal`).
fn refusal(code: Option<&str>) -> Result<Option<ErrorCode>, ProcessError> {
    code.map(|c| c.parse().map_err(|_| ProcessError::Internal(format!("unknown refusal {c}")))).transpose()
}
