//! seatq on a Citus cluster: the schema laid out sharded by event, and how a
//! client tells which layout a database has. (How statements are routed to
//! one event's shard is [`crate::sql::route`]; how workers pick the event to
//! serve, `seatq_worker`'s agenda.) docs/operations.md "Running on Citus"
//! says how to run it.

use sqlx::PgConnection;

use crate::Error;

/// The layout: every migration applied first, then this, once
/// (`citus.sql` beside this file).
pub const LAYOUT: &str = include_str!("citus.sql");

/// Whether the database's tables are distributed (`seatq.distributed()`).
pub const DISTRIBUTED: &str = "SELECT seatq.distributed()";

/// Whether the database has the citus extension and seatq's tables are not
/// laid out on it yet.
pub const TO_LAY_OUT: &str = "
SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'citus') AND NOT seatq.distributed()";

/// Whether this database's tables are sharded by event (laid out on Citus).
pub async fn distributed(conn: &mut PgConnection) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar(DISTRIBUTED).fetch_one(conn).await
}

/// Lay seatq's tables out on Citus if the database has the extension and
/// they are not yet; true if it did. In one transaction.
pub async fn lay_out(conn: &mut PgConnection) -> Result<bool, Error> {
    let due: bool = sqlx::query_scalar(TO_LAY_OUT).fetch_one(&mut *conn).await?;
    if !due {
        return Ok(false);
    }
    let mut tx = sqlx::Connection::begin(&mut *conn).await?;
    sqlx::raw_sql(LAYOUT).execute(&mut *tx).await?;
    tx.commit().await?;
    tracing::info!("laid seatq's tables out on Citus, sharded by event");
    Ok(true)
}
