//! Holds and bookings for a whole batch at once, set-based: the cheapest
//! seats of a class, seats named by number, and parties seated side by side
//! in one row. A handful of statements serve the whole batch, whatever its
//! size and mix, each run only when some request of the batch needs it:
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
//! then every request is decided in claim order, in memory; the blocks chosen
//! for side-by-side parties are locked (7; a party whose block was partly
//! locked elsewhere moves to its next best, at most [`ROUNDS`] times); and one
//! statement makes every booking and takes its seats (8). A batch of
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

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::sql::allocation;
use seatq_core::outcome::{ErrorCode, SeatInfo};
use seatq_core::request::{Request, SeatRequest};
use sqlx::postgres::PgConnection;

use crate::Strategy;
use crate::decision::{Decision, ProcessError};
use crate::take::{self, Grant};

/// How many times the blocks chosen for side-by-side parties are locked
/// before a party whose blocks were each partly held elsewhere counts as
/// contended.
const ROUNDS: usize = 3;

/// A hold (`hold_secs` set) or book.
#[derive(Debug, Clone, Copy)]
pub struct Wanted<'a> {
    pub request_id: i64,
    /// The login that enqueued the request: customers are its customers, so
    /// an event's per-customer limit counts a customer's seats per producer.
    pub producer: &'a str,
    pub request: &'a SeatRequest,
    pub hold_secs: Option<u32>,
}

impl<'a> Wanted<'a> {
    /// The request as seats to take, if it takes seats: a hold or a book.
    pub fn of(request_id: i64, producer: &'a str, request: &'a Request) -> Option<Wanted<'a>> {
        let (r, hold_secs) = match request {
            Request::Hold(r) => (r, Some(r.hold_secs())),
            Request::Book(r) => (r, None),
            Request::Confirm(_) | Request::Cancel(_) | Request::Extend(_) => return None,
        };
        Some(Wanted { request_id, producer, request: r, hold_secs })
    }

    fn how(&self) -> How {
        if !self.request.seats.is_empty() {
            How::Named
        } else if self.request.together {
            How::Together
        } else {
            How::Cheapest
        }
    }

    fn class(&self) -> i16 {
        self.request.class.unwrap_or_default()
    }
}

/// Which seats a request takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum How {
    /// The cheapest free seats of its class.
    Cheapest,
    /// The seats it names.
    Named,
    /// A block of adjacent free seats of its class in one row.
    Together,
}

/// An event's sales rules: why sales refuse now, and the per-customer limit.
#[derive(Debug, Clone, Copy)]
struct Rules {
    refusal: Option<ErrorCode>,
    per_customer: Option<i32>,
}

/// Rules by event; `None` for an event that does not exist.
type Events = HashMap<i64, Option<Rules>>;

/// Whether the per-customer limit applies to bookings of `event`: it exists,
/// is on sale (no booking is made otherwise) and has a limit. Its customers'
/// seats are counted, and the bookings made count toward it
/// (`seatq.bookings.limited`).
fn limited(events: &Events, event: i64) -> bool {
    events.get(&event).copied().flatten().is_some_and(|r| r.refusal.is_none() && r.per_customer.is_some())
}

/// A seat, as a batch tells seats apart.
type Key = (i64, i32);

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

