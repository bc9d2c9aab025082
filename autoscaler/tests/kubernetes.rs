//! The Kubernetes backend against the wire-level fake API server (the augur-kube-fake crate):
//! what it reads from the watches, the exact requests it sends to act, and its safety rules.

mod fixtures;

use std::time::Duration;

use augur_autoscaler::kubernetes::{Hooks, KubeBackend, KubeConfig, Safety, CHECKPOINT_ANNOTATION};
use augur_autoscaler::{BackendError, ClusterBackend, ErrorKind, JobId};
use augur_kube_fake::*;
use fixtures::*;
use serde_json::json;

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
