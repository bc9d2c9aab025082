//! `augur serve` against single abusive or broken peers, end to end (the real binary, loopback
//! only): what one connection, one slow uploader or one absurd event can do to the service.
//!
//! - a client that resets its connection mid-request, or a Kubernetes API address that
//!   answers 400 and closes, does not kill the process;
//! - slow uploads beyond the connection cap do not stop `/healthz` from answering;
//! - on the simulated backend an event far outside the simulation's time window is refused,
//!   and the simulator's clock does not move.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{free_addr, http, json_of, wait_until, Server};
use serde_json::json;

const TOKEN: &str = "abuse-suite-token-0123456789";

/// Closes `s` with a reset (SO_LINGER 0) instead of an orderly FIN.
#[cfg(unix)]
fn reset(s: TcpStream) {
    use std::os::fd::AsRawFd;
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: setsockopt reads `linger` (its size passed) for the open socket `s`
    #[allow(unsafe_code)]
    let rc = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            std::ptr::from_ref(&linger).cast(),
            libc::socklen_t::try_from(std::mem::size_of::<libc::linger>()).unwrap(),
        )
    };
    assert_eq!(rc, 0, "SO_LINGER: {}", std::io::Error::last_os_error());
    drop(s);
}

/// The server has not exited (it would be reaped here with its status).
fn assert_alive(server: &mut Server, after: &str) {
    if let Some(st) = server.child.try_wait().unwrap() {
        panic!("augur serve exited ({st:?}) after {after}");
    }
}

/// Clients that reset their connection mid-request, unauthenticated: a body promised and
/// cut short, `Expect: 100-continue` and nothing more, a body over the limit. The process
/// survives every one (the answers written to the reset sockets fail, they do not raise
/// SIGPIPE) and `/healthz` answers after them.
#[cfg(unix)]
#[test]
fn a_client_resetting_its_connection_mid_request_does_not_kill_the_service() {
    let dir = tempfile::tempdir().unwrap();
    let addr = free_addr();
    let mut cmd = common::serve_none(addr, dir.path());
    cmd.env("AUGUR_SERVE_TOKEN", TOKEN)
        .env("AUGUR_SERVE_BODY_LIMIT", "2000");
    let mut server = Server::spawn(cmd, addr);
    wait_until(Duration::from_secs(120), "/healthz", || {
        http(addr, "GET", "/healthz", None, None).is_ok()
    });
    let heads = [
        (
            "a cut-short body",
            "POST /v1/predict/runtime HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"job\"",
        ),
        (
            "Expect: 100-continue",
            "POST /v1/predict/runtime HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: 100\r\n\r\n",
        ),
        (
            "an over-limit body",
            "POST /v1/events HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 5000\r\n\r\n",
        ),
    ];
    for (what, head) in heads {
        for round in 0..40 {
            let mut s = TcpStream::connect(addr).unwrap();
            s.write_all(head.as_bytes()).unwrap();
            if what == "an over-limit body" {
                let _ = s.write_all(&[b' '; 3000]);
            }
            // every other round the server has a moment to answer first (its next write
            // then meets the reset), otherwise the reset races its first read
            if round % 2 == 1 {
                s.set_read_timeout(Some(Duration::from_millis(200)))
                    .unwrap();
                let _ = s.read(&mut [0u8; 64]);
            }
            reset(s);
            // the server has its turn to write to the reset socket: it must answer after it
            wait_until(Duration::from_secs(30), "/healthz after a reset", || {
                assert_alive(&mut server, what);
                http(addr, "GET", "/healthz", None, None).is_ok()
            });
        }
    }
    let (st, body) = http(addr, "GET", "/healthz", None, None).unwrap();
    assert_eq!(st, 200, "{body}");
    assert_alive(&mut server, "all the resets");
}

