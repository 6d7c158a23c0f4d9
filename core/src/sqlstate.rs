//! What a database error means to seatq, by its SQLSTATE: the one place
//! codes are named and classified (see PostgreSQL's "Appendix A. PostgreSQL
//! Error Codes"). Everything else asks a question here rather than compare
//! codes itself.

use std::borrow::Cow;

/// Class 08, connection exception: the connection failed or was lost.
pub const CONNECTION_EXCEPTION_CLASS: &str = "08";
/// Class 53, insufficient resources: too many connections, out of memory or disk.
pub const INSUFFICIENT_RESOURCES_CLASS: &str = "53";

/// Class SQ, seatq's own: codes its functions raise (an implementation-defined
/// class, as the SQL standard leaves classes I to Z; PostgreSQL uses none
/// starting with S).
pub const SEATQ_CLASS: &str = "SQ";
/// SQ001: `seatq.enqueue` was given an idempotency key already used for a
/// request of another kind or payload; nothing was inserted. The message
/// starts with the code `idempotency_conflict`.
pub const IDEMPOTENCY_CONFLICT: &str = "SQ001";
/// SQ002: an insert into `seatq.requests` was refused outright, nothing
/// stored, for a queue option the row cannot keep (an idempotency key too
/// long to index, or holding a control character). The message starts with
/// the error code (`idempotency_key_too_long`, `invalid_request`).
pub const REQUEST_REFUSED: &str = "SQ002";

/// 08P01: protocol violation; what a pooler (PgBouncer) answers to a
/// connection it refuses.
pub const PROTOCOL_VIOLATION: &str = "08P01";
/// 25006: a write on a read-only server (a standby).
pub const READ_ONLY_SQL_TRANSACTION: &str = "25006";
/// 22003: a number does not fit its type.
pub const NUMERIC_VALUE_OUT_OF_RANGE: &str = "22003";
/// 22P05: a character the database cannot store (U+0000 in `jsonb` or `text`).
pub const UNTRANSLATABLE_CHARACTER: &str = "22P05";
/// 23505: a unique constraint refused a second row.
pub const UNIQUE_VIOLATION: &str = "23505";
/// 23514: a check constraint refused a row.
pub const CHECK_VIOLATION: &str = "23514";
/// 3D000: the database named does not exist.
pub const INVALID_CATALOG_NAME: &str = "3D000";
/// 40001: a serializable transaction collided with another.
pub const SERIALIZATION_FAILURE: &str = "40001";
/// 40P01: a deadlock, broken by cancelling this transaction.
pub const DEADLOCK_DETECTED: &str = "40P01";
/// 42P01: the table named does not exist.
pub const UNDEFINED_TABLE: &str = "42P01";
/// 42501: permission denied.
pub const INSUFFICIENT_PRIVILEGE: &str = "42501";
/// 42P04: the database to create exists already.
pub const DUPLICATE_DATABASE: &str = "42P04";
/// 55P03: a NOWAIT lock (or `lock_timeout`) found the row locked.
pub const LOCK_NOT_AVAILABLE: &str = "55P03";
/// 57014: the statement was cancelled (`statement_timeout`, or a cancel request).
pub const QUERY_CANCELED: &str = "57014";
/// 57P01: the server is shutting down.
pub const ADMIN_SHUTDOWN: &str = "57P01";
/// 57P02: the server crashed (another backend did) and is restarting.
pub const CRASH_SHUTDOWN: &str = "57P02";
/// 57P03: the server is starting up or in recovery.
pub const CANNOT_CONNECT_NOW: &str = "57P03";
/// 57P05: the session was idle longer than `idle_session_timeout`.
pub const IDLE_SESSION_TIMEOUT: &str = "57P05";

/// The SQLSTATE of an error the server sent, if it is one.
pub fn code(error: &sqlx::Error) -> Option<Cow<'_, str>> {
    error.as_database_error().and_then(|e| e.code())
}

/// Whether the server answered with SQLSTATE `wanted`.
pub fn is(error: &sqlx::Error, wanted: &str) -> bool {
    code(error).is_some_and(|c| c == wanted)
}

/// A connection-level failure that may go away by itself: no server
/// answers, the connection was lost or none came free in time, the server
/// is shutting down, crashed or starting up (class 08, 57P01 to 57P03), or
/// it is a standby refusing a write (25006, a failover under way). Retrying the operation with the same idempotency key is safe.
pub fn is_connection_level(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut => true,
        sqlx::Error::Database(_) if is_refused_by_pooler(error) => false,
        // A standby refusing a write: during a failover the route reaches
        // the standby before it is promoted, and the same write goes through
        // once it is.
        sqlx::Error::Database(_) => code(error).is_some_and(|c| {
            c.starts_with(CONNECTION_EXCEPTION_CLASS)
                || [ADMIN_SHUTDOWN, CRASH_SHUTDOWN, CANNOT_CONNECT_NOW, READ_ONLY_SQL_TRANSACTION].contains(&&*c)
        }),
        _ => false,
    }
}

