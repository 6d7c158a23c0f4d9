//! Choosing seats, in memory: what each hold and book of a batch gets,
//! decided from what [`crate::allocate`] read and locked, with no statement
//! of its own. Nothing here touches the database, so every rule of the
//! choice is a unit test away:
//!
//! - [`in_claim_order`]: each request in claim order, a seat granted to one
//!   taken for every later one: the event's sales rules, the per-customer
//!   limit, then its seats by how it asks for them:
//!   - cheapest first ([`cheapest`]): the next seats its group locked;
//!   - named ([`named_seats`]): all of them, or why not;
//!   - side by side ([`together`]): the cheapest block of adjacent seats left
//!     ([`best_block`]), set aside to be locked;
//! - [`Chosen::settle_blocks`]: after each round of locking the blocks set
//!   aside, who got theirs and who moves to the next best;
//! - [`Chosen::settled`]: the decisions and the seats to take, once the
//!   rounds are over.
//!
//! All or nothing per party (docs/design.md): a request gets all its seats
//! or none (but for `partial`). If it cannot have them and in-flight
//! transactions hold seats it could have used, it is *contended*; if nothing
//! is held elsewhere, the answer is final.

use std::collections::{HashMap, HashSet};

use seatq_core::outcome::{ErrorCode, SeatInfo};
use seatq_core::request::{Request, SeatRequest};

use crate::decision::{Decision, ProcessError};
use crate::sql::allocation::NamedSeat;

/// A hold (`hold_secs` set) or book.
#[derive(Debug, Clone, Copy)]
pub struct Wanted<'a> {
    pub request_id: i64,
    /// The login that enqueued the request: customers are its customers, so
    /// an event's per-customer limit counts a customer's seats per producer.
    pub producer: &'a str,
    /// The SHA-256 of the request's hold token, if it carried one: its
    /// booking answers to that token.
    pub token_hash: Option<&'a [u8]>,
    /// The customer in normal form ([`seatq_core::customer::normal_form`]):
    /// who per-customer limits count.
    pub customer_key: &'a str,
    pub request: &'a SeatRequest,
    pub hold_secs: Option<u32>,
}

impl<'a> Wanted<'a> {
    /// The request as seats to take, if it takes seats: a hold or a book.
    pub fn of(
        request_id: i64,
        producer: &'a str,
        token_hash: Option<&'a [u8]>,
        customer_key: &'a str,
        request: &'a Request,
    ) -> Option<Wanted<'a>> {
        let (r, hold_secs) = match request {
            Request::Hold(r) => (r, Some(r.hold_secs())),
            Request::Book(r) => (r, None),
            Request::Confirm(_) | Request::Cancel(_) | Request::Extend(_) => return None,
        };
        Some(Wanted { request_id, producer, token_hash, customer_key, request: r, hold_secs })
    }

    /// How it asks for its seats.
    pub fn how(&self) -> How {
        if !self.request.seats.is_empty() {
            How::Named
        } else if self.request.together {
            How::Together
        } else {
            How::Cheapest
        }
    }

    /// The class it asks for (none for named seats).
    pub fn class(&self) -> i16 {
        self.request.class.unwrap_or_default()
    }
}

/// Which seats a request takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum How {
    /// The cheapest free seats of its class.
    Cheapest,
    /// The seats it names.
    Named,
    /// A block of adjacent free seats of its class in one row.
    Together,
}

/// An event's sales rules: why sales refuse now, and the per-customer limit.
#[derive(Debug, Clone, Copy)]
pub struct Rules {
    pub refusal: Option<ErrorCode>,
    pub per_customer: Option<i32>,
}

/// Rules by event; `None` for an event that does not exist.
pub type Events = HashMap<i64, Option<Rules>>;

/// Whether the per-customer limit applies to bookings of `event`: it exists,
/// is on sale (no booking is made otherwise) and has a limit. Its customers'
/// seats are counted, and the bookings made count toward it
/// (`seatq.bookings.limited`).
pub fn limited(events: &Events, event: i64) -> bool {
    events.get(&event).copied().flatten().is_some_and(|r| r.refusal.is_none() && r.per_customer.is_some())
}

/// A seat, as a batch tells seats apart.
pub type Key = (i64, i32);

/// A run of adjacent free seats in one row, in position order.
pub struct Run {
    pub row: i32,
    pub seats: Vec<i32>,
    pub positions: Vec<i32>,
    pub prices: Vec<i32>,
}

/// What the batch knows of adjacent seats: the runs of each (event, class)
/// side-by-side parties ask about, and which of those classes the event
/// does not have.
#[derive(Default)]
pub struct Runs {
    pub runs: HashMap<(i64, i16), Vec<Run>>,
    pub missing: HashSet<(i64, i16)>,
}