/// A Kubernetes API address that answers every request `HTTP/1.1 400` and resets the
/// connection: the backend's requests fail (and are retried), the process lives on and
/// `/healthz` answers.
#[cfg(unix)]
#[test]
fn an_api_server_answering_400_and_closing_does_not_kill_the_service() {
    let api = TcpListener::bind("127.0.0.1:0").unwrap();
    let api_addr = api.local_addr().unwrap();
    let answered = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    api.set_nonblocking(true).unwrap();
    let fake = {
        let (answered, stop) = (answered.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                match api.accept() {
                    Ok((mut s, _)) => {
                        s.set_nonblocking(false).unwrap();
                        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
                        let _ = s.read(&mut [0u8; 4096]);
                        let _ = s.write_all(
                            b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nContent-Length: 3\r\n\r\nno\n",
                        );
                        reset(s);
                        answered.fetch_add(1, Ordering::SeqCst);
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        })
    };
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    common::write_kubeconfig(&kubeconfig, api_addr);
    let addr = free_addr();
    let cmd = serve_kubernetes(addr, dir.path(), &kubeconfig);
    let mut server = Server::spawn(cmd, addr);
    wait_until(Duration::from_secs(120), "/healthz", || {
        http(addr, "GET", "/healthz", None, None).is_ok()
    });
    // the backend retries on a backoff: several answered-and-reset requests
    wait_until(
        Duration::from_secs(120),
        "three requests to the API address",
        || {
            assert_alive(&mut server, "the API address answered 400 and reset");
            answered.load(Ordering::SeqCst) >= 3
        },
    );
    let (st, body) = http(addr, "GET", "/healthz", None, None).unwrap();
    assert_eq!(st, 200, "{body}");
    let (st, body) = http(addr, "GET", "/readyz", None, None).unwrap();
    assert_eq!(st, 503, "{body}");
    assert!(
        json_of(&body)["reason"]
            .as_str()
            .unwrap()
            .contains("backend:kubernetes"),
        "{body}"
    );
    assert_alive(&mut server, "the API address answered 400 and reset");
    stop.store(true, Ordering::SeqCst);
    fake.join().unwrap();
}

/// `augur serve --backend kubernetes` at `addr` over `dir`/data (its working folder `dir`),
/// against the API server `kubeconfig` names, namespace `ml`, with the suite's token and the
/// first-start training kept small; no output kept.
fn serve_kubernetes(addr: SocketAddr, dir: &Path, kubeconfig: &Path) -> Command {
    let mut cmd = common::augur();
    cmd.args(["serve", "--addr", &addr.to_string(), "--data-dir"])
        .arg(dir.join("data"))
        .args(["--trees", "10", "--bootstrap-limit", "3000"])
        .args([
            "--backend",
            "kubernetes",
            "--namespace",
            "ml",
            "--kubeconfig",
        ])
        .arg(kubeconfig)
        .env("POD_NAME", "augur-abuse")
        .env("POD_NAMESPACE", "augur-system")
        .env("AUGUR_LOG", "warn")
        .env("AUGUR_SERVE_TOKEN", TOKEN)
        .env_remove("KUBECONFIG")
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    cmd
}

/// `GET /healthz` on a fresh connection, answered within `limit` in all (connect, send,
/// answer): its status, or none.
fn healthz_within(addr: SocketAddr, limit: Duration) -> Option<u16> {
    let t = Instant::now();
    let mut s = TcpStream::connect_timeout(&addr, limit).ok()?;
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .ok()?;
    let mut raw = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        let left = limit.checked_sub(t.elapsed())?;
        s.set_read_timeout(Some(left.max(Duration::from_millis(1))))
            .ok()?;
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => raw.extend_from_slice(&buf[..n]),
            Err(_) => return None,
        }
    }
    String::from_utf8_lossy(&raw)
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// 150 clients against a cap of 100 connections, each sending a header that promises a
/// 4,000,000-byte body and then one body byte every 2 s: `/healthz` keeps answering within
/// 10 s (the slow uploads that cannot finish by the body deadline are closed to make room),
/// and no upload is held past the whole-body deadline (15 s here) however steadily it
/// trickles.
#[test]
fn slow_uploads_at_the_connection_cap_do_not_stop_health_checks() {
    let dir = tempfile::tempdir().unwrap();
    let addr = free_addr();
    let mut cmd = common::serve_none(addr, dir.path());
    cmd.env("AUGUR_SERVE_TOKEN", TOKEN)
        .env("AUGUR_SERVE_MAX_CONNECTIONS", "100")
        .env("AUGUR_SERVE_REQUEST_BODY_TIMEOUT", "15");
    let mut server = Server::spawn(cmd, addr);
    wait_until(Duration::from_secs(120), "/healthz", || {
        http(addr, "GET", "/healthz", None, None).is_ok()
    });
    let head = format!(
        "POST /v1/events/batch HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nContent-Length: 4000000\r\n\r\n{{"
    );
    let started = Instant::now();
    let mut slow: Vec<Option<TcpStream>> = (0..150)
        .map(|_| {
            let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).ok()?;
            s.write_all(head.as_bytes()).ok()?;
            Some(s)
        })
        .collect();
    assert!(slow.iter().all(Option::is_some), "connecting the uploaders");
    let mut probes = Vec::new();
    let mut last_trickle = Instant::now();
    // 25 s of trickling: past the 15 s body deadline
    while started.elapsed() < Duration::from_secs(25) {
        if last_trickle.elapsed() >= Duration::from_secs(2) {
            for s in &mut slow {
                if let Some(c) = s {
                    if c.write_all(b" ").is_err() {
                        *s = None;
                    }
                }
            }
            last_trickle = Instant::now();
        }
        let t = Instant::now();
        let answered = healthz_within(addr, Duration::from_secs(10));
        assert_eq!(
            answered,
            Some(200),
            "/healthz not answered within 10 s with the slow uploads open ({:.1} s in)",
            started.elapsed().as_secs_f64()
        );
        probes.push(t.elapsed().as_secs_f64());
        assert_alive(&mut server, "the slow uploads");
        std::thread::sleep(Duration::from_millis(250));
    }
    // every upload has been answered or closed by now: their connections read an answer
    // (408/400) or end, none is still waiting
    let mut open = 0;
    for s in slow.iter_mut().flatten() {
        s.set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        let mut buf = [0u8; 256];
        match s.read(&mut buf) {
            Ok(_) => {}
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut =>
            {
                open += 1
            }
            Err(_) => {}
        }
    }
    probes.sort_by(f64::total_cmp);
    println!(
        "abuse suite: 150 slow uploads against a cap of 100: /healthz answered {} times, slowest {:.2} s; uploads still held after 25 s: {open}",
        probes.len(),
        probes.last().copied().unwrap_or(f64::NAN)
    );
    assert_eq!(open, 0, "uploads held past the body deadline");
}

