//! End-to-end: the real `augur serve --backend kubernetes` binary against the wire-level fake
//! Kubernetes API server (the augur-kube-fake crate), through a kubeconfig file. It
//! takes the lease, watches the cluster, ingests the jobs' lifecycle into its event store (the
//! same path as the HTTP API), and its elastic controller grows an elastic PyTorchJob onto
//! idle GPUs through `/scale`, inside the job's bounds. The controller is the same live loop
//! as the simulator's: `/v1/cluster` and `/v1/autoscaler/decisions` describe the fake cluster
//! and `POST /v1/autoscaler/pause` stops its patches.

mod common;

use augur_kube_fake as kubernetes_fake;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{wait_for, DATA};
use kubernetes_fake::*;
use serde_json::{json, Value};

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn get(addr: SocketAddr, path: &str) -> Option<(u16, String)> {
    request(addr, "GET", path, None)
}

fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    token: Option<&str>,
) -> Option<(u16, String)> {
    request_with_body(addr, method, path, token, "")
}

fn request_with_body(
    addr: SocketAddr,
    method: &str,
    path: &str,
    token: Option<&str>,
    json_body: &str,
) -> Option<(u16, String)> {
    let auth = token.map_or_else(String::new, |t| format!("Authorization: Bearer {t}\r\n"));
    let content_type = if json_body.is_empty() {
        ""
    } else {
        "Content-Type: application/json\r\n"
    };
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{auth}{content_type}Content-Length: {}\r\nConnection: close\r\n\r\n{json_body}",
        json_body.len()
    )
    .ok()?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).ok()?;
    let text = String::from_utf8_lossy(&raw).to_string();
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, body.to_string()))
}

/// Two 8-GPU nodes; elastic job `a` [2, 8] running 2 workers for 6 h (predicted 20 h); job
/// `c` finished an hour ago.
fn seed(api: &FakeApi) {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    api.put(NODES, node("n0", 8, "NVIDIA-A100-SXM4-80GB", "a", true));
    api.put(NODES, node("n1", 8, "NVIDIA-A100-SXM4-80GB", "a", true));
    let mut a = pytorchjob("ml", "a", 2, 1, Some((2, 8)), now - 6.0 * 3600.0);
    set_started(&mut a, now - 6.0 * 3600.0, 2);
    a["metadata"]["annotations"] = json!({ "augur.dev/predicted-runtime-s": "72000" });
    api.put(JOBS, a);
    api.put(PODS, worker_pod("ml", "a", 0, 1, Some("n0")));
    api.put(PODS, worker_pod("ml", "a", 1, 1, Some("n0")));
    let mut c = pytorchjob("ml", "c", 1, 1, None, now - 3.0 * 3600.0);
    set_started(&mut c, now - 3.0 * 3600.0, 1);
    set_succeeded(&mut c, now - 3600.0);
    api.put(JOBS, c);
}

/// `augur serve --backend kubernetes` on a free port, pointed at the fake API.
fn start(api: &FakeApi, dir: &std::path::Path, extra: &[&str]) -> (Server, SocketAddr) {
    start_at(api.addr, dir, extra)
}

/// [`start`] with the kubeconfig naming the API server at `api_addr`.
fn start_at(api_addr: SocketAddr, dir: &std::path::Path, extra: &[&str]) -> (Server, SocketAddr) {
    let kubeconfig = dir.join("kubeconfig");
    common::write_kubeconfig(&kubeconfig, api_addr);
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let server = Server(
        Command::new(env!("CARGO_BIN_EXE_augur"))
            .args(["serve", "--addr", &addr.to_string(), "--data-dir"])
            .arg(dir.join("data"))
            .args(["--trees", "10", "--bootstrap-limit", "3000"])
            .args([
                "--backend",
                "kubernetes",
                "--namespace",
                "ml",
                "--kubeconfig",
            ])
            .arg(&kubeconfig)
            .args(extra)
            .env("AUGUR_DATA_DIR", DATA)
            .env("POD_NAME", "augur-e2e")
            .env("POD_NAMESPACE", "augur-system")
            .env("AUGUR_LOG", "warn")
            .env_remove("AUGUR_SERVE_TOKEN")
            .env_remove("KUBECONFIG")
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start augur serve"),
    );
    (server, addr)
}

const SET_WORKERS_IDLE: &str =
    r#"augur_controller_actions_total{action="set_workers",reason="idle_gpus",outcome="#;

