//! Inventory: events and their seats, made (a classic layout, or a venue
//! file imported), listed, shown by section and class, closed, edited,
//! deleted.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use super::Client;
use crate::outcome::{ErrorCode, WaitlistOrder};
use crate::sql::inventory::{self as sql, EventSummary, SeatGroup, WaitingList};
use crate::venue::{NewEvent, VenueSeat};
use crate::{Error, RequestError, sqlstate, validate};

/// Inventory: events and their seats.
impl Client {
    /// Create (or find) an event by name and give it `seats` seats, `per_row`
    /// to a row, in the classic layout (see `sql::inventory::ADD_SEATS`).
    /// Idempotent. Returns the event id.
    pub async fn add_event(&self, name: &str, seats: i32, per_row: i32) -> Result<i64, Error> {
        let ids = self.add_events(&[name.to_string()], seats, per_row).await?;
        ids.first().copied().ok_or_else(|| Error::Db(sqlx::Error::RowNotFound))
    }

    /// Events by name, each with `seats` seats, `per_row` to a row, in the
    /// classic layout, in one transaction of two statements whatever their
    /// number. Idempotent. Returns the ids in the order of `names`.
    pub async fn add_events(&self, names: &[String], seats: i32, per_row: i32) -> Result<Vec<i64>, Error> {
        let mut tx = self.db.begin().await?;
        let ids = sql::AddEvents { names }.query().fetch_all(&mut tx).await?;
        sql::AddSeats { events: &ids, seats, per_row: per_row.max(1) }.query().execute(&mut tx).await?;
        tx.commit().await?;
        Ok(ids)
    }

    /// The demo inventory: `flights` events named "Flight 1".. of `seats`
    /// seats, six to a row. Idempotent. Returns the event ids.
    pub async fn seed(&self, flights: i32, seats: i32) -> Result<Vec<i64>, Error> {
        let names: Vec<String> = (1..=flights).map(|n| format!("Flight {n}")).collect();
        self.add_events(&names, seats, 6).await
    }

    /// Create `event` with these seats (from a venue file:
    /// [`crate::venue`]), all in one transaction: seats numbered 1.. in the
    /// order given, one row number per section and row (in order of first
    /// appearance), seats not for sale blocked. Refused, importing nothing:
    /// an event whose fields do not hold together ([`NewEvent::check`]:
    /// [`ErrorCode::InvalidEvent`](crate::outcome::ErrorCode)), one with no
    /// seats (the same code), or a name that is taken
    /// ([`ErrorCode::EventExists`](crate::outcome::ErrorCode), naming the
    /// event that has it). Returns the event id.
    pub async fn import_event(&self, event: &NewEvent, seats: &[VenueSeat]) -> Result<i64, Error> {
        event.check()?;
        if seats.is_empty() {
            let message = "seats: the venue has no seats".to_string();
            return Err(RequestError { code: ErrorCode::InvalidEvent, message }.into());
        }
        match self.import_event_unchecked(event, seats).await {
            Err(Error::Db(e)) if sqlstate::is_unique_violation(&e) => Err(self.name_taken(&event.name).await),
            other => other,
        }
    }

    /// The refusal of an event name another event has
    /// ([`ErrorCode::EventExists`]), naming that event, for an import and an
    /// edit alike.
    async fn name_taken(&self, name: &str) -> Error {
        let holder = sql::EventByName { name }.query().fetch_optional(&self.db).await;
        let which = match holder {
            Ok(Some(id)) => format!(" (event {id})"),
            _ => String::new(),
        };
        let message = format!("name: an event named {} exists already{which}", validate::quoted(name));
        RequestError { code: ErrorCode::EventExists, message }.into()
    }

