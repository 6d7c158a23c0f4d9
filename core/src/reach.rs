//! How seatq reaches its database: the one place that knows whether a
//! connection is a server session of its own (a direct connection, or a
//! pooler in session mode) or a slice of one lent for a transaction at a time
//! (a pooler in transaction mode: PgBouncer's `pool_mode = transaction`, the
//! pooler many managed offers put in front). Everything above runs its
//! statements on a [`Db`] (or a [`Tx`] begun on one) the same way in both.
//!
//! Through a transaction pooler, a server session belongs to the client only
//! from `BEGIN` to `COMMIT` (and for one statement outside a transaction), so
//! whatever outlives a transaction is unsafe there: named prepared statements
//! (sqlx names and caches every statement it prepares: on another client's
//! session, `sqlx_s_1` "already exists", or worse runs that client's SQL with
//! this one's parameters), `SET`, advisory locks held across transactions, and
//! `LISTEN`. So [`PoolMode::Transaction`]:
//!
//! - prepares every statement unnamed (sqlx's `persistent(false)`), which
//!   the server forgets at the next Parse;
//! - runs a statement outside a transaction inside one of its own (`BEGIN`,
//!   the statement, `COMMIT`): sqlx prepares a statement and runs it in two
//!   round trips, each ending in a Sync, and a pooler is free to hand the
//!   session to someone else between them, unless a transaction is open;
//! - (as in every mode: [`crate::db::options`]) sends no startup parameter a
//!   pooler refuses;
//! - does its session work (applying migrations, creating the database,
//!   `LISTEN`) on the session URL if one is given, and otherwise not at all:
//!   the schema must be current, and waiters poll.
//!
//! It costs round trips (three more a statement outside a transaction, one
//! more a statement inside one, and a parse each time); [`PoolMode::Session`]
//! costs nothing over sqlx itself.

use std::fmt;

use futures_util::{StreamExt as _, TryStreamExt as _};
use sqlx::postgres::{PgConnectOptions, PgPool, PgQueryResult, PgRow, PgStatement, PgTypeInfo};
use sqlx::{Describe, Either, Execute, Executor, Postgres, SqlStr};

use crate::Error;

/// The URL parameter that says a database URL reaches the server through a
/// transaction pooler: `?pool_mode=transaction`, PgBouncer's own name for it.
/// seatq takes it out of the URL before the driver reads it.
pub const POOL_MODE_PARAM: &str = "pool_mode";

/// What a connection of the pool is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum PoolMode {
    /// A server session of its own for as long as it is open: a direct
    /// connection, or a pooler in session mode.
    #[default]
    Session,
    /// A server session lent for one transaction at a time.
    Transaction,
}

/// Where a client connects: the URL for its statements and, through a
/// transaction pooler, the optional URL for what needs a session of its own.
#[derive(Debug, Clone)]
pub struct Target {
    /// The options for pooled statements (the URL, less `pool_mode`).
    pub options: PgConnectOptions,
    pub mode: PoolMode,
    /// Where migrations, database creation and `LISTEN` go: the session URL
    /// if one was given; else, in session mode, the statements' own.
    pub session: Option<PgConnectOptions>,
}

impl Target {
    /// Read `url` (with its `pool_mode`, if any) and the optional session URL
    /// (`SEATQ_SESSION_URL` for seatq's binaries): a direct or session-mode
    /// URL for migrations, database creation and `LISTEN`.
    pub fn parse(url: &str, session_url: Option<&str>) -> Result<Target, Error> {
        let (url, mode) = split_pool_mode(url)?;
        let options = crate::db::options(&url)?;
        let session = match session_url {
            Some(s) => {
                let (s, session_mode) = split_pool_mode(s)?;
                if session_mode == PoolMode::Transaction {
                    return Err(Error::BadUrl(
                        "the session URL (SEATQ_SESSION_URL) must not be a transaction pooler's: it is for \
                         migrations and LISTEN, which need a session"
                            .into(),
                    ));
                }
                Some(crate::db::options(&s)?)
            }
            None if mode == PoolMode::Session => Some(options.clone()),
            None => None,
        };
        Ok(Target { options, mode, session })
    }
}

