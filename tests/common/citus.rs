//! A private Citus cluster for a test: a coordinator and worker nodes, each
//! a [`PrivateCluster`] on its own port with the citus library loaded, the
//! extension created in database `postgres` on each, and the workers
//! registered with the coordinator. Stopped when dropped.

use std::path::Path;

use sqlx::Connection;
use sqlx::postgres::PgConnection;

use super::PrivateCluster;

/// Settings every node starts with: Citus loaded, and room for its
/// connections between nodes.
const SETTINGS: &str = "-c shared_preload_libraries=citus -c max_prepared_transactions=100 -c max_connections=200";

/// Whether Citus is installed into the server (`citus.so` beside the server's
/// other libraries: `../shared/citus/build.sh` installs it). Without it a
/// test fails under CI (`CI` set) and otherwise skips, saying why in one line
/// (false).
pub fn installed() -> bool {
    let found = std::fs::read_dir("/usr/lib/postgresql")
        .ok()
        .and_then(|versions| versions.filter_map(Result::ok).map(|v| v.path().join("lib")).max())
        .is_some_and(|lib| Path::new(&lib).join("citus.so").is_file());
    if !found {
        let why = "Citus is not installed into PostgreSQL (build it with ../shared/citus/build.sh)";
        assert!(std::env::var_os("CI").is_none(), "{why}: CI must run the Citus tests");
        eprintln!("skipped: {why}");
    }
    found
}

/// A running Citus cluster.
pub struct Citus {
    pub coordinator: PrivateCluster,
    pub workers: Vec<PrivateCluster>,
}

impl Citus {
    /// A coordinator and `workers` worker nodes, registered.
    pub async fn start(workers: usize) -> Citus {
        let coordinator = PrivateCluster::start_with(SETTINGS);
        let workers: Vec<PrivateCluster> = (0..workers).map(|_| PrivateCluster::start_with(SETTINGS)).collect();
        for node in std::iter::once(&coordinator).chain(&workers) {
            let mut conn = connect(node).await;
            sqlx::raw_sql("CREATE EXTENSION citus").execute(&mut conn).await.expect("create extension citus");
        }
        let mut conn = connect(&coordinator).await;
        sqlx::query("SELECT citus_set_coordinator_host('127.0.0.1', $1)")
            .bind(i32::from(coordinator.port))
            .execute(&mut conn)
            .await
            .expect("register the coordinator");
        for w in &workers {
            sqlx::query("SELECT citus_add_node('127.0.0.1', $1)")
                .bind(i32::from(w.port))
                .execute(&mut conn)
                .await
                .expect("add a worker node");
        }
        Citus { coordinator, workers }
    }

    /// The coordinator's URL (database `postgres`, where the extension is).
    pub fn url(&self) -> String {
        self.coordinator.url("postgres")
    }

    /// A connection to worker node `k`.
    pub async fn node(&self, k: usize) -> PgConnection {
        connect(&self.workers[k]).await
    }
}

async fn connect(node: &PrivateCluster) -> PgConnection {
    PgConnection::connect(&node.url("postgres")).await.expect("connect to a Citus node")
}
