//! A primary and a streaming standby as two private clusters, and a TCP
//! proxy that follows whichever is the primary (what HAProxy on Patroni's
//! leader check does), for the failover tests.

use std::sync::Arc;
use std::sync::atomic::{AtomicU16, Ordering};

use super::{PrivateCluster, path};

/// The standby's name in `synchronous_standby_names`.
pub const STANDBY_NAME: &str = "standby1";

impl PrivateCluster {
    /// A primary whose commits wait for [`STANDBY_NAME`] (`synchronous`) or
    /// not (asynchronous replication), and that standby, streaming from it.
    pub fn with_standby(synchronous: bool) -> (PrivateCluster, PrivateCluster) {
        let primary = PrivateCluster::start();
        let names = if synchronous { STANDBY_NAME } else { "" };
        primary.sql(&format!("ALTER SYSTEM SET synchronous_standby_names = '{names}'"));
        primary.sql("SELECT pg_reload_conf()");
        let standby = PrivateCluster::empty();
        let data = standby.dir.join("data");
        let from = format!("host=127.0.0.1 port={} user=postgres application_name={STANDBY_NAME}", primary.port);
        // -R writes standby.signal and primary_conninfo (with the name).
        standby.pg("pg_basebackup", &["-d", &from, "-D", path(&data), "-R", "-X", "stream", "--no-sync"]);
        standby.ctl("start");
        (primary, standby)
    }

    /// Run `sql` on the `postgres` database, as `postgres`; its output.
    pub fn sql(&self, sql: &str) -> String {
        let out = std::process::Command::new(self.bin.join("psql"))
            .args(["-X", "-At", "-h", "127.0.0.1", "-p", &self.port.to_string(), "-U", "postgres", "-d", "postgres"])
            .args(["-c", sql])
            .output()
            .expect("psql");
        assert!(out.status.success(), "{sql}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// The postmaster's process id.
    pub fn postmaster_pid(&self) -> u32 {
        let pid = std::fs::read_to_string(self.dir.join("data").join("postmaster.pid")).expect("postmaster.pid");
        pid.lines().next().and_then(|l| l.trim().parse().ok()).expect("a pid on postmaster.pid's first line")
    }

    /// SIGKILL the postmaster and every server process of this cluster at
    /// once: the machine is gone, nothing is flushed or said goodbye.
    pub fn kill(&self) {
        let pid = self.postmaster_pid().to_string();
        // Children first by parent pid, then the postmaster: none of them
        // gets to do anything after the first signal.
        let _ = std::process::Command::new("pkill").args(["-STOP", "-P", &pid]).status();
        let _ = std::process::Command::new("kill").args(["-STOP", &pid]).status();
        let _ = std::process::Command::new("pkill").args(["-KILL", "-P", &pid]).status();
        let _ = std::process::Command::new("kill").args(["-KILL", &pid]).status();
    }

    /// Stop (SIGSTOP) or continue (SIGCONT) every process of this cluster.
    pub fn pause(&self, paused: bool) {
        let signal = if paused { "-STOP" } else { "-CONT" };
        let pid = self.postmaster_pid().to_string();
        let _ = std::process::Command::new("pkill").args([signal, "-P", &pid]).status();
        let _ = std::process::Command::new("kill").args([signal, &pid]).status();
    }

    /// A promoted standby left without a standby of its own stops waiting
    /// for one (it inherited `synchronous_standby_names`, and its commits
    /// would wait for ever), as Patroni does when no synchronous standby is
    /// left.
    pub fn alone(&self) {
        self.sql("ALTER SYSTEM RESET synchronous_standby_names");
        self.sql("SELECT pg_reload_conf()");
    }

    /// Promote this standby to a primary, waiting until it is one.
    pub fn promote(&self) {
        let data = self.dir.join("data");
        self.pg("pg_ctl", &["-D", path(&data), "-w", "-t", "60", "promote"]);
    }
}

/// A TCP proxy on a free port of 127.0.0.1 that forwards each new connection
/// to 127.0.0.1:`target`, which can be switched (connections already open
/// stay where they are, as with HAProxy; a dead server ends them).
pub struct Proxy {
    pub port: u16,
    target: Arc<AtomicU16>,
}

impl Proxy {
    pub async fn start(target: u16) -> Proxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind the proxy");
        let port = listener.local_addr().expect("proxy address").port();
        let target = Arc::new(AtomicU16::new(target));
        let to = Arc::clone(&target);
        tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let port = to.load(Ordering::SeqCst);
                tokio::spawn(async move {
                    if let Ok(mut outbound) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
            }
        });
        Proxy { port, target }
    }

    /// New connections go to `port` from now on.
    pub fn switch(&self, port: u16) {
        self.target.store(port, Ordering::SeqCst);
    }

    pub fn url(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}", self.port)
    }
}
