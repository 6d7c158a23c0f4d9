//! Reading what a storefront shows, and drawing it. Every read of an
//! event's availability or seat map in the server goes through
//! [`availability`] and [`seat_map`], which serve it from the client's
//! cache of views ([`Client::cached_availability`]): every page view of an
//! on-sale costs the database at most one read per event per maximum age
//! (docs/checkout.md says what a view's age means to a customer).

use seatq::outcome::money;
use seatq::{ClassAvailability, Client, MapSeat, SeatAvailability};
use serde::Serialize;

use crate::error::ApiError;

/// An event's availability per class; `unknown_event` (404) for an event
/// without seats or none at all.
pub(crate) async fn availability(client: &Client, event: i64) -> Result<Vec<ClassAvailability>, ApiError> {
    let classes = client.cached_availability(event).await?.classes().to_vec();
    if classes.is_empty() {
        return Err(no_seats(event));
    }
    Ok(classes)
}

/// An event's seat map; `unknown_event` (404) for an event without seats or
/// none at all.
pub(crate) async fn seat_map(client: &Client, event: i64) -> Result<Vec<MapSeat>, ApiError> {
    let seats = client.cached_availability(event).await?.seat_map();
    if seats.is_empty() {
        return Err(no_seats(event));
    }
    Ok(seats)
}

fn no_seats(event: i64) -> ApiError {
    ApiError::refused(seatq::RequestError {
        code: seatq::ErrorCode::UnknownEvent,
        message: format!("event {event} does not exist or has no seats"),
    })
}

pub(crate) use crate::sql::dashboard::EventSeats;

/// The latest `limit` events, or only `event`.
pub(crate) async fn event_seats(
    client: &Client,
    limit: i64,
    event: Option<i64>,
) -> Result<Vec<EventSeats>, seatq::Error> {
    Ok(crate::sql::dashboard::EventSeatsOf { limit, event }.query().fetch_all(client.db()).await?)
}

/// Pixels from one seat's centre to the next.
const PITCH: i32 = 22;
/// Least room on the left for row labels (more for longer ones), and
/// around the map.
const LABEL_WIDTH: i32 = 40;
const MARGIN: i32 = 12;
/// About how wide a character of a row label (11 px, seatq.css) and of a
/// section's heading (13 px, bold) is drawn, narrow and wide (East Asian)
/// alike: enough to make room for a label, so that none runs off the map.
const ROW_CHAR: (i32, i32) = (7, 12);
const HEADING_CHAR: (i32, i32) = (9, 14);

/// About how many pixels `text` takes, at `per_char` (narrow, wide).
fn text_width(text: &str, (narrow, wide): (i32, i32)) -> i32 {
    // Hangul Jamo and up: the CJK scripts, Hangul, full-width forms, emoji.
    text.chars().map(|c| if u32::from(c) >= 0x1100 { wide } else { narrow }).sum()
}

/// How a row is labelled: its label, or its number when the venue gives none.
fn row_label(row: &[&MapSeat]) -> String {
    if row[0].row_label.is_empty() { row[0].row.to_string() } else { row[0].row_label.clone() }
}
/// Height of a section's heading.
const HEADING: i32 = 26;

/// A seat map laid out for SVG: sections one under another, each with its
/// heading, rows in order with their labels, seats at their positions (rows
/// narrower than their section's widest are centred).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Drawing {
    pub width: i32,
    pub height: i32,
    pub seats: Vec<DrawnSeat>,
    pub labels: Vec<Label>,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct DrawnSeat {
    pub x: i32,
    pub y: i32,
    pub seat: i32,
    pub class: i16,
    pub price_cents: i32,
    /// `free`, `held`, `booked` or `not_for_sale`: the CSS class.
    pub state: &'static str,
    /// The same in words, and the price as money, for the seat's tooltip.
    pub state_text: &'static str,
    pub price: String,
    /// How the venue names it: "Stalls, row A, seat 1".
    pub name: String,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct Label {
    pub x: i32,
    pub y: i32,
    pub text: String,
    /// A section's heading (else a row's label).
    pub heading: bool,
}

/// Lay `seats` (in seat order) out.
pub(crate) fn draw(seats: &[MapSeat]) -> Drawing {
    // Sections in order of first appearance; rows by their number within.
    let mut sections: Vec<(&str, Vec<Vec<&MapSeat>>)> = Vec::new();
    for seat in seats {
        let at = match sections.iter().position(|(name, _)| *name == seat.section) {
            Some(at) => at,
            None => {
                sections.push((&seat.section, Vec::new()));
                sections.len() - 1
            }
        };
        let rows = &mut sections[at].1;
        match rows.iter_mut().find(|r| r[0].row == seat.row) {
            Some(row) => row.push(seat),
            None => rows.push(vec![seat]),
        }
    }
    let widest = |rows: &[Vec<&MapSeat>]| {
        rows.iter().flat_map(|r| r.iter().map(|s| s.pos)).max().unwrap_or(1)
            - rows.iter().flat_map(|r| r.iter().map(|s| s.pos)).min().unwrap_or(1)
            + 1
    };
    let columns = sections.iter().map(|(_, rows)| widest(rows)).max().unwrap_or(1);
    let rows = sections.iter().flat_map(|(_, rows)| rows.iter());
    let label_width = rows.map(|r| text_width(&row_label(r), ROW_CHAR) + 8).max().unwrap_or(0).max(LABEL_WIDTH);
    let heading_width = sections.iter().map(|(name, _)| text_width(name, HEADING_CHAR)).max().unwrap_or(0);
    let width = (2 * MARGIN + label_width + columns * PITCH).max(2 * MARGIN + heading_width);
    let mut drawing = Drawing { width, height: 0, seats: Vec::with_capacity(seats.len()), labels: Vec::new() };
    let mut y = MARGIN;
    for (name, rows) in &mut sections {
        rows.sort_by_key(|r| r[0].row);
        let span = widest(rows);
        let low = rows.iter().flat_map(|r| r.iter().map(|s| s.pos)).min().unwrap_or(1);
        let left = MARGIN + label_width + (columns - span) * PITCH / 2;
        if !name.is_empty() {
            drawing.labels.push(Label { x: width / 2, y: y + HEADING / 2 + 5, text: name.to_string(), heading: true });
            y += HEADING;
        }
        for row in rows.iter() {
            let cy = y + PITCH / 2;
            let text = row_label(row);
            drawing.labels.push(Label { x: MARGIN + label_width / 2, y: cy + 4, text, heading: false });
            for seat in row {
                drawing.seats.push(DrawnSeat {
                    x: left + (seat.pos - low) * PITCH + PITCH / 2,
                    y: cy,
                    seat: seat.seat,
                    class: seat.class,
                    price_cents: seat.price_cents,
                    state: seat.state.as_str(),
                    state_text: legend_text(seat.state),
                    price: money(i64::from(seat.price_cents)),
                    name: seat_name(seat),
                });
            }
            y += PITCH;
        }
        y += PITCH / 2;
    }
    drawing.height = y + MARGIN;
    drawing
}

/// "Stalls, row A, seat 1", or "seat 7" where the venue names nothing.
fn seat_name(seat: &MapSeat) -> String {
    if seat.label.is_empty() {
        return format!("seat {}", seat.seat);
    }
    let section = if seat.section.is_empty() { String::new() } else { format!("{}, ", seat.section) };
    format!("{section}row {}, seat {}", seat.row_label, seat.label)
}

/// Every state a seat can show in (its CSS class), with its legend text.
pub(crate) fn legend() -> Vec<(&'static str, &'static str)> {
    use strum::VariantArray as _;
    SeatAvailability::VARIANTS.iter().map(|s| (s.as_str(), legend_text(*s))).collect()
}

fn legend_text(state: SeatAvailability) -> &'static str {
    match state {
        SeatAvailability::Free => "free",
        SeatAvailability::Held => "held",
        SeatAvailability::Booked => "booked",
        SeatAvailability::NotForSale => "not for sale",
    }
}

