//! The benchmark program works: a tiny run of every scenario, under the
//! default strategy and (on the hot event) every other one, ends with every
//! request in a terminal state and the invariants kept. Speeds are measured
//! by `seatq-bench` itself (see docs/benchmarks.md), never asserted here.

mod common;

use std::process::Command;

use serde_json::Value;
use sqlx::Connection;
use sqlx::postgres::PgConnection;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tiny_benchmark_of_every_scenario_keeps_the_invariants() {
    let bench = env!("CARGO_BIN_EXE_seatq-bench");
    let prefix = format!("seatq_test_{}_bench", std::process::id());
    let runs: [(&str, &str, &[&str]); 4] = [
        ("all", "skip-locked", &[]),
        ("hot", "blocking,nowait,serializable", &["--keep"]),
        ("hot", "skip-locked", &["--readers", "50"]),
        ("spread", "skip-locked", &["--http", "4"]),
    ];
    for (scenario, strategies, extra) in runs {
        let keep = extra.contains(&"--keep");
        let readers = extra.contains(&"--readers");
        let http = extra.contains(&"--http");
        let output = Command::new(bench)
            .args(["--database-url", &common::server_url()])
            .args(["--db-prefix", &prefix])
            .args(["--scenario", scenario, "--strategy", strategies])
            .args(["--flights", "10", "--scale", "0.004", "--hold-secs", "1", "--steady-at", "0", "--json"])
            .args(extra)
            .output()
            .expect("run seatq-bench (build the workspace: cargo test --workspace)");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "seatq-bench {scenario} {strategies} failed: {stderr}");
        let results: Vec<Value> = serde_json::from_slice(&output.stdout).expect("JSON results");
        let expected: Vec<(&str, &str)> = match scenario {
            "all" => {
                ["spread", "hot", "checkout", "deep", "on-sale", "onsale-line"].map(|s| (s, "skip-locked")).to_vec()
            }
            // With readers, each strategy runs without them, then with them.
            _ if readers => strategies.split(',').flat_map(|s| [("hot", s), ("hot", s)]).collect(),
            // With --http, the burst, then the producers direct and over HTTP.
            _ if http => vec![(scenario, strategies); 3],
            _ => strategies.split(',').map(|s| ("hot", s)).collect(),
        };
        let got: Vec<(&str, &str)> = results
            .iter()
            .map(|r| (r["scenario"].as_str().unwrap_or_default(), r["strategy"].as_str().unwrap_or_default()))
            .collect();
        assert_eq!(got, expected, "one result per scenario and strategy");
        for r in &results {
            let name = format!("{} / {}", r["scenario"], r["strategy"]);
            assert_eq!(r["invariants_ok"], true, "{name}: {:?}", r["violations"]);
            assert_eq!(r["violations"].as_array().map(Vec::len), Some(0), "{name}");
            // Every request ended in exactly one outcome (or waits on a list).
            let requests = r["requests"].as_i64().unwrap_or(0);
            let outcomes: i64 = r["outcomes"].as_object().map_or(0, |o| o.values().filter_map(Value::as_i64).sum());
            assert!(requests > 0, "{name}: no requests");
            assert_eq!(outcomes, requests, "{name}: outcomes {:?}", r["outcomes"]);
            assert!(!r["outcomes"].as_object().is_some_and(|o| o.keys().any(|k| k.ends_with(" queued"))), "{name}");
            assert!(r["seats_sold"].as_i64().unwrap_or(0) > 0, "{name}: no seat sold");
            // The latency's two parts are there, and neither exceeds the whole.
            let max = r["max_ms"].as_f64().unwrap_or(0.0);
            for part in ["queue_p50_ms", "batch_p50_ms"] {
                let ms = r[part].as_f64();
                assert!(ms.is_some_and(|ms| (0.0..=max).contains(&ms)), "{name}: {part} {ms:?}, max {max}");
            }
            if r["scenario"] == "checkout" || r["scenario"] == "onsale-line" {
                assert!(r["holds_expired"].as_i64().is_some(), "{name}: the sweeper's count is missing");
            }
            if r["scenario"] == "onsale-line" {
                let line = &r["line"];
                assert!(line["largest_overtaking"].as_u64().is_some(), "{name}: {line}");
                assert!(line["handed_over_seats"].as_i64().is_some_and(|n| n >= 0), "{name}: {line}");
                assert!(line["still_waiting"].as_i64().is_some(), "{name}: {line}");
            }
            if readers && r["load"].as_str().is_some_and(|l| l.contains("reads/s")) {
                let reads = &r["reads"];
                assert_eq!(reads["map_seats"], 20_000, "{name}: the whole hot venue: {reads}");
                assert!(reads["view_p99_ms"].as_f64().is_some_and(|ms| ms > 0.0), "{name}: {reads}");
                // Every page view served once: fresh, stale while a read ran, or after waiting.
                let served: u64 = ["fresh", "stale", "waited"].iter().filter_map(|k| reads[k].as_u64()).sum();
                assert_eq!(Some(served), reads["reads"].as_u64(), "{name}: {reads}");
                assert!(reads["db_reads"].as_u64().is_some(), "{name}: {reads}");
            }
            if http && r["load"] != "burst" {
                let via = if r["load"] == "4 producers direct" { "direct" } else { "http" };
                assert_eq!(r["load"], format!("4 producers {via}"), "{name}");
            }
            if keep {
                assert_kept(&format!("{prefix}_hot_{}", r["strategy"].as_str().unwrap_or_default()), requests).await;
            }
        }
    }
    // Nothing else is left behind: each run's copy and each scenario's seed
    // are dropped.
    let mut admin = common::admin().await.expect("connect to postgres");
    let left: Vec<String> = sqlx::query_scalar("SELECT datname FROM pg_database WHERE starts_with(datname, $1)")
        .bind(&prefix)
        .fetch_all(&mut admin)
        .await
        .expect("list databases");
    assert_eq!(left, Vec::<String>::new());
}

/// `--keep` left the run's database, holding every request of the run,
/// finished; then drop it.
async fn assert_kept(name: &str, requests: i64) {
    let name = name.replace('-', "_");
    let url = seatq::db::url_for(&common::server_url(), &name).expect("URL");
    let mut conn = PgConnection::connect(&url).await.unwrap_or_else(|e| panic!("{name} kept: {e}"));
    let (all, finished): (i64, i64) = sqlx::query_as("SELECT count(*), count(finished_at) FROM seatq.requests")
        .fetch_one(&mut conn)
        .await
        .expect("count requests");
    assert_eq!((all, finished), (requests, requests), "{name}: requests, finished");
    conn.close().await.expect("close");
    let mut admin = common::admin().await.expect("connect to postgres");
    seatq::db::drop_database(&mut admin, &name).await.expect("drop the kept database");
}
