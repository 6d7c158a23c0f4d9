//! Statements routed to one event's shard, for a database sharded by event
//! (Citus: docs/operations.md "Running on Citus").
//!
//! Citus sends a statement to the one node that keeps its rows when every
//! distributed table in it is filtered on the distribution column by one
//! value; a batch's statements take arrays of events and join them to the
//! tables, which Citus cannot read as one value. So a statement that a
//! batch runs marks, with a comment, each place a distributed table is
//! filtered: `/*route s.event_id*/`. Unrouted (one server), the text runs as
//! written, the comments change nothing, and the plans are the same. Routed
//! to an event, each mark becomes `AND s.event_id = $N`, one more parameter
//! after the statement's own, bound to the event: every array of the batch
//! then holds that one event, and the answer is the same.
//!
//! The text is static and the routed text is made from it once: no SQL is
//! built from input.

use std::sync::OnceLock;

/// A statement's text and, made on first use, the same routed to one event.
#[derive(Debug)]
pub struct Routable {
    text: &'static str,
    routed: OnceLock<String>,
}

impl Routable {
    /// A statement whose text carries `/*route COLUMN*/` marks.
    pub const fn new(text: &'static str) -> Routable {
        Routable { text, routed: OnceLock::new() }
    }

    /// The text to run: as written with no route, routed with one. The
    /// caller binds the event last ([`BindRoute::route`]).
    pub fn text(&'static self, route: Option<i64>) -> &'static str {
        match route {
            None => self.text,
            Some(_) => self.routed.get_or_init(|| routed(self.text)).as_str(),
        }
    }
}

/// Bind a statement's route, if any, after its own parameters.
pub trait BindRoute: Sized {
    fn route(self, route: Option<i64>) -> Self;
}

/// The three query types ([`super::Rows`], [`super::Scalars`],
/// [`super::Effect`]) bind a route the same way.
macro_rules! bind_route {
    ($([$($generic:tt)*] $query:ty),*) => {$(
        impl<$($generic)*> BindRoute for $query {
            fn route(self, route: Option<i64>) -> Self {
                match route {
                    Some(event) => self.bind(event),
                    None => self,
                }
            }
        }
    )*};
}
bind_route!(['a, O] super::Rows<'a, O>, ['a, O] super::Scalars<'a, O>, ['a] super::Effect<'a>);

const MARK: &str = "/*route ";

/// `text` with each `/*route COLUMN*/` made `AND COLUMN = $N`, where N is one
/// past the highest parameter the text has.
fn routed(text: &str) -> String {
    let param = highest_param(text) + 1;
    let mut out = String::with_capacity(text.len() + 32);
    let mut rest = text;
    while let Some(at) = rest.find(MARK) {
        out.push_str(&rest[..at]);
        let after = &rest[at + MARK.len()..];
        let end = after.find("*/").unwrap_or(after.len());
        out.push_str(&format!("AND {} = ${param}", after[..end].trim()));
        rest = after.get(end + 2..).unwrap_or("");
    }
    out.push_str(rest);
    out
}

/// The highest `$N` in `text` (0 if none).
fn highest_param(text: &str) -> usize {
    let bytes = text.as_bytes();
    let mut highest = 0;
    for (i, _) in text.match_indices('$') {
        let digits: String = bytes[i + 1..].iter().take_while(|b| b.is_ascii_digit()).map(|&b| b as char).collect();
        if let Ok(n) = digits.parse::<usize>() {
            highest = highest.max(n);
        }
    }
    highest
}

#[cfg(test)]
mod tests {
    use super::*;

    static CLAIM: Routable =
        Routable::new("SELECT id FROM t WHERE status = $1 /*route event_id*/ AND x = $12 /*route u.event_id */");

    #[test]
    fn a_routed_text_filters_each_mark_on_one_more_parameter() {
        assert_eq!(
            CLAIM.text(None),
            "SELECT id FROM t WHERE status = $1 /*route event_id*/ AND x = $12 /*route u.event_id */"
        );
        assert_eq!(
            CLAIM.text(Some(7)),
            "SELECT id FROM t WHERE status = $1 AND event_id = $13 AND x = $12 AND u.event_id = $13"
        );
    }

    #[test]
    fn a_text_without_parameters_is_routed_on_the_first() {
        assert_eq!(routed("SELECT 1 FROM t WHERE true /*route e*/"), "SELECT 1 FROM t WHERE true AND e = $1");
    }
}
