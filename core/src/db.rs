//! Connecting: zero-configuration start, database creation and migrations;
//! creating and dropping databases.

use std::str::FromStr;
use std::time::Duration;

use sqlx::ConnectOptions;
use sqlx::postgres::{PgConnectOptions, PgConnection, PgListener, PgPool, PgPoolOptions};

use crate::reach::{Db, PoolMode, Target};
use crate::sql::schema::{Applied, AppliedMigrations, OldSchema};
use crate::{Error, sqlstate};

/// Used when `DATABASE_URL` is unset.
pub const DEFAULT_DATABASE_URL: &str = "postgres://postgres@localhost:5432/seatq";

/// `DATABASE_URL`, or [`DEFAULT_DATABASE_URL`].
pub fn database_url() -> String {
    std::env::var("DATABASE_URL").unwrap_or_else(|_| DEFAULT_DATABASE_URL.to_string())
}

/// Parse a database URL into connection options, with no startup parameter
/// a pooler refuses: sqlx sends `extra_float_digits` unless told not to, and
/// PgBouncer answers `unsupported startup parameter` (SQLSTATE 08P01) to it
/// in every pool mode, unless its `ignore_startup_parameters` lists it. It
/// changes only how floats are written as text, and seatq reads none so.
pub fn options(url: &str) -> Result<PgConnectOptions, Error> {
    Ok(PgConnectOptions::from_str(url).map_err(|e| Error::BadUrl(e.to_string()))?.extra_float_digits(None))
}

/// `url` with database `db` instead of its own, for another process (a
/// worker, a test's) to connect with: only the database is replaced, so
/// everything else the URL says (a Unix socket, the password, TLS and other
/// parameters) reaches it as written.
pub fn url_for(url: &str, db: &str) -> Result<String, Error> {
    let mut url = url::Url::parse(url).map_err(|e| Error::BadUrl(e.to_string()))?;
    url.set_path(&format!("/{db}"));
    let kept: Vec<(String, String)> =
        url.query_pairs().filter(|(k, _)| k != "dbname").map(|(k, v)| (k.into_owned(), v.into_owned())).collect();
    if kept.is_empty() {
        url.set_query(None);
    } else {
        url.query_pairs_mut().clear().extend_pairs(kept);
    }
    Ok(url.into())
}

/// How long a client pool waits for a connection (including connecting)
/// before it gives up with an error.
pub const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(30);

/// Connect a pool of `max_connections`, creating the database if it does not
/// exist and applying the migrations, so a fresh server needs no set-up.
pub async fn connect(options: PgConnectOptions, max_connections: u32) -> Result<PgPool, Error> {
    connect_pool(options, PgPoolOptions::new().max_connections(max_connections).acquire_timeout(ACQUIRE_TIMEOUT)).await
}

/// [`connect`], with the pool's settings given. Its acquire timeout also
/// bounds the first connection attempt: services use a short one, so that an
/// outage surfaces as errors within seconds rather than as calls that hang.
/// The migrations run on a connection of their own before the pool opens
/// any, so every pooled connection (and its `after_connect`) finds the
/// schema current.
pub async fn connect_pool(options: PgConnectOptions, pool: PgPoolOptions) -> Result<PgPool, Error> {
    prepare(&options, pool.get_acquire_timeout()).await?;
    pool.connect_with(options.clone()).await.map_err(|e| unreachable(&options, e))
}

/// Create the database if it does not exist and apply the migrations, on a
/// session of its own (`options`), then close it.
async fn prepare(options: &PgConnectOptions, within: Duration) -> Result<(), Error> {
    let mut conn = connect_creating(options, within).await?;
    migrate(&mut conn).await?;
    let _ = sqlx::Connection::close(conn).await;
    Ok(())
}

/// [`connect_pool`] for a [`Target`]: the database is created and migrated
/// through its session URL when it has one. A transaction pooler's target
/// without one only checks that the schema is current
/// ([`Error::NotMigrated`] if not): creating a database and migrating need a
/// session.
pub async fn connect_target(target: &Target, pool: PgPoolOptions) -> Result<Db, Error> {
    if let Some(session) = &target.session {
        prepare(session, pool.get_acquire_timeout()).await?;
    }
    let options = &target.options;
    let pool = match target.mode {
        PoolMode::Transaction => pool.after_connect(|conn, _| Box::pin(crate::reach::learn_types(conn))),
        _ => pool,
    };
    let db = Db::new(pool.connect_with(options.clone()).await.map_err(|e| unreachable(options, e))?, target);
    if target.session.is_none() {
        let applied: Vec<Applied> = AppliedMigrations
            .query()
            .fetch_all(&db)
            .await
            .or_else(|e| if sqlstate::is(&e, sqlstate::UNDEFINED_TABLE) { Ok(Vec::new()) } else { Err(e) })?;
        if !schema_current(&applied)? {
            return Err(Error::NotMigrated { database: options.get_database().unwrap_or("").to_string() });
        }
    }
    Ok(db)
}

