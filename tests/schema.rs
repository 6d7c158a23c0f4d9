//! Where seatq records its migrations: in `seatq._sqlx_migrations`, so that a
//! host application's own sqlx migrations in `public` are left alone; and a
//! schema from an earlier development version, which recorded them in
//! `public._sqlx_migrations`, is refused with a clear error, never migrated
//! over or dropped.

mod common;

use common::TestDb;
use sqlx::Executor;
use sqlx::postgres::PgPool;

async fn seatq_versions(pool: &PgPool) -> Vec<i64> {
    sqlx::query_scalar("SELECT version FROM seatq._sqlx_migrations WHERE success ORDER BY version")
        .fetch_all(pool)
        .await
        .unwrap()
}

async fn public_migrations(pool: &PgPool) -> Vec<(i64, String)> {
    sqlx::query_as("SELECT version, description FROM public._sqlx_migrations ORDER BY version")
        .fetch_all(pool)
        .await
        .unwrap()
}

async fn exists(pool: &PgPool, relation: &str) -> bool {
    sqlx::query_scalar("SELECT to_regclass($1) IS NOT NULL").bind(relation).fetch_one(pool).await.unwrap()
}

#[tokio::test]
async fn migrations_are_recorded_in_seatq_and_a_host_applications_are_left_alone() {
    let db = TestDb::new().await;
    let versions = seatq_versions(&db.pool).await;
    assert!(!versions.is_empty());
    assert!(!exists(&db.pool, "public._sqlx_migrations").await, "seatq wrote to public._sqlx_migrations");

    // A host application with sqlx migrations of its own, and seatq's schema
    // made afresh beside them.
    db.pool
        .execute(
            "DROP SCHEMA seatq CASCADE;
             CREATE TABLE public._sqlx_migrations (
                 version bigint PRIMARY KEY, description text NOT NULL,
                 installed_on timestamptz NOT NULL DEFAULT now(), success boolean NOT NULL,
                 checksum bytea NOT NULL, execution_time bigint NOT NULL);
             INSERT INTO public._sqlx_migrations (version, description, success, checksum, execution_time)
             VALUES (1, 'host users', true, '\\x00', 0), (20, 'host orders', true, '\\x01', 0);",
        )
        .await
        .unwrap();
    seatq::db::migrate(&db.pool).await.expect("seatq migrates beside a host application's migrations");
    assert_eq!(seatq_versions(&db.pool).await, versions);
    assert_eq!(
        public_migrations(&db.pool).await,
        [(1, "host users".to_string()), (20, "host orders".to_string())],
        "the host application's migrations are untouched"
    );
    assert!(db.client.check_invariants(true).await.unwrap().is_empty());
    db.close().await;
}

#[tokio::test]
async fn a_schema_from_an_earlier_development_version_is_refused_and_kept() {
    let db = TestDb::new().await;
    // What an earlier development version left: the schema, with its
    // migrations recorded in public._sqlx_migrations.
    db.pool
        .execute(
            "CREATE TABLE public._sqlx_migrations (LIKE seatq._sqlx_migrations INCLUDING ALL);
             INSERT INTO public._sqlx_migrations SELECT * FROM seatq._sqlx_migrations;
             DROP TABLE seatq._sqlx_migrations;",
        )
        .await
        .unwrap();
    let recorded = public_migrations(&db.pool).await;

    let err = seatq::db::connect(db.options.clone(), 2).await.expect_err("an old schema is refused");
    assert!(matches!(err, seatq::Error::OldSchema { .. }), "{err:?}");
    assert!(!err.is_transient(), "waiting would not help: {err}");
    let message = err.to_string();
    for says in [format!("database \"{}\"", db.name), "DROP DATABASE".to_string(), "DATABASE_URL".to_string()] {
        assert!(message.contains(&says), "the error says {says:?}: {message}");
    }
    assert!(!message.contains("already exists"), "{message}");

    // A least-privilege role, which cannot migrate, is told the same.
    let login = format!("{}_producer", db.name);
    db.pool
        .execute(sqlx::AssertSqlSafe(format!("CREATE ROLE \"{login}\" LOGIN IN ROLE seatq_producer")))
        .await
        .unwrap();
    let producer = PgPool::connect_with(db.options.clone().username(&login)).await.unwrap();
    let err = seatq::db::migrate(&producer).await.expect_err("an old schema is refused");
    assert!(matches!(err, seatq::Error::OldSchema { .. }), "{err:?}");
    producer.close().await;
    db.pool.execute(sqlx::AssertSqlSafe(format!("DROP ROLE \"{login}\""))).await.unwrap();

    // Nothing was dropped, created or recorded.
    assert!(exists(&db.pool, "seatq.requests").await, "the old schema is kept");
    assert!(!exists(&db.pool, "seatq._sqlx_migrations").await);
    assert_eq!(public_migrations(&db.pool).await, recorded);
    db.close().await;
}

#[tokio::test]
async fn a_schema_from_another_text_of_an_applied_migration_is_refused_and_kept() {
    let db = TestDb::new().await;
    // Migrations are edited in place until a release: a database migrated
    // by another build records another checksum for the same version.
    db.pool.execute("UPDATE seatq._sqlx_migrations SET checksum = '\\x00' WHERE version = 1").await.unwrap();

    let err = seatq::db::connect(db.options.clone(), 2).await.expect_err("a mismatched schema is refused");
    assert!(matches!(err, seatq::Error::SchemaMismatch { version: 1, .. }), "{err:?}");
    assert!(!err.is_transient(), "waiting would not help: {err}");
    let message = err.to_string();
    for says in [format!("database \"{}\"", db.name), "migration 1".to_string(), "DROP DATABASE".to_string()] {
        assert!(message.contains(&says), "the error says {says:?}: {message}");
    }

    // Nothing was changed: the recorded checksum is still the odd one.
    let sum: Vec<u8> = sqlx::query_scalar("SELECT checksum FROM seatq._sqlx_migrations WHERE version = 1")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(sum, [0u8]);
    db.close().await;
}
