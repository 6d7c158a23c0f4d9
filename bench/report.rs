//! The benchmark's table.

use std::fmt::Write as _;

use crate::run::Measured;

const HEADER: [&str; 16] = [
    "scenario",
    "strategy",
    "load",
    "workers",
    "requests",
    "req/s",
    "p50 ms",
    "p95 ms",
    "p99 ms",
    "max ms",
    "seats sold",
    "contention",
    "worker cpu s",
    "db cpu s",
    "worker MiB",
    "invariants",
];

fn cells(m: &Measured) -> [String; 16] {
    let opt = |v: Option<f64>, digits: usize| v.map_or_else(|| "n/a".to_string(), |v| format!("{v:.digits$}"));
    [
        m.scenario.clone(),
        m.strategy.clone(),
        m.load.clone(),
        // Processes x loops, and "/n" when at most n of a process's loops
        // are in a transaction at once.
        if m.settings.max_active < m.settings.concurrency {
            format!("{}x{}/{}", m.workers, m.settings.concurrency, m.settings.max_active)
        } else {
            format!("{}x{}", m.workers, m.settings.concurrency)
        },
        m.requests.to_string(),
        format!("{:.0}", m.requests_per_sec),
        format!("{:.1}", m.latency.p50_ms),
        format!("{:.1}", m.latency.p95_ms),
        format!("{:.1}", m.latency.p99_ms),
        format!("{:.1}", m.latency.max_ms),
        m.seats_sold.to_string(),
        m.contention_retries.to_string(),
        opt(m.worker_cpu_secs, 1),
        opt(m.db_cpu_secs, 1),
        opt(m.worker_peak_mib, 1),
        if m.invariants_ok { "PASS".into() } else { "FAIL".into() },
    ]
}

/// One run, for the log while the benchmark goes on.
pub fn line(m: &Measured) -> String {
    let c = cells(m);
    let readers = m.reads.as_ref().map(readers).unwrap_or_default();
    format!(
        "{} / {} ({}): {} requests, {} req/s, p50 {} ms, p99 {} ms, invariants {}{readers}",
        c[0], c[1], c[2], c[4], c[5], c[6], c[8], c[15]
    )
}

/// What the storefront readers of a run measured.
fn readers(r: &crate::readers::Reads) -> String {
    format!(
        "; readers: {} page views ({:.0}/s) of {} seats, each p50 {:.2} ms p99 {:.2} ms \
         ({} fresh, {} stale while reading, {} waited; max age {:.0} ms); \
         {} database reads, p50 {:.1} ms p99 {:.1} ms",
        r.reads,
        r.reads_per_sec,
        r.map_seats,
        r.view_p50_ms,
        r.view_p99_ms,
        r.fresh,
        r.stale,
        r.waited,
        r.max_age_ms,
        r.db_reads,
        r.db_read_p50_ms,
        r.db_read_p99_ms
    )
}

/// Every run in one table, then each run's outcomes and any violation.
pub fn table(results: &[Measured]) -> String {
    let rows: Vec<[String; 16]> = results.iter().map(cells).collect();
    let widths: Vec<usize> = (0..HEADER.len())
        .map(|i| rows.iter().map(|r| r[i].len()).chain([HEADER[i].len()]).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    let mut row = |cells: &[String]| {
        let line: Vec<String> = cells
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(i, (c, w))| if i < 4 { format!("{c:<w$}") } else { format!("{c:>w$}") })
            .collect();
        let _ = writeln!(out, "| {} |", line.join(" | "));
    };
    row(&HEADER.map(String::from));
    row(&widths.iter().map(|w| "-".repeat(*w)).collect::<Vec<_>>());
    for r in &rows {
        row(r);
    }
    for m in results {
        let outcomes: Vec<String> = m.outcomes.iter().map(|(k, n)| format!("{k} {n}")).collect();
        let _ = write!(out, "\n{} / {} / {}: {}", m.scenario, m.strategy, m.load, outcomes.join(", "));
        if let Some(n) = m.holds_expired {
            let _ = write!(out, "; holds expired by the sweeper {n}");
        }
        if let Some(l) = &m.line {
            let ms = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.0} ms"));
            let _ = write!(
                out,
                "; largest overtaking {} positions; {} seats handed to waiting parties, freed to held p50 {}, p99 {}; \
                 {} parties still waiting",
                l.largest_overtaking,
                l.handed_over_seats,
                ms(l.handover_p50_ms),
                ms(l.handover_p99_ms),
                l.still_waiting
            );
        }
        if let Some(parts) = &m.latency.parts {
            let _ = write!(
                out,
                "; p50 in the queue {:.1} ms, in the batch {:.1} ms",
                parts.queue_p50_ms, parts.batch_p50_ms
            );
        }
        if m.runs_requests_per_sec.len() > 1 {
            let runs: Vec<String> = m.runs_requests_per_sec.iter().map(|r| format!("{r:.0}")).collect();
            let _ = write!(out, "; req/s of each run {} (the median run is shown)", runs.join(", "));
        }
        if let Some(r) = &m.reads {
            out.push_str(&readers(r));
            if let Some(alone) = beside(results, m, |o| o.reads.is_none() && m.load.starts_with(&o.load)) {
                let _ = write!(
                    out,
                    "; bookings {:.0} req/s against {:.0} without readers ({:+.1}%)",
                    m.requests_per_sec,
                    alone.requests_per_sec,
                    (m.requests_per_sec / alone.requests_per_sec - 1.0) * 100.0
                );
            }
        }
        if m.load.ends_with(" producers http") {
            let direct = m.load.replace(" http", " direct");
            if let Some(direct) = beside(results, m, |o| o.load == direct) {
                let _ = write!(
                    out,
                    "; through the HTTP API {:.0} req/s against {:.0} direct: {:.2} × direct",
                    m.requests_per_sec,
                    direct.requests_per_sec,
                    m.requests_per_sec / direct.requests_per_sec
                );
            }
        }
        for v in &m.violations {
            let _ = write!(out, "\n  VIOLATION {v}");
        }
    }
    out
}

/// The run of `m`'s scenario and strategy that `other` picks, to compare
/// `m` with, if it booked anything.
fn beside<'a>(results: &'a [Measured], m: &Measured, other: impl Fn(&Measured) -> bool) -> Option<&'a Measured> {
    results
        .iter()
        .find(|o| o.scenario == m.scenario && o.strategy == m.strategy && other(o))
        .filter(|o| o.requests_per_sec > 0.0)
}

/// Each node's share of the database CPU of a run, as `host:port 12%`.
pub fn shares(nodes: &[(String, f64)]) -> String {
    let total: f64 = nodes.iter().map(|(_, s)| s).sum();
    nodes
        .iter()
        .map(|(node, secs)| {
            format!("{node} {:.0}% ({secs:.1} s)", if total > 0.0 { secs / total * 100.0 } else { 0.0 })
        })
        .collect::<Vec<_>>()
        .join(", ")
}
