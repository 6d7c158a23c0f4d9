//! A private Citus cluster for a test: a coordinator and worker nodes, each
//! a [`PrivateCluster`] on its own port with the citus library loaded, the
//! extension created in database `postgres` on each, and the workers
//! registered with the coordinator. Stopped when dropped.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use sqlx::Connection;
use sqlx::postgres::PgConnection;

use super::PrivateCluster;

/// Settings every node starts with: Citus loaded, and room for its
/// connections between nodes.
/// Each log line starts with the session's pid (`%p~`), which
/// [`Citus::transactions`] reads.
/// Logical replication moves shards while they are written
/// ([`Citus::add_node`]); eight shards a table keep the reads over every
/// shard short and a rebalance quick.
const SETTINGS: &str = "-c shared_preload_libraries=citus -c max_prepared_transactions=100 -c max_connections=200 \
                        -c log_line_prefix=%p~ -c wal_level=logical -c citus.shard_count=8";

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
        // One line for the whole target, not one a test.
        static SAID: std::sync::Once = std::sync::Once::new();
        SAID.call_once(|| eprintln!("skipped: the Citus tests: {why}"));
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

    /// Start another worker node and add it to the cluster (it holds no
    /// shard until a rebalance moves some there).
    pub async fn add_node(&mut self) {
        let node = PrivateCluster::start_with(SETTINGS);
        let mut conn = connect(&node).await;
        sqlx::raw_sql("CREATE EXTENSION citus").execute(&mut conn).await.expect("create extension citus");
        sqlx::query("SELECT citus_add_node('127.0.0.1', $1)")
            .bind(i32::from(node.port))
            .execute(&mut self.coordinator().await)
            .await
            .expect("add the worker node");
        self.workers.push(node);
    }

    /// A connection to worker node `k`.
    pub async fn node(&self, k: usize) -> PgConnection {
        connect(&self.workers[k]).await
    }

    /// A connection to the coordinator.
    pub async fn coordinator(&self) -> PgConnection {
        connect(&self.coordinator).await
    }

    /// Which worker node (its index in [`Citus::workers`]) keeps event `event`'s rows.
    pub async fn node_of(&self, event: i64) -> usize {
        let port: i32 = sqlx::query_scalar(
            "SELECT p.nodeport FROM pg_dist_placement pl JOIN pg_dist_node p USING (groupid)
             WHERE pl.shardid = get_shard_id_for_distribution_column('seatq.seats', $1)",
        )
        .bind(event)
        .fetch_one(&mut self.coordinator().await)
        .await
        .expect("the event's node");
        self.workers.iter().position(|w| i32::from(w.port) == port).expect("a worker node's port")
    }

    /// `events` by the worker node that keeps each (one list a node, in
    /// [`Citus::workers`]' order; each list in the order given).
    pub async fn events_by_node(&self, events: &[i64]) -> Vec<Vec<i64>> {
        let mut by_node = vec![Vec::new(); self.workers.len()];
        for &event in events {
            by_node[self.node_of(event).await].push(event);
        }
        by_node
    }

    /// Log every command the coordinator sends to a worker node from now
    /// on (`citus.log_remote_commands`), for [`Citus::transactions`].
    pub async fn log_remote_commands(&self) {
        let mut conn = self.coordinator().await;
        for set in [
            "ALTER SYSTEM SET citus.log_remote_commands = on",
            "ALTER SYSTEM SET log_min_messages = notice",
            "SELECT pg_reload_conf()",
        ] {
            sqlx::raw_sql(set).execute(&mut conn).await.expect("log remote commands");
        }
    }

    /// From the coordinator's log: every distributed transaction that wrote
    /// on a worker node (an INSERT, UPDATE, DELETE or COPY sent in it),
    /// with the worker nodes' ports it sent anything to; and, for each
    /// `PREPARE TRANSACTION` (a two-phase commit), the commands its session
    /// sent before it. A transaction is known by its remote `BEGIN`
    /// (`assign_distributed_transaction_id`) and lasts until its session
    /// sends `COMMIT`, `ROLLBACK` or `PREPARE`.
    pub fn writing_transactions(&self) -> (HashMap<String, BTreeSet<u16>>, Vec<String>) {
        let log = std::fs::read_to_string(self.coordinator.log()).expect("the coordinator's log");
        let mut nodes: HashMap<String, BTreeSet<u16>> = HashMap::new();
        let mut wrote: BTreeSet<String> = BTreeSet::new();
        let mut prepared = Vec::new();
        // Per session: its open transaction, the command awaiting the
        // DETAIL line that names its node, and its last few commands.
        let mut open: HashMap<&str, String> = HashMap::new();
        let mut pending: HashMap<&str, String> = HashMap::new();
        let mut recent: HashMap<&str, Vec<String>> = HashMap::new();
        for line in log.lines() {
            let Some((pid, rest)) = line.split_once('~') else { continue };
            if let Some(at) = rest.find("issuing ") {
                let command = rest[at + "issuing ".len()..].to_string();
                if command.starts_with("PREPARE TRANSACTION") {
                    prepared
                        .push(format!("session {pid}: {}", recent.get(pid).map(|r| r.join("\n")).unwrap_or_default()));
                }
                if let Some(at) = command.find("assign_distributed_transaction_id(") {
                    let id = command[at..].split(')').next().unwrap_or_default().to_string();
                    open.insert(pid, id);
                } else if ["COMMIT", "ROLLBACK", "PREPARE"].iter().any(|c| command.starts_with(c)) {
                    open.remove(pid);
                }
                let r = recent.entry(pid).or_default();
                r.push(command.chars().take(200).collect());
                if r.len() > 6 {
                    r.remove(0);
                }
                pending.insert(pid, command);
            } else if let Some(at) = rest.find("DETAIL:  on server ") {
                let port = rest[at..].split(':').nth(2).and_then(|p| p.split_whitespace().next());
                let (Some(port), Some(command)) = (port.and_then(|p| p.parse().ok()), pending.remove(pid)) else {
                    continue;
                };
                let Some(id) = open.get(pid) else { continue };
                nodes.entry(id.clone()).or_default().insert(port);
                let writes = ["INSERT", "UPDATE", "DELETE", "COPY"].iter().any(|w| command.starts_with(w))
                    || (command.starts_with("WITH") && (command.contains(" UPDATE ") || command.contains(" DELETE ")));
                if writes {
                    wrote.insert(id.clone());
                }
            }
        }
        nodes.retain(|id, _| wrote.contains(id));
        (nodes, prepared)
    }
}

async fn connect(node: &PrivateCluster) -> PgConnection {
    PgConnection::connect(&node.url("postgres")).await.expect("connect to a Citus node")
}
