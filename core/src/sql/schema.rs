//! The schema's version, and the bookkeeping of its migrations.

use super::{Rows, Scalars};

/// The table sqlx records applied migrations in, inside seatq's own schema
/// (so that a host application's `public._sqlx_migrations` is left alone).
macro_rules! migrations_table {
    () => {
        "seatq._sqlx_migrations"
    };
}

/// The schema that holds everything of seatq's, its migrations table too.
pub const SCHEMA: &str = "seatq";

/// The migrations table, schema-qualified.
pub const MIGRATIONS_TABLE: &str = migrations_table!();

/// Versions and checksums of the migrations applied (readable by every
/// seatq role), with the database's name for messages.
pub const APPLIED_MIGRATIONS: &str =
    concat!("SELECT version, checksum, current_database() AS database FROM ", migrations_table!(), " WHERE success");

/// The parameters of [`APPLIED_MIGRATIONS`]: none.
#[derive(Debug, Clone, Copy)]
pub struct AppliedMigrations;

/// A migration the database has applied.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Applied {
    pub version: i64,
    pub checksum: Vec<u8>,
    /// The database's name, for messages.
    pub database: String,
}

impl AppliedMigrations {
    pub fn query(&self) -> Rows<'static, Applied> {
        sqlx::query_as(APPLIED_MIGRATIONS)
    }
}

/// The database's name if its schema `seatq` holds objects but no migrations
/// table of its own (no row otherwise): a schema made by an earlier
/// development version, which recorded its migrations in
/// `public._sqlx_migrations` and cannot be upgraded. Read from the catalogs,
/// which every role may read (whatever its rights on the schema), and blind
/// to objects a concurrent migration has not committed (it commits the
/// migrations table before any of them).
pub const OLD_SCHEMA: &str = "
WITH ns AS (SELECT oid FROM pg_catalog.pg_namespace WHERE nspname = 'seatq')
SELECT current_database()
WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_class
                  WHERE relnamespace IN (SELECT oid FROM ns) AND relname = '_sqlx_migrations')
  AND (EXISTS (SELECT 1 FROM pg_catalog.pg_class WHERE relnamespace IN (SELECT oid FROM ns))
       OR EXISTS (SELECT 1 FROM pg_catalog.pg_type WHERE typnamespace IN (SELECT oid FROM ns))
       OR EXISTS (SELECT 1 FROM pg_catalog.pg_proc WHERE pronamespace IN (SELECT oid FROM ns)))";

/// The parameters of [`OLD_SCHEMA`]: none.
#[derive(Debug, Clone, Copy)]
pub struct OldSchema;

impl OldSchema {
    pub fn query(&self) -> Scalars<'static, String> {
        sqlx::query_scalar(OLD_SCHEMA)
    }
}
