//! End-to-end: the real `augur serve --backend kubernetes` binary against the wire-level fake
//! Kubernetes API server (autoscaler/tests/kubernetes_fake), through a kubeconfig file. It
//! takes the lease, watches the cluster, ingests the jobs' lifecycle into its event store (the
//! same path as the HTTP API), and its elastic controller grows an elastic PyTorchJob onto
//! idle GPUs through `/scale`, inside the job's bounds.

#[path = "../autoscaler/tests/kubernetes_fake/mod.rs"]
mod kubernetes_fake;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use kubernetes_fake::*;
use serde_json::{json, Value};

const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../datasets/data");

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn get(addr: SocketAddr, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).ok()?;
    let text = String::from_utf8_lossy(&raw).to_string();
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, body.to_string()))
}

fn wait_for<T>(what: &str, secs: u64, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
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
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: http://{}\ncontexts:\n- name: fake\n  context:\n    cluster: fake\n    user: fake\ncurrent-context: fake\nusers:\n- name: fake\n  user: {{}}\n",
            api.addr
        ),
    )
    .unwrap();
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
fn serve_with_the_kubernetes_backend_leads_ingests_and_scales_through_scale() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let api = rt.block_on(FakeApi::start(&[]));
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
    // nothing but /scale and the lease was written
    for r in api.requests() {
        if r.method != "GET" {
            assert!(
                r.path.ends_with("/scale") || r.path.contains("/leases"),
                "{} {}",
                r.method,
                r.path
            );
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
    let job = api.get(JOBS, "ml", "a").unwrap();
    assert_eq!(
        job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"],
        json!(2)
    );
    drop(rt);
}
