//! The workloads beside PyTorchJobs against the wire-level fake API: Kubeflow Trainer v2
//! TrainJobs (observed, never scaled) and Kueue-managed `batch/v1` Jobs (observed; the running
//! elastic ones resized through `spec.parallelism`): what is watched, the snapshot, the
//! lifecycle events, and the exact requests of a resize.

mod fixtures;

use augur_autoscaler::kubernetes::{ClusterEvent, Hooks, JobKind, KubeBackend};
use augur_autoscaler::{ClusterBackend, ErrorKind, JobId};
use augur_kube_fake::*;
use fixtures::*;
use serde_json::json;

const SWEEP: &str = "/apis/batch/v1/namespaces/ml/jobs/sweep";

async fn start() -> FakeApi {
    let api = FakeApi::start(&[TRAINJOBS, BATCH_JOBS, WORKLOADS]).await;
    seed(&api);
    seed_workloads(&api);
    api
}

/// Jobs' (id, GPUs, min, max) with their ids as `namespace[/kind]/name`.
fn sizes(
    b: &KubeBackend,
    jobs: impl Iterator<Item = (JobId, u32, u32, u32)>,
) -> Vec<(String, u32, u32, u32)> {
    jobs.map(|(id, g, lo, hi)| (b.job_key(id).unwrap().to_string(), g, lo, hi))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trainjobs_and_kueue_jobs_are_watched_and_mapped_into_the_snapshot() {
    let api = start().await;
    let clock = VClock::new(T0 + 1000.0);
    let mut b = backend(&api, &clock, fast_safety(), Hooks::default()).await;
    assert_eq!(b.job_kinds(), JobKind::ALL.to_vec());
    let s = b.observe().await.unwrap();
    // n0: a's 4 + sweep's 2 GPUs; n1: 2 foreign + 1 other namespace + llama's 4
    let free: Vec<u32> = s.nodes.iter().map(|n| n.free).collect();
    assert_eq!(free, vec![2, 1]);
    let running = s
        .running
        .iter()
        .map(|r| (r.id, r.workers, r.min_workers, r.max_workers));
    assert_eq!(
        sizes(&b, running),
        vec![
            ("ml/a".to_string(), 4, 2, 8),
            ("ml/trainjob/llama".to_string(), 4, 4, 4),
            ("ml/job/sweep".to_string(), 2, 1, 8),
        ]
    );
    let llama = job_id(&s, &b, "llama");
    let r = s.running.iter().find(|r| r.id == llama).unwrap();
    assert_eq!((r.submitted, r.first_started), (T0 - 30.0, T0 + 10.0));
    assert_eq!(
        b.facts(llama).unwrap().bounds,
        None,
        "TrainJobs are never scaled"
    );
    let sweep = job_id(&s, &b, "sweep");
    assert_eq!(b.facts(sweep).unwrap().bounds, Some((1, 8)));
    // queued: static b; tiny (suspended by Kueue); etl (suspended: Kueue admits it, not sized)
    let queued = s
        .queued
        .iter()
        .map(|q| (q.id, q.requested, q.min_workers, q.max_workers));
    assert_eq!(
        sizes(&b, queued),
        vec![
            ("ml/b".to_string(), 4, 4, 4),
            ("ml/trainjob/tiny".to_string(), 1, 1, 1),
            ("ml/job/etl".to_string(), 2, 2, 2),
        ]
    );
    // the kinds' collections in the namespace; Jobs selected by Kueue's label server-side
    let watches: Vec<_> = api
        .requests()
        .into_iter()
        .filter(|r| r.query.contains("watch=true"))
        .collect();
    assert!(watches
        .iter()
        .any(|r| r.path == "/apis/trainer.kubeflow.org/v1alpha1/namespaces/ml/trainjobs"));
    assert!(watches
        .iter()
        .any(|r| r.path == "/apis/batch/v1/namespaces/ml/jobs"
            && r.query
                .contains("labelSelector=kueue.x-k8s.io%2Fqueue-name")));
    assert!(api.requests().iter().all(|r| r.method == "GET"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trainjob_and_job_lifecycles_reach_the_service_hook_with_gpus_and_queue() {
    let api = start().await;
    let clock = VClock::new(T0 + 1000.0);
    let (hooks, seen) = recording_hooks();
    let b = backend(&api, &clock, fast_safety(), hooks).await;
    // tiny is admitted and runs, then fails; llama completes; sweep succeeds; etl is deleted
    let mut tiny = api.get(TRAINJOBS, "ml", "tiny").unwrap();
    set_trainjob_resumed(&mut tiny, T0 + 1100.0);
    api.put(TRAINJOBS, tiny.clone());
    set_trainjob_finished(&mut tiny, T0 + 1500.0, false);
    api.put(TRAINJOBS, tiny);
    let mut llama = api.get(TRAINJOBS, "ml", "llama").unwrap();
    set_trainjob_finished(&mut llama, T0 + 1600.0, true);
    api.put(TRAINJOBS, llama);
    let mut sweep = api.get(BATCH_JOBS, "ml", "sweep").unwrap();
    set_job_finished(&mut sweep, T0 + 1700.0, true);
    api.put(BATCH_JOBS, sweep);
    clock.set(T0 + 2000.0);
    api.delete(BATCH_JOBS, "ml", "etl");
    caught_up(&b, &api).await;
    let mut lifecycle: Vec<String> = seen
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| match e {
            ClusterEvent::Submitted {
                job,
                time,
                gpus,
                elastic,
                queue,
                ..
            } if job.kind != JobKind::PyTorchJob => Some(format!(
                "submitted {job} {} {gpus:?} {elastic:?} {queue:?}",
                time - T0
            )),
            ClusterEvent::Started { job, time } if job.kind != JobKind::PyTorchJob => {
                Some(format!("started {job} {}", time - T0))
            }
            ClusterEvent::Finished { job, time, outcome } if job.kind != JobKind::PyTorchJob => {
                Some(format!("finished {job} {} {outcome:?}", time - T0))
            }
            _ => None,
        })
        .collect();
    lifecycle.sort();
    assert_eq!(
        lifecycle,
        vec![
            "finished ml/job/etl 2000 Deleted",
            "finished ml/job/sweep 1700 Succeeded",
            "finished ml/trainjob/llama 1600 Succeeded",
            "finished ml/trainjob/tiny 1500 Failed",
            "started ml/job/sweep 20",
            "started ml/trainjob/llama 10",
            "started ml/trainjob/tiny 1100",
            "submitted ml/job/etl -5 Some(2) Some((1, 4)) Some(\"team-b\")",
            "submitted ml/job/sweep -10 Some(2) Some((1, 8)) Some(\"team-b\")",
            "submitted ml/trainjob/llama -30 Some(4) None Some(\"team-a\")",
            "submitted ml/trainjob/tiny -20 Some(1) None Some(\"team-a\")",
        ],
        "the Job without the queue label and the JobSet's Job are not jobs"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_elastic_kueue_job_is_resized_through_spec_parallelism_and_trainjobs_never() {
    let api = start().await;
    let clock = VClock::new(T0 + 1000.0);
    let mut b = backend(&api, &clock, fast_safety(), Hooks::default()).await;
    let s = b.observe().await.unwrap();
    let (sweep, llama, etl) = (
        job_id(&s, &b, "sweep"),
        job_id(&s, &b, "llama"),
        job_id(&s, &b, "etl"),
    );
    api.clear_requests();
    // a TrainJob, a queued Job and a size beyond spec.completions: refused, nothing sent
    let e = b.set_workers(llama, 8).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::Invalid);
    assert!(e.to_string().contains("TrainJob"), "{e}");
    let e = b.admit(etl, 4).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::Invalid);
    let e = b.set_workers(sweep, 9).await.unwrap_err();
    assert!(
        e.to_string().contains("[1, spec.completions] [1, 8]"),
        "{e}"
    );
    assert!(api.requests().is_empty(), "{:?}", api.requests());

    // the first PATCH meets a concurrent change (409): re-read, patch again with the read version
    let rv = api.get(BATCH_JOBS, "ml", "sweep").unwrap()["metadata"]["resourceVersion"].clone();
    api.inject(Fault::status("PATCH", "/jobs/sweep", 409, 1));
    b.set_workers(sweep, 4).await.unwrap();
    let calls: Vec<(String, String)> = api
        .requests_to("/jobs/sweep")
        .into_iter()
        .map(|r| (r.method, r.path))
        .collect();
    let (get, patch) = (
        ("GET".to_string(), SWEEP.to_string()),
        ("PATCH".to_string(), SWEEP.to_string()),
    );
    assert_eq!(calls, vec![get.clone(), patch.clone(), get, patch]);
    let sent = api.requests_to("/jobs/sweep").pop().unwrap();
    assert_eq!(
        sent.content_type.as_deref(),
        Some("application/merge-patch+json")
    );
    assert_eq!(
        sent.body,
        Some(json!({"metadata": {"resourceVersion": rv}, "spec": {"parallelism": 4}}))
    );
    let job = api.get(BATCH_JOBS, "ml", "sweep").unwrap();
    assert_eq!(job["spec"]["parallelism"], 4);
    assert_eq!(job["spec"]["completions"], 8, "only parallelism changes");
    let r = b.scales().last().unwrap();
    assert_eq!(
        (r.job.to_string(), r.from, r.to),
        ("ml/job/sweep".into(), 2, 4)
    );

    // a scale-down inside the grace period without a checkpoint is held, like a PyTorchJob's
    caught_up(&b, &api).await;
    let s = b.observe().await.unwrap();
    let sweep = job_id(&s, &b, "sweep");
    api.clear_requests();
    let e = b.set_workers(sweep, 1).await.unwrap_err();
    assert!(e.to_string().contains("grace period"), "{e}");
    assert!(api.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_marked_elastic_without_kueues_feature_gate_is_observed_only() {
    let api = start().await;
    // the annotation, but Kueue's webhook added no scheduling gate: the gate is off, and a new
    // parallelism would suspend and requeue the Job
    let mut job = api.get(BATCH_JOBS, "ml", "sweep").unwrap();
    job["spec"]["template"]["spec"]["schedulingGates"] = json!([]);
    api.put(BATCH_JOBS, job);
    let clock = VClock::new(T0 + 1000.0);
    let mut b = backend(&api, &clock, fast_safety(), Hooks::default()).await;
    let s = b.observe().await.unwrap();
    let sweep = job_id(&s, &b, "sweep");
    assert_eq!(b.facts(sweep).unwrap().bounds, None);
    api.clear_requests();
    let e = b.set_workers(sweep, 4).await.unwrap_err();
    assert!(e.to_string().contains("observed, never scaled"), "{e}");
    assert!(api.requests().is_empty());
}
