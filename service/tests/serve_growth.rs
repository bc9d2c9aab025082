//! Bounded growth of `augur serve`, on the real binary: during a restart `/healthz` answers
//! while `/readyz` says what is loading; finished jobs past the retention window leave
//! memory with a clear 404; compaction moves their events to the archive, `GET /v1/events`
//! still returns every event in order and `augur store check` verifies the archive; a clean
//! stop writes a snapshot of the online state that the next start loads, answering as
//! before.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{augur, free_addr, http, json_of, Server};

const TOKEN: &str = "growth-suite-token-0123456789";
/// Synthetic jobs ingested (three events each), one submit a minute.
const JOBS: usize = 20_000;
/// 2025-01-01T00:00:00Z.
const T0: f64 = 1_735_689_600.0;

fn start(data_dir: &Path) -> Server {
    let addr = free_addr();
    let mut cmd = common::serve_none(addr, data_dir);
    cmd.args(["--retention-days", "2"])
        .env("AUGUR_SERVE_TOKEN", TOKEN)
        .env("AUGUR_SERVE_RETRAIN_EVERY_JOBS", "0")
        .env("AUGUR_SERVE_COMPACTION_INTERVAL", "1");
    Server::spawn(cmd, addr)
}

/// Job `i`: submitted at minute `i`, started 30 s later, finished after 10–50 minutes.
fn events(i: usize) -> [serde_json::Value; 3] {
    let submit = T0 + 60.0 * i as f64;
    let start = submit + 30.0;
    let finish = start + 600.0 * (1 + i % 5) as f64;
    let id = format!("g-{i}");
    [
        serde_json::json!({"type": "job_submitted", "job_id": id, "at": submit,
            "profile": {"num_gpus": 1 << (i % 4), "user": format!("u{}", i % 37)}}),
        serde_json::json!({"type": "job_started", "job_id": id, "at": start}),
        serde_json::json!({"type": "job_finished", "job_id": id, "at": finish, "status": "completed"}),
    ]
}

fn stop(mut server: Server) {
    let pid = server.child.id().to_string();
    let _ = Command::new("kill").args(["-TERM", &pid]).status();
    let _ = server.child.wait();
}