fn migrator() -> sqlx::migrate::Migrator {
    let mut migrator = sqlx::migrate!("./migrations");
    migrator.dangerous_set_table_name(crate::sql::schema::MIGRATIONS_TABLE);
    migrator.create_schema(crate::sql::schema::SCHEMA);
    migrator
}

/// Whether every migration of this build is applied; [`Error::SchemaMismatch`]
/// when an applied one differs from this build's text of it.
fn schema_current(applied: &[Applied]) -> Result<bool, Error> {
    let migrator = migrator();
    let ups = || migrator.iter().filter(|m| !m.migration_type.is_down_migration());
    // Checked here rather than left to sqlx's own check, which runs only
    // when something is pending: a least-privilege role never migrates.
    if let Some(Applied { version, database, .. }) =
        applied.iter().find(|a| ups().any(|m| m.version == a.version && *m.checksum != *a.checksum))
    {
        return Err(Error::SchemaMismatch { database: database.clone(), version: *version });
    }
    Ok(ups().all(|m| applied.iter().any(|a| a.version == m.version)))
}

/// Apply the migrations in `migrations/` unless all are applied already
/// (concurrent callers are serialised by sqlx with an advisory lock). A
/// least-privilege role can connect to a current schema; only applying a
/// pending migration needs an admin. sqlx's bookkeeping lives in seatq's own
/// schema ([`MIGRATIONS_TABLE`](crate::sql::schema::MIGRATIONS_TABLE)), which
/// the migrator creates before it; a `seatq` schema made by an earlier
/// development version (bookkeeping in `public`) is refused with
/// [`Error::OldSchema`], which says how to start afresh, and never dropped.
pub async fn migrate<'a>(db: impl sqlx::Acquire<'a, Database = sqlx::Postgres>) -> Result<(), Error> {
    let mut conn = db.acquire().await?;
    let applied: Vec<Applied> = AppliedMigrations.query().fetch_all(&mut *conn).await.unwrap_or_default();
    if !schema_current(&applied)? {
        let old: Option<String> = OldSchema.query().fetch_optional(&mut *conn).await?;
        if let Some(database) = old {
            return Err(Error::OldSchema { database });
        }
        migrator().run(&mut *conn).await?;
    }
    // On a database with the citus extension, the tables are then laid out
    // sharded by event, once.
    crate::citus::lay_out(&mut conn).await?;
    Ok(())
}

/// A listener on `channel`, on a connection of its own (not one of `pool`'s,
/// which it would hold for as long as it listens), with `pool`'s options and
/// acquire timeout (which also bounds each reconnection attempt).
pub async fn listen(pool: &PgPool, channel: &str) -> Result<PgListener, sqlx::Error> {
    listen_on(pool.connect_options().as_ref(), pool.options().get_acquire_timeout(), channel).await
}

/// A listener on `channel`, connected with `options`, each connection
/// attempt bounded by `acquire_timeout`.
async fn listen_on(
    options: &PgConnectOptions,
    acquire_timeout: Duration,
    channel: &str,
) -> Result<PgListener, sqlx::Error> {
    let own = PgPoolOptions::new()
        .max_connections(1)
        .idle_timeout(None)
        .max_lifetime(None)
        .acquire_timeout(acquire_timeout)
        .connect_with(options.clone())
        .await?;
    let mut listener = PgListener::connect_with(&own).await?;
    listener.listen(channel).await?;
    Ok(listener)
}

/// A listener on `channel` on `db`'s session connection, tried again on the
/// shared reconnect schedule ([`crate::retry::Jitter::reconnect`]) until it
/// works; each failure is logged (`warn`) as "could not listen for `what`".
/// `None` when `db` has no session (a transaction pooler with no session
/// URL, where `LISTEN` would land on a session other clients share): the
/// caller polls instead.
pub async fn listen_until_connected(db: &Db, channel: &str, what: &str) -> Option<PgListener> {
    let Some(options) = db.session_options() else {
        tracing::info!("no session to listen for {what} on (a transaction pooler, no session URL); polling instead");
        return None;
    };
    let within = db.pool().options().get_acquire_timeout();
    let mut delays = crate::retry::Jitter::reconnect();
    loop {
        match listen_on(options, within, channel).await {
            Ok(listener) => return Some(listener),
            Err(e) => {
                let pause = delays.next_delay();
                tracing::warn!(error = %e, in_ms = pause.as_millis() as u64, "could not listen for {what}");
                tokio::time::sleep(pause).await;
            }
        }
    }
}