/// A class's row of the availability table.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ClassRow {
    pub class: i16,
    pub free: i64,
    pub held: i64,
    pub booked: i64,
    /// The free seats' prices ("28.00 - 32.50"), or all seats' when none is free.
    pub prices: String,
}

pub(crate) fn class_rows(classes: &[ClassAvailability]) -> Vec<ClassRow> {
    classes
        .iter()
        .map(|c| ClassRow {
            class: c.class,
            free: c.free,
            held: c.held,
            booked: c.booked,
            prices: c.prices.free_range().unwrap_or_else(|| format!("{} (none free)", c.prices.range())),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seat(seat: i32, section: &str, row: i32, pos: i32) -> MapSeat {
        let layout = seatq::LayoutSeat {
            seat,
            section: section.into(),
            row_label: format!("{}", (b'A' + row as u8 - 1) as char),
            label: pos.to_string(),
            row,
            pos,
            class: 1,
            price_cents: 100,
        };
        MapSeat::new(&layout, SeatAvailability::Free)
    }

    #[test]
    fn sections_stack_rows_order_and_narrow_rows_centre() {
        let seats =
            [seat(1, "Stalls", 1, 1), seat(2, "Stalls", 1, 2), seat(3, "Stalls", 1, 3), seat(4, "Stalls", 1, 4)]
                .into_iter()
                .chain([seat(5, "Boxes", 2, 1), seat(6, "Boxes", 2, 2)])
                .collect::<Vec<_>>();
        let d = draw(&seats);
        assert_eq!(d.seats.len(), 6);
        let at = |n: i32| d.seats.iter().find(|s| s.seat == n).map(|s| (s.x, s.y)).unwrap();
        // One row: same y, one pitch apart.
        assert_eq!(at(1).1, at(4).1);
        assert_eq!(at(2).0 - at(1).0, PITCH);
        // The boxes below the stalls, their two seats centred under four.
        assert!(at(5).1 > at(1).1);
        assert_eq!(at(5).0, at(2).0);
        assert_eq!(
            d.labels.iter().filter(|l| l.heading).map(|l| l.text.as_str()).collect::<Vec<_>>(),
            ["Stalls", "Boxes"]
        );
        assert_eq!(d.seats[0].name, "Stalls, row A, seat 1");
        assert!(d.seats.iter().all(|s| s.x < d.width && s.y < d.height));
    }

    #[test]
    fn long_labels_get_room_and_stay_on_the_map() {
        let mut seats = vec![seat(1, "S", 1, 1), seat(2, "S", 1, 2)];
        for s in &mut seats {
            s.layout.row_label = "Orchestra left, row AA".into();
        }
        let heading = "一階 オーケストラ席 左側ブロック".repeat(3);
        seats.push(seat(3, &heading, 2, 1));
        let d = draw(&seats);
        for label in &d.labels {
            let (narrow, wide) = if label.heading { HEADING_CHAR } else { ROW_CHAR };
            let half = text_width(&label.text, (narrow, wide)) / 2;
            assert!(label.x - half >= 0 && label.x + half <= d.width, "{label:?} runs off a map {} wide", d.width);
        }
        let label_right = d.labels.iter().filter(|l| !l.heading).map(|l| l.x + text_width(&l.text, ROW_CHAR) / 2);
        let first_seat = d.seats.iter().map(|s| s.x - 9).min().unwrap();
        assert!(label_right.max().unwrap() <= first_seat, "a row label runs into its seats");
    }
}