/// The simulated backend's clock, once the replay runs (`GET /v1/cluster`'s `now.time`).
fn sim_time(addr: SocketAddr) -> Option<f64> {
    let (st, body) = http(addr, "GET", "/v1/cluster", None, None).ok()?;
    let v: serde_json::Value = serde_json::from_str(&body).ok()?;
    (st == 200).then(|| v["now"]["time"].as_f64()).flatten()
}

/// On `--backend sim` events far in the simulation's future or before its trace are refused
/// (422 naming the field) as the live backends refuse them against the wall clock, one at a
/// time or in a batch (which then stores nothing); the simulator's clock and the service's
/// "now" stay where they were, and an event at the simulator's clock is taken.
#[test]
fn on_the_simulator_events_outside_its_time_window_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let addr = free_addr();
    let mut cmd = common::augur();
    cmd.args(["serve", "--addr", &addr.to_string(), "--data-dir"])
        .arg(dir.path())
        .args(["--trees", "10", "--bootstrap-limit", "3000"])
        .env("AUGUR_LOG", "warn")
        .env("AUGUR_SERVE_TOKEN", TOKEN)
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let _server = Server::spawn(cmd, addr);
    // the clock reads 0 until the simulator has loaded its trace (at its first submit)
    let t0 = common::wait_for("the simulator's clock", 300, || {
        sim_time(addr).filter(|t| *t > 0.0)
    });
    let post = |body: serde_json::Value, path: &str| {
        http(addr, "POST", path, Some(&body.to_string()), Some(TOKEN)).unwrap()
    };
    let submit = |id: &str, at: serde_json::Value| json!({ "type": "job_submitted", "job_id": id, "at": at, "profile": { "num_gpus": 2 } });
    for at in [
        json!(1e12),
        json!(0),
        json!(-1e9),
        json!("9999-12-31T23:59:59Z"),
    ] {
        let (st, body) = post(submit("evil", at.clone()), "/v1/events");
        assert_eq!(st, 422, "at {at}: {body}");
        let v = json_of(&body);
        assert_eq!(v["error"]["field"], "at", "{body}");
        assert!(
            v["error"]["message"].as_str().unwrap().contains("simulat"),
            "{body}"
        );
    }
    let batch = json!({ "events": [submit("fine", json!(t0)), submit("evil", json!(1e12))] });
    let (st, body) = post(batch, "/v1/events/batch");
    assert_eq!(st, 422, "{body}");
    assert_eq!(json_of(&body)["error"]["field"], "events[1].at", "{body}");
    let (st, _) = http(addr, "GET", "/v1/jobs/fine", None, None).unwrap();
    assert_eq!(st, 404, "a refused batch stores none of its events");
    // the clocks did not move to the refused times
    let now = common::get_json(addr, "/v1/eta")["now"].as_f64().unwrap();
    let sim = sim_time(addr).unwrap();
    assert!(
        now < t0 + 86_400.0 && sim < t0 + 86_400.0,
        "now {now}, simulator {sim}"
    );
    // an event at the simulator's clock is taken
    let (st, body) = post(submit("plausible", json!(sim)), "/v1/events");
    assert_eq!(st, 200, "{body}");
}

