//! End-to-end high availability: two real `augur serve --backend kubernetes` replicas share
//! one event log on a real PostgreSQL 15 (started here, in a temp folder) and watch the
//! wire-level fake Kubernetes API. Both answer the same prediction for a job ingested through
//! one of them; the cluster's lifecycle lands in the shared log once; SIGKILL on the leader
//! makes the other take the Lease within one lease duration (plus one retry period) and act;
//! every event acknowledged before the kill is readable on the survivor.

mod common;

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use augur_kube_fake::*;
use augur_test_fixtures::postgres::TestPostgres;
use common::{free_addr, http, json_of, wait_for, DATA};
use serde_json::{json, Value};

const TOKEN: &str = "ha-test-token-0123456789";
/// The Lease's duration and the candidates' retry period (client-go's defaults, which the
/// service uses).
const LEASE_S: f64 = 15.0;
const RETRY_S: f64 = 2.0;

struct Replica {
    name: &'static str,
    child: Child,
    addr: SocketAddr,
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

fn get(addr: SocketAddr, path: &str) -> Option<Value> {
    match http(addr, "GET", path, None, None) {
        Ok((200, body)) => serde_json::from_str(&body).ok(),
        _ => None,
    }
}

/// One replica: its own data folder (models, trained at first start), the shared kubeconfig
/// (the same cluster identity) and the shared store.
fn start(
    name: &'static str,
    dir: &std::path::Path,
    kubeconfig: &std::path::Path,
    store: &str,
) -> Replica {
    let addr = free_addr();
    let child = Command::new(env!("CARGO_BIN_EXE_augur"))
        .args(["serve", "--addr", &addr.to_string(), "--data-dir"])
        .arg(dir.join(name))
        .args(["--trees", "10", "--bootstrap-limit", "3000"])
        .args([
            "--backend",
            "kubernetes",
            "--namespace",
            "ml",
            "--kubeconfig",
        ])
        .arg(kubeconfig)
        .args(["--store", store])
        .env("AUGUR_DATA_DIR", DATA)
        .env("AUGUR_SERVE_TOKEN", TOKEN)
        .env("POD_NAME", name)
        .env("POD_NAMESPACE", "augur-system")
        .env("AUGUR_LOG", "warn")
        .env_remove("KUBECONFIG")
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start augur serve");
    Replica { name, child, addr }
}

/// Two 8-GPU nodes; elastic job `a` [2, 8] running 2 workers; job `c` finished.
fn seed(api: &FakeApi) {
    let t = now();
    api.put(NODES, node("n0", 8, "NVIDIA-A100-SXM4-80GB", "a", true));
    api.put(NODES, node("n1", 8, "NVIDIA-A100-SXM4-80GB", "a", true));
    let mut a = pytorchjob("ml", "a", 2, 1, Some((2, 8)), t - 6.0 * 3600.0);
    set_started(&mut a, t - 6.0 * 3600.0, 2);
    api.put(JOBS, a);
    api.put(PODS, worker_pod("ml", "a", 0, 1, Some("n0")));
    api.put(PODS, worker_pod("ml", "a", 1, 1, Some("n0")));
    let mut c = pytorchjob("ml", "c", 1, 1, None, t - 3.0 * 3600.0);
    set_started(&mut c, t - 3.0 * 3600.0, 1);
    set_succeeded(&mut c, t - 3600.0);
    api.put(JOBS, c);
}

fn post_event(addr: SocketAddr, event: &Value) -> Option<i64> {
    let (status, body) = http(
        addr,
        "POST",
        "/v1/events",
        Some(&event.to_string()),
        Some(TOKEN),
    )
    .ok()?;
    (status == 200).then(|| json_of(&body)["seq"].as_i64())?
}

/// Every stored event on `addr`, paging through `GET /v1/events`.
fn all_events(addr: SocketAddr) -> Vec<Value> {
    let mut out = Vec::new();
    let mut after = 0;
    loop {
        let page = get(addr, &format!("/v1/events?after={after}&limit=10000")).expect("events");
        let events = page["events"].as_array().unwrap().clone();
        if events.is_empty() {
            return out;
        }
        after = events.last().unwrap()["seq"].as_i64().unwrap();
        out.extend(events);
    }
}

fn holder(api: &FakeApi) -> Option<String> {
    api.get(LEASES, "augur-system", "augur-controller")?["spec"]["holderIdentity"]
        .as_str()
        .map(str::to_string)
}

#[test]
fn two_replicas_on_one_postgres_share_state_and_fail_over_without_losing_events() {
    let Some(pg) = TestPostgres::start("serve_ha") else {
        return;
    };
    let store = pg.url("postgres");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let api = rt.block_on(FakeApi::start(&[EVENTS]));
    seed(&api);
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    common::write_kubeconfig(&kubeconfig, api.addr);
    let mut replicas = vec![
        start("augur-a", dir.path(), &kubeconfig, &store),
        start("augur-b", dir.path(), &kubeconfig, &store),
    ];
    for r in &replicas {
        wait_for(&format!("{} ready", r.name), 600, || {
            matches!(http(r.addr, "GET", "/readyz", None, None), Ok((200, _))).then_some(())
        });
    }
    let leader_name = wait_for("the lease", 60, || holder(&api));
    let (li, fi) = if leader_name == "augur-a" {
        (0, 1)
    } else {
        (1, 0)
    };
    let (leader, follower) = (replicas[li].addr, replicas[fi].addr);

    // a job ingested through the follower is answered alike by both replicas
    let t = now();
    let submit = json!({
        "type": "job_submitted", "job_id": "api/j1", "at": t - 60.0,
        "profile": { "num_gpus": 8, "user": "alice", "group": "vc1" }
    });
    let seq = post_event(follower, &submit).expect("submit acknowledged");
    let view = |addr| {
        wait_for("api/j1 on a replica", 30, || {
            get(addr, "/v1/jobs/api%2Fj1").filter(|v| v["job"]["runtime_at_submit"].is_object())
        })
    };
    let (on_f, on_l) = (view(follower), view(leader));
    assert_eq!(
        on_f["job"]["runtime_at_submit"], on_l["job"]["runtime_at_submit"],
        "the same answer at submit on both replicas"
    );
    let ask = json!({"job": {"profile": {"num_gpus": 8, "user": "alice", "group": "vc1"}}});
    let predict = |addr| {
        let (st, body) = http(
            addr,
            "POST",
            "/v1/predict/runtime",
            Some(&ask.to_string()),
            None,
        )
        .expect("predict");
        assert_eq!(st, 200, "{body}");
        json_of(&body)
    };
    assert_eq!(predict(follower), predict(leader));

    // the cluster's lifecycle is in the shared log once, although both replicas watch it
    wait_for("ml/c finished in the log", 60, || {
        all_events(follower)
            .iter()
            .any(|e| e["event"]["type"] == "job_finished" && e["event"]["job_id"] == "ml/c")
            .then_some(())
    });
    // the leader acts: `a` grows onto the idle GPUs
    wait_for("the leader's /scale", 120, || {
        (!api.requests_to("/pytorchjobs/a/scale").is_empty()).then_some(())
    });

    // a stream of events into the leader; SIGKILL it in the middle
    let acked: Arc<Mutex<Vec<i64>>> = Arc::new(Mutex::new(vec![seq]));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (acked, stop) = (acked.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut i = 0;
            while !stop.load(Ordering::SeqCst) {
                let ev = json!({"type": "job_started", "job_id": format!("api/s{i}"), "at": now() - 1.0});
                let sub = json!({"type": "job_submitted", "job_id": format!("api/s{i}"), "at": now() - 2.0,
                    "profile": {"num_gpus": 1}});
                for e in [sub, ev] {
                    if let Some(s) = post_event(leader, &e) {
                        acked.lock().unwrap().push(s);
                    }
                }
                i += 1;
            }
        })
    };
    wait_for("a few acknowledged events", 30, || {
        (acked.lock().unwrap().len() > 200).then_some(())
    });
    let requests_at_kill = api.requests().len();
    let killed_at = Instant::now();
    replicas[li].child.kill().expect("SIGKILL the leader");
    let _ = replicas[li].child.wait();
    stop.store(true, Ordering::SeqCst);
    writer.join().unwrap();
    let survivor = &replicas[fi];

    // the survivor takes the lease within one lease duration (plus its retry period)
    wait_for("the survivor's lease", 60, || {
        (holder(&api).as_deref() == Some(survivor.name)).then_some(())
    });
    let failover = killed_at.elapsed().as_secs_f64();
    eprintln!("serve_ha: failover (SIGKILL to lease taken over) took {failover:.1} s");
    assert!(
        failover <= LEASE_S + RETRY_S,
        "failover took {failover:.1} s"
    );
    // and acts: a job that can grow appears; only the survivor can patch it
    let t = now() - 3600.0;
    let mut b = pytorchjob("ml", "b", 1, 1, Some((1, 8)), t);
    set_started(&mut b, t, 1);
    api.put(JOBS, b);
    api.put(PODS, worker_pod("ml", "b", 0, 1, Some("n1")));
    wait_for("the survivor's /scale of b", 120, || {
        (!api.requests_to("/pytorchjobs/b/scale").is_empty()).then_some(())
    });
    let acted = killed_at.elapsed().as_secs_f64();
    eprintln!("serve_ha: the survivor acted {acted:.1} s after the kill");
    assert!(api.requests().len() > requests_at_kill);
    let cluster = get(survivor.addr, "/v1/cluster").expect("cluster");
    assert_eq!(cluster["leader"], true, "{cluster}");

    // every event acknowledged before the kill is on the survivor
    let log = all_events(survivor.addr);
    let stored: std::collections::HashSet<i64> =
        log.iter().map(|e| e["seq"].as_i64().unwrap()).collect();
    let acked = acked.lock().unwrap().clone();
    let lost: Vec<i64> = acked
        .iter()
        .filter(|s| !stored.contains(s))
        .copied()
        .collect();
    assert!(lost.is_empty(), "acknowledged events lost: {lost:?}");
    eprintln!("serve_ha: {} acknowledged events, 0 lost", acked.len());
    // the log has no gaps and each cluster fact once: the new leader did not ingest again
    let seqs: Vec<i64> = log.iter().map(|e| e["seq"].as_i64().unwrap()).collect();
    assert_eq!(seqs, (1..=seqs.len() as i64).collect::<Vec<_>>());
    for (kind, job) in [
        ("job_submitted", "ml/a"),
        ("job_started", "ml/a"),
        ("job_submitted", "ml/c"),
        ("job_finished", "ml/c"),
    ] {
        let n = log
            .iter()
            .filter(|e| e["event"]["type"] == kind && e["event"]["job_id"] == job)
            .count();
        assert_eq!(n, 1, "{kind} {job} in the shared log {n} times");
    }
    wait_for("ml/b's submit in the log", 60, || {
        all_events(survivor.addr)
            .iter()
            .any(|e| e["event"]["type"] == "job_submitted" && e["event"]["job_id"] == "ml/b")
            .then_some(())
    });
    drop(replicas);
    drop(rt);
}
