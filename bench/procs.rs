//! Worker processes for a run, and what /proc says about CPU and memory.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use serde::Serialize;

/// `seatq-worker`, built beside this binary.
pub fn worker_binary() -> anyhow::Result<PathBuf> {
    let me = std::env::current_exe().context("locating seatq-bench")?;
    let worker = me.with_file_name("seatq-worker");
    if !worker.exists() {
        bail!(
            "{} is missing: build the workspace first (cargo build --release --workspace), \
             then run target/release/seatq-bench",
            worker.display()
        );
    }
    Ok(worker)
}

/// Worker processes, SIGKILLed if dropped while running.
pub struct Workers {
    children: Vec<Child>,
}

/// The settings each worker process of a run is started with (the same
/// for every strategy compared; its flags of the same names).
#[derive(Debug, Clone, Serialize)]
pub struct WorkerSettings {
    pub concurrency: usize,
    /// Of each process's loops, how many may be in a transaction at once.
    pub max_active: usize,
    pub batch_size: i64,
    pub backlog_batch_size: i64,
}

/// How to start the workers of a run.
pub struct Launch<'a> {
    pub binary: &'a Path,
    pub database_url: &'a str,
    pub processes: usize,
    pub settings: &'a WorkerSettings,
    pub strategy: &'a str,
    pub log: &'a Path,
}

impl Workers {
    pub fn start(l: &Launch) -> anyhow::Result<Workers> {
        let mut children = Vec::with_capacity(l.processes);
        for n in 0..l.processes {
            let log = std::fs::File::create(l.log.with_extension(format!("{n}.log")))
                .with_context(|| format!("creating {}", l.log.display()))?;
            let s = l.settings;
            let child = Command::new(l.binary)
                .args(["--concurrency", &s.concurrency.to_string()])
                .args(["--max-active", &s.max_active.to_string()])
                .args(["--batch-size", &s.batch_size.to_string()])
                .args(["--backlog-batch-size", &s.backlog_batch_size.to_string()])
                .args(["--strategy", l.strategy])
                .args(["--name", &format!("bench-{n}")])
                .args(["--retention-hours", "0"])
                .env("DATABASE_URL", l.database_url)
                .env("RUST_LOG", "warn")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .with_context(|| format!("starting {}", l.binary.display()))?;
            children.push(child);
        }
        Ok(Workers { children })
    }

    pub fn pids(&self) -> Vec<u32> {
        self.children.iter().map(Child::id).collect()
    }

    /// Whether any worker has exited (it should not have).
    pub fn any_exited(&mut self) -> bool {
        self.children.iter_mut().any(|c| matches!(c.try_wait(), Ok(Some(_))))
    }

    /// SIGTERM every worker and wait (bounded) for them to exit.
    pub fn stop(mut self) {
        for child in &self.children {
            signal(child.id(), "TERM");
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        for child in &mut self.children {
            while Instant::now() < deadline {
                if matches!(child.try_wait(), Ok(Some(_)) | Err(_)) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        for child in &mut self.children {
            if matches!(child.try_wait(), Ok(None)) {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

fn signal(pid: u32, name: &str) {
    let _ = Command::new("kill").args([&format!("-{name}"), &pid.to_string()]).status();
}

/// CPU seconds (user + system) a process has used, if /proc shows it.
pub fn cpu_secs(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / CLOCK_TICKS)
}

/// Peak resident memory of a process in MiB (VmHWM), if /proc shows it.
pub fn peak_rss_mib(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

/// Clock ticks per second in /proc times (USER_HZ, 100 on Linux).
const CLOCK_TICKS: f64 = 100.0;

/// The parent of a process, if /proc shows it.
pub fn parent(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse().ok()
}

/// CPU seconds a PostgreSQL server has used so far: its postmaster's own,
/// that of its processes still running, and that of those that have ended
/// (the postmaster's children times), so that two samples' difference counts
/// the sessions that came and went between them. `None` if /proc does not
/// show the postmaster (a server on another machine).
pub fn server_cpu_secs(postmaster: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{postmaster}/stat")).ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let mut ticks: f64 = [11, 12, 13, 14].iter().filter_map(|&i| fields.get(i)?.parse::<f64>().ok()).sum();
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        if parent(pid) == Some(postmaster) {
            ticks += cpu_secs(pid).map_or(0.0, |s| s * CLOCK_TICKS);
        }
    }
    Some(ticks / CLOCK_TICKS)
}
