use crate::request::RequestError;

/// Everything the client library can fail with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The database URL does not parse.
    #[error("bad database URL: {0}")]
    BadUrl(String),
    /// No PostgreSQL server answered.
    #[error(
        "cannot reach PostgreSQL at {target}: {source}\n\n\
         seatq needs a PostgreSQL server (version 13 or later). Start the local one \
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
    #[error("database error: {0}")]
    Db(#[from] sqlx::Error),
    #[error("migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
}
