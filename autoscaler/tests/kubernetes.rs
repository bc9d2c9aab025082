//! The Kubernetes backend against a wire-level fake API server (tests/kubernetes_fake): what
//! it reads from the watches, the exact requests it sends to act, and its safety rules.

mod kubernetes_fake;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use augur_autoscaler::kubernetes::{
    ClusterEvent, Hooks, KubeBackend, KubeConfig, LeaderElector, LeaseConfig, Outcome, Safety,
    CHECKPOINT_ANNOTATION,
};
use augur_autoscaler::{BackendError, ClusterBackend, ClusterSnapshot, ErrorKind, JobId};
use kubernetes_fake::*;
use serde_json::json;

const T0: f64 = 1_767_225_600.0; // 2026-01-01T00:00:00Z

fn fast_safety() -> Safety {
    Safety {
        backoff_base: Duration::from_millis(5),
        backoff_max: Duration::from_millis(40),
        request_timeout: Duration::from_millis(500),
        scale_down_grace_s: 600.0,
        ..Safety::default()
    }
}

fn config(safety: Safety) -> KubeConfig {
    KubeConfig {
        namespace: Some("ml".into()),
        safety,
        ..KubeConfig::default()
    }
}

/// Two 8-GPU nodes (A100 in zone a, V100 in zone b); elastic job `a` [2, 8] running 4 one-GPU
/// workers on n0 since T0; static job `b` (4 workers) pending; finished job `c`; a foreign pod
/// holding 2 GPUs on n1 and a pod of another namespace holding 1.
fn seed(api: &FakeApi) {
    api.put(NODES, node("n0", 8, "NVIDIA-A100-SXM4-80GB", "a", true));
    api.put(NODES, node("n1", 8, "Tesla-V100-SXM2-32GB", "b", true));
    api.put(NODES, node("cpu0", 0, "none", "a", true));
    let mut a = pytorchjob("ml", "a", 4, 1, Some((2, 8)), T0 - 100.0);
    set_started(&mut a, T0, 4);
    api.put(JOBS, a);
    for i in 0..4 {
        api.put(PODS, worker_pod("ml", "a", i, 1, Some("n0")));
    }
    api.put(JOBS, pytorchjob("ml", "b", 4, 1, None, T0 - 50.0));
    for i in 0..4 {
        api.put(PODS, worker_pod("ml", "b", i, 1, None));
    }
    let mut c = pytorchjob("ml", "c", 2, 1, Some((1, 2)), T0 - 500.0);
    set_succeeded(&mut c, T0 - 10.0);
    api.put(JOBS, c);
    let mut other = worker_pod("ml", "notebook", 0, 2, Some("n1"));
    other["metadata"]["labels"] = json!({ "app": "notebook" });
    api.put(PODS, other);
    // a pod of another namespace holds a GPU of n1 too
    api.put(PODS, worker_pod("other-team", "x", 0, 1, Some("n1")));
}

async fn backend(api: &FakeApi, clock: &VClock, safety: Safety, hooks: Hooks) -> KubeBackend {
    let hooks = Hooks {
        clock: clock.clock(),
        ..hooks
    };
    let b = KubeBackend::start(api.client(), config(safety), hooks)
        .await
        .expect("backend starts");
    b.wait_synced(Duration::from_secs(10))
        .await
        .expect("synced");
    caught_up(&b, api).await;
    b
}

fn job_id(snap: &ClusterSnapshot, b: &KubeBackend, name: &str) -> JobId {
    snap.running
        .iter()
        .map(|r| r.id)
        .chain(snap.queued.iter().map(|q| q.id))
        .find(|&id| b.facts(id).is_some_and(|f| f.key.name == name))
        .expect("job in snapshot")
}

/// (method, path) of the requests to job `name`'s scale subresource.
fn scale_calls(api: &FakeApi, name: &str) -> Vec<(String, String)> {
    api.requests_to(&format!("/pytorchjobs/{name}/scale"))
        .into_iter()
        .map(|r| (r.method, r.path))
        .collect()
}