/// `url` without its `pool_mode` parameter, and the mode it named (session
/// when absent).
fn split_pool_mode(url: &str) -> Result<(String, PoolMode), Error> {
    let Ok(mut parsed) = url::Url::parse(url) else {
        // Not a URL the url crate reads (a libpq key=value string): the
        // driver says what is wrong with it.
        return Ok((url.to_string(), PoolMode::Session));
    };
    let mut mode = PoolMode::Session;
    let mut kept = Vec::new();
    for (k, v) in parsed.query_pairs() {
        if k == POOL_MODE_PARAM {
            mode = match v.as_ref() {
                "transaction" => PoolMode::Transaction,
                "session" => PoolMode::Session,
                other => {
                    return Err(Error::BadUrl(format!("{POOL_MODE_PARAM}={other:?}: expected transaction or session")));
                }
            };
        } else {
            kept.push((k.into_owned(), v.into_owned()));
        }
    }
    if kept.is_empty() {
        parsed.set_query(None);
    } else {
        parsed.query_pairs_mut().clear().extend_pairs(kept);
    }
    Ok((parsed.into(), mode))
}

/// seatq's own types (its enums and their arrays), as a statement's result.
const TYPES: &str = "SELECT NULL::seatq.request_status, NULL::seatq.seat_state, NULL::seatq.booking_state, \
    NULL::seatq.seat_availability, NULL::seatq.request_status[], NULL::seatq.seat_state[], \
    NULL::seatq.booking_state[], NULL::seatq.seat_availability[]";

/// Teach a new connection seatq's types before it runs anything through a
/// transaction pooler. sqlx learns the name of a type it has not seen in a
/// result by asking the server in the middle of preparing the statement (a
/// simple query, after Parse and before Bind), and for an unnamed statement
/// that query destroys the statement it was preparing: the statement fails
/// with `unnamed prepared statement does not exist` (26000), once per
/// connection (sqlx asks for every unknown type at once). So a statement naming every seatq type is prepared once
/// here, in a transaction of its own, to fail that way while sqlx learns the
/// types; the connection then knows them all. Best effort: a schema not laid
/// out yet has no types to learn, and the statements will say so.
pub(crate) async fn learn_types(conn: &mut sqlx::PgConnection) -> Result<(), sqlx::Error> {
    use sqlx::Connection as _;
    let mut tx = conn.begin().await?;
    let _ = sqlx::query(TYPES).persistent(false).fetch_all(&mut *tx).await;
    tx.rollback().await
}

/// A pool of connections to a seatq database, and how they reach it.
/// Statements run on `&Db` (and on a [`Tx`] from [`Db::begin`]) as on a
/// `&PgPool`; the mode decides how they are sent.
#[derive(Clone)]
pub struct Db {
    pool: PgPool,
    mode: PoolMode,
    session: Option<PgConnectOptions>,
}

impl fmt::Debug for Db {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Db").field("mode", &self.mode).field("session", &self.session.is_some()).finish()
    }
}

impl Db {
    /// A pool whose connections are sessions of their own (direct or
    /// session-mode), which also serves as the session connection.
    pub fn direct(pool: PgPool) -> Db {
        let session = Some(pool.connect_options().as_ref().clone());
        Db { pool, mode: PoolMode::Session, session }
    }

    /// A pool opened on `target`'s statement URL.
    pub fn new(pool: PgPool, target: &Target) -> Db {
        Db { pool, mode: target.mode, session: target.session.clone() }
    }

    /// The pool itself. Through a transaction pooler, a statement run on it
    /// directly rather than on the `Db` is a named, cached statement, which
    /// the pooler hands to other clients' sessions: run statements on the
    /// `Db` (or a [`Tx`]).
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    pub fn mode(&self) -> PoolMode {
        self.mode
    }

    /// Where to open a session of one's own (`LISTEN`, session locks), if
    /// anywhere: `None` through a transaction pooler with no session URL.
    pub fn session_options(&self) -> Option<&PgConnectOptions> {
        self.session.as_ref()
    }

