//! End-to-end tests of `augur serve`: the real binary on a free port with a temporary data
//! folder, fed a slice of the bundled Philly trace over HTTP; killed with SIGKILL under
//! concurrent ingest and restarted, every acknowledged event must still be there.

mod common;

use std::collections::HashSet;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use augur_datasets::bundled::Dataset;
use augur_datasets::{JobRecord, ReadOptions};
use common::{augur, free_addr, http, json_of, Server};
use serde_json::{json, Value};

/// `augur serve --backend none`: the trace slices these tests send lie ahead of the
/// simulator's clock, which `--backend sim` refuses.
fn start(data_dir: &Path) -> Server {
    start_with(data_dir, &["--backend", "none"])
}

fn start_with(data_dir: &Path, extra: &[&str]) -> Server {
    let addr = free_addr();
    let child = augur()
        .args(["serve", "--addr", &addr.to_string(), "--data-dir"])
        .arg(data_dir)
        .args(["--trees", "10", "--bootstrap-limit", "3000"])
        .args(extra)
        .env_remove("AUGUR_SERVE_TOKEN")
        .env("AUGUR_LOG", "warn")
        .current_dir(data_dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start augur serve");
    let server = Server {
        child,
        addr,
        data: None,
    };
    // wait until it answers and its models are loaded (trained at first start)
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        if let Ok((200, _)) = http(addr, "GET", "/readyz", None, None) {
            return server;
        }
        assert!(Instant::now() < deadline, "augur serve did not get ready");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn philly_jobs() -> Vec<JobRecord> {
    let (table, _) = Dataset::Philly.load(&ReadOptions::default()).unwrap();
    let mut jobs = table.to_records().unwrap();
    jobs.sort_by(|a, b| a.submit_time.total_cmp(&b.submit_time));
    jobs
}

fn submit_event(j: &JobRecord) -> Value {
    json!({
        "type": "job_submitted", "job_id": j.job_id, "at": j.submit_time,
        "profile": { "num_gpus": j.num_gpus, "user": j.user, "group": j.group, "cluster": j.cluster }
    })
}

fn finish_event(j: &JobRecord) -> Value {
    let end = j.submit_time + j.duration.unwrap_or(0.0);
    json!({
        "type": "job_finished", "job_id": j.job_id, "at": end,
        "status": j.status.as_str(), "duration": j.duration
    })
}

/// Every stored event's job id, paging through `GET /v1/events`.
fn stored_job_ids(addr: SocketAddr) -> (usize, HashSet<String>) {
    let mut after = 0;
    let mut ids = HashSet::new();
    let mut n = 0;
    loop {
        let (st, body) = http(
            addr,
            "GET",
            &format!("/v1/events?after={after}&limit=10000"),
            None,
            None,
        )
        .unwrap();
        assert_eq!(st, 200, "{body}");
        let v = json_of(&body);
        let evs = v["events"].as_array().unwrap();
        if evs.is_empty() {
            return (n, ids);
        }
        for e in evs {
            n += 1;
            if let Some(id) = e["event"]["job_id"].as_str() {
                ids.insert(id.to_string());
            }
        }
        after = v["next_after"].as_i64().unwrap();
    }
}

#[test]
fn serve_ingests_a_real_trace_predicts_and_loses_nothing_acknowledged_when_killed() {
    let dir = tempfile::tempdir().unwrap();
    let jobs = philly_jobs();
    let slice = &jobs[3000..3400];

    let server = start(dir.path());
    let addr = server.addr;
    // the generated token is owner-only in the data folder
    let token_path = dir.path().join("auth-token");
    let token = std::fs::read_to_string(&token_path)
        .unwrap()
        .trim()
        .to_string();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&token_path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    assert_eq!(http(addr, "GET", "/healthz", None, None).unwrap().0, 200);

    // ingest: without the token 401, with it every batch is acknowledged
    let batch = json!({ "events": slice.iter().map(submit_event).collect::<Vec<_>>() }).to_string();
    let (st, _) = http(addr, "POST", "/v1/events/batch", Some(&batch), None).unwrap();
    assert_eq!(st, 401);
    let (st, body) = http(addr, "POST", "/v1/events/batch", Some(&batch), Some(&token)).unwrap();
    assert_eq!(st, 200, "{body}");
    assert_eq!(json_of(&body)["count"], 400);
    let finishes =
        json!({ "events": slice[..200].iter().map(finish_event).collect::<Vec<_>>() }).to_string();
    let (st, body) = http(
        addr,
        "POST",
        "/v1/events/batch",
        Some(&finishes),
        Some(&token),
    )
    .unwrap();
    assert_eq!(st, 200, "{body}");

    // predictions: model version and interval
    let req = json!({ "job": { "profile": { "num_gpus": 8, "user": slice[0].user } } }).to_string();
    let (st, body) = http(addr, "POST", "/v1/predict/runtime", Some(&req), None).unwrap();
    assert_eq!(st, 200, "{body}");
    let v = json_of(&body);
    assert_eq!(v["model_version"], 1, "{v}");
    let p = &v["prediction"];
    assert!(p["lower"].as_f64().unwrap() <= p["seconds"].as_f64().unwrap());
    assert!(p["seconds"].as_f64().unwrap() <= p["upper"].as_f64().unwrap());
    // a job the service saw submitted and finish
    let (st, body) = http(
        addr,
        "GET",
        &format!("/v1/jobs/{}", slice[0].job_id),
        None,
        None,
    )
    .unwrap();
    assert_eq!(st, 200, "{body}");
    let v = json_of(&body);
    assert_eq!(v["phase"], "finished");
    assert!(
        v["job"]["runtime_at_submit"]["seconds"].as_f64().is_some(),
        "{v}"
    );
    // a running one has an ETA to finish
    let (st, body) = http(
        addr,
        "GET",
        &format!("/v1/jobs/{}", slice[300].job_id),
        None,
        None,
    )
    .unwrap();
    assert_eq!(st, 200, "{body}");
    assert_eq!(json_of(&body)["phase"], "queued");
    // Prometheus metrics
    let (st, body) = http(addr, "GET", "/metrics", None, None).unwrap();
    assert_eq!(st, 200, "{body}");
    assert!(body.contains("# TYPE"), "{body}");
    let build = format!(
        "augur_build_info{{version=\"{}\"}} 1",
        env!("CARGO_PKG_VERSION")
    );
    assert!(body.contains(&build), "{body}");
    let rss: f64 = body
        .lines()
        .find_map(|l| l.strip_prefix("process_resident_memory_bytes "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no process_resident_memory_bytes in {body}"));
    assert!(rss > 1e6, "resident memory {rss}");
    assert!(body.contains("process_cpu_seconds_total "), "{body}");
    assert_eq!(body.matches("# EOF").count(), 1, "{body}");

    // kill -9 under concurrent ingest: every acknowledged event must survive
    let acked = Arc::new(Mutex::new(Vec::<String>::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    for w in 0..4 {
        let (acked, stop, token) = (acked.clone(), stop.clone(), token.clone());
        writers.push(std::thread::spawn(move || {
            let mut i = 0;
            while !stop.load(Ordering::SeqCst) {
                let ids: Vec<String> = (0..3).map(|k| format!("load-{w}-{i}-{k}")).collect();
                let events: Vec<Value> = ids
                    .iter()
                    .map(|id| json!({ "type": "job_submitted", "job_id": id, "at": 1.0e9 + i as f64, "profile": { "num_gpus": 1 } }))
                    .collect();
                let body = json!({ "events": events }).to_string();
                match http(addr, "POST", "/v1/events/batch", Some(&body), Some(&token)) {
                    Ok((200, _)) => acked.lock().unwrap().extend(ids),
                    Ok((st, b)) => panic!("ingest answered {st}: {b}"),
                    Err(_) => return, // the server is gone
                }
                i += 1;
            }
        }));
    }
    // SIGKILL mid-ingest, once a fair number of batches is acknowledged (however slow the
    // machine is)
    let deadline = Instant::now() + Duration::from_secs(120);
    while acked.lock().unwrap().len() <= 60 {
        assert!(
            Instant::now() < deadline,
            "only {} events acknowledged in 120 s",
            acked.lock().unwrap().len()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut server = server;
    server.child.kill().unwrap(); // SIGKILL
    server.child.wait().unwrap();
    stop.store(true, Ordering::SeqCst);
    for w in writers {
        w.join().unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    assert!(
        acked.len() > 30,
        "only {} events acknowledged under load",
        acked.len()
    );
    eprintln!("{} events acknowledged before SIGKILL", acked.len());
    drop(server);

    let server = start(dir.path());
    let (n, ids) = stored_job_ids(server.addr);
    let lost: Vec<&String> = acked.iter().filter(|id| !ids.contains(*id)).collect();
    assert!(
        lost.is_empty(),
        "{} acknowledged events lost, e.g. {:?}",
        lost.len(),
        &lost[..lost.len().min(5)]
    );
    assert!(n >= 600 + acked.len(), "{n} events stored");
    // the restarted service rebuilt its state from the store
    let (st, body) = http(
        server.addr,
        "GET",
        &format!("/v1/jobs/{}", slice[0].job_id),
        None,
        None,
    )
    .unwrap();
    assert_eq!(st, 200, "{body}");
    assert_eq!(json_of(&body)["phase"], "finished");
    let (st, body) = http(
        server.addr,
        "GET",
        &format!("/v1/jobs/{}", acked[acked.len() - 1]),
        None,
        None,
    )
    .unwrap();
    assert_eq!(st, 200, "{body}");
}

#[test]
fn serve_shuts_down_gracefully_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    // a configured token: no token file is written
    let addr = free_addr();
    let child = augur()
        .args(["serve", "--addr", &addr.to_string(), "--data-dir"])
        .arg(dir.path())
        .args(["--trees", "10", "--bootstrap-limit", "3000"])
        .args(["--backend", "none"])
        .env("AUGUR_SERVE_TOKEN", "a-configured-token-123")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    common::wait_started(addr);
    assert!(!dir.path().join("auth-token").exists());
    let ev = json!({ "type": "job_started", "job_id": "x", "at": 1.7e9 }).to_string();
    let (st, _) = http(
        addr,
        "POST",
        "/v1/events",
        Some(&ev),
        Some("a-configured-token-123"),
    )
    .unwrap();
    assert_eq!(st, 200);
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "exit {:?}: {stderr}", out.status);
    assert!(stderr.contains("shutting down"), "{stderr}");
    assert!(stderr.contains("stopped"), "{stderr}");
}

/// `--backend none` is a prediction service fed only by its API: after several seconds its
/// store holds exactly the one event the test sent (no simulated job), and the folder then
/// belongs to `none`: a start with the simulator on it is refused, naming both backends.
#[test]
fn backend_none_stores_only_api_events_and_its_folder_refuses_the_simulator() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_with(dir.path(), &["--backend", "none"]);
    let token = std::fs::read_to_string(dir.path().join("auth-token")).unwrap();
    let event = json!({"type": "job_submitted", "job_id": "mine-1", "at": 1.7e9,
        "profile": {"num_gpus": 8, "user": "alice"}});
    let (st, body) = http(
        server.addr,
        "POST",
        "/v1/events",
        Some(&event.to_string()),
        Some(token.trim()),
    )
    .unwrap();
    assert_eq!(st, 200, "{body}");
    std::thread::sleep(Duration::from_secs(3));
    let (n, ids) = stored_job_ids(server.addr);
    assert_eq!(n, 1, "only the API's event is stored: {ids:?}");
    assert!(ids.contains("mine-1"));
    let cluster = common::get_json(server.addr, "/v1/cluster");
    assert!(cluster.to_string().contains("none"), "{cluster}");
    drop(server);
    let out = augur()
        .args([
            "serve",
            "--backend",
            "sim",
            "--addr",
            &free_addr().to_string(),
        ])
        .arg("--data-dir")
        .arg(dir.path())
        .env_remove("AUGUR_SERVE_TOKEN")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "a sim start on a none folder must fail"
    );
    assert!(
        err.contains("belongs to backend `none`") && err.contains("not to backend `sim`"),
        "{err}"
    );
}