const SCALE_A: &str = "/apis/kubeflow.org/v1/namespaces/ml/pytorchjobs/a/scale";

fn get_a() -> (String, String) {
    ("GET".into(), SCALE_A.into())
}
fn patch_a() -> (String, String) {
    ("PATCH".into(), SCALE_A.into())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observe_reads_nodes_pods_and_jobs_into_a_gpu_snapshot() {
    let api = FakeApi::start(&[]).await;
    seed(&api);
    let clock = VClock::new(T0 + 1000.0);
    let mut b = backend(&api, &clock, fast_safety(), Hooks::default()).await;
    assert_eq!(b.queueing_systems(), (false, false));
    let s = b.observe().await.unwrap();
    assert_eq!(s.time, T0 + 1000.0);
    // GPU nodes only, by name; types from the product label, racks from the zone
    let nodes: Vec<(&str, u32, u32, u16, u32)> = s
        .nodes
        .iter()
        .map(|n| (n.name.as_str(), n.gpus, n.free, n.gpu_type, n.rack))
        .collect();
    assert_eq!(nodes, vec![("n0", 8, 4, 0, 0), ("n1", 8, 5, 1, 1)]);
    assert_eq!(s.gpu_types[1].name, "Tesla-V100-SXM2-32GB");
    // a: running elastic, 4 workers on n0; b: queued static; c: finished, absent
    assert_eq!(s.running.len(), 1);
    let a = &s.running[0];
    assert_eq!(
        (a.workers, a.requested, a.min_workers, a.max_workers),
        (4, 4, 2, 8)
    );
    assert_eq!((a.submitted, a.first_started), (T0 - 100.0, T0));
    assert_eq!(
        s.placement_of(a),
        &[augur_autoscaler::Slot { node: 0, gpus: 4 }]
    );
    assert_eq!(s.queued.len(), 1);
    let q = &s.queued[0];
    assert_eq!(
        (q.requested, q.min_workers, q.max_workers, q.submitted),
        (4, 4, 4, T0 - 50.0)
    );
    assert!(!q.elastic());
    // the only requests were lists and watches (nothing written)
    assert!(api.requests().iter().all(|r| r.method == "GET"));
    let watches: Vec<_> = api
        .requests()
        .into_iter()
        .filter(|r| r.query.contains("watch=true"))
        .collect();
    // pods of every namespace (capacity), without terminated ones; jobs of the configured one
    assert!(watches.iter().any(|r| r.path == "/api/v1/pods"
        && r.query
            .contains("fieldSelector=status.phase%21%3DSucceeded%2Cstatus.phase%21%3DFailed")));
    assert!(watches
        .iter()
        .any(|r| r.path == "/apis/kubeflow.org/v1/namespaces/ml/pytorchjobs"));
    assert!(watches.iter().any(|r| r.path == "/api/v1/nodes"));
    assert!(watches
        .iter()
        .all(|r| r.query.contains("allowWatchBookmarks=true")
            && r.query.contains("resourceVersion=")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_workers_reads_then_patches_scale_with_the_read_resource_version() {
    let api = FakeApi::start(&[]).await;
    seed(&api);
    let clock = VClock::new(T0 + 1000.0);
    let mut b = backend(&api, &clock, fast_safety(), Hooks::default()).await;
    let s = b.observe().await.unwrap();
    let a = job_id(&s, &b, "a");
    let rv = api.get(JOBS, "ml", "a").unwrap()["metadata"]["resourceVersion"].clone();
    api.clear_requests();
    b.set_workers(a, 6).await.unwrap();
    assert_eq!(scale_calls(&api, "a"), vec![get_a(), patch_a()]);
    let patch = api.requests_to("/pytorchjobs/a/scale").pop().unwrap();
    assert_eq!(
        patch.content_type.as_deref(),
        Some("application/merge-patch+json")
    );
    assert_eq!(
        patch.body,
        Some(json!({"metadata": {"resourceVersion": rv}, "spec": {"replicas": 6}}))
    );
    let job = api.get(JOBS, "ml", "a").unwrap();
    assert_eq!(
        job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"],
        json!(6)
    );
    assert_eq!(b.scales().len(), 1);
    // the size it has already: nothing to patch
    caught_up(&b, &api).await;
    let s = b.observe().await.unwrap();
    let a = job_id(&s, &b, "a");
    api.clear_requests();
    b.set_workers(a, 6).await.unwrap();
    assert!(scale_calls(&api, "a").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conflicts_re_read_and_retry_throttling_and_errors_back_off() {
    let api = FakeApi::start(&[]).await;
    seed(&api);
    let clock = VClock::new(T0 + 1000.0);
    let mut b = backend(&api, &clock, fast_safety(), Hooks::default()).await;
    let s = b.observe().await.unwrap();
    let a = job_id(&s, &b, "a");

    // 409 on the patch: read again, patch again
    api.clear_requests();
    api.inject(Fault::status("PATCH", "/pytorchjobs/a/scale", 409, 1));
    b.set_workers(a, 5).await.unwrap();
    assert_eq!(
        scale_calls(&api, "a"),
        vec![get_a(), patch_a(), get_a(), patch_a()]
    );

    // 429 then 500 on the read, a slow read past the deadline: backed off, then done
    caught_up(&b, &api).await;
    let s = b.observe().await.unwrap();
    let a = job_id(&s, &b, "a");
    api.clear_requests();
    api.inject(Fault::status("GET", "/pytorchjobs/a/scale", 429, 1));
    api.inject(Fault::status("GET", "/pytorchjobs/a/scale", 500, 1));
    let started = std::time::Instant::now();
    b.set_workers(a, 6).await.unwrap();
    assert_eq!(
        scale_calls(&api, "a"),
        vec![get_a(), get_a(), get_a(), patch_a()]
    );
    let job = api.get(JOBS, "ml", "a").unwrap();
    assert_eq!(
        job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"],
        json!(6)
    );

    caught_up(&b, &api).await;
    let s = b.observe().await.unwrap();
    let a = job_id(&s, &b, "a");
    api.clear_requests();
    api.inject(Fault::slow(
        "GET",
        "/pytorchjobs/a/scale",
        Duration::from_secs(2),
        1,
    ));
    b.set_workers(a, 7).await.unwrap();
    assert_eq!(scale_calls(&api, "a"), vec![get_a(), get_a(), patch_a()]);
    assert!(started.elapsed() < Duration::from_secs(10));

    // retries are bounded: the error is retryable and nothing was patched
    caught_up(&b, &api).await;
    let s = b.observe().await.unwrap();
    let a = job_id(&s, &b, "a");
    api.clear_requests();
    api.inject(Fault::status("GET", "/pytorchjobs/a/scale", 503, 10));
    let e = b.set_workers(a, 8).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::Unavailable);
    assert_eq!(
        scale_calls(&api, "a"),
        vec![get_a(); fast_safety().attempts as usize]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bounds_static_jobs_stale_views_and_suspend_are_refused_without_writing() {
    let api = FakeApi::start(&[]).await;
    seed(&api);
    let clock = VClock::new(T0 + 1000.0);
    let mut b = backend(&api, &clock, fast_safety(), Hooks::default()).await;
    let s = b.observe().await.unwrap();
    let (a, qb) = (job_id(&s, &b, "a"), job_id(&s, &b, "b"));
    api.clear_requests();
    let kind = |r: Result<(), BackendError>| r.unwrap_err().kind;
    assert_eq!(kind(b.set_workers(a, 9).await), ErrorKind::Invalid);
    assert_eq!(kind(b.set_workers(a, 1).await), ErrorKind::Invalid);
    assert_eq!(kind(b.admit(qb, 2).await), ErrorKind::Invalid); // not elastic
    assert_eq!(kind(b.admit(a, 4).await), ErrorKind::Invalid); // running, not queued
    assert_eq!(kind(b.suspend(a).await), ErrorKind::Invalid);
    b.admit(qb, 4).await.unwrap(); // its own size: the scheduler admits, nothing to patch
    assert_eq!(
        kind(b.set_workers(JobId(999), 4).await),
        ErrorKind::NotFound
    );
    assert!(api
        .requests()
        .iter()
        .all(|r| r.method == "GET" && !r.path.ends_with("/scale")));

    // someone else rescaled `a` after the snapshot: stale view, no patch
    let mut job = api.get(JOBS, "ml", "a").unwrap();
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = json!(3);
    api.put(JOBS, job);
    let e = b.set_workers(a, 6).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::Conflict);
    assert_eq!(scale_calls(&api, "a"), vec![get_a()]);

    // an old snapshot: refused before any request
    caught_up(&b, &api).await;
    let s = b.observe().await.unwrap();
    let a = job_id(&s, &b, "a");
    clock.set(T0 + 1000.0 + 31.0);
    api.clear_requests();
    let e = b.set_workers(a, 6).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::Conflict);
    assert!(e.message.contains("stale snapshot"), "{e}");
    assert!(scale_calls(&api, "a").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scale_down_waits_for_a_checkpoint_or_the_grace_period_and_actions_are_budgeted() {
    let api = FakeApi::start(&[]).await;
    seed(&api);
    // the run started at T0; the grace period is 600 s
    let clock = VClock::new(T0 + 100.0);
    let safety = Safety {
        max_actions_per_job_per_hour: 2,
        ..fast_safety()
    };
    let mut b = backend(&api, &clock, safety, Hooks::default()).await;
    let s = b.observe().await.unwrap();
    let a = job_id(&s, &b, "a");
    api.clear_requests();
    let e = b.set_workers(a, 2).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::Invalid);
    assert!(e.message.contains("grace period"), "{e}");
    assert!(scale_calls(&api, "a").is_empty());
    // growing is not held
    b.set_workers(a, 6).await.unwrap();

    // with a checkpoint annotation the scale-down goes through at once
    let mut job = api.get(JOBS, "ml", "a").unwrap();
    job["metadata"]["annotations"] = json!({ CHECKPOINT_ANNOTATION: "2026-01-01T00:01:00Z" });
    api.put(JOBS, job);
    caught_up(&b, &api).await;
    let s = b.observe().await.unwrap();
    let a = job_id(&s, &b, "a");
    b.set_workers(a, 3).await.unwrap();
    let job = api.get(JOBS, "ml", "a").unwrap();
    assert_eq!(
        job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"],
        json!(3)
    );

    // a third action within the hour is refused; an hour later it is allowed
    caught_up(&b, &api).await;
    let s = b.observe().await.unwrap();
    let a = job_id(&s, &b, "a");
    api.clear_requests();
    let e = b.set_workers(a, 5).await.unwrap_err();
    assert!(e.message.contains("rate-limited"), "{e}");
    assert!(scale_calls(&api, "a").is_empty());
    clock.set(T0 + 100.0 + 3600.0);
    let s = b.observe().await.unwrap();
    let a = job_id(&s, &b, "a");
    b.set_workers(a, 5).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run_decides_and_logs_but_never_patches() {
    let api = FakeApi::start(&[]).await;
    seed(&api);
    let clock = VClock::new(T0 + 1000.0);
    let safety = Safety {
        dry_run: true,
        ..fast_safety()
    };
    let mut b = backend(&api, &clock, safety, Hooks::default()).await;
    let s = b.observe().await.unwrap();
    let a = job_id(&s, &b, "a");
    api.clear_requests();
    b.set_workers(a, 8).await.unwrap();
    assert!(api
        .requests()
        .iter()
        .all(|r| r.method == "GET" && !r.path.ends_with("/scale")));
    assert_eq!(b.scales().len(), 1);
    let r = &b.scales()[0];
    assert_eq!(
        (r.job.name.as_str(), r.from, r.to, r.dry_run),
        ("a", 4, 8, true)
    );
    let job = api.get(JOBS, "ml", "a").unwrap();
    assert_eq!(
        job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"],
        json!(4)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kueue_workloads_and_volcano_podgroups_decide_what_is_queued() {
    let api = FakeApi::start(&[PODGROUPS, WORKLOADS]).await;
    seed(&api);
    // d: elastic, its pods bound but its Kueue workload not admitted yet: queued
    api.put(JOBS, pytorchjob("ml", "d", 2, 1, Some((1, 4)), T0));
    api.put(PODS, worker_pod("ml", "d", 0, 1, Some("n1")));
    api.put(PODS, worker_pod("ml", "d", 1, 1, Some("n1")));
    api.put(WORKLOADS, workload("ml", "d", false));
    // a's PodGroup is Running, b's is Inqueue
    api.put(PODGROUPS, podgroup("ml", "a", 2, "Running"));
    api.put(PODGROUPS, podgroup("ml", "b", 4, "Inqueue"));
    let clock = VClock::new(T0 + 1000.0);
    let mut b = backend(&api, &clock, fast_safety(), Hooks::default()).await;
    assert_eq!(b.queueing_systems(), (true, true));
    let s = b.observe().await.unwrap();
    let names = |b: &KubeBackend, ids: Vec<JobId>| -> Vec<String> {
        ids.iter()
            .map(|&i| b.facts(i).unwrap().key.name.clone())
            .collect()
    };
    assert_eq!(
        names(&b, s.running.iter().map(|r| r.id).collect()),
        vec!["a"]
    );
    assert_eq!(
        names(&b, s.queued.iter().map(|q| q.id).collect()),
        vec!["b", "d"]
    );
    // admitted by Kueue: running
    api.put(WORKLOADS, workload("ml", "d", true));
    caught_up(&b, &api).await;
    let s = b.observe().await.unwrap();
    assert_eq!(
        names(&b, s.running.iter().map(|r| r.id).collect()),
        vec!["a", "d"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_watch_delivers_changes_without_relisting() {
    let api = FakeApi::start(&[]).await;
    seed(&api);
    let clock = VClock::new(T0 + 1000.0);
    let mut b = backend(&api, &clock, fast_safety(), Hooks::default()).await;
    let lists = || {
        api.requests_to("/api/v1/nodes")
            .iter()
            .filter(|r| !r.query.contains("watch=true"))
            .count()
    };
    let before = lists();
    api.put(NODES, node("n2", 4, "NVIDIA-A100-SXM4-80GB", "a", true));
    api.put(NODES, node("n3", 4, "NVIDIA-A100-SXM4-80GB", "a", false));
    caught_up(&b, &api).await;
    let s = b.observe().await.unwrap();
    assert_eq!(s.nodes.len(), 4);
    assert!(!s.nodes[3].healthy && s.nodes[3].free == 0);
    assert_eq!(lists(), before, "an open watch needs no re-list");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_watch_relists_and_an_unsynced_view_is_refused() {
    let api = FakeApi::start(&[]).await;
    seed(&api);
    let clock = VClock::new(T0 + 1000.0);
    // the pods list fails until the faults are cleared: no snapshot from a partial view
    api.inject(Fault::status("GET", "/api/v1/pods", 500, 10_000));
    let cfg = KubeConfig {
        watch_timeout_s: 1,
        ..config(fast_safety())
    };
    let hooks = Hooks {
        clock: clock.clock(),
        ..Hooks::default()
    };
    let mut b = KubeBackend::start(api.client(), cfg, hooks).await.unwrap();
    assert!(b.wait_synced(Duration::from_millis(300)).await.is_err());
    let e = b.observe().await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::Unavailable);
    assert!(e.message.contains("pods"), "{e}");
    api.clear_faults();
    b.wait_synced(Duration::from_secs(20)).await.unwrap();
    b.observe().await.unwrap();

    // the nodes watch ends (1 s timeout) and resumes from a compacted version: 410, re-list
    let lists = || {
        api.requests_to("/api/v1/nodes")
            .iter()
            .filter(|r| !r.query.contains("watch=true"))
            .count()
    };
    assert_eq!(lists(), 1);
    api.inject(Fault::expire_watch("/api/v1/nodes", 1));
    api.put(NODES, node("n2", 4, "NVIDIA-A100-SXM4-80GB", "a", true));
    let nodes_sync = b
        .watch_sync()
        .into_iter()
        .find(|(n, _)| *n == "nodes")
        .unwrap()
        .1;
    let start = std::time::Instant::now();
    while !(lists() >= 2 && b.synced()) {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "no re-list after 410"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(nodes_sync.errors() >= 1);
    caught_up(&b, &api).await;
    assert_eq!(b.observe().await.unwrap().nodes.len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_leader_acts_and_a_lost_lease_stops_acting_within_the_renew_deadline() {
    let api = FakeApi::start(&[]).await;
    seed(&api);
    let clock = VClock::new(T0 + 1000.0);
    let cfg = |id: &str| LeaseConfig::new("augur-system", "augur-controller", id);
    let mut e1 = LeaderElector::new(api.client(), cfg("augur-0"), clock.clock());
    let mut e2 = LeaderElector::new(api.client(), cfg("augur-1"), clock.clock());
    const LEASE: &str = "/apis/coordination.k8s.io/v1/namespaces/augur-system/leases";
    api.clear_requests();
    assert!(e1.step().await.unwrap());
    assert!(!e2.step().await.unwrap());
    let calls: Vec<(String, String)> = api
        .requests()
        .into_iter()
        .filter(|r| r.path.starts_with(LEASE))
        .map(|r| (r.method, r.path))
        .collect();
    let named = format!("{LEASE}/augur-controller");
    assert_eq!(
        calls,
        vec![
            ("GET".to_string(), named.clone()),
            ("POST".to_string(), LEASE.to_string()),
            ("GET".to_string(), named.clone()),
        ]
    );
    let lease = api.get(LEASES, "augur-system", "augur-controller").unwrap();
    assert_eq!(lease["spec"]["holderIdentity"], json!("augur-0"));
    assert_eq!(lease["spec"]["leaseDurationSeconds"], json!(15));

    // the leader acts; the other replica's backend refuses
    let g1 = e1.gate();
    let g2 = e2.gate();
    assert!(g1.may_act(clock.now()) && !g2.may_act(clock.now()));
    let mut b = backend(
        &api,
        &clock,
        fast_safety(),
        Hooks {
            leader: Some(g2.clone()),
            ..Hooks::default()
        },
    )
    .await;
    let s = b.observe().await.unwrap();
    let a = job_id(&s, &b, "a");
    api.clear_requests();
    let e = b.set_workers(a, 6).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::Unavailable);
    assert!(scale_calls(&api, "a").is_empty());

    // renew: a replace carrying the read resourceVersion
    clock.set(T0 + 1005.0);
    api.clear_requests();
    assert!(e1.step().await.unwrap());
    let put = api
        .requests()
        .into_iter()
        .find(|r| r.method == "PUT")
        .expect("renew is a PUT");
    assert_eq!(
        put.body.as_ref().unwrap()["spec"]["holderIdentity"],
        json!("augur-0")
    );
    assert!(put.body.as_ref().unwrap()["metadata"]["resourceVersion"].is_string());

    // the leader's API calls fail from now on (it cannot renew): it stops acting once the
    // renew deadline (10 s) passed, before the lease (15 s) expires for the other replica
    api.inject(Fault::status("GET", "/leases/augur-controller", 500, 1));
    clock.set(T0 + 1009.0);
    assert!(e1.step().await.is_err());
    assert!(g1.may_act(clock.now()));
    clock.set(T0 + 1015.5);
    assert!(
        !g1.may_act(clock.now()),
        "stopped within the renew deadline"
    );
    assert!(!e2.step().await.unwrap(), "the lease has not expired yet");
    clock.set(T0 + 1020.5);
    assert!(e2.step().await.unwrap(), "expired lease taken over");
    let lease = api.get(LEASES, "augur-system", "augur-controller").unwrap();
    assert_eq!(lease["spec"]["holderIdentity"], json!("augur-1"));
    assert_eq!(lease["spec"]["leaseTransitions"], json!(1));
    assert!(g2.may_act(clock.now()));
    // the old leader sees the new holder and stays out
    assert!(!e1.step().await.unwrap());
    assert!(!g1.may_act(clock.now()));

    // two candidates racing on an expired lease: the loser's replace gets 409
    api.inject(Fault::status("PUT", "/leases/augur-controller", 409, 1));
    clock.set(T0 + 1040.0);
    assert!(!e1.step().await.unwrap());
    // release clears the holder; the other takes it at once
    assert!(e2.step().await.unwrap());
    e2.release().await.unwrap();
    assert!(!g2.may_act(clock.now()));
    assert!(e1.step().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_lifecycle_events_and_snapshots_reach_the_service_hook() {
    let api = FakeApi::start(&[]).await;
    seed(&api);
    let clock = VClock::new(T0 + 1000.0);
    let seen: Arc<Mutex<Vec<ClusterEvent>>> = Arc::default();
    let sink = seen.clone();
    let hooks = Hooks {
        events: Some(Arc::new(move |e| sink.lock().unwrap().push(e))),
        ..Hooks::default()
    };
    let mut b = backend(&api, &clock, fast_safety(), hooks).await;
    // b starts, then finishes; a is deleted
    let mut job = api.get(JOBS, "ml", "b").unwrap();
    set_started(&mut job, T0 + 1100.0, 4);
    api.put(JOBS, job);
    let mut job = api.get(JOBS, "ml", "b").unwrap();
    set_succeeded(&mut job, T0 + 1900.0);
    api.put(JOBS, job);
    clock.set(T0 + 2000.0);
    api.delete(JOBS, "ml", "a");
    caught_up(&b, &api).await;
    b.observe().await.unwrap();
    let events = seen.lock().unwrap().clone();
    let mut lifecycle: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            ClusterEvent::Submitted {
                job, time, gpus, ..
            } => Some(format!("submitted {} {} {gpus}", job.name, time - T0)),
            ClusterEvent::Started { job, time } => {
                Some(format!("started {} {}", job.name, time - T0))
            }
            ClusterEvent::Finished { job, time, outcome } => {
                Some(format!("finished {} {} {outcome:?}", job.name, time - T0))
            }
            ClusterEvent::Snapshot(_) => None,
        })
        .collect();
    lifecycle.sort();
    assert_eq!(
        lifecycle,
        vec![
            "finished a 2000 Deleted",
            "finished b 1900 Succeeded",
            "finished c -10 Succeeded",
            "started a 0",
            "started b 1100",
            "submitted a -100 4",
            "submitted b -50 4",
            "submitted c -500 2",
        ]
    );
    let _ = Outcome::Failed;
    assert!(events
        .iter()
        .any(|e| matches!(e, ClusterEvent::Snapshot(s) if s.time == T0 + 2000.0)));
}

/// The live loop (pause, dry-run, decision log) drives the Kubernetes backend like the
/// simulator: a tick asks the policy only when a watch saw a change or the resync period
/// passed, a closed leader gate means no decision and no request, and an open one grows the
/// elastic job through `/scale` with the decision's reason logged.
#[tokio::test]
async fn the_live_loop_drives_the_backend_only_while_it_leads() {
    use augur_autoscaler::kubernetes::LeaderGate;
    use augur_autoscaler::live::{LiveBackend, LiveConfig, LiveLoop, Outcome as Done};
    use augur_autoscaler::{ElasticController, ElasticParams, ScalingModel};

    let api = FakeApi::start(&[]).await;
    seed(&api);
    let mut a = api.get(JOBS, "ml", "a").expect("a");
    a["metadata"]["annotations"] = json!({ "augur.dev/predicted-runtime-s": "72000" });
    api.put(JOBS, a);
    let clock = VClock::new(T0 + 3600.0);
    let policy = || {
        let params = ElasticParams {
            preempt_factor: None,
            ..ElasticParams::default()
        };
        ElasticController::new(params, ScalingModel::default())
    };

    // a follower (the gate stays closed): observes, never decides, sends nothing but reads
    let follower = Hooks {
        leader: Some(LeaderGate::default()),
        ..Hooks::default()
    };
    let b = backend(&api, &clock, fast_safety(), follower).await;
    let mut l = LiveLoop::new(b, policy(), LiveConfig::default());
    api.clear_requests();
    for _ in 0..3 {
        let r = l.step(Duration::from_secs(1)).await;
        assert!(!r.decided && r.error.is_none(), "{r:?}");
    }
    assert_eq!(l.decisions().count(), 0);
    assert_eq!(l.cluster().healthy_gpus, 16);
    assert_eq!(l.cluster().running, 1);
    assert!(api.requests().is_empty(), "{:?}", api.requests());
    drop(l);

    // the leader (no election): the first tick decides, grows `a`, and logs why
    let b = backend(&api, &clock, fast_safety(), Hooks::default()).await;
    let mut l = LiveLoop::new(b, policy(), LiveConfig::default());
    let r = l.step(Duration::from_secs(1)).await;
    assert!(r.decided && r.decisions > 0 && r.error.is_none(), "{r:?}");
    let all: Vec<serde_json::Value> = l
        .decisions()
        .map(|d| serde_json::to_value(d).expect("json"))
        .collect();
    let grow = all
        .iter()
        .find(|d| d["action"] == "set_workers")
        .unwrap_or_else(|| panic!("no rescale in {all:?}"));
    assert_eq!(grow["reason"], "idle_gpus", "{grow}");
    assert_eq!(grow["outcome"], "applied", "{grow}");
    assert!(l.decisions().all(|d| d.outcome == Done::Applied), "{all:?}");
    let patches: Vec<_> = api
        .requests_to("/pytorchjobs/a/scale")
        .into_iter()
        .filter(|r| r.method == "PATCH")
        .collect();
    assert_eq!(patches.len(), 1, "{patches:?}");
    caught_up(l.backend(), &api).await;
    // the patch changed `a`: the next tick looks again; then nothing changes until the resync
    assert!(l.backend_mut().tick(Duration::from_secs(1)));
    assert!(!l.backend_mut().tick(Duration::from_secs(1)));
    assert!(!l.backend_mut().tick(Duration::from_secs(5)));
    assert!(
        l.backend_mut().tick(Duration::from_secs(10)),
        "resync after 15 s"
    );
    assert!(!l.backend_mut().tick(Duration::from_secs(1)));
    api.put(PODS, worker_pod("ml", "a", 4, 1, Some("n0")));
    caught_up(l.backend(), &api).await;
    assert!(
        l.backend_mut().tick(Duration::from_secs(1)),
        "a watch saw a pod"
    );

    // paused: the loop neither decides nor patches
    l.set_paused(true);
    api.clear_requests();
    for _ in 0..3 {
        let r = l.step(Duration::from_secs(20)).await;
        assert!(!r.decided, "{r:?}");
    }
    assert!(api.requests().is_empty(), "{:?}", api.requests());
}