    /// Begin a transaction on a pooled connection.
    pub async fn begin(&self) -> Result<Tx, sqlx::Error> {
        Ok(Tx { inner: self.pool.begin().await?, mode: self.mode })
    }

    /// Begin a transaction with `statement` (`BEGIN ISOLATION LEVEL ...`).
    pub async fn begin_with(&self, statement: impl sqlx::SqlSafeStr) -> Result<Tx, sqlx::Error> {
        Ok(Tx { inner: self.pool.begin_with(statement).await?, mode: self.mode })
    }
}

/// A transaction begun on a [`Db`]; statements run on `&mut Tx`. Dropped
/// without [`Tx::commit`], it rolls back.
pub struct Tx {
    inner: sqlx::Transaction<'static, Postgres>,
    mode: PoolMode,
}

impl fmt::Debug for Tx {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tx").field("mode", &self.mode).finish()
    }
}

impl Tx {
    pub async fn commit(self) -> Result<(), sqlx::Error> {
        self.inner.commit().await
    }

    pub async fn rollback(self) -> Result<(), sqlx::Error> {
        self.inner.rollback().await
    }
}

/// A query as given, but prepared unnamed: the server forgets it at the
/// next Parse, so no other client of a pooled session can meet it.
struct Unnamed<E>(E);

impl<'q, E: Execute<'q, Postgres>> Execute<'q, Postgres> for Unnamed<E> {
    fn sql(self) -> SqlStr {
        self.0.sql()
    }

    fn statement(&self) -> Option<&PgStatement> {
        self.0.statement()
    }

    fn take_arguments(&mut self) -> Result<Option<sqlx::postgres::PgArguments>, sqlx::error::BoxDynError> {
        self.0.take_arguments()
    }

    fn persistent(&self) -> bool {
        false
    }
}

type Item = Either<PgQueryResult, PgRow>;

/// `session()` where connections are sessions of their own; refused through a
/// transaction pooler. For prepare and describe: sqlx names, and keeps, a
/// statement it prepares or describes, and another client's session would
/// meet it there.
fn session_only<'e, T: 'e>(
    mode: PoolMode,
    session: impl FnOnce() -> futures_util::future::BoxFuture<'e, Result<T, sqlx::Error>>,
) -> futures_util::future::BoxFuture<'e, Result<T, sqlx::Error>> {
    match mode {
        PoolMode::Session => session(),
        PoolMode::Transaction => Box::pin(async {
            Err(sqlx::Error::Configuration(
                "prepare and describe keep a named statement, which a transaction pooler (pool_mode=transaction) \
                 hands to other clients: run the statement instead"
                    .into(),
            ))
        }),
    }
}

impl<'c> Executor<'c> for &'c Db {
    type Database = Postgres;

    fn fetch_many<'e, 'q: 'e, E>(self, query: E) -> futures_util::stream::BoxStream<'e, Result<Item, sqlx::Error>>
    where
        'c: 'e,
        E: 'q + Execute<'q, Postgres>,
    {
        match self.mode {
            PoolMode::Session => self.pool.fetch_many(query),
            PoolMode::Transaction => {
                // In a transaction of its own (whose executor prepares it
                // unnamed), read to the end before COMMIT: rows are held in
                // memory, not streamed, through the pooler.
                futures_util::stream::once(async move {
                    let mut tx = self.begin().await?;
                    let items: Vec<Item> = (&mut tx).fetch_many(query).try_collect().await?;
                    tx.commit().await?;
                    Ok::<_, sqlx::Error>(items)
                })
                .map_ok(|items| futures_util::stream::iter(items.into_iter().map(Ok)))
                .try_flatten()
                .boxed()
            }
        }
    }

    fn fetch_optional<'e, 'q: 'e, E>(
        self,
        query: E,
    ) -> futures_util::future::BoxFuture<'e, Result<Option<PgRow>, sqlx::Error>>
    where
        'c: 'e,
        E: 'q + Execute<'q, Postgres>,
    {
        match self.mode {
            PoolMode::Session => self.pool.fetch_optional(query),
            PoolMode::Transaction => Box::pin(async move {
                let mut tx = self.begin().await?;
                let row = (&mut tx).fetch_optional(query).await?;
                tx.commit().await?;
                Ok(row)
            }),
        }
    }

    fn prepare_with<'e>(
        self,
        sql: SqlStr,
        parameters: &'e [PgTypeInfo],
    ) -> futures_util::future::BoxFuture<'e, Result<PgStatement, sqlx::Error>>
    where
        'c: 'e,
    {
        session_only(self.mode, || self.pool.prepare_with(sql, parameters))
    }

    fn describe<'e>(self, sql: SqlStr) -> futures_util::future::BoxFuture<'e, Result<Describe<Postgres>, sqlx::Error>>
    where
        'c: 'e,
    {
        session_only(self.mode, || self.pool.describe(sql))
    }
}

