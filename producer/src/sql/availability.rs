//! What a storefront reads: free seats and prices per class, and the seat
//! map, through the functions of `migrations/0007_availability.sql` (which
//! the producer role may execute; it may not read the seats themselves).

/// Per class of event $1: seats, free, held, booked, and the price ranges.
pub const AVAILABILITY: &str = "
SELECT class, seats, free, held, booked, free_min_cents, free_max_cents, min_cents, max_cents
FROM seatq.availability($1)";

/// Every seat of event $1, in seat order, and how it shows.
pub const SEAT_MAP: &str = "
SELECT seat_no, section, row_label, label, row_no, pos, class, price_cents, state
FROM seatq.seat_map($1)";

/// The layout of event $1's seats, in seat order: what never changes.
pub const SEAT_LAYOUT: &str = "
SELECT seat_no, section, row_label, label, row_no, pos, class, price_cents
FROM seatq.seat_layout($1)";

/// How event $1's seats stand, in one row: how many there are, and those
/// held, booked and not for sale (every other seat is free).
pub const SEAT_STATES: &str = "SELECT seats, held, booked, not_for_sale FROM seatq.seat_states($1)";

/// A read-only transaction with one snapshot for all its statements: the
/// layout and the states read together agree.
pub const BEGIN_ONE_SNAPSHOT: &str = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY";