/// A named seat, as [`allocation::LOCK_NAMED`] found it.
#[derive(sqlx::FromRow)]
struct NamedSeat {
    event: i64,
    #[sqlx(flatten)]
    seat: SeatInfo,
    /// This transaction holds its lock.
    locked: bool,
    /// Not for sale.
    blocked: bool,
    /// Free (trusted only where locked).
    free: bool,
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

/// A run of adjacent free seats in one row, in position order.
struct Run {
    row: i32,
    seats: Vec<i32>,
    positions: Vec<i32>,
    prices: Vec<i32>,
}

/// What the batch knows of adjacent seats: the runs of each (event, class)
/// side-by-side parties ask about, and which of those classes the event
/// does not have.
#[derive(Default)]
struct Runs {
    runs: HashMap<(i64, i16), Vec<Run>>,
    missing: HashSet<(i64, i16)>,
}

impl Runs {
    fn of(&self, event: i64, class: i16) -> &[Run] {
        self.runs.get(&(event, class)).map_or(&[], Vec::as_slice)
    }
}

/// The cheapest-first requests of one (event, class), and what the batch
/// found for them.
struct Group {
    event: i64,
    class: i16,
    /// Seats to lock: as many as its requests ask for in all, and as many
    /// as other requests of the batch might take from the same seats.
    lock: i32,
    /// Seats locked, cheapest first.
    locked: Vec<SeatInfo>,
    /// How many of `locked` are given out (or were taken by another request
    /// of the batch).
    next: usize,
    /// Short, with free seats held by in-flight transactions.
    contended: bool,
    /// The event has seats of the class (asked only of a short group).
    has_class: bool,
}

/// What the batch knows of its seats while it decides, in claim order.
#[derive(Default)]
struct Seats {
    /// Granted to a request of this batch.
    granted: HashSet<Key>,
    /// Chosen for a side-by-side party whose block is not locked yet.
    reserved: HashSet<Key>,
    /// Found held by an in-flight transaction, or no longer free, while
    /// locking a block.
    elsewhere: HashSet<Key>,
}

impl Seats {
    fn unusable(&self, key: &Key) -> bool {
        self.granted.contains(key) || self.reserved.contains(key) || self.elsewhere.contains(key)
    }

    /// The seat numbers of `event` in `sets`, sorted, for [`best_block`]:
    /// it asks about every seat of every run of a class, tens of thousands
    /// on a large venue, while the batch knows a few hundred seats; a
    /// binary search of those is far cheaper than hashing each seat asked
    /// about into three sets.
    fn of_event<'a>(event: i64, sets: impl IntoIterator<Item = &'a HashSet<Key>>) -> Vec<i32> {
        let mut seats: Vec<i32> =
            sets.into_iter().flat_map(|set| set.iter()).filter(|k| k.0 == event).map(|k| k.1).collect();
        seats.sort_unstable();
        seats.dedup();
        seats
    }

    /// [`Seats::unusable`] for one event, as [`Seats::of_event`].
    fn unusable_on(&self, event: i64) -> Vec<i32> {
        Seats::of_event(event, [&self.granted, &self.reserved, &self.elsewhere])
    }
}