/// A Kubernetes API address that takes connections and never answers: the backend's start
/// gives up after its deadline with an error in the log, and `/readyz` names why (not a
/// bare "starting" for minutes).
#[test]
fn an_api_server_that_never_answers_is_named_in_readiness_and_the_log() {
    let api = TcpListener::bind("127.0.0.1:0").unwrap();
    let api_addr = api.local_addr().unwrap();
    api.set_nonblocking(true).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let silent = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut held = Vec::new();
            while !stop.load(Ordering::SeqCst) {
                match api.accept() {
                    Ok((s, _)) => held.push(s),
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        })
    };
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    common::write_kubeconfig(&kubeconfig, api_addr);
    let log_path = dir.path().join("serve.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let addr = free_addr();
    let mut cmd = serve_kubernetes(addr, dir.path(), &kubeconfig);
    cmd.stderr(Stdio::from(log));
    let _server = Server::spawn(cmd, addr);
    let reason = common::wait_for("readiness to name the silent API server", 180, || {
        let (_, body) = http(addr, "GET", "/readyz", None, None).ok()?;
        let v: serde_json::Value = serde_json::from_str(&body).ok()?;
        let r = v["reason"].as_str()?.to_string();
        r.contains("did not answer").then_some(r)
    });
    assert!(reason.contains("backend:kubernetes"), "{reason}");
    let text = std::fs::read_to_string(&log_path).unwrap();
    assert!(
        text.lines()
            .any(|l| l.contains("ERROR") && l.contains("did not answer")),
        "{text}"
    );
    stop.store(true, Ordering::SeqCst);
    silent.join().unwrap();
}

/// The files `augur serve` creates in its data folder (the event store, its mark, the
/// identity, the token, the snapshot written at stop) are readable by their owner only.
#[cfg(unix)]
#[test]
fn the_data_folder_files_are_private() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let addr = free_addr();
    let mut cmd = common::serve_none(addr, &data);
    // the token generated into the folder
    cmd.env_remove("AUGUR_SERVE_TOKEN");
    let mut server = Server::spawn(cmd, addr);
    common::wait_started(addr);
    let token = std::fs::read_to_string(data.join("auth-token")).ok();
    let ev = json!({ "type": "job_submitted", "job_id": "p", "at": 1.7e9, "profile": { "num_gpus": 1 } });
    let token = token.as_deref().map(str::trim);
    let (st, body) = http(addr, "POST", "/v1/events", Some(&ev.to_string()), token).unwrap();
    assert_eq!(st, 200, "{body}");
    let status = std::process::Command::new("kill")
        .args(["-TERM", &server.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    common::wait_until(Duration::from_secs(60), "the service to stop", || {
        server.child.try_wait().unwrap().is_some()
    });
    let mut open = Vec::new();
    let mut stack = vec![data.clone()];
    let mut seen = 0;
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let mode = e.metadata().unwrap().permissions().mode();
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else {
                seen += 1;
            }
            if mode & 0o077 != 0 {
                open.push(format!("{} {:o}", e.path().display(), mode & 0o777));
            }
        }
    }
    for f in ["events.sqlite", "events.sqlite.hwm", "identity.json"] {
        assert!(data.join(f).exists(), "{f} was created");
    }
    assert!(seen >= 3);
    assert!(open.is_empty(), "readable by group or others: {open:?}");
}