impl<'c> Executor<'c> for &'c mut Tx {
    type Database = Postgres;

    fn fetch_many<'e, 'q: 'e, E>(self, query: E) -> futures_util::stream::BoxStream<'e, Result<Item, sqlx::Error>>
    where
        'c: 'e,
        E: 'q + Execute<'q, Postgres>,
    {
        match self.mode {
            PoolMode::Session => self.inner.fetch_many(query),
            PoolMode::Transaction => self.inner.fetch_many(Unnamed(query)),
        }
    }

    fn fetch_optional<'e, 'q: 'e, E>(
        self,
        query: E,
    ) -> futures_util::future::BoxFuture<'e, Result<Option<PgRow>, sqlx::Error>>
    where
        'c: 'e,
        E: 'q + Execute<'q, Postgres>,
    {
        match self.mode {
            PoolMode::Session => self.inner.fetch_optional(query),
            PoolMode::Transaction => self.inner.fetch_optional(Unnamed(query)),
        }
    }

    fn prepare_with<'e>(
        self,
        sql: SqlStr,
        parameters: &'e [PgTypeInfo],
    ) -> futures_util::future::BoxFuture<'e, Result<PgStatement, sqlx::Error>>
    where
        'c: 'e,
    {
        session_only(self.mode, || self.inner.prepare_with(sql, parameters))
    }

    fn describe<'e>(self, sql: SqlStr) -> futures_util::future::BoxFuture<'e, Result<Describe<Postgres>, sqlx::Error>>
    where
        'c: 'e,
    {
        session_only(self.mode, || self.inner.describe(sql))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_mode_is_read_from_the_url_and_taken_out() {
        let (url, mode) = split_pool_mode("postgres://u@h:6432/seatq?pool_mode=transaction&sslmode=disable").unwrap();
        assert_eq!((url.as_str(), mode), ("postgres://u@h:6432/seatq?sslmode=disable", PoolMode::Transaction));
        let (url, mode) = split_pool_mode("postgres://u@h/seatq?pool_mode=session").unwrap();
        assert_eq!((url.as_str(), mode), ("postgres://u@h/seatq", PoolMode::Session));
        let (url, mode) = split_pool_mode("postgres://u@h/seatq").unwrap();
        assert_eq!((url.as_str(), mode), ("postgres://u@h/seatq", PoolMode::Session));
        let bad = split_pool_mode("postgres://u@h/seatq?pool_mode=statement").unwrap_err();
        assert!(bad.to_string().contains("pool_mode=\"statement\""), "{bad}");
    }

    #[test]
    fn a_transaction_pooler_has_no_session_unless_one_is_given() {
        let t = Target::parse("postgres://u@h:6432/seatq?pool_mode=transaction", None).unwrap();
        assert_eq!(t.mode, PoolMode::Transaction);
        assert!(t.session.is_none());
        let t = Target::parse("postgres://u@h:6432/seatq?pool_mode=transaction", Some("postgres://u@h:5432/seatq"))
            .unwrap();
        assert_eq!(t.session.as_ref().map(|s| s.get_port()), Some(5432));
        let direct = Target::parse("postgres://u@h:5432/seatq", None).unwrap();
        assert_eq!(direct.session.as_ref().map(|s| s.get_port()), Some(5432));
        assert!(Target::parse("postgres://u@h/seatq", Some("postgres://u@h/seatq?pool_mode=transaction")).is_err());
    }
}
