//! A throwaway PostgreSQL 15 for tests: `initdb` + `pg_ctl` on a temp folder (as the
//! `postgres` user when the tests run as root: the server refuses root), on a free loopback
//! port, trust authentication for the user `augur`; stopped by its data folder when dropped
//! (also when the test panics). Shared by the end-to-end tests and the store's unit tests.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Where Debian's `postgresql` package puts the server binaries.
pub const PG_BIN: &str = "/usr/lib/postgresql/15/bin";

/// A running test server.
pub struct TestPostgres {
    dir: PathBuf,
    bin: PathBuf,
    pub port: u16,
}

fn as_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// `bin/tool args…`, as the `postgres` user when running as root.
fn pg_command(bin: &Path, tool: &str) -> Command {
    let exe = bin.join(tool);
    if as_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(exe);
        c
    } else {
        Command::new(exe)
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

impl TestPostgres {
    /// Starts a server, or `None` (after a loud message) when the PostgreSQL binaries are
    /// absent outside CI; in CI (`CI=true`) their absence fails the test.
    pub fn start(test: &str) -> Option<TestPostgres> {
        let bin = PathBuf::from(std::env::var("AUGUR_PG_BIN").unwrap_or_else(|_| PG_BIN.into()));
        if !bin.join("initdb").exists() {
            let msg = format!(
                "{test}: PostgreSQL 15 is not installed ({}/initdb missing): `apt-get install postgresql` (or set AUGUR_PG_BIN)",
                bin.display()
            );
            assert!(std::env::var("CI").as_deref() != Ok("true"), "{msg}");
            eprintln!("\n*** SKIPPED {msg} ***\n");
            return None;
        }
        let dir =
            std::env::temp_dir().join(format!("augur-pg-{}-{}", std::process::id(), free_port()));
        std::fs::create_dir_all(&dir).expect("the server's temp folder");
        if as_root() {
            let ok = Command::new("chown")
                .args(["-R", "postgres"])
                .arg(&dir)
                .status()
                .is_ok_and(|s| s.success());
            assert!(ok, "chown postgres {}", dir.display());
        }
        let data = dir.join("data");
        let out = pg_command(&bin, "initdb")
            .arg("-D")
            .arg(&data)
            .args(["-A", "trust", "-U", "augur", "--no-sync"])
            .stdin(Stdio::null())
            .output()
            .expect("run initdb");
        assert!(
            out.status.success(),
            "initdb failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let port = free_port();
        let server = TestPostgres { dir, bin, port };
        let out = pg_command(&server.bin, "pg_ctl")
            .arg("-D")
            .arg(&data)
            .arg("-l")
            .arg(server.dir.join("log"))
            .args(["-w", "-t", "60", "-o"])
            .arg(format!(
                "-p {port} -k {} -c listen_addresses=127.0.0.1 -c fsync=on",
                server.dir.display()
            ))
            .arg("start")
            .stdin(Stdio::null())
            .output()
            .expect("run pg_ctl start");
        assert!(
            out.status.success(),
            "pg_ctl start failed: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            std::fs::read_to_string(server.dir.join("log")).unwrap_or_default()
        );
        Some(server)
    }

    /// The connection string of database `db` (created with [`TestPostgres::create_db`], or
    /// `postgres`).
    pub fn url(&self, db: &str) -> String {
        format!("postgres://augur@127.0.0.1:{}/{db}", self.port)
    }

    /// Creates database `name`.
    pub fn create_db(&self, name: &str) {
        let out = Command::new(self.bin.join("psql"))
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
            .args([
                "-U",
                "augur",
                "-d",
                "postgres",
                "-v",
                "ON_ERROR_STOP=1",
                "-c",
            ])
            .arg(format!("CREATE DATABASE {name}"))
            .stdin(Stdio::null())
            .output()
            .expect("run psql");
        assert!(
            out.status.success(),
            "CREATE DATABASE {name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for TestPostgres {
    fn drop(&mut self) {
        let _ = pg_command(&self.bin, "pg_ctl")
            .arg("-D")
            .arg(self.dir.join("data"))
            .args(["-m", "immediate", "-w", "stop"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