    async fn import_event_unchecked(&self, event: &NewEvent, seats: &[VenueSeat]) -> Result<i64, Error> {
        let mut rows: BTreeMap<(&str, &str), i32> = BTreeMap::new();
        let row_nos: Vec<i32> = seats
            .iter()
            .map(|s| {
                let next = rows.len() as i32 + 1;
                *rows.entry((s.section.as_str(), s.row_label.as_str())).or_insert(next)
            })
            .collect();
        let mut tx = self.db.begin().await?;
        let new = sql::ImportEvent {
            name: &event.name,
            venue: event.venue.as_deref(),
            starts_at: event.starts_at,
            sales_from: event.sales_from,
            sales_until: event.sales_until,
            per_customer: event.per_customer,
        };
        let id = new.query().fetch_one(&mut tx).await?;
        sql::ImportSeats {
            event: id,
            row_nos: &row_nos,
            positions: &seats.iter().map(|s| s.pos).collect::<Vec<_>>(),
            classes: &seats.iter().map(|s| s.class).collect::<Vec<_>>(),
            prices_cents: &seats.iter().map(|s| s.price_cents).collect::<Vec<_>>(),
            sections: &seats.iter().map(|s| s.section.as_str()).collect::<Vec<_>>(),
            row_labels: &seats.iter().map(|s| s.row_label.as_str()).collect::<Vec<_>>(),
            labels: &seats.iter().map(|s| s.label.as_str()).collect::<Vec<_>>(),
            for_sale: &seats.iter().map(|s| s.for_sale).collect::<Vec<_>>(),
        }
        .query()
        .execute(&mut tx)
        .await?;
        tx.commit().await?;
        Ok(id)
    }

    /// Every event (or only `event`), with its sales window and seat
    /// counts. A producer login may call it.
    pub async fn events(&self, event: Option<i64>) -> Result<Vec<EventSummary>, Error> {
        Ok(sql::ListEvents { event }.query().fetch_all(&self.db).await?)
    }

    /// Event `event`'s seats in groups of one section, class and state, as a
    /// storefront sees them (`seatq event show`). A producer login may call it.
    pub async fn seat_groups(&self, event: i64) -> Result<Vec<SeatGroup>, Error> {
        Ok(sql::SeatGroups { event }.query().fetch_all(&self.db).await?)
    }

    /// Stop event `event`'s sales now: holds and books are refused
    /// (`sales_closed`) from then on, and live holds lapse at once (a hold
    /// never outlives its event's sales; to let checkouts under way finish,
    /// move `sales_until` a few minutes ahead with [`Client::edit_event`]
    /// instead). Whether the event exists.
    pub async fn close_event(&self, event: i64) -> Result<bool, Error> {
        let mut tx = self.db.begin().await?;
        sql::CloseEvent { event }.query().execute(&mut tx).await?;
        let found = sql::CutHolds { event }.query().fetch_optional(&mut tx).await?;
        tx.commit().await?;
        Ok(found.is_some())
    }

    /// Event `event`'s line and waiting list (`None` if there is no such
    /// event): requests in line, parties waiting, the seats they want, the
    /// longest wait, the order it is served in and whether it is closed.
    pub async fn waiting_list(&self, event: i64) -> Result<Option<WaitingList>, Error> {
        Ok(sql::WaitingListOf { event }.query().fetch_optional(&self.db).await?)
    }

    /// Close event `event`'s waiting list: it takes no one from now on, and
    /// the parties on it are told `sold_out` now. Whether the event exists.
    /// (An admin's: it serves the list, as a worker does.)
    pub async fn close_waiting_list(&self, event: i64) -> Result<bool, Error> {
        let mut tx = self.db.begin().await?;
        let found = sql::CloseWaitingList { event }.query().fetch_optional(&mut tx).await?.is_some();
        if found {
            sql::ServeLine { event }.query().fetch_one(&mut tx).await?;
        }
        tx.commit().await?;
        Ok(found)
    }

    /// Set the order event `event`'s waiting list is served in (see
    /// [`WaitlistOrder`]). Whether the event exists.
    pub async fn set_waitlist_order(&self, event: i64, order: WaitlistOrder) -> Result<bool, Error> {
        Ok(sql::WaitlistOrderOf { event, order }.query().fetch_optional(&self.db).await?.is_some())
    }