impl Runs {
    fn of(&self, event: i64, class: i16) -> &[Run] {
        self.runs.get(&(event, class)).map_or(&[], Vec::as_slice)
    }
}

/// The cheapest-first requests of one (event, class), and what the batch
/// found for them.
pub struct Group {
    pub event: i64,
    pub class: i16,
    /// Seats to lock: as many as its requests ask for in all, and as many
    /// as other requests of the batch might take from the same seats.
    pub lock: i32,
    /// Seats locked, cheapest first.
    pub locked: Vec<SeatInfo>,
    /// How many of `locked` are given out (or were taken by another request
    /// of the batch).
    pub next: usize,
    /// Short, with free seats held by in-flight transactions.
    pub contended: bool,
    /// The event has seats of the class (asked only of a short group).
    pub has_class: bool,
    /// The class has a waiting list: its free seats are the list's, and
    /// the group locked none.
    pub lined: bool,
}

/// The (event, class) pairs of the batch that have a waiting list
/// (migrations/0012_waiting_list.sql): their free seats are the list's, so
/// a request for them is refused `sold_out` (or joins the list, if it asked
/// to wait), and a named seat of one is `seats_taken`.
pub type Lined = HashSet<(i64, i16)>;

/// What the batch knows of its seats while it decides, in claim order.
#[derive(Default)]
pub struct Seats {
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

/// A customer on an event: (event, producer, customer name). Customer names
/// are each producer's own, so two shops' "ann" are two customers.
pub type Customer<'w> = (i64, &'w str, &'w str);

/// Seats granted to requests of the batch, by the request's index in it.
pub type Granted = Vec<(usize, Vec<SeatInfo>)>;

/// What the batch chose in memory: each request's decision where it is
/// made, the seats granted, and the blocks set aside for side-by-side
/// parties, still to be locked.
pub struct Chosen {
    /// What the batch knows of its seats.
    seats: Seats,
    /// Each request's decision, by its index in the batch, once made.
    decisions: Vec<Option<Decision>>,
    grants: Granted,
    /// Side-by-side parties with a block chosen but not yet locked.
    pub pending: Vec<(usize, Vec<i32>)>,
    /// Side-by-side parties refused because the blocks chosen for earlier
    /// ones are taken.
    provisional: Vec<usize>,
    /// Every side-by-side party so far got the block first chosen for it.
    as_chosen: bool,
}

/// Decide every request of the batch (`wanted`, in claim order) from what
/// the batch read: the events' rules, the cheapest-first groups' locked
/// seats, the named seats, the runs of adjacent seats, and the seats each
/// customer already has on events with a per-customer limit (`None` where
/// another batch holds the customer's lock). A seat granted to one request
/// is taken for every later one.
pub fn in_claim_order<'w>(
    wanted: &[Wanted<'w>],
    events: &Events,
    groups: &mut [Group],
    named: &HashMap<Key, NamedSeat>,
    runs: &Runs,
    lined: &Lined,
    mut used: HashMap<Customer<'w>, Option<i64>>,
) -> Result<Chosen, ProcessError> {
    let group_of: HashMap<(i64, i16), usize> =
        groups.iter().enumerate().map(|(g, gr)| ((gr.event, gr.class), g)).collect();

    let mut seats = Seats::default();
    let mut decisions: Vec<Option<Decision>> = (0..wanted.len()).map(|_| None).collect();
    let mut grants: Granted = Vec::new();
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
        let customer = (r.event, w.producer, w.customer_key);
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
        if w.how() != How::Named && lined.contains(&(r.event, w.class())) {
            decisions[i] = Some(owed_to_the_list(r.event, w.class(), party));
            continue;
        }
        let taken = match w.how() {
            How::Cheapest => {
                let group = group_of
                    .get(&(r.event, w.class()))
                    .and_then(|&g| groups.get_mut(g))
                    .ok_or_else(|| ProcessError::Internal(format!("no group for request {}", w.request_id)))?;
                cheapest(group, r, &seats)
            }
            How::Named => named_seats(r, named, &seats).and_then(|mine| promised_to_the_list(mine, r.event, lined)),
            How::Together => match together(runs, r, &seats) {
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
    Ok(Chosen { seats, decisions, grants, pending, provisional, as_chosen: true })
}

impl Chosen {
    /// One round of locking the blocks set aside for side-by-side parties
    /// ([`Chosen::pending`]), given the seats of those blocks the round
    /// locked: a party whose block is whole gets it; one whose block was
    /// partly held elsewhere (or taken since) moves to its next best block,
    /// for the next round, and after the `last` round, or with none left,
    /// is contended.
    pub fn settle_blocks(
        &mut self,
        wanted: &[Wanted<'_>],
        runs: &Runs,
        mut locked: HashMap<Key, SeatInfo>,
        last: bool,
    ) {
        let seats = &mut self.seats;
        let mut next = Vec::new();
        for (i, block) in std::mem::take(&mut self.pending) {
            let w = wanted[i];
            let event = w.request.event;
            for &s in &block {
                seats.reserved.remove(&(event, s));
            }
            if block.iter().all(|&s| locked.contains_key(&(event, s))) {
                let mine: Vec<SeatInfo> = block.iter().filter_map(|&s| locked.remove(&(event, s))).collect();
                seats.granted.extend(block.iter().map(|&s| (event, s)));
                self.grants.push((i, mine));
                continue;
            }
            self.as_chosen = false;
            seats.elsewhere.extend(block.iter().filter(|&&s| !locked.contains_key(&(event, s))).map(|&s| (event, s)));
            let unusable = seats.unusable_on(event);
            match best_block(runs.of(event, w.class()), event, w.request.party_size() as usize, |k| among(&unusable, k))
            {
                Some(other) if !last => {
                    seats.reserved.extend(other.iter().map(|&s| (event, s)));
                    next.push((i, other));
                }
                _ => self.decisions[i] = Some(Decision::Contended),
            }
        }
        self.pending = next;
    }

    /// The decisions and the seats granted (by the request's index), once
    /// the blocks are settled. If some side-by-side party did not get its
    /// first block, a refusal that counted on it may be wrong: those are
    /// contended, to try again.
    pub fn settled(self) -> (Vec<Option<Decision>>, Granted) {
        let Chosen { mut decisions, grants, provisional, as_chosen, .. } = self;
        if !as_chosen {
            for i in provisional {
                decisions[i] = Some(Decision::Contended);
            }
        }
        (decisions, grants)
    }
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

/// A party of a class with a waiting list: `sold_out`, since the class's
/// free seats are the list's.
fn owed_to_the_list(event: i64, class: i16, party: usize) -> Decision {
    Decision::Reject(
        ErrorCode::SoldOut,
        format!("0 seat(s) of class {class} left on event {event}, {party} requested: parties are waiting for them"),
    )
}

/// Named seats, unless one is of a class with a waiting list: its free
/// seats are the list's (`seats_taken`).
fn promised_to_the_list(mine: Vec<SeatInfo>, event: i64, lined: &Lined) -> Result<Vec<SeatInfo>, Decision> {
    let promised: Vec<SeatInfo> = mine.iter().filter(|s| lined.contains(&(event, s.class))).cloned().collect();
    if promised.is_empty() {
        return Ok(mine);
    }
    Err(Decision::Reject(
        ErrorCode::SeatsTaken,
        format!("seat(s) {} are taken by the waiting list{}", numbers(&promised), named_as(&promised)),
    ))
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

#[cfg(test)]
mod tests {
    use seatq_core::request::BookingRef;

    use super::*;

    const EVENT: i64 = 7;

    fn seat(n: i32, price_cents: i32) -> SeatInfo {
        SeatInfo {
            seat: n,
            class: 1,
            row: 1,
            pos: n,
            price_cents,
            section: String::new(),
            row_label: String::new(),
            label: String::new(),
        }
    }

    fn nos(seats: &[SeatInfo]) -> Vec<i32> {
        seats.iter().map(|s| s.seat).collect()
    }

    /// The code of a refusal; `None` for anything else.
    fn code(d: &Decision) -> Option<ErrorCode> {
        match d {
            Decision::Reject(code, _) => Some(*code),
            _ => None,
        }
    }

    fn message(d: &Decision) -> &str {
        match d {
            Decision::Reject(_, message) => message,
            other => panic!("not a refusal: {other:?}"),
        }
    }

    fn contended(d: &Decision) -> bool {
        matches!(d, Decision::Contended)
    }

    /// A cheapest-first group of class 1 on [`EVENT`] that locked these seats.
    fn group(locked: &[i32]) -> Group {
        Group {
            lined: false,
            event: EVENT,
            class: 1,
            lock: locked.len() as i32,
            locked: locked.iter().map(|&n| seat(n, 1000)).collect(),
            next: 0,
            contended: false,
            has_class: true,
        }
    }

    fn on_sale(per_customer: Option<i32>) -> Option<Rules> {
        Some(Rules { refusal: None, per_customer })
    }

    fn together_of(party: u32, customer: &str) -> SeatRequest {
        SeatRequest { together: true, ..SeatRequest::new(EVENT, 1, party, customer) }
    }

    /// Runs of class 1 on [`EVENT`]: row `row`, seats `row * 10 + 1` on, at
    /// positions 1 on, each at `price`.
    fn run(row: i32, len: i32, price: i32) -> Run {
        Run {
            row,
            seats: (1..=len).map(|k| row * 10 + k).collect(),
            positions: (1..=len).collect(),
            prices: vec![price; len as usize],
        }
    }

    fn runs(of_class_1: Vec<Run>) -> Runs {
        Runs { runs: HashMap::from([((EVENT, 1), of_class_1)]), missing: HashSet::new() }
    }

    fn wanted<'a>(requests: &'a [SeatRequest]) -> Vec<Wanted<'a>> {
        requests
            .iter()
            .enumerate()
            .map(|(i, r)| Wanted {
                request_id: i as i64 + 1,
                producer: "shop",
                token_hash: None,
                customer_key: &r.customer,
                request: r,
                hold_secs: None,
            })
            .collect()
    }

    #[test]
    fn only_holds_and_books_want_seats_and_each_asks_one_way() {
        let r = SeatRequest::new(EVENT, 2, 3, "ann");
        let hold = Request::Hold(r.clone());
        let book = Request::Book(r.clone());
        let confirm = Request::Confirm(BookingRef { event: None, booking: 1, customer: "ann".into(), token: None });
        let held = Wanted::of(1, "shop", None, "ann", &hold).expect("a hold takes seats");
        assert_eq!(held.hold_secs, Some(r.hold_secs()));
        assert_eq!((held.request_id, held.producer, held.class()), (1, "shop", 2));
        assert_eq!(Wanted::of(1, "shop", None, "ann", &book).expect("a book takes seats").hold_secs, None);
        assert!(Wanted::of(1, "shop", None, "ann", &confirm).is_none());

        let how = |r: &SeatRequest| {
            Wanted {
                request_id: 1,
                producer: "shop",
                token_hash: None,
                customer_key: &r.customer,
                request: r,
                hold_secs: None,
            }
            .how()
        };
        assert_eq!(how(&r), How::Cheapest);
        assert_eq!(how(&together_of(2, "ann")), How::Together);
        assert_eq!(how(&SeatRequest::named(EVENT, vec![4, 5], "ann")), How::Named);
        // Named seats are taken as named, even with `together`.
        assert_eq!(how(&SeatRequest { together: true, ..SeatRequest::named(EVENT, vec![4], "ann") }), How::Named);
    }

    #[test]
    fn a_limit_applies_only_to_an_event_on_sale_that_has_one() {
        let events: Events = HashMap::from([
            (1, on_sale(Some(4))),
            (2, on_sale(None)),
            (3, Some(Rules { refusal: Some(ErrorCode::SalesClosed), per_customer: Some(4) })),
            (4, None),
        ]);
        assert!(limited(&events, 1));
        assert!(!limited(&events, 2));
        assert!(!limited(&events, 3));
        assert!(!limited(&events, 4));
        assert!(!limited(&events, 5));
    }

    #[test]
    fn cheapest_first_gives_out_the_groups_seats_in_order() {
        let mut g = group(&[1, 2, 3, 4, 5]);
        let seats = Seats::default();
        let two = SeatRequest::new(EVENT, 1, 2, "ann");
        assert_eq!(nos(&cheapest(&mut g, &two, &seats).expect("seats")), [1, 2]);
        assert_eq!(nos(&cheapest(&mut g, &two, &seats).expect("seats")), [3, 4]);
        let short = cheapest(&mut g, &two, &seats).expect_err("one seat left");
        assert_eq!(code(&short), Some(ErrorCode::SoldOut));
        assert_eq!(message(&short), "1 seat(s) of class 1 left on event 7, 2 requested");
        assert_eq!(g.next, 4, "a refusal gives out nothing");
        let partial = SeatRequest { partial: true, ..two };
        assert_eq!(nos(&cheapest(&mut g, &partial, &seats).expect("what is left")), [5]);
        let none = cheapest(&mut g, &partial, &seats).expect_err("none left");
        assert_eq!(code(&none), Some(ErrorCode::SoldOut), "partial takes what is left, not nothing");
    }

    #[test]
    fn cheapest_first_steps_over_seats_the_batch_gave_others() {
        let mut seats = Seats::default();
        seats.granted.insert((EVENT, 2));
        seats.granted.insert((EVENT + 1, 3));
        let two = SeatRequest::new(EVENT, 1, 2, "ann");
        let mut g = group(&[1, 2, 3]);
        assert_eq!(nos(&cheapest(&mut g, &two, &seats).expect("seats")), [1, 3]);
        assert_eq!(g.next, 3);
        // Short only because the batch took a seat: other seats may be free.
        let three = SeatRequest::new(EVENT, 1, 3, "ann");
        assert!(contended(&cheapest(&mut group(&[1, 2, 3]), &three, &seats).expect_err("short")));
        let partial = SeatRequest { partial: true, ..three };
        assert!(contended(&cheapest(&mut group(&[1, 2, 3]), &partial, &seats).expect_err("short")));
    }

    #[test]
    fn cheapest_first_short_is_contended_or_an_unknown_class() {
        let two = SeatRequest::new(EVENT, 1, 2, "ann");
        let seats = Seats::default();
        let held_elsewhere = &mut Group { contended: true, ..group(&[1]) };
        assert!(contended(&cheapest(held_elsewhere, &two, &seats).expect_err("short")));
        let partial = SeatRequest { partial: true, ..two.clone() };
        assert!(contended(&cheapest(held_elsewhere, &partial, &seats).expect_err("short")), "it might get all");
        let no_class = &mut Group { has_class: false, ..group(&[]) };
        let refused = cheapest(no_class, &two, &seats).expect_err("no such class");
        assert_eq!(code(&refused), Some(ErrorCode::UnknownClass));
        assert_eq!(message(&refused), "event 7 has no seats of class 1");
    }

    /// Named seats as locking them found them: 1-4 free, 5 not for sale
    /// (named by the venue), 6 taken, 7 held by another transaction.
    fn named_found() -> HashMap<Key, NamedSeat> {
        let found = |n: i32, locked: bool, blocked: bool, free: bool| {
            let mut s = seat(n, 1000);
            if n == 5 {
                (s.section, s.row_label, s.label) = ("Stalls".into(), "A".into(), "5".into());
            }
            ((EVENT, n), NamedSeat { event: EVENT, seat: s, locked, blocked, free })
        };
        let mut named: HashMap<Key, NamedSeat> = (1..=4).map(|n| found(n, true, false, true)).collect();
        named.extend([found(5, true, true, true), found(6, true, false, false), found(7, false, false, true)]);
        named
    }

    #[test]
    fn named_seats_all_or_why_not() {
        let named = named_found();
        let seats = Seats::default();
        let asking = |numbers: &[i32]| named_seats(&SeatRequest::named(EVENT, numbers.to_vec(), "ann"), &named, &seats);
        assert_eq!(nos(&asking(&[2, 1]).expect("free")), [2, 1]);
        // The worst reason first: unknown, then not for sale, then taken,
        // and only then held elsewhere.
        let unknown = asking(&[99, 5, 6, 7, 98]).expect_err("unknown");
        assert_eq!(code(&unknown), Some(ErrorCode::UnknownSeat));
        assert_eq!(message(&unknown), "event 7 has no seat(s) 99, 98");
        let blocked = asking(&[7, 6, 5]).expect_err("not for sale");
        assert_eq!(code(&blocked), Some(ErrorCode::SeatNotForSale));
        assert_eq!(message(&blocked), "seat(s) 5 of event 7 are not for sale (Stalls, row A, seat 5)");
        let taken = asking(&[1, 7, 6]).expect_err("taken");
        assert_eq!(code(&taken), Some(ErrorCode::SeatsTaken));
        assert_eq!(message(&taken), "seat(s) 6 are taken");
        assert!(contended(&asking(&[1, 7]).expect_err("held elsewhere")));
    }

    #[test]
    fn named_seats_given_or_set_aside_earlier_in_the_batch() {
        let named = named_found();
        let mut seats = Seats::default();
        seats.granted.insert((EVENT, 1));
        seats.reserved.insert((EVENT, 2));
        let asking = |n: i32| named_seats(&SeatRequest::named(EVENT, vec![n], "ann"), &named, &seats);
        assert_eq!(code(&asking(1).expect_err("granted")), Some(ErrorCode::SeatsTaken));
        // Set aside for a side-by-side party that may not get its block.
        assert!(contended(&asking(2).expect_err("reserved")));
        assert_eq!(nos(&asking(3).expect("free")), [3]);
    }

    #[test]
    fn side_by_side_the_cheapest_block_or_why_not() {
        let runs = runs(vec![run(1, 4, 10), run(2, 3, 5)]);
        let seats = Seats::default();
        let block = |r: &SeatRequest, seats: &Seats| match together(&runs, r, seats) {
            Together::Block(block) => block,
            Together::NoneIfTheyGetTheirs(d) | Together::No(d) => panic!("no block: {d:?}"),
        };
        assert_eq!(block(&together_of(3, "ann"), &seats), [21, 22, 23]);
        assert_eq!(block(&together_of(4, "ann"), &seats), [11, 12, 13, 14]);
        let Together::No(none) = together(&runs, &together_of(5, "ann"), &seats) else { panic!("no row of 5") };
        assert_eq!(code(&none), Some(ErrorCode::NoAdjacentSeats));
        assert_eq!(message(&none), "no row of event 7 has 5 adjacent free seats of class 1");
        let other_class = SeatRequest { class: Some(2), ..together_of(2, "ann") };
        let Together::No(none) = together(&runs, &other_class, &seats) else { panic!("no runs") };
        assert_eq!(code(&none), Some(ErrorCode::NoAdjacentSeats), "a class without runs has no block");
        let missing = Runs { missing: HashSet::from([(EVENT, 2)]), ..Runs::default() };
        let Together::No(unknown) = together(&missing, &other_class, &seats) else { panic!("no class") };
        assert_eq!(code(&unknown), Some(ErrorCode::UnknownClass));

        // Seats set aside for earlier parties: none left if they get them.
        let mut aside = Seats::default();
        aside.reserved.extend([(EVENT, 22), (EVENT, 12)]);
        assert_eq!(block(&together_of(2, "ann"), &aside), [13, 14]);
        let Together::NoneIfTheyGetTheirs(d) = together(&runs, &together_of(3, "ann"), &aside) else {
            panic!("none left but for the seats set aside")
        };
        assert_eq!(code(&d), Some(ErrorCode::NoAdjacentSeats));
        // Seats granted are gone for good.
        let mut given = Seats::default();
        given.granted.extend([(EVENT, 22), (EVENT, 12)]);
        assert!(matches!(together(&runs, &together_of(3, "ann"), &given), Together::No(_)));
    }

    #[test]
    fn a_batch_is_decided_in_claim_order() {
        let requests = [
            SeatRequest::new(EVENT + 1, 1, 1, "ann"),
            SeatRequest::new(EVENT + 2, 1, 1, "ann"),
            SeatRequest::new(EVENT + 3, 1, 1, "ann"),
            SeatRequest::named(EVENT, vec![2], "bob"),
            SeatRequest::named(EVENT, vec![2], "cat"),
            SeatRequest::new(EVENT, 1, 2, "dan"),
        ];
        let wanted = wanted(&requests);
        let events: Events = HashMap::from([
            (EVENT, on_sale(None)),
            (EVENT + 1, None),
            (EVENT + 2, Some(Rules { refusal: Some(ErrorCode::NotOnSale), per_customer: None })),
            (EVENT + 3, Some(Rules { refusal: Some(ErrorCode::SalesClosed), per_customer: None })),
        ]);
        // The group locked a seat more for the named requests.
        let mut groups = [group(&[1, 2, 3])];
        let named = named_found();
        let chosen =
            in_claim_order(&wanted, &events, &mut groups, &named, &Runs::default(), &Lined::new(), HashMap::new());
        let (decisions, grants) = chosen.expect("decided").settled();
        assert_eq!(message(decisions[0].as_ref().expect("refused")), "event 8 does not exist");
        assert_eq!(code(decisions[0].as_ref().expect("refused")), Some(ErrorCode::UnknownEvent));
        assert_eq!(code(decisions[1].as_ref().expect("refused")), Some(ErrorCode::NotOnSale));
        assert_eq!(message(decisions[1].as_ref().expect("refused")), "event 9 is not on sale yet");
        assert_eq!(code(decisions[2].as_ref().expect("refused")), Some(ErrorCode::SalesClosed));
        assert_eq!(message(decisions[2].as_ref().expect("refused")), "sales of event 10 are closed");
        // Bob claimed seat 2 first; Cat finds it taken; Dan's cheapest seats
        // step over it.
        assert_eq!(code(decisions[4].as_ref().expect("refused")), Some(ErrorCode::SeatsTaken));
        let granted: Vec<(usize, Vec<i32>)> = grants.iter().map(|(i, seats)| (*i, nos(seats))).collect();
        assert_eq!(granted, [(3, vec![2]), (5, vec![1, 3])]);
        assert!(decisions[3].is_none() && decisions[5].is_none(), "granted seats wait to be taken");
    }

    #[test]
    fn a_batch_asks_for_a_group_every_cheapest_first_request_has() {
        let requests = [SeatRequest::new(EVENT, 1, 2, "ann")];
        let events: Events = HashMap::from([(EVENT, on_sale(None))]);
        let chosen = in_claim_order(
            &wanted(&requests),
            &events,
            &mut [],
            &HashMap::new(),
            &Runs::default(),
            &Lined::new(),
            HashMap::new(),
        );
        assert!(matches!(chosen, Err(ProcessError::Internal(_))));
    }

    #[test]
    fn the_per_customer_limit_counts_the_batchs_own_grants() {
        let requests = [
            SeatRequest::new(EVENT, 1, 3, "ann"),
            SeatRequest::new(EVENT, 1, 1, "ann"),
            SeatRequest::new(EVENT, 1, 1, "bob"),
            SeatRequest::new(EVENT, 1, 4, "cat"),
            SeatRequest::new(EVENT, 1, 5, "dan"),
        ];
        let events: Events = HashMap::from([(EVENT, on_sale(Some(4)))]);
        let mut groups = [group(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10])];
        // Ann has a seat already; another batch holds Bob's lock.
        let used = HashMap::from([((EVENT, "shop", "ann"), Some(1)), ((EVENT, "shop", "bob"), None)]);
        let chosen = in_claim_order(
            &wanted(&requests),
            &events,
            &mut groups,
            &HashMap::new(),
            &Runs::default(),
            &Lined::new(),
            used,
        );
        let (decisions, grants) = chosen.expect("decided").settled();
        let over = decisions[1].as_ref().expect("over the limit");
        assert_eq!(code(over), Some(ErrorCode::CustomerLimitExceeded));
        assert_eq!(message(over), "event 7 sells at most 4 seat(s) per customer; the customer has 4, 1 requested");
        assert!(contended(decisions[2].as_ref().expect("not counted yet")));
        assert_eq!(code(decisions[4].as_ref().expect("over the limit")), Some(ErrorCode::CustomerLimitExceeded));
        let granted: Vec<(usize, Vec<i32>)> = grants.iter().map(|(i, seats)| (*i, nos(seats))).collect();
        assert_eq!(granted, [(0, vec![1, 2, 3]), (3, vec![4, 5, 6, 7])]);
    }

    #[test]
    fn a_customer_waits_while_their_side_by_side_block_is_unsettled() {
        let requests =
            [together_of(2, "ann"), SeatRequest::new(EVENT, 1, 1, "ann"), SeatRequest::new(EVENT, 1, 1, "bob")];
        let wanted = wanted(&requests);
        let events: Events = HashMap::from([(EVENT, on_sale(Some(4)))]);
        let mut groups = [group(&[1, 2])];
        let runs = runs(vec![run(2, 3, 5)]);
        let mut chosen =
            in_claim_order(&wanted, &events, &mut groups, &HashMap::new(), &runs, &Lined::new(), HashMap::new())
                .expect("decided");
        assert_eq!(chosen.pending, [(0, vec![21, 22])]);
        let locked = HashMap::from([((EVENT, 21), seat(21, 5)), ((EVENT, 22), seat(22, 5))]);
        chosen.settle_blocks(&wanted, &runs, locked, false);
        let (decisions, grants) = chosen.settled();
        assert!(contended(decisions[1].as_ref().expect("waits")), "her seats are not counted yet");
        let granted: Vec<(usize, Vec<i32>)> = grants.iter().map(|(i, seats)| (*i, nos(seats))).collect();
        assert_eq!(granted, [(2, vec![1]), (0, vec![21, 22])]);
    }

    /// Four side-by-side parties of three over a row of three (row 2, the
    /// cheapest) and a row of six (row 1): the first three get a block each
    /// and the fourth none, if they get theirs.
    fn four_parties() -> [SeatRequest; 4] {
        [together_of(3, "ann"), together_of(3, "bob"), together_of(3, "cat"), together_of(3, "dan")]
    }

    fn lock_all_but(blocks: &[(usize, Vec<i32>)], gone: &[i32]) -> HashMap<Key, SeatInfo> {
        let seats = blocks.iter().flat_map(|(_, b)| b.iter().copied());
        seats.filter(|s| !gone.contains(s)).map(|s| ((EVENT, s), seat(s, 10))).collect()
    }

    #[test]
    fn side_by_side_parties_get_their_blocks_and_the_refusal_stands() {
        let requests = four_parties();
        let wanted = wanted(&requests);
        let events: Events = HashMap::from([(EVENT, on_sale(None))]);
        let runs = runs(vec![run(1, 6, 10), run(2, 3, 5)]);
        let mut chosen =
            in_claim_order(&wanted, &events, &mut [], &HashMap::new(), &runs, &Lined::new(), HashMap::new())
                .expect("decided");
        assert_eq!(chosen.pending, [(0, vec![21, 22, 23]), (1, vec![11, 12, 13]), (2, vec![14, 15, 16])]);
        let locked = lock_all_but(&chosen.pending, &[]);
        chosen.settle_blocks(&wanted, &runs, locked, false);
        assert!(chosen.pending.is_empty());
        let (decisions, grants) = chosen.settled();
        assert_eq!(code(decisions[3].as_ref().expect("refused")), Some(ErrorCode::NoAdjacentSeats));
        assert_eq!(grants.iter().map(|(i, _)| *i).collect::<Vec<_>>(), [0, 1, 2]);
    }

    #[test]
    fn a_party_without_its_block_or_another_is_contended() {
        let requests = four_parties();
        let wanted = wanted(&requests);
        let events: Events = HashMap::from([(EVENT, on_sale(None))]);
        // A longer row 1: room for Dan's block there too.
        let runs = runs(vec![run(1, 9, 10), run(2, 3, 5)]);
        let mut chosen =
            in_claim_order(&wanted, &events, &mut [], &HashMap::new(), &runs, &Lined::new(), HashMap::new())
                .expect("decided");
        assert_eq!(
            chosen.pending,
            [(0, vec![21, 22, 23]), (1, vec![11, 12, 13]), (2, vec![14, 15, 16]), (3, vec![17, 18, 19])]
        );
        // Seat 13 is held elsewhere, and every other seat is in someone's
        // block: Bob has no other.
        let locked = lock_all_but(&chosen.pending, &[13]);
        chosen.settle_blocks(&wanted, &runs, locked, false);
        assert!(chosen.pending.is_empty());
        let (decisions, grants) = chosen.settled();
        assert!(contended(decisions[1].as_ref().expect("no block")));
        assert_eq!(grants.iter().map(|(i, _)| *i).collect::<Vec<_>>(), [0, 2, 3]);
    }

    #[test]
    fn a_refusal_that_counted_on_an_earlier_partys_block_is_retried_if_it_did_not_get_it() {
        let requests = four_parties();
        let wanted = wanted(&requests);
        let events: Events = HashMap::from([(EVENT, on_sale(None))]);
        let runs = runs(vec![run(1, 6, 10), run(2, 3, 5)]);
        let mut chosen =
            in_claim_order(&wanted, &events, &mut [], &HashMap::new(), &runs, &Lined::new(), HashMap::new())
                .expect("decided");
        assert_eq!(chosen.pending.len(), 3, "Dan is refused: the blocks left are set aside");
        // Seat 13 is held elsewhere: Bob does not get his block, so 11-13
        // may come back, and Dan's refusal is no longer final.
        let locked = lock_all_but(&chosen.pending, &[13]);
        chosen.settle_blocks(&wanted, &runs, locked, false);
        let (decisions, grants) = chosen.settled();
        assert!(contended(decisions[1].as_ref().expect("no block")));
        assert!(contended(decisions[3].as_ref().expect("refused, then retried")));
        assert_eq!(grants.iter().map(|(i, _)| *i).collect::<Vec<_>>(), [0, 2]);
    }

    #[test]
    fn a_party_moves_to_its_next_best_block_until_the_last_round() {
        // One party of two on a row of five: 11-12 first, 13 held elsewhere.
        let requests = [together_of(2, "ann")];
        let wanted = wanted(&requests);
        let events: Events = HashMap::from([(EVENT, on_sale(None))]);
        let runs = runs(vec![run(1, 5, 10)]);
        let chosen =
            || in_claim_order(&wanted, &events, &mut [], &HashMap::new(), &runs, &Lined::new(), HashMap::new());
        let mut moving = chosen().expect("decided");
        assert_eq!(moving.pending, [(0, vec![11, 12])]);
        moving.settle_blocks(&wanted, &runs, lock_all_but(&moving.pending, &[12]), false);
        assert_eq!(moving.pending, [(0, vec![13, 14])], "the next best block without 12");
        moving.settle_blocks(&wanted, &runs, lock_all_but(&moving.pending, &[]), false);
        let (decisions, grants) = moving.settled();
        assert!(decisions[0].is_none());
        assert_eq!(grants.iter().map(|(i, seats)| (*i, nos(seats))).collect::<Vec<_>>(), [(0, vec![13, 14])]);

        let mut last = chosen().expect("decided");
        last.settle_blocks(&wanted, &runs, lock_all_but(&last.pending, &[12]), true);
        assert!(last.pending.is_empty());
        let (decisions, grants) = last.settled();
        assert!(contended(decisions[0].as_ref().expect("out of rounds")));
        assert!(grants.is_empty());
    }
}
