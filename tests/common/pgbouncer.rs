//! A real PgBouncer (Debian's `pgbouncer`) started by a test on a port of its
//! own, in front of the test server, so the test goes through a pooler as
//! production does. Stopped when dropped.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

/// Where `pgbouncer` is: `SEATQ_PGBOUNCER`, else on PATH, else Debian's
/// `/usr/sbin/pgbouncer`. Without one, a test fails under CI (`CI` set) and
/// otherwise skips, saying why in one line (`None`).
pub fn find() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("SEATQ_PGBOUNCER").map(PathBuf::from) {
        assert!(path.is_file(), "SEATQ_PGBOUNCER names {}, which is not a file", path.display());
        return Some(path);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    let found = std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin")])
        .map(|dir| dir.join("pgbouncer"))
        .find(|p| p.is_file());
    if found.is_none() {
        let why = "no pgbouncer on PATH or in /usr/sbin (Debian: apt-get install pgbouncer; or set SEATQ_PGBOUNCER)";
        assert!(std::env::var_os("CI").is_none(), "{why}: CI must run the PgBouncer tests");
        eprintln!("skipped: {why}");
    }
    found
}

/// A running PgBouncer.
pub struct Bouncer {
    child: Child,
    dir: PathBuf,
    pub port: u16,
}

impl Bouncer {
    /// Start `exe` on a free port in `pool_mode`, pooling `databases` (name,
    /// and the server's host and port) with at most `pool_size` server
    /// connections each: fewer than the clients, so that they share them.
    pub fn start(exe: &Path, pool_mode: &str, server: (&str, u16), databases: &[&str], pool_size: u32) -> Bouncer {
        let dir = std::env::temp_dir().join(format!("seatq-pgbouncer-{}-{}", std::process::id(), free_port()));
        std::fs::create_dir_all(&dir).expect("pgbouncer dir");
        let port = free_port();
        let (host, server_port) = server;
        let mut ini = String::from("[databases]\n");
        for db in databases {
            ini.push_str(&format!("{db} = host={host} port={server_port} dbname={db}\n"));
        }
        ini.push_str(&format!(
            "[pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n\
             auth_type = trust\nauth_file = {auth}\npool_mode = {pool_mode}\n\
             default_pool_size = {pool_size}\nmax_client_conn = 500\n\
             logfile = {log}\npidfile = {pid}\nserver_login_retry = 1\n",
            auth = dir.join("users.txt").display(),
            log = dir.join("pgbouncer.log").display(),
            pid = dir.join("pgbouncer.pid").display(),
        ));
        // PgBouncer 1.21 and later can carry named prepared statements
        // across transactions (on by default from 1.24): turned off, so that
        // the test shows seatq needs none, as with Debian 12's 1.18.
        if version(exe) >= (1, 21) {
            ini.push_str("max_prepared_statements = 0\n");
        }
        std::fs::write(dir.join("users.txt"), "\"postgres\" \"\"\n").expect("users.txt");
        std::fs::write(dir.join("pgbouncer.ini"), ini).expect("pgbouncer.ini");
        // PgBouncer will not run as root; it drops to postgres when told to.
        let mut cmd = Command::new(exe);
        if as_root() {
            let owned = Command::new("chown").args(["-R", "postgres:postgres"]).arg(&dir).status();
            assert!(owned.is_ok_and(|s| s.success()), "chown the pgbouncer dir to postgres");
            cmd.args(["-u", "postgres"]);
        }
        // -q: its log goes to the logfile only (see `log`), not the test's output.
        let child = cmd.arg("-q").arg(dir.join("pgbouncer.ini")).spawn().expect("start pgbouncer");
        let bouncer = Bouncer { child, dir, port };
        for _ in 0..100 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return bouncer;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("pgbouncer did not listen on {port}: {}", bouncer.log());
    }

    /// The URL of `database` through this pooler, with `query` appended
    /// (`pool_mode=transaction`).
    pub fn url(&self, database: &str, query: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}?{query}", self.port)
    }

    /// What PgBouncer logged.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("pgbouncer.log")).unwrap_or_default()
    }
}

impl Drop for Bouncer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `pgbouncer --version`'s major and minor version ("PgBouncer 1.18.0").
fn version(exe: &Path) -> (u32, u32) {
    let out = Command::new(exe).arg("--version").output().expect("pgbouncer --version");
    let text = String::from_utf8_lossy(&out.stdout);
    let number = text.split_whitespace().nth(1).unwrap_or_default();
    let mut parts = number.split('.').map(|p| p.parse().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("free port").port()
}

fn as_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout.starts_with(b"0"))
}
