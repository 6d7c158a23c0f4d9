use crate::request::RequestError;

/// Everything the client library can fail with.
///
/// Variants that wrap a lower-level error name it in their message and also
/// return it from [`std::error::Error::source`]; a printer that walks the
/// chain (`anyhow`'s `{:#}`) should skip a cause already shown, as the `seatq`
/// CLI does.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The database URL does not parse.
    #[error("bad database URL: {0}")]
    BadUrl(String),
    /// No PostgreSQL server answered.
    #[error(
        "cannot reach PostgreSQL at {target}: {source}\n\n\
         seatq needs a PostgreSQL server (version 14 or later). Start the local one \
         (on Debian: `pg_ctlcluster 15 main start`), or install it (`apt-get install postgresql`), \
         or point DATABASE_URL at a server you can use, e.g. \
         DATABASE_URL=postgres://user:password@host:5432/seatq. seatq creates the database \
         and its schema itself on first use."
    )]
    Unreachable { target: String, source: sqlx::Error },
    /// A request failed validation before it was enqueued.
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
    /// [`crate::client::Client::enqueue_all`]).
    #[error(
        "the connection was lost while transaction {xid} was committing and its fate is unknown: \
         ask the server with SELECT pg_xact_status('{xid}') before trying again ({source})"
    )]
    CommitUnknown { xid: String, source: sqlx::Error },
    #[error("database error: {0}")]
    Db(#[from] sqlx::Error),
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
}

impl Error {
    /// Whether this is a connection-level failure that may go away by itself:
    /// no server answers, the connection was lost, or the server is shutting
    /// down, crashed or starting up (SQLSTATE class 08, 57P01 to 57P03).
    /// Retrying such an operation with the same idempotency key is safe. A
    /// refused request, a bad URL or any other SQL error is not one.
    pub fn is_connection_error(&self) -> bool {
        use sqlx::migrate::MigrateError;
        match self {
            Error::Unreachable { source, .. } | Error::Db(source) => connection_level(source),
            Error::Migrate(MigrateError::Execute(source) | MigrateError::ExecuteMigration(source, _)) => {
                connection_level(source)
            }
            _ => false,
        }
    }
}

/// See [`Error::is_connection_error`].
pub fn connection_level(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut => true,
        sqlx::Error::Database(e) => {
            e.code().is_some_and(|code| code.starts_with("08") || ["57P01", "57P02", "57P03"].contains(&&*code))
        }
        _ => false,
    }
}
