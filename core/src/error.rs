use crate::outcome::ErrorCode;
use crate::sqlstate;

/// Why a request was refused: a stable code and a message that names the
/// field at fault (see [`crate::validate`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct RequestError {
    pub code: ErrorCode,
    pub message: String,
}

impl RequestError {
    /// The stable error code recorded on a failed request (the field, as a
    /// method for callers holding an `&dyn` error or a reference chain).
    pub fn code(&self) -> ErrorCode {
        self.code
    }
}

/// Everything the client library can fail with.
///
/// Variants that wrap a lower-level error name it in their message and also
/// return it from [`std::error::Error::source`]; a printer that walks the
/// chain (`anyhow`'s `{:#}`) should skip a cause already shown, as the `seatq`
/// CLI does.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The database URL does not parse.
    #[error("bad database URL: {0}")]
    BadUrl(String),
    /// No PostgreSQL server answered. What a person can do about it is the
    /// binaries' to say (`seatq_core::bin::help`), not the library's.
    #[error("cannot reach PostgreSQL at {target}: {source}")]
    Unreachable { target: String, source: sqlx::Error },
    /// A request was refused before it was enqueued: it failed validation,
    /// or its idempotency key was first used for another request
    /// ([`ErrorCode::IdempotencyConflict`]); or an event's time was refused
    /// for not being finite ([`ErrorCode::TimeNotFinite`]).
    #[error(transparent)]
    Invalid(#[from] RequestError),
    /// No request with this id.
    #[error("no request with id {0}")]
    NotFound(i64),
    /// Waiting for an outcome took longer than allowed.
    #[error("request {0} has no outcome yet (timed out waiting)")]
    Timeout(i64),
    /// The connection was lost while a transaction was committing, and
    /// whether it committed could not be found out (see
    /// `seatq::Client::enqueue_all`): `why` says what stood in the way (the
    /// server could not tell in time, or another server answers now, after a
    /// failover, which cannot know).
    #[error(
        "the connection was lost while transaction {xid} was committing, and whether it committed is unknown: {why} ({source})"
    )]
    CommitUnknown { xid: String, why: String, source: sqlx::Error },
    #[error("database error: {}", db_text(.0))]
    Db(sqlx::Error),
    /// One read made for several callers failed, and each of them gets
    /// this same error (the storefront cache reads an event once for every
    /// page view waiting for it).
    #[error(transparent)]
    Shared(std::sync::Arc<Error>),
    #[error("migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// The database holds a `seatq` schema made by an earlier development
    /// version (its migrations recorded in `public._sqlx_migrations`), which
    /// cannot be upgraded; it is left as it is.
    #[error(
        "database \"{database}\" holds a seatq schema made by an earlier development version of seatq \
         (its migrations recorded in public._sqlx_migrations), which cannot be upgraded. Recreate the \
         database (DROP DATABASE \"{database}\"; seatq creates it again on its next start), or drop only \
         that schema if the database holds other data (DROP SCHEMA seatq CASCADE), or point DATABASE_URL \
         at another database."
    )]
    OldSchema { database: String },
    /// A migration applied to the database differs from this build's text
    /// of it: the schema was made by another build of seatq (migrations are
    /// edited in place until a release), and running against it would
    /// misbehave in ways no error names. It is left as it is.
    #[error(
        "database \"{database}\" holds a seatq schema made by another build of seatq: its migration \
         {version} differs from this build's. Recreate the database (DROP DATABASE \"{database}\"; seatq \
         creates it again on its next start), or drop only that schema if the database holds other data \
         (DROP SCHEMA seatq CASCADE), or point DATABASE_URL at another database."
    )]
    SchemaMismatch { database: String, version: i64 },
    /// The schema needs migrations this build has, and the client reaches
    /// the database only through a transaction pooler, where migrating is
    /// unsafe (sqlx serialises migrations with a session advisory lock).
    #[error(
        "database \"{database}\" needs migrating, which cannot be done through a transaction pooler: run \
         `seatq migrate` with a direct (or session-mode) URL, or give this client one for its session work \
         (SEATQ_SESSION_URL)"
    )]
    NotMigrated { database: String },
}