    /// Change event `event`'s fields: each of `changes` that is set replaces
    /// the event's own, the result checked as an import's is
    /// ([`NewEvent::check`]; a name taken by another event is
    /// [`ErrorCode::EventExists`]). Live holds are cut to the end of the
    /// sales as edited. Whether the event exists.
    pub async fn edit_event(&self, event: i64, changes: &EventChanges) -> Result<bool, Error> {
        let mut tx = self.db.begin().await?;
        let Some(mut edited) = sql::LockEvent { event }.query().fetch_optional(&mut tx).await? else {
            return Ok(false);
        };
        let limit_added = edited.per_customer.is_none();
        changes.apply_to(&mut edited);
        edited.check()?;
        let limit_added = limit_added && edited.per_customer.is_some();
        let edit = sql::EditEvent {
            event,
            name: &edited.name,
            venue: edited.venue.as_deref(),
            starts_at: edited.starts_at,
            sales_from: edited.sales_from,
            sales_until: edited.sales_until,
            per_customer: edited.per_customer,
        };
        let done = edit.query().fetch_optional(&mut tx).await;
        match done {
            Err(e) if sqlstate::is_unique_violation(&e) => {
                drop(tx);
                Err(self.name_taken(&edited.name).await)
            }
            Err(e) => Err(e.into()),
            Ok(None) => Ok(false),
            Ok(Some(_)) => {
                sql::CutHolds { event }.query().fetch_optional(&mut tx).await?;
                if limit_added {
                    sql::CountTowardLimit { event }.query().execute(&mut tx).await?;
                }
                tx.commit().await?;
                Ok(true)
            }
        }
    }

    /// Delete event `event` and its seats: for an event made by mistake
    /// (a test import, a wrong file). Refused ([`ErrorCode::EventInUse`])
    /// once anyone booked it (a booking in any state is history the event
    /// must keep: close it instead) or while a request for it is queued.
    /// Whether the event existed.
    pub async fn delete_event(&self, event: i64) -> Result<bool, Error> {
        let mut tx = self.db.begin().await?;
        let found = sql::LockEvent { event }.query().fetch_optional(&mut tx).await?;
        if found.is_none() {
            return Ok(false);
        }
        let in_use = sql::EventInUse { event }.query().fetch_one(&mut tx).await?;
        if in_use {
            let message = format!(
                "event {event} has bookings or queued requests and cannot be deleted; close its sales instead (seatq event close {event})"
            );
            return Err(RequestError { code: ErrorCode::EventInUse, message }.into());
        }
        let deleted = sql::DeleteEvent { event }.query().fetch_optional(&mut tx).await?;
        tx.commit().await?;
        Ok(deleted.is_some())
    }
}

/// Changes to an event's fields ([`Client::edit_event`]): each one set
/// replaces the event's own; unset ones are kept.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventChanges {
    pub name: Option<String>,
    pub venue: Option<String>,
    pub starts_at: Option<DateTime<Utc>>,
    pub sales_from: Option<DateTime<Utc>>,
    pub sales_until: Option<DateTime<Utc>>,
    pub per_customer: Option<i32>,
}

impl EventChanges {
    fn apply_to(&self, event: &mut NewEvent) {
        let EventChanges { name, venue, starts_at, sales_from, sales_until, per_customer } = self.clone();
        event.name = name.unwrap_or(std::mem::take(&mut event.name));
        event.venue = venue.or(event.venue.take());
        event.starts_at = starts_at.or(event.starts_at);
        event.sales_from = sales_from.or(event.sales_from);
        event.sales_until = sales_until.or(event.sales_until);
        event.per_customer = per_customer.or(event.per_customer);
    }

    /// Whether it changes nothing.
    pub fn is_empty(&self) -> bool {
        *self == EventChanges::default()
    }
}