/// `augur store check` on `dir`: (exit status success, what it printed).
fn store_check(dir: &Path) -> (bool, String) {
    let out = augur()
        .args(["store", "check", "--data-dir"])
        .arg(dir)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// Every event's seq, through `GET /v1/events` pages.
fn all_seqs(server: &Server) -> Vec<i64> {
    let mut out = Vec::new();
    loop {
        let after = out.last().copied().unwrap_or(0);
        let path = format!("/v1/events?after={after}&limit=10000");
        let (st, body) = http(server.addr, "GET", &path, None, None).unwrap();
        assert_eq!(st, 200, "{body}");
        let page = json_of(&body);
        let events = page["events"].as_array().unwrap().clone();
        if events.is_empty() {
            return out;
        }
        out.extend(events.iter().map(|e| e["seq"].as_i64().unwrap()));
    }
}

#[test]
fn restart_answers_health_while_loading_and_compaction_keeps_every_event() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    server.wait_ready();
    // ingest in time order, 3,000 events a request
    let all: Vec<serde_json::Value> = (0..JOBS).flat_map(events).collect();
    let mut ordered = all.clone();
    ordered.sort_by(|a, b| {
        a["at"]
            .as_f64()
            .unwrap()
            .total_cmp(&b["at"].as_f64().unwrap())
    });
    for chunk in ordered.chunks(3000) {
        let body = serde_json::json!({ "events": chunk }).to_string();
        let (st, reply) = http(
            server.addr,
            "POST",
            "/v1/events/batch",
            Some(&body),
            Some(TOKEN),
        )
        .unwrap();
        assert_eq!(st, 200, "{reply}");
    }
    let total = all.len() as i64;
    // the first job finished ~14 days before the last event: it left memory
    let (st, body) = http(server.addr, "GET", "/v1/jobs/g-0", None, None).unwrap();
    assert_eq!(st, 404, "{body}");
    assert!(body.contains("retention window"), "{body}");
    let (st, body) = http(
        server.addr,
        "GET",
        &format!("/v1/jobs/g-{}", JOBS - 1),
        None,
        None,
    )
    .unwrap();
    assert_eq!(st, 200, "{body}");
    // compaction runs every second: wait until the archive holds most events
    let archive = dir.path().join("archive").join("manifest.json");
    common::wait_until(Duration::from_secs(60), "a compaction", || archive.exists());
    assert_eq!(all_seqs(&server), (1..=total).collect::<Vec<_>>());
    // a held job's answer (without `now`, the wall clock) and a prediction by profile
    let answers = |server: &Server| {
        let last = format!("/v1/jobs/g-{}", JOBS - 1);
        let probe = r#"{"job": {"profile": {"num_gpus": 2, "user": "u3"}}}"#;
        [
            http(server.addr, "GET", &last, None, None).unwrap(),
            http(
                server.addr,
                "POST",
                "/v1/predict/runtime",
                Some(probe),
                None,
            )
            .unwrap(),
        ]
        .map(|(st, body)| {
            let mut v = json_of(&body);
            if let Some(o) = v.as_object_mut() {
                o.remove("now");
            }
            (st, v)
        })
    };
    let before = answers(&server);
    assert!(before.iter().all(|(st, _)| *st == 200), "{before:?}");
    // the first start's training ends with the convergence and DAG models: a stop before
    // that leaves a snapshot built without them, which the next start (serving them) refuses
    common::wait_until(Duration::from_secs(900), "the first-start training", || {
        http(server.addr, "GET", "/v1/models", None, None).is_ok_and(|(_, b)| {
            let v = json_of(&b);
            v["serving"]["convergence"].is_u64() && v["serving"]["dag"].is_u64()
        })
    });
    stop(server);

    // the clean stop wrote a snapshot; the next start loads it and answers the same
    let snapshot = dir.path().join("snapshot").join("online.bin");
    assert!(snapshot.exists(), "no snapshot at the clean stop");
    let t = Instant::now();
    let server = start(dir.path());
    server.wait_ready();
    println!(
        "restart from the snapshot to /readyz: {:.2} s",
        t.elapsed().as_secs_f64()
    );
    let (_, metrics) = http(server.addr, "GET", "/metrics", None, None).unwrap();
    let loads: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("augur_snapshot_loads_total"))
        .collect();
    assert_eq!(
        loads,
        [r#"augur_snapshot_loads_total{outcome="loaded"} 1"#],
        "{metrics}"
    );
    assert_eq!(answers(&server), before);
    assert_eq!(all_seqs(&server), (1..=total).collect::<Vec<_>>());
    stop(server);
    // without it, the start replays the whole log (below)
    std::fs::remove_file(&snapshot).unwrap();

    let (sound, out) = store_check(dir.path());
    assert!(sound, "{out}");
    assert!(out.contains("archive"), "{out}");

    // the restart without a snapshot: /healthz answers at once, /readyz says what is loading
    let t = Instant::now();
    let server = start(dir.path());
    while http(server.addr, "GET", "/healthz", None, None).is_err() {
        assert!(t.elapsed() < Duration::from_secs(30), "never listened");
        std::thread::sleep(Duration::from_millis(2));
    }
    let (st, body) = http(server.addr, "GET", "/readyz", None, None).unwrap();
    assert_eq!(st, 503, "ready before the replay was done? {body}");
    let v = json_of(&body);
    assert_eq!(v["checks"][0]["name"], "loading", "{body}");
    println!("/readyz while starting: {body}");
    server.wait_ready();
    println!("restart to /readyz: {:.2} s", t.elapsed().as_secs_f64());
    let (_, metrics) = http(server.addr, "GET", "/metrics", None, None).unwrap();
    assert!(
        metrics.contains(r#"augur_snapshot_loads_total{outcome="absent"} 1"#),
        "{}",
        metrics
            .lines()
            .filter(|l| l.starts_with("augur_snapshot"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert_eq!(answers(&server), before);
    assert_eq!(all_seqs(&server), (1..=total).collect::<Vec<_>>());
    // the next event gets the next number
    let body =
        serde_json::json!({"type": "job_started", "job_id": "late", "at": T0 + 60.0 * JOBS as f64})
            .to_string();
    let (st, reply) = http(server.addr, "POST", "/v1/events", Some(&body), Some(TOKEN)).unwrap();
    assert_eq!(st, 200, "{reply}");
    assert_eq!(json_of(&reply)["seq"], total + 1, "{reply}");
    stop(server);

    // a damaged archive segment is found by the check
    let seg = std::fs::read_dir(dir.path().join("archive"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".jsonl.gz"))
        .unwrap();
    let mut bytes = std::fs::read(&seg).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    std::fs::write(&seg, bytes).unwrap();
    let (sound, out) = store_check(dir.path());
    assert!(!sound, "{out}");
    assert!(out.contains("checksum mismatch"), "{out}");
}
