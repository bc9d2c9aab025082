//! What the end-to-end tests of the `augur` binary share: the binary with the repository's
//! bundled data, free loopback addresses, a server process killed when dropped, and a
//! minimal HTTP/1.1 client (one request per connection).
//!
//! Where the service's tests live, by what they drive:
//!
//! - beside the code, in `#[cfg(test)]` modules: short unit tests of one module's own logic
//!   (`service/src/**`);
//! - `service/src/serve/tests/`: the service in-process through its real router
//!   (`tower::ServiceExt::oneshot`) with small trained models; they reach crate-private
//!   state, so they stay inside the crate;
//! - `service/tests/` (here, one file per test binary): the real `augur` binary as a user
//!   runs it, over HTTP and the command line;
//! - the real services the tests start are one fixture each, in the dev-only
//!   `augur-test-fixtures` crate (`test-fixtures/`: a single-node Slurm, a throwaway
//!   PostgreSQL), shared with the other crates' tests; the one fake, the Kubernetes API, is
//!   the `augur-kube-fake` crate (`kube-fake/`).

// each test crate uses its own part of this module
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The repository's bundled data folder.
pub const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../datasets/data");

/// The `augur` binary, reading the bundled data from the repository.
pub fn augur() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_augur"));
    c.env("AUGUR_DATA_DIR", DATA);
    c
}

/// A loopback address with a port no one listens on (yet).
pub fn free_addr() -> SocketAddr {
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port");
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// A running `augur serve`; killed (SIGKILL) when dropped.
pub struct Server {
    pub child: Child,
    pub addr: SocketAddr,
    /// A data folder the server owns, removed after it is killed.
    pub data: Option<tempfile::TempDir>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `augur serve --backend none` at `addr` over `data_dir` (its working folder too), with the
/// bundled first-start training kept small (10 trees, 3,000 jobs) and quiet (`AUGUR_LOG=warn`,
/// no output kept); the caller adds flags and environment, then [`Server::spawn`]s it.
pub fn serve_none(addr: SocketAddr, data_dir: &Path) -> Command {
    let mut cmd = augur();
    cmd.args(["serve", "--addr", &addr.to_string(), "--data-dir"])
        .arg(data_dir)
        .args(["--trees", "10", "--bootstrap-limit", "3000"])
        .args(["--backend", "none"])
        .env("AUGUR_LOG", "warn")
        .current_dir(data_dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    cmd
}

/// Writes a kubeconfig at `path` naming the (fake) Kubernetes API server at `api_addr`, with
/// no credentials.
pub fn write_kubeconfig(path: &Path, api_addr: SocketAddr) {
    std::fs::write(
        path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: http://{api_addr}\ncontexts:\n- name: fake\n  context:\n    cluster: fake\n    user: fake\ncurrent-context: fake\nusers:\n- name: fake\n  user: {{}}\n"
        ),
    )
    .expect("write the kubeconfig");
}

impl Server {
    /// Starts `cmd`, the server listening at `addr`.
    pub fn spawn(mut cmd: Command, addr: SocketAddr) -> Server {
        let child = cmd.spawn().expect("start augur serve");
        Server {
            child,
            addr,
            data: None,
        }
    }

    /// Waits (10 minutes at most: first-start training) until `/readyz` answers 200: the
    /// runtime model is served; other kinds may still be training (see [`trained`]).
    pub fn wait_ready(&self) {
        wait_until(Duration::from_secs(600), "/readyz 200", || {
            matches!(http(self.addr, "GET", "/readyz", None, None), Ok((200, _)))
        });
    }

    /// Waits until `/readyz` is 200 and the first start has trained `kinds` ([`trained`]).
    pub fn wait_trained(&self, kinds: &[&str]) {
        trained(self.addr, kinds);
    }
}

/// Every kind the service serves, by the names `/readyz` lists them under.
pub const ALL_KINDS: &[&str] = &["runtime", "queue_wait", "failure", "convergence", "dag"];

/// The kinds trained on the job history at first start (the bootstrap trace): what a test
/// that ingests jobs waits for, so every answer at submit comes from the same models.
pub const HISTORY_KINDS: &[&str] = &["runtime", "queue_wait", "failure"];

/// Waits (10 minutes at most) until the service at `addr` answers `/readyz` 200 with none
/// of `kinds` in its `training` list: each is served, or was found not trainable (its
/// predictions then answer 503 saying why). Panics at once when one is listed in
/// `training_failed`.
pub fn trained(addr: SocketAddr, kinds: &[&str]) {
    let what = format!("/readyz 200 with {kinds:?} trained");
    wait_until(Duration::from_secs(600), &what, || {
        let Ok((200, body)) = http(addr, "GET", "/readyz", None, None) else {
            return false;
        };
        let v = json_of(&body);
        if let Some(failed) = v["training_failed"].as_object() {
            for k in kinds {
                assert!(
                    failed.get(*k).is_none(),
                    "first-start training of {k} failed: {body}"
                );
            }
        }
        let training = v["training"].as_array().expect("/readyz lists `training`");
        !training.iter().any(|t| kinds.iter().any(|k| t == k))
    });
}

/// `method path` with a JSON `body` (and the bearer `token`): (status, body).
pub fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: Option<&str>,
    token: Option<&str>,
) -> std::io::Result<(u16, String)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    s.set_read_timeout(Some(Duration::from_secs(60)))?;
    let body = body.unwrap_or("");
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\n{auth}Content-Length: {}\r\n\r\n{body}",
        body.len()
    )?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw);
    let (head, rest) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| std::io::Error::other("no HTTP header"))?;
    let status: u16 = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other("no status"))?;
    let chunked = head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    let body = if chunked {
        dechunk(rest)
    } else {
        rest.to_string()
    };
    Ok((status, body))
}

/// The body of a chunked answer.
fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        s = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// `body` as JSON (panics with the body when it is not).
pub fn json_of(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"))
}

/// `GET path`, which must answer 200 with JSON.
pub fn get_json(addr: SocketAddr, path: &str) -> Value {
    let (status, body) = http(addr, "GET", path, None, None).expect("request");
    assert_eq!(status, 200, "GET {path}: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("GET {path}: {e}: {body}"))
}

/// Waits (2 minutes at most) until the service at `addr` is past its start-up: `/healthz`
/// answers while the event log replays, every other route 503 "starting" until then.
pub fn wait_started(addr: SocketAddr) {
    wait_until(Duration::from_secs(120), "the service to start", || {
        http(addr, "GET", "/v1/models", None, None).is_ok_and(|(s, _)| s == 200)
    });
}

/// Polls `ok` every 100 ms until it holds; panics after `limit`, naming `what`.
pub fn wait_until(limit: Duration, what: &str, mut ok: impl FnMut() -> bool) {
    wait_for(what, limit.as_secs().max(1), || ok().then_some(()));
}

/// Polls `f` every 100 ms until it gives a value and returns it; panics after `secs`
/// seconds, naming `what`.
pub fn wait_for<T>(what: &str, secs: u64, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}