#[test]
fn serve_with_the_kubernetes_backend_leads_ingests_scales_and_writes_predictions_back() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let api = rt.block_on(FakeApi::start(&[EVENTS]));
    seed(&api);
    let dir = tempfile::tempdir().unwrap();
    let (_server, addr) = start(&api, dir.path(), &[]);

    // it takes the lease
    let lease = wait_for("the lease", 120, || {
        api.get(LEASES, "augur-system", "augur-controller")
    });
    assert_eq!(lease["spec"]["holderIdentity"], "augur-e2e");

    // it grows `a` onto the idle GPUs through /scale, inside [2, 8]
    let patch = wait_for("a /scale patch", 120, || {
        api.requests()
            .into_iter()
            .find(|r| r.method == "PATCH" && r.path.ends_with("/pytorchjobs/a/scale"))
    });
    assert_eq!(
        patch.path,
        "/apis/kubeflow.org/v1/namespaces/ml/pytorchjobs/a/scale"
    );
    let replicas = patch.body.as_ref().unwrap()["spec"]["replicas"]
        .as_u64()
        .unwrap();
    assert!((3..=8).contains(&replicas), "patched to {replicas}");
    let job = api.get(JOBS, "ml", "a").unwrap();
    assert_eq!(
        job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"],
        json!(replicas)
    );
    // the scaling decision is an Event on the job (kubectl describe)
    let event = wait_for("the decision's Event", 60, || {
        api.list(EVENTS)
            .into_iter()
            .find(|e| e["involvedObject"]["name"] == "a")
    });
    assert_eq!(event["reason"], "AugurScaled", "{event}");
    assert_eq!(event["involvedObject"]["kind"], "PyTorchJob");
    assert!(
        event["message"].as_str().unwrap().contains("idle_gpus"),
        "{event}"
    );
    // the predictions are annotations on the running job
    let annotations = wait_for("predictions written onto ml/a", 60, || {
        let a = api.get(JOBS, "ml", "a")?["metadata"]["annotations"].clone();
        a.get("predicted.augur.dev/runtime-s")
            .is_some()
            .then_some(a)
    });
    let runtime: f64 = annotations["predicted.augur.dev/runtime-s"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(runtime > 0.0, "{annotations}");
    assert!(
        annotations["predicted.augur.dev/eta"].is_string(),
        "{annotations}"
    );
    assert!(
        annotations["predicted.augur.dev/model-versions"]
            .as_str()
            .unwrap()
            .starts_with("runtime="),
        "{annotations}"
    );
    // the user's own annotation is kept
    assert_eq!(annotations["augur.dev/predicted-runtime-s"], "72000");
    // nothing but /scale, the lease, annotations and Events was written
    for r in api.requests() {
        match r.method.as_str() {
            "GET" => {}
            "PATCH" if r.path.ends_with("/scale") => {}
            "PATCH" => {
                let body = r.body.as_ref().unwrap();
                assert_eq!(
                    body.as_object().unwrap().keys().collect::<Vec<_>>(),
                    ["metadata"],
                    "{} {body}",
                    r.path
                );
                assert_eq!(
                    body["metadata"]
                        .as_object()
                        .unwrap()
                        .keys()
                        .collect::<Vec<_>>(),
                    ["annotations"],
                    "{} {body}",
                    r.path
                );
            }
            _ => assert!(
                r.path.contains("/leases") || r.path.ends_with("/events"),
                "{} {}",
                r.method,
                r.path
            ),
        }
    }

    // the lifecycle went into the event store like the HTTP API's events
    let job_state = |id: &str| -> Option<Value> {
        let (status, body) = get(addr, &format!("/v1/jobs/{id}"))?;
        (status == 200)
            .then(|| serde_json::from_str(&body).ok())
            .flatten()
    };
    let a = wait_for("job ml/a ingested", 60, || job_state("ml%2Fa"));
    assert_eq!(a["phase"], "running", "{a}");
    let c = wait_for("job ml/c ingested", 60, || job_state("ml%2Fc"));
    assert_eq!(c["phase"], "finished", "{c}");
    // and the action is on /metrics
    let metrics = wait_for("the action on /metrics", 60, || {
        let (_, body) = get(addr, "/metrics")?;
        body.contains(&format!(r#"{SET_WORKERS_IDLE}"applied"}}"#))
            .then_some(body)
    });
    assert!(metrics.contains("augur_cluster_running_jobs"));
    drop(rt);
}

#[test]
fn serve_in_dry_run_decides_and_counts_but_never_patches() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let api = rt.block_on(FakeApi::start(&[]));
    seed(&api);
    let dir = tempfile::tempdir().unwrap();
    let (_server, addr) = start(&api, dir.path(), &["--dry-run"]);
    wait_for("the dry-run decision on /metrics", 120, || {
        let (_, body) = get(addr, "/metrics")?;
        body.contains(&format!(r#"{SET_WORKERS_IDLE}"dry_run"}}"#))
            .then_some(())
    });
    assert!(
        api.requests()
            .iter()
            .all(|r| r.method == "GET" || r.path.contains("/leases")),
        "dry-run wrote to the cluster"
    );
    // --dry-run is a hard guarantee: even with the token, the endpoint cannot turn it off
    let token = std::fs::read_to_string(dir.path().join("data").join("auth-token"))
        .expect("the generated token");
    let (status, body) = request_with_body(
        addr,
        "POST",
        "/v1/autoscaler/dry-run",
        Some(token.trim()),
        r#"{"enabled": false}"#,
    )
    .expect("dry-run switch");
    assert_eq!(status, 409, "{body}");
    assert!(body.contains("--dry-run"), "{body}");
    let (status, body) = request_with_body(
        addr,
        "POST",
        "/v1/autoscaler/dry-run",
        Some(token.trim()),
        r#"{"enabled": true}"#,
    )
    .expect("dry-run switch");
    assert_eq!(status, 200, "{body}");
    // the controller decides again after the refused switch (a dry run still), and nothing
    // was written
    let dry_runs = || -> Option<f64> {
        let (_, body) = get(addr, "/metrics")?;
        let name = format!(r#"{SET_WORKERS_IDLE}"dry_run"}} "#);
        body.lines()
            .find_map(|l| l.strip_prefix(name.as_str()))
            .and_then(|v| v.trim().parse().ok())
    };
    let before = dry_runs().expect("the dry-run decisions on /metrics");
    wait_for("another dry-run decision after the switch", 120, || {
        (dry_runs()? > before).then_some(())
    });
    assert!(
        api.requests()
            .iter()
            .all(|r| r.method == "GET" || r.path.contains("/leases")),
        "dry-run wrote to the cluster after the switch was refused"
    );
    let job = api.get(JOBS, "ml", "a").unwrap();
    assert_eq!(
        job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"],
        json!(2)
    );
    drop(rt);
}

fn get_json(addr: SocketAddr, path: &str) -> Option<Value> {
    let (status, body) = get(addr, path)?;
    (status == 200)
        .then(|| serde_json::from_str(&body).ok())
        .flatten()
}

fn scale_patches(api: &FakeApi) -> Vec<Request> {
    api.requests()
        .into_iter()
        .filter(|r| r.method == "PATCH" && r.path.ends_with("/scale"))
        .collect()
}

#[test]
fn serve_on_kubernetes_reports_the_cluster_and_decisions_and_pause_stops_patches() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let api = rt.block_on(FakeApi::start(&[]));
    seed(&api);
    let dir = tempfile::tempdir().unwrap();
    let (_server, addr) = start(&api, dir.path(), &[]);

    // the first decision grows `a` through /scale
    let first = wait_for("a /scale patch", 120, || {
        scale_patches(&api)
            .into_iter()
            .find(|r| r.path.ends_with("/pytorchjobs/a/scale"))
    });
    let grown = first.body.as_ref().unwrap()["spec"]["replicas"]
        .as_u64()
        .unwrap() as u32;

    // /v1/cluster: the fake cluster (two 8-GPU nodes, `a` running on 2 bound GPUs, no queue)
    let c = wait_for("the kubernetes cluster on /v1/cluster", 60, || {
        get_json(addr, "/v1/cluster").filter(|c| c["backend"] == "kubernetes")
    });
    assert_eq!(c["controller"]["status"], "running", "{c}");
    assert_eq!(c["controller"]["paused"], false, "{c}");
    assert_eq!(c["leader"], true, "{c}");
    assert_eq!(c["watches_synced"], true, "{c}");
    assert_eq!(c["namespace"], "ml", "{c}");
    let now = &c["now"];
    assert_eq!(now["healthy_gpus"], 16, "{c}");
    assert_eq!(now["busy_gpus"], 2, "{c}");
    assert_eq!(now["running"], 1, "{c}");
    assert_eq!(now["queued"], 0, "{c}");
    assert_eq!(now["queued_gpus"], 0, "{c}");
    let wall = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let t = now["time"].as_f64().unwrap();
    assert!(
        (wall - t).abs() < 120.0,
        "the kube clock is wall time: {t} vs {wall}"
    );

    // /v1/autoscaler/decisions: the grow, with its reason and outcome
    let d = get_json(addr, "/v1/autoscaler/decisions").expect("decisions");
    let grow = d["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["action"] == "set_workers" && x["workers"] == grown)
        .unwrap_or_else(|| panic!("no set_workers to {grown} in {d}"))
        .clone();
    assert_eq!(grow["reason"], "idle_gpus", "{grow}");
    assert_eq!(grow["job_name"], "ml/a", "{grow}");
    // the decision names the job by the id the API takes
    assert_eq!(grow["job_id"], "ml/a", "{grow}");
    let job = get_json(addr, "/v1/jobs/ml%2Fa").expect("the decided job");
    assert_eq!(job["job"]["job_id"], "ml/a", "{job}");
    assert!(grow["idle_gpus"].as_u64().unwrap() > 0, "{grow}");
    assert_eq!(grow["outcome"], "applied", "{grow}");
    assert!(grow["error"].is_null(), "{grow}");
    assert!(
        d["totals"]
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x["action"] == "set_workers"
                && x["reason"] == "idle_gpus"
                && x["outcome"] == "applied"
                && x["count"].as_u64() >= Some(1)),
        "{d}"
    );

    // pause (with the token generated in the data folder): no further /scale patch, although
    // there is something to do
    let token = std::fs::read_to_string(dir.path().join("data").join("auth-token"))
        .expect("the generated token");
    let token = Some(token.trim());
    let (status, _) = request(addr, "POST", "/v1/autoscaler/pause", None).expect("pause");
    assert_eq!(status, 401, "pause without the token");
    let (status, body) = request(addr, "POST", "/v1/autoscaler/pause", token).expect("pause");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(r#""paused":true"#), "{body}");
    let patches_at_pause = scale_patches(&api).len();
    let seq_at_pause =
        get_json(addr, "/v1/autoscaler/decisions?limit=1").unwrap()["decisions"][0]["seq"].clone();
    // the cluster's operator starts `a`'s new workers on n0, and an elastic job `b` [1, 8]
    // starts with 1 worker on n1: idle GPUs and a job that can grow (`a` is in its cooldown)
    for i in 2..grown {
        api.put(PODS, worker_pod("ml", "a", i, 1, Some("n0")));
    }
    let started = wall - 6.0 * 3600.0;
    let mut b = pytorchjob("ml", "b", 1, 1, Some((1, 8)), started);
    set_started(&mut b, started, 1);
    b["metadata"]["annotations"] = json!({ "augur.dev/predicted-runtime-s": "72000" });
    api.put(JOBS, b);
    api.put(PODS, worker_pod("ml", "b", 0, 1, Some("n1")));
    let seen = wait_for("`b` on /v1/cluster", 60, || {
        get_json(addr, "/v1/cluster")
            .filter(|c| c["now"]["running"] == 2 && c["now"]["busy_gpus"] == json!(grown + 1))
    });
    assert_eq!(seen["controller"]["paused"], true);
    // a few more ticks (one a second) in which an acting loop would have grown `b`
    let ticks = seen["ticks"].as_u64().unwrap();
    wait_for("three more ticks", 30, || {
        get_json(addr, "/v1/cluster").filter(|c| c["ticks"].as_u64() >= Some(ticks + 3))
    });
    assert_eq!(
        scale_patches(&api).len(),
        patches_at_pause,
        "patched while paused: {:?}",
        scale_patches(&api)
    );
    assert!(api.requests_to("/pytorchjobs/b/scale").is_empty());
    assert_eq!(
        get_json(addr, "/v1/autoscaler/decisions?limit=1").unwrap()["decisions"][0]["seq"],
        seq_at_pause,
        "decided while paused"
    );

    // resume: the loop grows `b` (so the pause was what held it)
    let (status, body) = request(addr, "POST", "/v1/autoscaler/resume", token).expect("resume");
    assert_eq!(status, 200, "{body}");
    let patch_b = wait_for("b /scale patch after resume", 60, || {
        scale_patches(&api)
            .into_iter()
            .find(|r| r.path.ends_with("/pytorchjobs/b/scale"))
    });
    let to = patch_b.body.as_ref().unwrap()["spec"]["replicas"]
        .as_u64()
        .unwrap();
    assert!((2..=8).contains(&to), "b patched to {to}");
    let d = get_json(addr, "/v1/autoscaler/decisions").unwrap();
    assert!(
        d["decisions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x["action"] == "set_workers"
                && x["workers"] == json!(to)
                && x["reason"] == "idle_gpus"
                && x["outcome"] == "applied"),
        "{d}"
    );
    drop(rt);
}

/// The kubeconfig's API address, held by the test from start to end so that no other
/// process can take the port and answer in the fake API's place. While down, every connection
/// is closed at once, unanswered (the API server is gone); while up, each is forwarded to the
/// fake API at `target`. Going down also cuts every forwarded connection (an API server lost
/// mid-run).
struct Link {
    addr: SocketAddr,
    up: tokio::sync::watch::Sender<bool>,
}

impl Link {
    /// A link on a free loopback port, down.
    fn start(rt: &tokio::runtime::Runtime, target: SocketAddr) -> Link {
        let listener = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .expect("bind the API address");
        let addr = listener.local_addr().expect("the API address");
        let (up, is_up) = tokio::sync::watch::channel(false);
        rt.spawn(async move {
            loop {
                let Ok((mut client, _)) = listener.accept().await else {
                    return;
                };
                if !*is_up.borrow() {
                    drop(client);
                    continue;
                }
                let mut down = is_up.clone();
                tokio::spawn(async move {
                    if let Ok(mut server) = tokio::net::TcpStream::connect(target).await {
                        tokio::select! {
                            _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                            _ = down.wait_for(|up| !*up) => {}
                        }
                    }
                });
            }
        });
        Link { addr, up }
    }

    fn set_up(&self, up: bool) {
        self.up.send_replace(up);
    }
}

/// The API server unreachable when augur starts (the kubeconfig's address closes every
/// connection unanswered; the test holds that port throughout, so nothing else can answer
/// there): `/readyz` answers 503 naming `backend:kubernetes` and `augur_backend_up` reads 0;
/// once the address answers (a proxy to the fake API), the backend is started again on its
/// backoff and `/readyz` turns 200, without restarting augur. The API server lost mid-run
/// (every connection cut, new ones closed unanswered) turns `/readyz` 503 naming the backend
/// again, and its return turns it 200, again without a restart.
#[test]
fn an_api_server_down_at_start_or_lost_mid_run_is_retried_and_readiness_follows_it() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let api = rt.block_on(FakeApi::start(&[]));
    seed(&api);
    let link = Link::start(&rt, api.addr);
    let dir = tempfile::tempdir().unwrap();
    let (_server, addr) = start_at(link.addr, dir.path(), &[]);
    // the runtime model trained, the backend still down
    let body = wait_for("the runtime model", 600, || {
        let (_, body) = get(addr, "/readyz")?;
        let v: Value = serde_json::from_str(&body).ok()?;
        (v["models"]["runtime"].is_u64()).then_some(body)
    });
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["ready"], false, "{body}");
    assert!(
        v["reason"].as_str().unwrap().contains("backend:kubernetes"),
        "{body}"
    );
    let (_, metrics) = get(addr, "/metrics").unwrap();
    assert!(
        metrics.contains("augur_backend_up{backend=\"kubernetes\"} 0"),
        "{metrics}"
    );
    // the API server comes up at the kubeconfig's address
    link.set_up(true);
    wait_for("readiness with the backend up", 180, || {
        let (st, _) = get(addr, "/readyz")?;
        (st == 200).then_some(())
    });
    let (_, metrics) = get(addr, "/metrics").unwrap();
    assert!(
        metrics.contains("augur_backend_up{backend=\"kubernetes\"} 1"),
        "{metrics}"
    );

    // the API server is lost mid-run: readiness names the backend within a minute
    link.set_up(false);
    let lost = Instant::now();
    let body = wait_for("readiness with the API server lost", 60, || {
        let (st, body) = get(addr, "/readyz")?;
        (st == 503).then_some(body)
    });
    let v: Value = serde_json::from_str(&body).unwrap();
    assert!(
        v["reason"].as_str().unwrap().contains("backend:kubernetes"),
        "{body}"
    );
    let (_, metrics) = get(addr, "/metrics").unwrap();
    assert!(
        metrics.contains("augur_backend_up{backend=\"kubernetes\"} 0"),
        "{metrics}"
    );
    eprintln!("API server lost: /readyz 503 after {:?}", lost.elapsed());
    // ... and back: ready again without a restart
    link.set_up(true);
    let back = Instant::now();
    wait_for("readiness with the API server back", 180, || {
        let (st, _) = get(addr, "/readyz")?;
        (st == 200).then_some(())
    });
    eprintln!("API server back: /readyz 200 after {:?}", back.elapsed());
}

/// A queued Kubernetes job whose request is far from its best option: the advisor's option is
/// written onto it (and onto no running job), the option `POST /v1/advise` marks as the
/// earliest finish for the same job.
#[test]
fn a_queued_job_far_from_its_best_option_gets_the_advice_annotation() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let api = rt.block_on(FakeApi::start(&[EVENTS]));
    seed(&api);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    // 2 one-GPU workers, not elastic, queued (no scheduler starts it in the fake)
    api.put(JOBS, pytorchjob("ml", "two", 2, 1, None, now - 60.0));
    let dir = tempfile::tempdir().unwrap();
    // a bootstrap trace with start times, so a queue-wait model is served
    let (_server, addr) = start(&api, dir.path(), &["--bootstrap", "openb"]);
    common::trained(addr, &["runtime", "queue_wait"]);

    let annotations = wait_for("the advice written onto ml/two", 180, || {
        let a = api.get(JOBS, "ml", "two")?["metadata"]["annotations"].clone();
        a.get("predicted.augur.dev/advice").is_some().then_some(a)
    });
    let (status, body) = request_with_body(
        addr,
        "POST",
        "/v1/advise",
        None,
        &json!({ "job": { "job_id": "ml/two" } }).to_string(),
    )
    .unwrap();
    assert_eq!(status, 200, "{body}");
    let advice: Value = serde_json::from_str(&body).unwrap();
    let options = advice["options"].as_array().unwrap();
    assert_eq!(options[0]["gpus"], json!(2.0), "{advice}");
    let best = options
        .iter()
        .find(|o| o["earliest_finish"] == json!(true))
        .expect("an earliest finish");
    let gpus = best["gpus"].as_f64().unwrap();
    assert_ne!(gpus, 2.0, "{advice}");
    assert_eq!(
        annotations["predicted.augur.dev/advice-gpus"],
        json!(format!("{gpus}")),
        "{annotations}"
    );
    let headline = annotations["predicted.augur.dev/advice"].as_str().unwrap();
    assert!(
        headline.starts_with(&format!("{gpus} GPUs: ")) && headline.contains("finishes ~"),
        "{headline}"
    );
    assert!(annotations
        .get("predicted.augur.dev/advice-gpu-type")
        .is_none());
    // the running job is not advised
    let a = api.get(JOBS, "ml", "a").unwrap()["metadata"]["annotations"].clone();
    assert!(a.get("predicted.augur.dev/runtime-s").is_some(), "{a}");
    assert!(a.get("predicted.augur.dev/advice").is_none(), "{a}");
}

/// RFC 7386: `patch` merged into `target` (what the API server does with a merge patch).
fn merge(target: &mut Value, patch: &Value) {
    match (target.as_object_mut(), patch.as_object()) {
        (Some(t), Some(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    merge(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        _ => *target = patch.clone(),
    }
}

/// The GPU product node label.
const PRODUCT_LABEL: &str = "nvidia.com/gpu.product";

/// A history that names a GPU type: `ml/old`, 1 GPU, pinned by its owner to P100s, ran from
/// 5 h to 4 h before `now`.
fn p100_history(api: &FakeApi, now: f64) {
    let mut old = pytorchjob("ml", "old", 1, 1, None, now - 5.0 * 3600.0);
    old["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["nodeSelector"] =
        json!({ PRODUCT_LABEL: "Tesla-P100-PCIE-16GB" });
    set_started(&mut old, now - 5.0 * 3600.0, 1);
    set_succeeded(&mut old, now - 4.0 * 3600.0);
    api.put(JOBS, old);
}

/// A PyTorchJob `ml/{name}` of `workers` one-GPU workers, no type, held suspended (as Kueue
/// holds a queued job).
fn suspended_job(api: &FakeApi, name: &str, workers: u32, created: f64) {
    let mut j = pytorchjob("ml", name, workers, 1, None, created);
    j["spec"]["runPolicy"] = json!({ "suspend": true });
    api.put(JOBS, j);
}

/// A queued job steered to a GPU type: the type reaches the service (`job_typed`), and the
/// run time every endpoint gives for the job — the write-back annotation, `GET /v1/jobs/{id}`
/// (its `runtime` and its ETA), `GET /v1/eta` — is one number, the answer at submit times the
/// measured ratio from the type the history ran on to the steered one, which differs from the
/// unsteered answer.
#[test]
fn a_job_steered_to_a_gpu_type_is_predicted_for_it_alike_on_every_endpoint() {
    use augur_autoscaler::kubernetes::{steer::steer_patch, JobKind};
    use augur_autoscaler::scaling::reshape::{Reshaper, Shape};
    const LABEL: &str = PRODUCT_LABEL;
    const P100: &str = "Tesla-P100-PCIE-16GB";
    const V100: &str = "Tesla-V100-SXM2-32GB";
    let rt = tokio::runtime::Runtime::new().unwrap();
    let api = rt.block_on(FakeApi::start(&[EVENTS]));
    seed(&api);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    // the history names a type: a finished job its owner pinned to P100s
    p100_history(&api, now);
    let dir = tempfile::tempdir().unwrap();
    // a bootstrap trace with start times: a queue-wait model is served, so `/v1/eta` has ends
    let (_server, addr) = start(&api, dir.path(), &["--bootstrap", "openb"]);
    // every history kind served: the jobs below are answered at submit by all of them
    common::trained(addr, common::HISTORY_KINDS);
    // q, submitted once the models are served (its answers at submit are stored): 1 GPU, no
    // type, held suspended (as Kueue holds a queued job)
    suspended_job(&api, "q", 1, now - 60.0);
    let runtime_s = |api: &FakeApi| -> Option<String> {
        api.get(JOBS, "ml", "q")?["metadata"]["annotations"]["predicted.augur.dev/runtime-s"]
            .as_str()
            .map(str::to_string)
    };
    let unsteered = wait_for("q's runtime annotation", 300, || runtime_s(&api));
    let (before, view) = one_runtime(&api, addr, "q", None);
    assert_eq!(unsteered, format!("{before:.0}"), "{view}");
    assert_eq!(view["runtime"], view["job"]["runtime_at_submit"], "{view}");

    // Augur's steer of q to the V100s, as the backend sends it
    let mut obj = api.get(JOBS, "ml", "q").unwrap();
    let reason = r#"{"reason":"type_gain"}"#;
    let patch = steer_patch(JobKind::PyTorchJob, &obj, LABEL, V100, reason).unwrap();
    merge(&mut obj, &patch);
    api.put(JOBS, obj);
    // the type is ingested and the annotation follows (an object is patched at most once a
    // minute)
    let steered = wait_for("q's runtime for the V100s", 240, || {
        runtime_s(&api).filter(|s| *s != unsteered)
    });
    let (after, view) = one_runtime(&api, addr, "q", Some(V100));
    assert_eq!(steered, format!("{after:.0}"), "{view}");
    assert_eq!(view["runtime"], view["job"]["runtime_on_type"], "{view}");
    // the answer at submit times the measured ratio from the history's type (P100)
    let ratio = Reshaper::bundled()
        .expect("the bundled scaling data")
        .ratio(
            Some("q"),
            &Shape {
                gpus: 1.0,
                gpu_type: Some(P100.into()),
            },
            &Shape {
                gpus: 1.0,
                gpu_type: Some(V100.into()),
            },
            &[],
        );
    assert!(ratio.ratio < 0.9, "a V100 is measured faster: {ratio:?}");
    assert!(
        (after / before - ratio.ratio).abs() < 1e-9,
        "{after} / {before} vs {ratio:?}"
    );
}

/// The run time of job `ml/{name}` on every endpoint, once they agree and the job's type is
/// `gpu_type` (`None`: no type): the write-back annotation, `GET /v1/jobs/{id}` (its
/// `runtime` and its ETA's finish − start) and `GET /v1/eta` (end − start), with the job's
/// view.
fn one_runtime(
    api: &FakeApi,
    addr: SocketAddr,
    name: &str,
    gpu_type: Option<&str>,
) -> (f64, Value) {
    let id = format!("ml%2F{name}");
    wait_for(
        &format!("{name}'s run time for {gpu_type:?} on every endpoint"),
        240,
        || {
            let view = get_json(addr, &format!("/v1/jobs/{id}"))?;
            if view["job"]["gpu_type"] != json!(gpu_type) {
                return None;
            }
            let seconds = view["runtime"]["seconds"].as_f64()?;
            let note: f64 = api.get(JOBS, "ml", name)?["metadata"]["annotations"]
                ["predicted.augur.dev/runtime-s"]
                .as_str()?
                .parse()
                .ok()?;
            let by_eta = view["eta"]["finish"].as_f64()? - view["eta"]["start"].as_f64()?;
            let eta = get_json(addr, &format!("/v1/eta?job={id}"))?;
            let e = &eta["jobs"][0];
            let by_list = e["end"].as_f64()? - e["start"].as_f64()?;
            let near = |x: f64| (x - seconds).abs() <= 1e-6 * seconds;
            (note == seconds.round()
                && near(by_eta)
                && near(by_list)
                && e["gpu_type"] == json!(gpu_type))
            .then_some((seconds, view))
        },
    )
}

/// The live controller chooses the GPU type. A cluster of an 8-GPU K80 node and a 4-GPU V100
/// node; two suspended 4-GPU PyTorchJobs queued: `cyclegan-train` (its model runs 8.8x faster
/// on a V100 than on a K80, as Gavel measured it) and `a3c-agent` (2.1x). Only one fits on the
/// V100: the controller gives it to the job that gains most there and steers the other to the
/// K80s — first in dry-run (decided and logged, nothing written), then for real: one merge
/// patch each (the selector on the GPU product label, the type and the reason as
/// annotations), nothing suspended or moved. The run time every endpoint then gives for each
/// job is the advisor's answer for its type, the one the controller planned with: the answer
/// at submit times the measured ratio from the type the history ran on (P100) to its type.
#[test]
fn the_live_controller_steers_queued_jobs_by_their_gain_and_every_endpoint_predicts_for_the_type() {
    use augur_autoscaler::kubernetes::steer::type_reason;
    use augur_autoscaler::scaling::reshape::{Reshaper, Shape};
    use augur_autoscaler::Reason;
    const LABEL: &str = PRODUCT_LABEL;
    const P100: &str = "Tesla-P100-PCIE-16GB";
    const K80: &str = "Tesla-K80";
    const V100: &str = "Tesla-V100-SXM2-32GB";
    let rt = tokio::runtime::Runtime::new().unwrap();
    let api = rt.block_on(FakeApi::start(&[EVENTS]));
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    api.put(NODES, node("k80-0", 8, K80, "a", true));
    api.put(NODES, node("v100-0", 4, V100, "a", true));
    // the history names a type: a finished job its owner pinned to P100s
    p100_history(&api, now);
    let dir = tempfile::tempdir().unwrap();
    let (_server, addr) = start(&api, dir.path(), &["--bootstrap", "openb"]);
    // every history kind served: the jobs below are answered at submit by all of them
    common::trained(addr, common::HISTORY_KINDS);
    let token = std::fs::read_to_string(dir.path().join("data").join("auth-token"))
        .expect("the generated token");
    let token = Some(token.trim());
    let (status, body) = request_with_body(
        addr,
        "POST",
        "/v1/autoscaler/dry-run",
        token,
        r#"{"enabled": true}"#,
    )
    .expect("dry-run on");
    assert_eq!(status, 200, "{body}");

    // the jobs, submitted once the models are served (their answers at submit are stored)
    let names = ["a3c-agent", "cyclegan-train"];
    for name in names {
        suspended_job(&api, name, 4, now - 60.0);
    }
    let rvs: Vec<Value> = names
        .iter()
        .map(|n| api.get(JOBS, "ml", n).unwrap()["metadata"]["resourceVersion"].clone())
        .collect();
    // the snapshot's types, by their first node's name: 0 the K80, 1 the V100
    let typed_admission = |name: &str, outcome: &str| -> Option<Value> {
        let d = get_json(addr, "/v1/autoscaler/decisions")?;
        d["decisions"]
            .as_array()?
            .iter()
            .rev()
            .find(|x| {
                x["job_name"] == json!(format!("ml/{name}"))
                    && x["action"] == "admit"
                    && x["outcome"] == json!(outcome)
                    && x["gpu_type"].is_u64()
            })
            .cloned()
    };
    // both jobs' admissions with that outcome, once the service has logged them
    let admissions = |outcome: &str, within_s| {
        wait_for(
            &format!("the typed admissions ({outcome})"),
            within_s,
            || {
                Some((
                    typed_admission("a3c-agent", outcome)?,
                    typed_admission("cyclegan-train", outcome)?,
                ))
            },
        )
    };
    let dry = admissions("dry_run", 240);
    assert_eq!(
        (dry.0["gpu_type"].clone(), dry.1["gpu_type"].clone()),
        (json!(0), json!(1)),
        "{dry:?}"
    );
    assert_eq!(dry.1["reason"], "type_gain", "{dry:?}");
    let jobs_written = |api: &FakeApi| -> Vec<Request> {
        api.requests()
            .into_iter()
            .filter(|r| r.method != "GET" && r.path.contains("/pytorchjobs/"))
            .collect()
    };
    assert!(
        jobs_written(&api).is_empty(),
        "dry-run wrote: {:?}",
        jobs_written(&api)
    );

    // for real: each steered once, to the type its gain earns it
    let (status, body) = request_with_body(
        addr,
        "POST",
        "/v1/autoscaler/dry-run",
        token,
        r#"{"enabled": false}"#,
    )
    .expect("dry-run off");
    assert_eq!(status, 200, "{body}");
    let steers = |api: &FakeApi| -> Vec<Request> {
        jobs_written(api)
            .into_iter()
            .filter(|r| {
                r.body.as_ref().is_some_and(|b| {
                    b["metadata"]["annotations"]
                        .get("augur.dev/gpu-type")
                        .is_some()
                })
            })
            .collect()
    };
    let sent = wait_for("both steers", 120, || {
        let s = steers(&api);
        (s.len() >= 2).then_some(s)
    });
    // the speeds the controller planned with: the advisor's, from the measured scaling and
    // the type the history ran on
    let reshaper = Reshaper::bundled().expect("the bundled scaling data");
    let shape = |t: &str| Shape {
        gpus: 4.0,
        gpu_type: Some(t.to_string()),
    };
    let types = [K80.to_string(), V100.to_string()];
    let speeds = |name: Option<&str>| -> Vec<f64> {
        types
            .iter()
            .map(|t| 1.0 / reshaper.ratio(name, &shape(P100), &shape(t), &[]).ratio)
            .collect()
    };
    let typical = speeds(None);
    for (k, (name, (t, chosen))) in names.iter().zip([(K80, 0u16), (V100, 1u16)]).enumerate() {
        let r = sent
            .iter()
            .find(|r| r.path.ends_with(&format!("/pytorchjobs/{name}")))
            .unwrap_or_else(|| panic!("no steer of {name}: {sent:?}"));
        let own = speeds(Some(name));
        let c = usize::from(chosen);
        let reason = type_reason(
            &types,
            &own,
            chosen,
            &Reason::TypeGain {
                gpu_type: chosen,
                speed: own[c],
                gain: own[c] / typical[c],
                step: "shortest_predicted",
            },
        );
        eprintln!("{name}: {reason}");
        // the precondition is the version the steer read (the write-back's annotations may
        // have come first)
        let mut body = r.body.clone().unwrap();
        let read: u64 = body["metadata"]["resourceVersion"]
            .as_str()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{name}: no resourceVersion in {body}"));
        let created: u64 = rvs[k].as_str().unwrap().parse().unwrap();
        assert!(read >= created, "{name}: {read} < {created}");
        body["metadata"]["resourceVersion"] = rvs[k].clone();
        assert_eq!(
            body,
            json!({
                "metadata": {
                    "resourceVersion": rvs[k],
                    "annotations": { "augur.dev/gpu-type": t, "augur.dev/gpu-type-reason": reason },
                },
                "spec": { "pytorchReplicaSpecs": { "Worker": { "template": { "spec": {
                    "nodeSelector": { LABEL: t } } } } } },
            }),
            "{name}"
        );
    }
    let gan = &sent
        .iter()
        .find(|r| r.path.ends_with("/cyclegan-train"))
        .unwrap()
        .body;
    let why = gan.as_ref().unwrap()["metadata"]["annotations"]["augur.dev/gpu-type-reason"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        why.starts_with("Tesla-V100-SXM2-32GB: 8.8x faster than Tesla-K80 for this job"),
        "{why}"
    );
    let applied = admissions("applied", 60);
    assert_eq!(
        (applied.0["gpu_type"].clone(), applied.1["gpu_type"].clone()),
        (json!(0), json!(1))
    );

    // every endpoint gives each job's run time on its type: the answer at submit times the
    // measured ratio from the history's type
    for (name, t) in names.iter().zip([K80, V100]) {
        let (seconds, view) = one_runtime(&api, addr, name, Some(t));
        assert_eq!(view["runtime"], view["job"]["runtime_on_type"], "{view}");
        let at_submit = view["job"]["runtime_at_submit"]["seconds"]
            .as_f64()
            .unwrap();
        let ratio = reshaper
            .ratio(Some(name), &shape(P100), &shape(t), &[])
            .ratio;
        assert!(
            (seconds / at_submit - ratio).abs() < 1e-9,
            "{name}: {seconds} / {at_submit} vs {ratio}"
        );
    }

    // a few more decisions: nothing written to the jobs again, nothing suspended or moved
    let seq = get_json(addr, "/v1/autoscaler/decisions?limit=1").unwrap()["decisions"][0]["seq"]
        .as_u64()
        .unwrap();
    wait_for("more decisions", 120, || {
        let d = get_json(addr, "/v1/autoscaler/decisions?limit=1")?;
        (d["decisions"][0]["seq"].as_u64()? >= seq + 4).then_some(())
    });
    assert_eq!(steers(&api).len(), 2, "{:?}", steers(&api));
    for r in jobs_written(&api) {
        let body = r.body.clone().unwrap_or(Value::Null);
        assert!(
            body.pointer("/spec/runPolicy").is_none() && body.pointer("/spec/suspend").is_none(),
            "{} {body}",
            r.path
        );
    }
    for name in names {
        assert_eq!(
            api.get(JOBS, "ml", name).unwrap()["spec"]["runPolicy"]["suspend"],
            json!(true)
        );
    }
    let d = get_json(addr, "/v1/autoscaler/decisions").unwrap();
    assert!(
        d["decisions"]
            .as_array()
            .unwrap()
            .iter()
            .all(|x| x["action"] != "suspend" && x["reason"] != "migrated" && x["error"].is_null()),
        "{d}"
    );
}
