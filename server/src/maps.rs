//! Reading what a storefront shows, and drawing it. Every read of an
//! event's availability or seat map in the server goes through
//! [`availability`] and [`seat_map`], which serve it from the client's
//! cache of views ([`Client::cached_availability`]): every page view of an
//! on-sale costs the database at most one read per event per maximum age
//! (docs/checkout.md says what a view's age means to a customer).

use std::collections::{BTreeMap, BTreeSet};

use seatq::{ClassAvailability, Client, MapSeat, SeatAvailability};
use serde::Serialize;

use crate::error::ApiError;
use crate::pages::Currency;

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

/// Pixels from one seat's centre to the next, and a seat's radius: a seat
/// is drawn 24 px across, the least a finger hits reliably (the usual
/// minimum touch target), with 4 px between seats so that a tap lands on
/// one seat only. A map wider than its box pans within it (seatq.css)
/// rather than shrinking its seats below that.
const PITCH: i32 = 28;
const SEAT_RADIUS: i32 = 12;
// Kept when either changes: no seat smaller than a finger, none touching.
const _: () = assert!(2 * SEAT_RADIUS >= 24 && PITCH > 2 * SEAT_RADIUS);
/// Least room on each side for row labels (more for longer ones), and
/// around the map. Rows are labelled on both sides so that a map panned
/// sideways on a phone still says which row is which.
const LABEL_WIDTH: i32 = 40;
const MARGIN: i32 = 12;
/// About how wide a character of a row label (11 px, seatq.css) and of a
/// section's heading (13 px, bold) is drawn, narrow and wide (East Asian)
/// alike: enough to make room for a label, so that none runs off the map.
const ROW_CHAR: (i32, i32) = (7, 12);
const HEADING_CHAR: (i32, i32) = (9, 14);
/// Height of a section's heading.
const HEADING: i32 = 26;
/// Height of the stage drawn above the seats, and the room under it.
const STAGE: i32 = 24;
const STAGE_GAP: i32 = 14;

/// About how many pixels `text` takes, at `per_char` (narrow, wide).
fn text_width(text: &str, (narrow, wide): (i32, i32)) -> i32 {
    // Hangul Jamo and up: the CJK scripts, Hangul, full-width forms, emoji.
    text.chars().map(|c| if u32::from(c) >= 0x1100 { wide } else { narrow }).sum()
}

/// How a row is labelled: its label, or its number when the venue gives none.
fn row_label(row: &[&MapSeat]) -> String {
    if row[0].row_label.is_empty() { row[0].row.to_string() } else { row[0].row_label.clone() }
}

/// A seat map laid out for SVG: the stage at the top (for a venue's map),
/// sections one under another, each with its heading, rows in order with
/// their labels on both sides, seats at their positions (rows narrower than
/// their section's widest are centred).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Drawing {
    pub width: i32,
    pub height: i32,
    pub radius: i32,
    pub seats: Vec<DrawnSeat>,
    pub labels: Vec<Label>,
    pub stage: Option<Stage>,
    /// Whether seats are picked on this map (the checkout page): each free
    /// seat is then in the tab order, a checkbox with its name and price.
    pub pickable: bool,
}

/// Where the stage is drawn. Rows are numbered from the front, so the
/// stage is above the first: a customer choosing seats wants to know which
/// way the seats face more than anything else the map can say.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Stage {
    pub x: i32,
    pub y: i32,
    pub width: i32,
    pub height: i32,
    pub text_x: i32,
    pub text_y: i32,
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
    pub free: bool,
    /// The same in words, and the price as money, for the seat's tooltip.
    pub state_text: &'static str,
    pub price: String,
    /// How the venue names it: "Stalls, row A, seat 1".
    pub name: String,
    /// Short, for a sentence: "Stalls seat A1".
    pub short: String,
    /// What a screen reader says of it: "Stalls row A seat 1, £45.00" (and
    /// "booked" where it is not free).
    pub spoken: String,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct Label {
    pub x: i32,
    pub y: i32,
    pub text: String,
    /// A section's heading (else a row's label).
    pub heading: bool,
}