/// A database error as a person reads it: PostgreSQL's message and its
/// SQLSTATE. sqlx's own wording ends with the line of the server's C source
/// that raised it ("at line 3655"), which means nothing to whoever reads it.
pub fn db_text(error: &sqlx::Error) -> String {
    match error.as_database_error() {
        Some(db) => match db.code() {
            Some(code) => format!("{} (SQLSTATE {code})", db.message()),
            None => db.message().to_string(),
        },
        None => error.to_string(),
    }
}

impl From<sqlx::Error> for Error {
    /// A database error; a refusal raised by seatq's own functions (an
    /// idempotency conflict, a key too long: SQLSTATE SQ001, SQ002) is the
    /// refusal it stands for, [`Error::Invalid`] with the code its message
    /// starts with, and so is an event time refused for not being finite
    /// ([`ErrorCode::TimeNotFinite`], naming the field).
    fn from(error: sqlx::Error) -> Self {
        if sqlstate::is_refusal(&error)
            && let Some(db) = error.as_database_error()
            && let Some((code, message)) = db.message().split_once(": ")
            && let Ok(code) = code.parse::<ErrorCode>()
        {
            return Error::Invalid(RequestError { code, message: message.to_string() });
        }
        if sqlstate::is_check_violation(&error, "events_sales_window") {
            let message = "sales_until: sales would close before they open (sales_from)".to_string();
            return Error::Invalid(RequestError { code: ErrorCode::InvalidEvent, message });
        }
        if let Some(field) = sqlstate::not_finite_column(&error) {
            let message = format!("{field}: must be a finite time (NULL, not infinity, for none)");
            return Error::Invalid(RequestError { code: ErrorCode::TimeNotFinite, message });
        }
        Error::Db(error)
    }
}

impl Error {
    /// The stable code of this error, as `seatq --json` and `seatq serve`'s
    /// API print it: a refused request's own [`ErrorCode`], else one of
    /// `bad_url`, `unreachable`, `not_found`, `timeout`, `commit_unknown`,
    /// `database`, `migration`, `old_schema`, `schema_mismatch`, `not_migrated`.
    pub fn code(&self) -> &'static str {
        match self {
            Error::BadUrl(_) => "bad_url",
            Error::Unreachable { .. } => "unreachable",
            Error::Invalid(refused) => refused.code.as_str(),
            Error::NotFound(_) => "not_found",
            Error::Timeout(_) => "timeout",
            Error::CommitUnknown { .. } => "commit_unknown",
            Error::Db(_) => "database",
            Error::Shared(e) => e.code(),
            Error::Migrate(_) => "migration",
            Error::OldSchema { .. } => "old_schema",
            Error::SchemaMismatch { .. } => "schema_mismatch",
            Error::NotMigrated { .. } => "not_migrated",
        }
    }

    /// Whether this is a connection-level failure that may go away by itself:
    /// no server answers, the connection was lost, or the server is shutting
    /// down, crashed or starting up (see [`sqlstate::is_connection_level`]).
    /// Retrying such an operation with the same idempotency key is safe. A
    /// refused request, a bad URL or any other SQL error is not one.
    pub fn is_connection_error(&self) -> bool {
        self.database_error().is_some_and(sqlstate::is_connection_level)
    }

    /// Whether this may go away by itself (the server is down, starting up,
    /// restarting, out of connections; a lock or a serialization conflict
    /// while migrating: see [`sqlstate::is_transient`]), so that connecting
    /// again later makes sense. A bad URL, a refused login, a database that
    /// does not exist and cannot be created, or a failed migration is not
    /// transient: retrying would not help.
    pub fn is_transient(&self) -> bool {
        self.database_error().is_some_and(sqlstate::is_transient)
    }

    /// The error of the database or its connection behind this one, if any.
    fn database_error(&self) -> Option<&sqlx::Error> {
        use sqlx::migrate::MigrateError;
        match self {
            Error::Unreachable { source, .. } | Error::Db(source) => Some(source),
            Error::Shared(error) => error.database_error(),
            Error::Migrate(MigrateError::Execute(source) | MigrateError::ExecuteMigration(source, _)) => Some(source),
            _ => None,
        }
    }
}
