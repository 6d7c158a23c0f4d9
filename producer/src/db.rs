//! Connecting: zero-configuration start, database creation and migrations.

use std::str::FromStr;
use std::time::Duration;

use sqlx::ConnectOptions;
use sqlx::postgres::{PgConnectOptions, PgListener, PgPool, PgPoolOptions};

use crate::Error;

/// Used when `DATABASE_URL` is unset.
pub const DEFAULT_DATABASE_URL: &str = "postgres://postgres@localhost:5432/seatq";

/// `DATABASE_URL`, or [`DEFAULT_DATABASE_URL`].
pub fn database_url() -> String {
    std::env::var("DATABASE_URL").unwrap_or_else(|_| DEFAULT_DATABASE_URL.to_string())
}

/// Parse a database URL into connection options.
pub fn options(url: &str) -> Result<PgConnectOptions, Error> {
    PgConnectOptions::from_str(url).map_err(|e| Error::BadUrl(e.to_string()))
}

/// Connect a pool of `max_connections`, creating the database if it does not
/// exist and applying the migrations, so a fresh server needs no set-up.
pub async fn connect(options: PgConnectOptions, max_connections: u32) -> Result<PgPool, Error> {
    ensure_database(&options).await?;
    let pool = PgPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(Duration::from_secs(30))
        .connect_with(options.clone())
        .await
        .map_err(|e| unreachable(&options, e))?;
    migrate(&pool).await?;
    Ok(pool)
}

/// Apply the migrations in `migrations/` unless all are applied already
/// (concurrent callers are serialised by sqlx with an advisory lock). A
/// least-privilege role can connect to a current schema; only applying a
/// pending migration needs an admin.
pub async fn migrate(pool: &PgPool) -> Result<(), Error> {
    let migrator = sqlx::migrate!("../migrations");
    let applied: Vec<i64> =
        sqlx::query_scalar(crate::sql::schema::APPLIED_MIGRATIONS).fetch_all(pool).await.unwrap_or_default();
    let current =
        migrator.iter().filter(|m| !m.migration_type.is_down_migration()).all(|m| applied.contains(&m.version));
    if !current {
        migrator.run(pool).await?;
    }
    Ok(())
}

/// A listener on `channel`, on a connection of its own (not one of `pool`'s,
/// which it would hold for as long as it listens), with `pool`'s options.
pub async fn listen(pool: &PgPool, channel: &str) -> Result<PgListener, sqlx::Error> {
    let own = PgPoolOptions::new()
        .max_connections(1)
        .idle_timeout(None)
        .max_lifetime(None)
        .connect_with(pool.connect_options().as_ref().clone())
        .await?;
    let mut listener = PgListener::connect_with(&own).await?;
    listener.listen(channel).await?;
    Ok(listener)
}

/// Create the target database when the server answers "does not exist".
async fn ensure_database(options: &PgConnectOptions) -> Result<(), Error> {
    let err = match options.connect().await {
        Ok(conn) => return sqlx::Connection::close(conn).await.map_err(Error::Db),
        Err(err) => err,
    };
    let missing = err.as_database_error().and_then(|e| e.code()).is_some_and(|c| c == "3D000");
    if !missing {
        return Err(unreachable(options, err));
    }
    let name = options.get_database().unwrap_or("postgres").to_string();
    let mut admin = options.clone().database("postgres").connect().await.map_err(|e| unreachable(options, e))?;
    // CREATE DATABASE takes no parameters; the name comes from the operator's
    // own configuration and is quoted as an identifier.
    let create = format!("CREATE DATABASE \"{}\"", name.replace('"', "\"\""));
    match sqlx::raw_sql(sqlx::AssertSqlSafe(create)).execute(&mut admin).await {
        Ok(_) => tracing::info!(database = %name, "created database"),
        // Another process created it first.
        Err(e) if e.as_database_error().and_then(|d| d.code()).is_some_and(|c| c == "42P04") => {}
        Err(e) => return Err(Error::Db(e)),
    }
    let _ = sqlx::Connection::close(admin).await;
    Ok(())
}

fn unreachable(options: &PgConnectOptions, source: sqlx::Error) -> Error {
    if source.as_database_error().is_some() {
        return Error::Db(source);
    }
    Error::Unreachable {
        target: format!("{}:{}/{}", options.get_host(), options.get_port(), options.get_database().unwrap_or("")),
        source,
    }
}