/// Lay `seats` (in seat order) out, their prices in `currency`.
pub(crate) fn draw(seats: &[MapSeat], currency: &Currency) -> Drawing {
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
    let seats_width = columns * PITCH;
    let inner = 2 * label_width + seats_width;
    let width = (2 * MARGIN + inner).max(2 * MARGIN + heading_width);
    // Where the left labels begin: the rows centred under a wider heading.
    let x0 = (width - inner) / 2;
    let seats_left = x0 + label_width;
    let mut drawing = Drawing {
        width,
        height: 0,
        radius: SEAT_RADIUS,
        seats: Vec::with_capacity(seats.len()),
        labels: Vec::new(),
        stage: None,
        pickable: false,
    };
    let mut y = MARGIN;
    // A venue's map (its seats named) has a stage; numbered seats alone
    // (an event made with `seatq event add`, a flight) have none.
    if seats.iter().any(|s| !s.section.is_empty() || !s.label.is_empty()) {
        drawing.stage = Some(Stage {
            x: seats_left,
            y,
            width: seats_width,
            height: STAGE,
            text_x: seats_left + seats_width / 2,
            text_y: y + STAGE / 2 + 5,
        });
        y += STAGE + STAGE_GAP;
    }
    for (name, rows) in &mut sections {
        rows.sort_by_key(|r| r[0].row);
        let span = widest(rows);
        let low = rows.iter().flat_map(|r| r.iter().map(|s| s.pos)).min().unwrap_or(1);
        let left = seats_left + (columns - span) * PITCH / 2;
        if !name.is_empty() {
            drawing.labels.push(Label { x: width / 2, y: y + HEADING / 2 + 5, text: name.to_string(), heading: true });
            y += HEADING;
        }
        for row in rows.iter() {
            let cy = y + PITCH / 2;
            let text = row_label(row);
            for x in [x0 + label_width / 2, seats_left + seats_width + label_width / 2] {
                drawing.labels.push(Label { x, y: cy + 4, text: text.clone(), heading: false });
            }
            for seat in row {
                let price = currency.amount(i64::from(seat.price_cents));
                let free = seat.state == SeatAvailability::Free;
                let spoken = match free {
                    true => format!("{}, {price}", spoken_name(seat)),
                    false => format!("{}, {price}, {}", spoken_name(seat), legend_text(seat.state)),
                };
                drawing.seats.push(DrawnSeat {
                    x: left + (seat.pos - low) * PITCH + PITCH / 2,
                    y: cy,
                    seat: seat.seat,
                    class: seat.class,
                    price_cents: seat.price_cents,
                    state: seat.state.as_str(),
                    free,
                    state_text: legend_text(seat.state),
                    price,
                    name: seat_name(seat),
                    short: short_name(seat),
                    spoken,
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

/// "Stalls row A seat 1": the name without the commas a screen reader
/// pauses at, or "Seat 7".
fn spoken_name(seat: &MapSeat) -> String {
    if seat.label.is_empty() {
        return format!("Seat {}", seat.seat);
    }
    let place = format!("row {} seat {}", seat.row_label, seat.label);
    if seat.section.is_empty() { capitalised(&place) } else { format!("{} {place}", seat.section) }
}

/// A seat as a sentence names it: "Stalls seat C14" where row and seat
/// read as one (a row of letters, a seat of digits, as box offices print
/// them), else "Stalls row Ряд А, seat один"; "Seat 7" without names.
fn short_name(seat: &MapSeat) -> String {
    if seat.label.is_empty() {
        return format!("Seat {}", seat.seat);
    }
    let (row, label) = (seat.row_label.as_str(), seat.label.as_str());
    let compact = (1..=3).contains(&row.chars().count())
        && row.chars().all(char::is_alphabetic)
        && (1..=4).contains(&label.len())
        && label.bytes().all(|b| b.is_ascii_digit());
    let place = if compact { format!("seat {row}{label}") } else { format!("row {row}, seat {label}") };
    if seat.section.is_empty() { capitalised(&place) } else { format!("{} {place}", seat.section) }
}

fn capitalised(s: &str) -> String {
    let mut chars = s.chars();
    chars.next().map(|c| c.to_uppercase().chain(chars).collect()).unwrap_or_default()
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
    /// Where its seats are ([`class_names`]).
    pub name: String,
    pub free: i64,
    pub held: i64,
    pub booked: i64,
    /// The free seats' prices ("£28.00 – £32.50"), or all seats' when none is free.
    pub prices: String,
}

/// The classes' rows, named from the map `seats`, prices in `currency`.
pub(crate) fn class_rows(classes: &[ClassAvailability], seats: &[MapSeat], currency: &Currency) -> Vec<ClassRow> {
    let names = class_names(seats);
    classes
        .iter()
        .map(|c| {
            let p = &c.prices;
            let prices = match (p.free_min_cents, p.free_max_cents) {
                (Some(low), Some(high)) => currency.range(low.into(), high.into()),
                _ => format!("{} (none free)", currency.range(p.min_cents.into(), p.max_cents.into())),
            };
            ClassRow {
                class: c.class,
                name: names.get(&c.class).cloned().unwrap_or_else(|| format!("Class {}", c.class)),
                free: c.free,
                held: c.held,
                booked: c.booked,
                prices,
            }
        })
        .collect()
}

/// What a customer calls each class. Classes have numbers only, which mean
/// nothing to a customer, so a class is named by where its seats are, read
/// from the map: "Boxes" (a section of one class), "Stalls rows A–G", "Stalls
/// rows H–M, Circle rows D–F". Two classes in the same rows (centre and
/// sides priced apart) keep their number too; seats without names (an event
/// made with `seatq event add`) leave "Class 2".
pub(crate) fn class_names(seats: &[MapSeat]) -> BTreeMap<i16, String> {
    // Sections in order of first appearance: each row's label and classes.
    type Rows<'a> = BTreeMap<i32, (String, BTreeSet<i16>)>;
    let mut sections: Vec<(&str, Rows)> = Vec::new();
    for s in seats {
        let at = match sections.iter().position(|(name, _)| *name == s.section) {
            Some(at) => at,
            None => {
                sections.push((&s.section, BTreeMap::new()));
                sections.len() - 1
            }
        };
        let label = if s.row_label.is_empty() { s.row.to_string() } else { s.row_label.clone() };
        sections[at].1.entry(s.row).or_insert_with(|| (label, BTreeSet::new())).1.insert(s.class);
    }
    let classes: BTreeSet<i16> = seats.iter().map(|s| s.class).collect();
    let named = seats.iter().any(|s| !s.section.is_empty());
    let mut names: BTreeMap<i16, String> = classes
        .iter()
        .map(|&class| {
            let parts: Vec<String> =
                sections.iter().filter_map(|(section, rows)| where_in(section, rows, class)).collect();
            let name = match (named, parts.len()) {
                (false, _) | (_, 0) => format!("Class {class}"),
                (true, 1..=3) => parts.join(", "),
                (true, n) => format!("{}, {} and {} more", parts[0], parts[1], n - 2),
            };
            (class, name)
        })
        .collect();
    let shared: Vec<i16> = names
        .iter()
        .filter(|(class, name)| names.iter().any(|(other, n)| other != *class && n == *name))
        .map(|(class, _)| *class)
        .collect();
    for class in shared {
        if let Some(name) = names.get_mut(&class) {
            name.push_str(&format!(" (class {class})"));
        }
    }
    names
}

/// Where in `section` (its `rows`) `class` is: the section's name if the
/// class is all of it, else its rows ("Stalls rows A–C, F"); none where the
/// class has no seat there.
fn where_in(section: &str, rows: &BTreeMap<i32, (String, BTreeSet<i16>)>, class: i16) -> Option<String> {
    let has: Vec<(&str, bool)> =
        rows.values().map(|(label, classes)| (label.as_str(), classes.contains(&class))).collect();
    if !has.iter().any(|(_, h)| *h) {
        return None;
    }
    if !section.is_empty() && rows.values().all(|(_, classes)| classes.len() == 1) && has.iter().all(|(_, h)| *h) {
        return Some(section.to_string());
    }
    // Runs of the section's rows in order that hold the class.
    let mut runs: Vec<(&str, &str)> = Vec::new();
    let mut open = false;
    for (label, h) in has {
        match (h, open, runs.last_mut()) {
            (true, true, Some(run)) => run.1 = label,
            (true, _, _) => runs.push((label, label)),
            (false, _, _) => {}
        }
        open = h;
    }
    let word = if runs.len() == 1 && runs[0].0 == runs[0].1 { "row" } else { "rows" };
    let mut listed: Vec<String> =
        runs.iter().take(4).map(|(a, b)| if a == b { a.to_string() } else { format!("{a}–{b}") }).collect();
    if runs.len() > 4 {
        listed.push("…".into());
    }
    let place = format!("{word} {}", listed.join(", "));
    Some(if section.is_empty() { capitalised(&place) } else { format!("{section} {place}") })
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
        let d = draw(&seats, &Currency::default());
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
        assert_eq!(d.seats[0].short, "Stalls seat A1");
        assert_eq!(d.seats[0].spoken, "Stalls row A seat 1, £1.00");
        assert!(d.seats.iter().all(|s| s.x + d.radius < d.width && s.y + d.radius < d.height));
        // The stage above the first row, over the seats.
        let stage = d.stage.as_ref().expect("a venue's map has a stage");
        assert!(stage.y + stage.height < at(1).1 - d.radius);
        assert!(stage.x <= at(1).0 - d.radius && stage.x + stage.width >= at(4).0 + d.radius);
        // Each row labelled on both sides.
        assert_eq!(d.labels.iter().filter(|l| !l.heading && l.text == "A").count(), 2);
    }

    #[test]
    fn long_labels_get_room_and_stay_on_the_map() {
        let mut seats = vec![seat(1, "S", 1, 1), seat(2, "S", 1, 2)];
        for s in &mut seats {
            s.layout.row_label = "Orchestra left, row AA".into();
        }
        let heading = "一階 オーケストラ席 左側ブロック".repeat(3);
        seats.push(seat(3, &heading, 2, 1));
        let d = draw(&seats, &Currency::default());
        for label in &d.labels {
            let (narrow, wide) = if label.heading { HEADING_CHAR } else { ROW_CHAR };
            let half = text_width(&label.text, (narrow, wide)) / 2;
            assert!(label.x - half >= 0 && label.x + half <= d.width, "{label:?} runs off a map {} wide", d.width);
        }
        let first_seat = d.seats.iter().map(|s| s.x - d.radius).min().unwrap();
        let last_seat = d.seats.iter().map(|s| s.x + d.radius).max().unwrap();
        for label in d.labels.iter().filter(|l| !l.heading) {
            let half = text_width(&label.text, ROW_CHAR) / 2;
            let clear = label.x + half <= first_seat || label.x - half >= last_seat;
            assert!(clear, "a row label runs into its seats: {label:?}");
        }
    }

    #[test]
    fn classes_are_named_by_where_their_seats_are() {
        let mut seats = Vec::new();
        let mut n = 0;
        // Stalls rows A-C class 2, D-E class 3; the Circle (rows A-B) class 3; Boxes class 4.
        for (section, rows, class) in
            [("Stalls", 1..=3, 2), ("Stalls", 4..=5, 3), ("Circle", 6..=7, 3), ("Boxes", 8..=8, 4)]
        {
            for row in rows {
                for pos in 1..=2 {
                    n += 1;
                    let mut s = seat(n, section, row, pos);
                    s.layout.class = class;
                    if section == "Circle" {
                        s.layout.row_label = ["A", "B"][(row - 6) as usize].into();
                    }
                    seats.push(s);
                }
            }
        }
        let names = class_names(&seats);
        assert_eq!(names[&2], "Stalls rows A–C");
        assert_eq!(names[&3], "Stalls rows D–E, Circle");
        assert_eq!(names[&4], "Boxes");
        // Sides and centre of the same rows priced apart keep their numbers.
        for side in [0, 2, 4] {
            seats[side].layout.class = 5;
        }
        let names = class_names(&seats);
        assert_eq!(names[&5], "Stalls rows A–C (class 5)");
        assert_eq!(names[&2], "Stalls rows A–C (class 2)");
        assert_eq!(names[&4], "Boxes");
        // Numbered seats alone: the number.
        let plain: Vec<MapSeat> = seats
            .iter()
            .map(|s| {
                let mut s = s.clone();
                (s.layout.section, s.layout.row_label, s.layout.label) = (String::new(), String::new(), String::new());
                s
            })
            .collect();
        assert_eq!(class_names(&plain)[&4], "Class 4");
        assert!(draw(&plain, &Currency::default()).stage.is_none(), "numbered seats have no stage");
    }
}