/// A pooler refused the connection for what it was asked, not for a server
/// it cannot reach: PgBouncer's `unsupported startup parameter`, `no such
/// database` (not in its list) and `database "…" does not exist` (the
/// server's 3D000, passed on): all 08P01, a connection exception by class,
/// but the same answer however often it is asked, so never worth retrying.
pub fn is_refused_by_pooler(error: &sqlx::Error) -> bool {
    is(error, PROTOCOL_VIOLATION)
        && error.as_database_error().is_some_and(|e| {
            let m = e.message();
            m.starts_with("unsupported startup parameter")
                || m.starts_with("no such database")
                || (m.starts_with("database \"") && m.ends_with("\" does not exist"))
        })
}

/// A failure that only delays a start: one that is connection-level (see
/// [`is_connection_level`]), too many connections or another resource short
/// (class 53), an idle session timeout (57P05), or a conflict with another
/// process migrating at the same time (40001, 40P01, 55P03 under
/// `lock_timeout`).
pub fn is_transient(error: &sqlx::Error) -> bool {
    is_connection_level(error)
        || code(error).is_some_and(|c| {
            c.starts_with(INSUFFICIENT_RESOURCES_CLASS)
                || [IDLE_SESSION_TIMEOUT, SERIALIZATION_FAILURE, DEADLOCK_DETECTED, LOCK_NOT_AVAILABLE].contains(&&*c)
        })
}

/// Others got there first; try again: a lock not available (55P03), a
/// serialization failure (40001), a deadlock (40P01).
pub fn is_contention(error: &sqlx::Error) -> bool {
    code(error).is_some_and(|c| [LOCK_NOT_AVAILABLE, SERIALIZATION_FAILURE, DEADLOCK_DETECTED].contains(&&*c))
}

/// A NOWAIT lock (or `lock_timeout`) found the row locked (55P03).
pub fn is_lock_unavailable(error: &sqlx::Error) -> bool {
    is(error, LOCK_NOT_AVAILABLE)
}

/// A unique constraint refused a second row (23505).
pub fn is_unique_violation(error: &sqlx::Error) -> bool {
    is(error, UNIQUE_VIOLATION)
}

/// A check constraint named `constraint` refused the row (23514).
pub fn is_check_violation(error: &sqlx::Error, constraint: &str) -> bool {
    is(error, CHECK_VIOLATION) && error.as_database_error().and_then(|db| db.constraint()) == Some(constraint)
}

/// The column of a time that is not finite (`infinity`), when a check
/// constraint named `<table>_<column>_finite` refused the row (23514): the
/// event times of 0003_inventory.sql are checked so.
pub fn not_finite_column(error: &sqlx::Error) -> Option<&str> {
    let db = error.as_database_error().filter(|_| is(error, CHECK_VIOLATION))?;
    db.constraint()?.strip_prefix(db.table()?)?.strip_prefix('_')?.strip_suffix("_finite")
}

/// The database named does not exist (3D000).
pub fn is_missing_database(error: &sqlx::Error) -> bool {
    is(error, INVALID_CATALOG_NAME)
}

/// CREATE DATABASE found another process had created it first: it exists
/// (42P04), or both were creating it at the same moment (23505).
pub fn is_database_created_meanwhile(error: &sqlx::Error) -> bool {
    is(error, DUPLICATE_DATABASE) || is_unique_violation(error)
}

/// The statement was cancelled (57014): `statement_timeout`, or a cancel request.
pub fn is_query_canceled(error: &sqlx::Error) -> bool {
    is(error, QUERY_CANCELED)
}

/// An idempotency key reused for another request (SQ001, see [`IDEMPOTENCY_CONFLICT`]).
pub fn is_idempotency_conflict(error: &sqlx::Error) -> bool {
    is(error, IDEMPOTENCY_CONFLICT)
}

/// A request refused by seatq's own functions, nothing stored: SQ001 or
/// SQ002, whose message starts with the error code.
pub fn is_refusal(error: &sqlx::Error) -> bool {
    is(error, IDEMPOTENCY_CONFLICT) || is(error, REQUEST_REFUSED)
}