/// Whether `key`'s seat is among `seats` (sorted seat numbers of its event).
fn among(seats: &[i32], key: &Key) -> bool {
    seats.binary_search(&key.1).is_ok()
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
    let mut used = customer_seats(conn, wanted, &events).await?;
    let group_of: HashMap<(i64, i16), usize> =
        groups.iter().enumerate().map(|(g, gr)| ((gr.event, gr.class), g)).collect();

    let mut seats = Seats::default();
    let mut decisions: Vec<Option<Decision>> = (0..wanted.len()).map(|_| None).collect();
    let mut grants: Vec<(usize, Vec<SeatInfo>)> = Vec::new();
    // Side-by-side parties with a block chosen but not yet locked.
    let mut pending: Vec<(usize, Vec<i32>)> = Vec::new();
    // Customers (on events with a limit) with such a party: their later
    // requests wait, as the count of their seats is not settled yet.
    let mut unsettled: HashSet<Customer> = HashSet::new();
    // Side-by-side parties refused because the blocks chosen for earlier
    // ones are taken.
    let mut provisional: Vec<usize> = Vec::new();
    for (i, w) in wanted.iter().enumerate() {
        let r = w.request;
        let party = r.party_size() as usize;
        let Some(rules) = events.get(&r.event).copied().flatten() else {
            decisions[i] = Some(Decision::Reject(ErrorCode::UnknownEvent, format!("event {} does not exist", r.event)));
            continue;
        };
        if let Some(code) = rules.refusal {
            decisions[i] = Some(Decision::Reject(code, sales_message(code, r.event)));
            continue;
        }
        let customer = (r.event, w.producer, r.customer.as_str());
        if let Some(limit) = rules.per_customer {
            // None: another batch holds the customer's lock, and its
            // bookings are not counted yet.
            let Some(so_far) = used.get(&customer).copied().unwrap_or(Some(0)) else {
                decisions[i] = Some(Decision::Contended);
                continue;
            };
            if unsettled.contains(&customer) {
                decisions[i] = Some(Decision::Contended);
                continue;
            }
            if so_far + party as i64 > i64::from(limit) {
                decisions[i] = Some(limit_exceeded(limit, so_far, party, r.event));
                continue;
            }
        }
        let taken = match w.how() {
            How::Cheapest => {
                let group = group_of
                    .get(&(r.event, w.class()))
                    .and_then(|&g| groups.get_mut(g))
                    .ok_or_else(|| ProcessError::Internal(format!("no group for request {}", w.request_id)))?;
                cheapest(group, r, &seats)
            }
            How::Named => named_seats(r, &named, &seats),
            How::Together => match together(&runs, r, &seats) {
                Together::Block(block) => {
                    seats.reserved.extend(block.iter().map(|&s| (r.event, s)));
                    if rules.per_customer.is_some() {
                        unsettled.insert(customer);
                    }
                    pending.push((i, block));
                    continue;
                }
                Together::NoneIfTheyGetTheirs(decision) => {
                    provisional.push(i);
                    Err(decision)
                }
                Together::No(decision) => Err(decision),
            },
        };
        match taken {
            Ok(mine) => {
                seats.granted.extend(mine.iter().map(|s| (r.event, s.seat)));
                if rules.per_customer.is_some() {
                    *used.entry(customer).or_insert(Some(0)).get_or_insert(0) += mine.len() as i64;
                }
                grants.push((i, mine));
            }
            Err(decision) => decisions[i] = Some(decision),
        }
    }

    if !lock_blocks(conn, wanted, pending, &runs, &mut seats, &mut grants, &mut decisions).await? {
        // Some earlier party did not get its first block: a refusal that
        // counted on it may be wrong. Try those again.
        for i in provisional {
            decisions[i] = Some(Decision::Contended);
        }
    }

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

/// A customer on an event: (event, producer, customer name). Customer names
/// are each producer's own, so two shops' "ann" are two customers.
type Customer<'w> = (i64, &'w str, &'w str);

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

/// A cheapest-first request: the group's next locked seats.
fn cheapest(group: &mut Group, r: &SeatRequest, seats: &Seats) -> Result<Vec<SeatInfo>, Decision> {
    let party = r.party_size() as usize;
    let rest = &group.locked[group.next..];
    // Seats of the group another request of the batch (named, side by side)
    // took: the group locked no more than its own requests need, so without
    // them it may be short only in appearance.
    let mut robbed = false;
    let mut mine = Vec::with_capacity(party);
    let mut end = group.next;
    for (k, s) in rest.iter().enumerate() {
        if mine.len() == party {
            break;
        }
        if seats.unusable(&(group.event, s.seat)) {
            robbed = true;
        } else {
            mine.push(s.clone());
        }
        end = group.next + k + 1;
    }
    if mine.len() == party || (r.partial && !mine.is_empty() && !group.contended && !robbed) {
        group.next = end;
        return Ok(mine);
    }
    if group.contended || robbed {
        return Err(Decision::Contended);
    }
    if !group.has_class {
        return Err(unknown_class(group.event, group.class));
    }
    Err(Decision::Reject(
        ErrorCode::SoldOut,
        format!("{} seat(s) of class {} left on event {}, {party} requested", mine.len(), group.class, group.event),
    ))
}

/// A request naming its seats: all of them, or why not.
fn named_seats(r: &SeatRequest, named: &HashMap<Key, NamedSeat>, seats: &Seats) -> Result<Vec<SeatInfo>, Decision> {
    let (mut unknown, mut blocked, mut taken, mut busy) = (Vec::new(), Vec::new(), Vec::new(), false);
    let mut mine = Vec::with_capacity(r.seats.len());
    for &n in &r.seats {
        let key = (r.event, n);
        let Some(s) = named.get(&key) else {
            unknown.push(n);
            continue;
        };
        if s.blocked {
            blocked.push(s.seat.clone());
        } else if seats.granted.contains(&key) || (s.locked && !s.free) {
            taken.push(s.seat.clone());
        } else if !s.locked || seats.reserved.contains(&key) {
            busy = true;
        }
        mine.push(s.seat.clone());
    }
    if !unknown.is_empty() {
        return Err(Decision::Reject(
            ErrorCode::UnknownSeat,
            format!("event {} has no seat(s) {}", r.event, list(&unknown)),
        ));
    }
    if !blocked.is_empty() {
        return Err(Decision::Reject(
            ErrorCode::SeatNotForSale,
            format!("seat(s) {} of event {} are not for sale{}", numbers(&blocked), r.event, named_as(&blocked)),
        ));
    }
    if !taken.is_empty() {
        return Err(Decision::Reject(
            ErrorCode::SeatsTaken,
            format!("seat(s) {} are taken{}", numbers(&taken), named_as(&taken)),
        ));
    }
    // A seat an in-flight transaction holds may be given back: try again.
    if busy {
        return Err(Decision::Contended);
    }
    Ok(mine)
}

/// The seats' numbers, as a request names them.
fn numbers(seats: &[SeatInfo]) -> String {
    list(&seats.iter().map(|s| s.seat).collect::<Vec<_>>())
}

/// " (Stalls, row A, seats 1, 2)": the seats as the venue names them, for a
/// refusal's message; nothing where the event's seats have no names.
fn named_as(seats: &[SeatInfo]) -> String {
    match seats.iter().all(|s| s.label.is_empty()) {
        true => String::new(),
        false => format!(" ({})", seatq_core::outcome::booked_places(seats)),
    }
}

/// What a side-by-side party comes to while the batch decides.
enum Together {
    /// The cheapest block of adjacent seats left, to be locked.
    Block(Vec<i32>),
    /// No block left once the blocks chosen for earlier parties are theirs:
    /// final if they all get them, contended otherwise.
    NoneIfTheyGetTheirs(Decision),
    /// Final.
    No(Decision),
}

/// A side-by-side party: the cheapest block of adjacent seats left, or why
/// there is none.
fn together(runs: &Runs, r: &SeatRequest, seats: &Seats) -> Together {
    let party = r.party_size() as usize;
    let class = r.class.unwrap_or_default();
    if runs.missing.contains(&(r.event, class)) {
        return Together::No(unknown_class(r.event, class));
    }
    let runs = runs.of(r.event, class);
    let unusable = seats.unusable_on(r.event);
    if let Some(block) = best_block(runs, r.event, party, |k| among(&unusable, k)) {
        return Together::Block(block);
    }
    let none = Decision::Reject(
        ErrorCode::NoAdjacentSeats,
        format!("no row of event {} has {party} adjacent free seats of class {class}", r.event),
    );
    let granted = Seats::of_event(r.event, [&seats.granted]);
    match best_block(runs, r.event, party, |k| among(&granted, k)) {
        Some(_) => Together::NoneIfTheyGetTheirs(none),
        None => Together::No(none),
    }
}

/// How a block of adjacent seats ranks: total price, row, position.
type BlockRank = (i64, i32, i32);

/// The cheapest block of `party` adjacent seats in the runs, avoiding the
/// seats `excluded` says: least total price, then the lowest row, then the
/// lowest position. Each seat is asked about once and each block's total
/// and excluded seats are carried from the block before (a sliding
/// window): a batch asks this of every side-by-side party, and on a venue
/// of tens of thousands of seats asking per seat of every block, and adding
/// up every block's prices anew, made the worker's own time grow with the
/// venue times the party.
fn best_block(runs: &[Run], event: i64, party: usize, excluded: impl Fn(&Key) -> bool) -> Option<Vec<i32>> {
    if party == 0 {
        return None;
    }
    // (total price, row, position) of the best block so far, and its seats.
    let mut best: Option<(BlockRank, &[i32])> = None;
    let mut out = Vec::new();
    for run in runs.iter().filter(|r| r.seats.len() >= party) {
        out.clear();
        out.extend(run.seats.iter().map(|&s| excluded(&(event, s))));
        let price = |i: usize| i64::from(run.prices[i]);
        let mut total: i64 = (0..party).map(price).sum();
        let mut excluded_in_block = out[..party].iter().filter(|&&x| x).count();
        for start in 0..=run.seats.len() - party {
            if start > 0 {
                let (gone, come) = (start - 1, start + party - 1);
                total += price(come) - price(gone);
                excluded_in_block = excluded_in_block + usize::from(out[come]) - usize::from(out[gone]);
            }
            if excluded_in_block > 0 {
                continue;
            }
            let key = (total, run.row, run.positions[start]);
            if best.is_none_or(|(b, _)| key < b) {
                best = Some((key, &run.seats[start..start + party]));
            }
        }
    }
    best.map(|(_, block)| block.to_vec())
}

/// Statement 7: lock the blocks chosen for side-by-side parties, in rounds:
/// a party whose block is whole gets it; one whose block was partly held
/// elsewhere (or taken since) moves to its next best block for the next
/// round, and after the last, or with none left, is contended. True if every
/// party got the block first chosen for it.
async fn lock_blocks(
    conn: &mut PgConnection,
    wanted: &[Wanted<'_>],
    mut pending: Vec<(usize, Vec<i32>)>,
    runs: &Runs,
    seats: &mut Seats,
    grants: &mut Vec<(usize, Vec<SeatInfo>)>,
    decisions: &mut [Option<Decision>],
) -> Result<bool, ProcessError> {
    let mut as_chosen = true;
    for round in 1..=ROUNDS {
        if pending.is_empty() {
            break;
        }
        let (events, seat_nos): (Vec<i64>, Vec<i32>) =
            pending.iter().flat_map(|(i, block)| block.iter().map(move |&s| (wanted[*i].request.event, s))).unzip();
        let rows: Vec<EventSeat> =
            sqlx::query_as(allocation::LOCK_FREE_SEATS).bind(events).bind(seat_nos).fetch_all(&mut *conn).await?;
        let mut locked: HashMap<Key, SeatInfo> = rows.into_iter().map(|s| ((s.event, s.seat.seat), s.seat)).collect();
        let mut next = Vec::new();
        for (i, block) in pending {
            let w = wanted[i];
            let event = w.request.event;
            for &s in &block {
                seats.reserved.remove(&(event, s));
            }
            if block.iter().all(|&s| locked.contains_key(&(event, s))) {
                let mine: Vec<SeatInfo> = block.iter().filter_map(|&s| locked.remove(&(event, s))).collect();
                seats.granted.extend(block.iter().map(|&s| (event, s)));
                grants.push((i, mine));
                continue;
            }
            as_chosen = false;
            seats.elsewhere.extend(block.iter().filter(|&&s| !locked.contains_key(&(event, s))).map(|&s| (event, s)));
            let unusable = seats.unusable_on(event);
            match best_block(runs.of(event, w.class()), event, w.request.party_size() as usize, |k| among(&unusable, k))
            {
                Some(other) if round < ROUNDS => {
                    seats.reserved.extend(other.iter().map(|&s| (event, s)));
                    next.push((i, other));
                }
                _ => decisions[i] = Some(Decision::Contended),
            }
        }
        pending = next;
    }
    Ok(as_chosen)
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

/// The message of a `not_on_sale` or `sales_closed` refusal.
fn sales_message(code: ErrorCode, event: i64) -> String {
    match code {
        ErrorCode::NotOnSale => format!("event {event} is not on sale yet"),
        _ => format!("sales of event {event} are closed"),
    }
}

/// An `unknown_class` refusal.
fn unknown_class(event: i64, class: i16) -> Decision {
    Decision::Reject(ErrorCode::UnknownClass, format!("event {event} has no seats of class {class}"))
}

/// A `customer_limit_exceeded` refusal.
fn limit_exceeded(limit: i32, used: i64, party: usize, event: i64) -> Decision {
    Decision::Reject(
        ErrorCode::CustomerLimitExceeded,
        format!("event {event} sells at most {limit} seat(s) per customer; the customer has {used}, {party} requested"),
    )
}

fn list(seats: &[i32]) -> String {
    seats.iter().map(i32::to_string).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod best_block_tests {
    use super::*;

    /// Every block checked on its own: what `best_block` must agree with.
    fn by_brute_force(runs: &[Run], event: i64, party: usize, excluded: &HashSet<Key>) -> Option<Vec<i32>> {
        let mut best: Option<(BlockRank, Vec<i32>)> = None;
        for run in runs {
            for start in 0..(run.seats.len() + 1).saturating_sub(party) {
                let block = &run.seats[start..start + party];
                if block.iter().any(|&s| excluded.contains(&(event, s))) {
                    continue;
                }
                let total: i64 = run.prices[start..start + party].iter().map(|&p| i64::from(p)).sum();
                let key = (total, run.row, run.positions[start]);
                if best.as_ref().is_none_or(|(b, _)| key < *b) {
                    best = Some((key, block.to_vec()));
                }
            }
        }
        best.map(|(_, block)| block)
    }

    #[test]
    fn the_cheapest_block_then_the_lowest_row_and_position() {
        let run = |row: i32, first: i32, prices: &[i32]| Run {
            row,
            seats: (0..prices.len() as i32).map(|k| row * 100 + first + k).collect(),
            positions: (0..prices.len() as i32).map(|k| first + k).collect(),
            prices: prices.to_vec(),
        };
        let runs = [run(1, 1, &[50, 10, 10, 50]), run(2, 1, &[10, 10, 10]), run(3, 4, &[10, 10])];
        let none = |_: &Key| false;
        // 20 in row 1 (seats 2-3), row 2 (1-2, 2-3) and row 3: row 1 first.
        assert_eq!(best_block(&runs, 7, 2, none), Some(vec![102, 103]));
        assert_eq!(best_block(&runs, 7, 3, none), Some(vec![201, 202, 203]));
        assert_eq!(best_block(&runs, 7, 5, none), None, "no run is long enough");
        // Seat 103 taken: row 2's first block is next.
        assert_eq!(best_block(&runs, 7, 2, |k| *k == (7, 103)), Some(vec![201, 202]));
        // Another event's seat of the same number is no matter.
        assert_eq!(best_block(&runs, 7, 2, |k| *k == (8, 103)), Some(vec![102, 103]));
    }

    #[test]
    fn agrees_with_checking_every_block() {
        let mut rng = fastrand::Rng::with_seed(7);
        for _ in 0..500 {
            let mut seat = 0;
            let runs: Vec<Run> = (0..rng.usize(0..6))
                .map(|row| {
                    let len = rng.usize(0..12);
                    let first = rng.i32(1..5);
                    let seats: Vec<i32> = (0..len)
                        .map(|_| {
                            seat += 1;
                            seat
                        })
                        .collect();
                    Run {
                        row: row as i32 + 1,
                        positions: (0..len as i32).map(|k| first + k).collect(),
                        prices: (0..len).map(|_| rng.i32(1..4) * 10).collect(),
                        seats,
                    }
                })
                .collect();
            let excluded: HashSet<Key> = (1..=seat).filter(|_| rng.u8(..) < 60).map(|s| (3, s)).collect();
            let party = rng.usize(1..10);
            assert_eq!(
                best_block(&runs, 3, party, |k| excluded.contains(k)),
                by_brute_force(&runs, 3, party, &excluded),
                "party {party}, excluded {excluded:?}"
            );
        }
    }
}
