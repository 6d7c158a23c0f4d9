//! What a storefront shows: per class of an event, how many seats are free
//! and at what prices, and the seat map. Read exactly through
//! `seatq.availability(event)` and `seatq.seat_map(event)`, or in two parts,
//! the layout (`seatq.seat_layout`, which never changes) and the states
//! (`seatq.seat_states`, the seats that are not free), which make an
//! [`AvailabilityView`]: what [`Client::cached_availability`] serves page
//! views from. The producer role may call all four; none names a customer
//! or a booking. A seat whose hold has lapsed counts as free, swept or not.
//!
//! [`Client::cached_availability`]: crate::Client::cached_availability

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::SeatAvailability;
use seatq_core::outcome::{money, money_range};

/// One class of an event: its seats, how they stand, and its prices.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, sqlx::FromRow)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ClassAvailability {
    pub class: i16,
    /// Seats of the class in all (not for sale ones too).
    pub seats: i64,
    /// Available, or held with the hold lapsed.
    pub free: i64,
    /// Held, the hold not lapsed.
    pub held: i64,
    pub booked: i64,
    /// Its price ranges (in JSON and SQL, fields beside the counts).
    #[serde(flatten)]
    #[sqlx(flatten)]
    pub prices: ClassPrices,
}

/// A class's prices, in cents: of its free seats, and of all its seats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, sqlx::FromRow)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ClassPrices {
    /// Cheapest and dearest free seat; absent when none is free.
    pub free_min_cents: Option<i32>,
    pub free_max_cents: Option<i32>,
    /// Cheapest and dearest seat of the class, free or not.
    pub min_cents: i32,
    pub max_cents: i32,
}

impl ClassPrices {
    /// The free seats' prices as money ("28.00 - 32.50"); none when no
    /// seat is free.
    pub fn free_range(&self) -> Option<String> {
        Some(money_range(self.free_min_cents?.into(), self.free_max_cents?.into()))
    }

    /// All the class's prices as money, free seats or not.
    pub fn range(&self) -> String {
        money_range(self.min_cents.into(), self.max_cents.into())
    }

    /// The cheapest free seat's price as money; none when no seat is free.
    pub fn cheapest_free(&self) -> Option<String> {
        self.free_min_cents.map(|c| money(c.into()))
    }

    /// The prices of a class whose first seat costs `price`, none free yet.
    fn of(price: i32) -> ClassPrices {
        ClassPrices { free_min_cents: None, free_max_cents: None, min_cents: price, max_cents: price }
    }

    /// Count in one more seat of the class.
    fn add(&mut self, price: i32, free: bool) {
        self.min_cents = self.min_cents.min(price);
        self.max_cents = self.max_cents.max(price);
        if free {
            self.free_min_cents = Some(self.free_min_cents.map_or(price, |p| p.min(price)));
            self.free_max_cents = Some(self.free_max_cents.map_or(price, |p| p.max(price)));
        }
    }
}

/// One seat on an event's map: where it is and what it costs, and how it
/// shows. Its layout's fields are read through it (`seat.label`), and in
/// JSON they sit beside `state`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, sqlx::FromRow)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MapSeat {
    #[serde(flatten)]
    #[sqlx(flatten)]
    pub layout: LayoutSeat,
    pub state: SeatAvailability,
}

impl MapSeat {
    /// The seat of `layout`, shown as `state`.
    pub fn new(layout: &LayoutSeat, state: SeatAvailability) -> MapSeat {
        MapSeat { layout: layout.clone(), state }
    }
}

impl std::ops::Deref for MapSeat {
    type Target = LayoutSeat;

    fn deref(&self) -> &LayoutSeat {
        &self.layout
    }
}

/// Where a seat is and what it costs (`seatq.seat_layout`): the part of the
/// map that never changes once an event's seats are made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, sqlx::FromRow)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LayoutSeat {
    #[sqlx(rename = "seat_no")]
    pub seat: i32,
    /// Where the venue says the seat is ("Circle", row "C", seat "14").
    pub section: String,
    pub row_label: String,
    pub label: String,
    /// Row number and place in the row, for drawing (and adjacency).
    #[sqlx(rename = "row_no")]
    pub row: i32,
    pub pos: i32,
    pub class: i16,
    pub price_cents: i32,
}

/// How an event's seats stand at one moment (`seatq.seat_states`): every
/// seat is free but those listed (each list in no particular order).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, sqlx::FromRow)]
pub struct SeatStates {
    /// Seats of the event in all.
    pub seats: i64,
    /// Held, the hold not lapsed.
    pub held: Vec<i32>,
    pub booked: Vec<i32>,
    pub not_for_sale: Vec<i32>,
}

impl SeatStates {
    /// Whether `layout` holds every seat these states are of (else seats
    /// were added to the event since the layout was read).
    pub fn fit(&self, layout: &[LayoutSeat]) -> bool {
        layout.len() as i64 == self.seats
    }
}

/// An event's availability at one moment: the summary per class and the
/// seat map, made from the event's layout and one read of its states. What
/// [`crate::Client::cached_availability`] serves; the same answers as
/// [`crate::Client::availability`] and [`crate::Client::seat_map`] give for
/// the moment of its read.
#[derive(Debug)]
pub struct AvailabilityView {
    event: i64,
    layout: Arc<[LayoutSeat]>,
    /// How each seat of `layout` shows, in the same order.
    states: Vec<SeatAvailability>,
    classes: Vec<ClassAvailability>,
    read_at: Instant,
    read_took: Duration,
}