/// A connection to the target database, created first when the server
/// answers "does not exist". Each connection attempt waits at most `within`.
async fn connect_creating(options: &PgConnectOptions, within: Duration) -> Result<PgConnection, Error> {
    let err = match bounded(within, options.connect()).await {
        Ok(conn) => return Ok(conn),
        Err(err) => err,
    };
    if !sqlstate::is_missing_database(&err) {
        return Err(unreachable(options, err));
    }
    let name = options.get_database().unwrap_or("postgres").to_string();
    let mut conn = bounded(within, admin(options)).await.map_err(|e| unreachable(options, e))?;
    match create_database(&mut conn, &name, None).await {
        Ok(()) => tracing::info!(database = %name, "created database"),
        // Another process created it first.
        Err(e) if sqlstate::is_database_created_meanwhile(&e) => {}
        // Say which database and why, rather than a bare "permission denied".
        Err(e) if !sqlstate::is_transient(&e) => {
            return Err(Error::Db(sqlx::Error::Configuration(
                format!("database \"{name}\" does not exist and cannot be created: {}", crate::error::db_text(&e))
                    .into(),
            )));
        }
        Err(e) => return Err(Error::Db(e)),
    }
    let _ = sqlx::Connection::close(conn).await;
    bounded(within, options.connect()).await.map_err(|e| unreachable(options, e))
}

/// A connection to the server's own `postgres` database, with `options`'
/// server, user and other settings: to create and drop databases.
pub async fn admin(options: &PgConnectOptions) -> Result<PgConnection, sqlx::Error> {
    options.clone().database("postgres").connect().await
}

/// Create database `name` on `admin`'s server, a copy of database
/// `template` if one is given.
pub async fn create_database(admin: &mut PgConnection, name: &str, template: Option<&str>) -> Result<(), sqlx::Error> {
    let mut create = format!("CREATE DATABASE {}", quote_identifier(name));
    if let Some(template) = template {
        create.push_str(&format!(" TEMPLATE {}", quote_identifier(template)));
    }
    sqlx::raw_sql(sqlx::AssertSqlSafe(create)).execute(admin).await.map(|_| ())
}

/// Drop database `name` on `admin`'s server if it exists, whoever is
/// connected to it (their sessions are ended).
pub async fn drop_database(admin: &mut PgConnection, name: &str) -> Result<(), sqlx::Error> {
    let drop = format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", quote_identifier(name));
    sqlx::raw_sql(sqlx::AssertSqlSafe(drop)).execute(admin).await.map(|_| ())
}

/// `name` as an SQL identifier: CREATE and DROP DATABASE take no bound
/// parameters, so a database's name (from the operator's own configuration)
/// is written into the statement, in double quotes, with any double quote in
/// it doubled.
fn quote_identifier(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// A connection attempt that gives up after `within` (a server that does not
/// answer at all: a lost host, a firewall dropping packets).
async fn bounded<T>(
    within: Duration,
    attempt: impl std::future::Future<Output = Result<T, sqlx::Error>>,
) -> Result<T, sqlx::Error> {
    tokio::time::timeout(within, attempt).await.unwrap_or_else(|_| {
        Err(sqlx::Error::Io(std::io::Error::new(std::io::ErrorKind::TimedOut, format!("no answer within {within:?}"))))
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_are_quoted() {
        assert_eq!(quote_identifier("seatq"), "\"seatq\"");
        assert_eq!(quote_identifier("a\"; DROP DATABASE x; --"), "\"a\"\"; DROP DATABASE x; --\"");
    }

    #[test]
    fn url_for_changes_only_the_database() {
        let url = |server: &str| url_for(server, "seatq_bench_hot").expect("URL");
        for server in [
            "postgres://u:p%40ss@%2Fvar%2Frun%2Fpostgresql/seatq",
            "postgres:///seatq?host=/var/run/postgresql&user=u&password=p%40ss",
            "postgres:///?dbname=seatq&host=/var/run/postgresql&user=u&password=p%40ss",
        ] {
            let url = url(server);
            let back = options(&url).expect("URL for the database");
            assert_eq!(
                back.get_socket().map(|p| p.to_string_lossy().into_owned()).as_deref(),
                Some("/var/run/postgresql"),
                "{url}"
            );
            assert_eq!(back.get_database(), Some("seatq_bench_hot"), "{url}");
            assert_eq!(back.get_username(), "u", "{url}");
            assert!(url.contains("p%40ss"), "{url}: password");
        }
        assert_eq!(
            url("postgres://u@db.example:6543/seatq?sslmode=verify-full&sslrootcert=/etc/ca.pem&options=-c%20a%3Db"),
            "postgres://u@db.example:6543/seatq_bench_hot?sslmode=verify-full&sslrootcert=%2Fetc%2Fca.pem&options=-c+a%3Db"
        );
        assert_eq!(url("postgres://u@db.example/seatq"), "postgres://u@db.example/seatq_bench_hot");
        assert!(matches!(url_for("not a url", "x"), Err(Error::BadUrl(_))));
    }
}