impl AvailabilityView {
    /// The view of `event` with this layout (in seat order) and these
    /// states, read from `read_at` (when the read was sent: the states are
    /// no older) for `read_took`. A seat the layout does not have is left
    /// out (see [`SeatStates::fit`]).
    pub fn new(
        event: i64,
        layout: Arc<[LayoutSeat]>,
        states: &SeatStates,
        read_at: Instant,
        read_took: Duration,
    ) -> AvailabilityView {
        let mut shown = vec![SeatAvailability::Free; layout.len()];
        for (seats, state) in [
            (&states.held, SeatAvailability::Held),
            (&states.booked, SeatAvailability::Booked),
            (&states.not_for_sale, SeatAvailability::NotForSale),
        ] {
            for seat in seats {
                if let Ok(i) = layout.binary_search_by_key(seat, |s| s.seat) {
                    shown[i] = state;
                }
            }
        }
        let classes = summary(layout.iter().zip(shown.iter().copied()));
        AvailabilityView { event, layout, states: shown, classes, read_at, read_took }
    }

    pub fn event(&self) -> i64 {
        self.event
    }

    /// Per class, in class order: as [`crate::Client::availability`] answers.
    pub fn classes(&self) -> &[ClassAvailability] {
        &self.classes
    }

    /// Every seat, in seat order, and how it shows.
    pub fn seats(&self) -> impl ExactSizeIterator<Item = (&LayoutSeat, SeatAvailability)> {
        self.layout.iter().zip(self.states.iter().copied())
    }

    /// How seat `seat` shows; `None` for a seat the event does not have.
    pub fn state_of(&self, seat: i32) -> Option<SeatAvailability> {
        self.layout.binary_search_by_key(&seat, |s| s.seat).ok().map(|i| self.states[i])
    }

    /// The seat map as [`crate::Client::seat_map`] answers it (a copy of
    /// every seat: [`AvailabilityView::seats`] lends them instead).
    pub fn seat_map(&self) -> Vec<MapSeat> {
        self.seats().map(|(seat, state)| MapSeat::new(seat, state)).collect()
    }

    /// The layout the view was made from.
    pub fn layout(&self) -> &Arc<[LayoutSeat]> {
        &self.layout
    }

    /// How long ago its read was sent: the view shows no commit made since.
    pub fn age(&self) -> Duration {
        self.read_at.elapsed()
    }

    /// How long its database read took.
    pub fn read_took(&self) -> Duration {
        self.read_took
    }
}

/// Per class, in class order, the counts and price ranges of these seats
/// (what `seatq.availability` computes in SQL).
fn summary<'a>(seats: impl Iterator<Item = (&'a LayoutSeat, SeatAvailability)>) -> Vec<ClassAvailability> {
    let mut classes: BTreeMap<i16, ClassAvailability> = BTreeMap::new();
    for (seat, state) in seats {
        let price = seat.price_cents;
        let c = classes.entry(seat.class).or_insert(ClassAvailability {
            class: seat.class,
            seats: 0,
            free: 0,
            held: 0,
            booked: 0,
            prices: ClassPrices::of(price),
        });
        c.seats += 1;
        c.prices.add(price, state == SeatAvailability::Free);
        match state {
            SeatAvailability::Free => c.free += 1,
            SeatAvailability::Held => c.held += 1,
            SeatAvailability::Booked => c.booked += 1,
            SeatAvailability::NotForSale => {}
        }
    }
    classes.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seat(seat: i32, class: i16, price_cents: i32) -> LayoutSeat {
        LayoutSeat {
            seat,
            section: "Stalls".into(),
            row_label: "A".into(),
            label: seat.to_string(),
            row: 1,
            pos: seat,
            class,
            price_cents,
        }
    }

    #[test]
    fn a_view_counts_each_class_from_the_states() {
        // Seat numbers with a gap, as a layout may have.
        let layout: Arc<[LayoutSeat]> =
            vec![seat(1, 1, 5000), seat(2, 1, 4000), seat(3, 2, 3000), seat(5, 2, 2500), seat(6, 2, 2000)].into();
        let states = SeatStates { seats: 5, held: vec![2], booked: vec![5, 6], not_for_sale: vec![9] };
        assert!(states.fit(&layout));
        let view = AvailabilityView::new(7, layout, &states, Instant::now(), Duration::ZERO);
        let shown: Vec<(i32, SeatAvailability)> = view.seats().map(|(s, st)| (s.seat, st)).collect();
        use SeatAvailability::*;
        assert_eq!(shown, [(1, Free), (2, Held), (3, Free), (5, Booked), (6, Booked)]);
        assert_eq!(view.state_of(4), None);
        assert_eq!(view.state_of(5), Some(Booked));
        let counts: Vec<(i16, i64, i64, i64, i64)> =
            view.classes().iter().map(|c| (c.class, c.seats, c.free, c.held, c.booked)).collect();
        assert_eq!(counts, [(1, 2, 1, 1, 0), (2, 3, 1, 0, 2)]);
        let prices: Vec<_> = view.classes().iter().map(|c| c.prices).collect();
        assert_eq!(
            prices,
            [
                ClassPrices {
                    free_min_cents: Some(5000),
                    free_max_cents: Some(5000),
                    min_cents: 4000,
                    max_cents: 5000
                },
                ClassPrices {
                    free_min_cents: Some(3000),
                    free_max_cents: Some(3000),
                    min_cents: 2000,
                    max_cents: 3000
                },
            ]
        );
        assert!(!SeatStates { seats: 6, ..states }.fit(view.layout()));
    }
}
