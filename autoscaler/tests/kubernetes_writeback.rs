//! Writing predictions back onto the cluster's objects, against the wire-level fake API: the
//! exact PATCHes (merge patches of annotations only, on queued and running PyTorchJobs,
//! TrainJobs and Kueue-managed Jobs and the Kueue Workloads queueing them), only by the
//! leader, none in dry-run, the rate limits, and the Events of scaling decisions.

mod fixtures;

use std::collections::BTreeSet;

use augur_autoscaler::kubernetes::{
    AdviceAnswer, Hooks, JobAdvice, JobKey, JobKind, JobPhase, JobPredictions, KubeBackend,
    KubeConfig, LeaderGate, Span, WriteBackConfig, WRITEBACK_PREFIX,
};
use augur_autoscaler::ClusterBackend;
use augur_kube_fake::*;
use fixtures::*;
use serde_json::{json, Value};

/// Runtime 3,600 s [2,400, 5,400] for every job; queued jobs also get a start.
fn predict(k: &JobKey, phase: JobPhase) -> Option<JobPredictions> {
    let runtime = Some((
        3600.0,
        Span {
            lower: 2400.0,
            upper: 5400.0,
            coverage: 0.8,
        },
    ));
    let start = (phase == JobPhase::Queued).then_some((
        T0 + 600.0,
        Span {
            lower: T0,
            upper: T0 + 1800.0,
            coverage: 0.95,
        },
    ));
    Some(JobPredictions {
        runtime,
        start,
        eta: Some(T0 + 600.0 + 3600.0),
        failure_probability: (k.name == "a").then_some(0.25),
        model_versions: vec![("runtime", 1)],
        advice: None,
    })
}

/// No job is advised otherwise.
fn no_advice(_: &JobKey) -> AdviceAnswer {
    AdviceAnswer::Same
}

/// A replica that does not hold the lease.
fn follower() -> Hooks {
    Hooks {
        leader: Some(LeaderGate::default()),
        ..Hooks::default()
    }
}

fn paths(sent: &[augur_kube_fake::Request]) -> BTreeSet<&str> {
    sent.iter().map(|r| r.path.as_str()).collect()
}

fn patches(api: &FakeApi) -> Vec<augur_kube_fake::Request> {
    api.requests()
        .into_iter()
        .filter(|r| r.method == "PATCH")
        .collect()
}

async fn backend_with(
    api: &FakeApi,
    clock: &VClock,
    cfg: WriteBackConfig,
    hooks: Hooks,
) -> KubeBackend {
    let hooks = Hooks {
        clock: clock.clock(),
        ..hooks
    };
    let config = KubeConfig {
        writeback: cfg,
        ..config(fast_safety())
    };
    let b = KubeBackend::start(api.client(), config, hooks)
        .await
        .expect("backend starts");
    b.wait_synced(std::time::Duration::from_secs(10))
        .await
        .expect("synced");
    caught_up(&b, api).await;
    b
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn predictions_are_merge_patched_as_annotations_onto_jobs_and_their_workloads() {
    let api = FakeApi::start(&[WORKLOADS, EVENTS]).await;
    seed(&api);
    // d: queued behind Kueue
    api.put(JOBS, pytorchjob("ml", "d", 2, 1, Some((1, 4)), T0));
    api.put(WORKLOADS, workload("ml", "d", false));
    let clock = VClock::new(T0 + 100.0);
    let mut b = backend_with(&api, &clock, WriteBackConfig::default(), Hooks::default()).await;
    b.observe().await.expect("snapshot");
    api.clear_requests();

    let r = b.write_back(predict, no_advice, false).await;
    assert_eq!((r.patched, r.failed, r.skipped), (4, 0, None), "{r:?}");
    let sent = patches(&api);
    assert_eq!(
        paths(&sent),
        BTreeSet::from([
            "/apis/kubeflow.org/v1/namespaces/ml/pytorchjobs/a",
            "/apis/kubeflow.org/v1/namespaces/ml/pytorchjobs/b",
            "/apis/kubeflow.org/v1/namespaces/ml/pytorchjobs/d",
            "/apis/kueue.x-k8s.io/v1beta1/namespaces/ml/workloads/pytorchjob-d",
        ]),
        "finished job c is not annotated"
    );
    for p in &sent {
        assert_eq!(
            p.content_type.as_deref(),
            Some("application/merge-patch+json")
        );
        let body = p.body.as_ref().expect("body");
        // only metadata.annotations, only Augur's keys
        assert_eq!(
            body.as_object().unwrap().keys().collect::<Vec<_>>(),
            ["metadata"]
        );
        let meta = body["metadata"].as_object().unwrap();
        assert_eq!(meta.keys().collect::<Vec<_>>(), ["annotations"]);
        assert!(meta["annotations"]
            .as_object()
            .unwrap()
            .keys()
            .all(|k| k.starts_with(WRITEBACK_PREFIX)));
    }
    // what kubectl then shows on the objects
    let ann = |kind, name: &str| -> Value {
        api.get(kind, "ml", name).expect("object")["metadata"]["annotations"].clone()
    };
    let key = |k: &str| format!("{WRITEBACK_PREFIX}{k}");
    let a = ann(JOBS, "a");
    assert_eq!(a[key("runtime-s")], "3600");
    assert_eq!(a[key("runtime-interval-s")], "2400-5400");
    assert_eq!(a[key("failure-probability")], "0.250");
    assert!(a.get(key("start")).is_none(), "a runs: no predicted start");
    let d = ann(JOBS, "d");
    assert_eq!(d[key("start")], "2026-01-01T00:10:00Z");
    assert_eq!(d[key("start-bound")], "2026-01-01T00:30:00Z");
    let w = ann(WORKLOADS, "pytorchjob-d");
    assert_eq!(w[key("start-bound")], "2026-01-01T00:30:00Z");
    assert_eq!(w[key("eta")], "2026-01-01T01:10:00Z");
    assert!(w.get(key("runtime-s")).is_none());
    // the spec is untouched
    assert_eq!(
        api.get(JOBS, "ml", "a").unwrap()["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"],
        4
    );

    // the same predictions again: nothing to patch
    api.clear_requests();
    let r = b.write_back(predict, no_advice, false).await;
    assert_eq!((r.patched, r.unchanged), (0, 4), "{r:?}");
    assert!(patches(&api).is_empty());

    // a Kubernetes Event on the job, for `kubectl describe`
    b.record_event(
        &JobKey::pytorchjob("ml", "a"),
        "ScaledUp",
        "augur: 4 -> 6 workers (marginal_gain: idle GPUs)",
    )
    .await
    .expect("event posted");
    let events = api.list(EVENTS);
    assert_eq!(events.len(), 1, "{events:?}");
    let e = &events[0];
    assert_eq!(e["involvedObject"]["kind"], "PyTorchJob");
    assert_eq!(e["involvedObject"]["name"], "a");
    assert_eq!(e["reason"], "ScaledUp");
    assert_eq!(e["type"], "Normal");
    assert_eq!(e["source"]["component"], "augur");
    assert!(e["metadata"]["name"].as_str().unwrap().starts_with("a."));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_leader_writes_none_in_dry_run_and_the_rate_limits_hold() {
    let api = FakeApi::start(&[EVENTS]).await;
    seed(&api);
    let clock = VClock::new(T0 + 100.0);
    let mut f = backend_with(&api, &clock, WriteBackConfig::default(), follower()).await;
    api.clear_requests();
    let r = f.write_back(predict, no_advice, false).await;
    assert_eq!(r.skipped, Some("not the leader"));
    let key_a = JobKey::pytorchjob("ml", "a");
    f.record_event(&key_a, "ScaledUp", "x").await.unwrap();
    assert!(
        api.requests().iter().all(|r| r.method == "GET"),
        "{:?}",
        api.requests()
    );

    // the leader: dry-run writes nothing; then one patch a minute, each object once a minute
    let limits = WriteBackConfig {
        min_interval_s: 120.0,
        max_patches_per_minute: 1,
        ..WriteBackConfig::default()
    };
    let mut b = backend_with(&api, &clock, limits, Hooks::default()).await;
    api.clear_requests();
    assert_eq!(
        b.write_back(predict, no_advice, true).await.skipped,
        Some("dry-run")
    );
    assert!(patches(&api).is_empty());
    let r = b.write_back(predict, no_advice, false).await;
    assert_eq!((r.patched, r.deferred), (1, 1), "{r:?}");
    clock.set(T0 + 130.0);
    let r = b.write_back(predict, no_advice, false).await;
    assert_eq!(
        (r.patched, r.deferred),
        (0, 1),
        "the minute's budget is spent: {r:?}"
    );
    clock.set(T0 + 161.0);
    let r = b.write_back(predict, no_advice, false).await;
    assert_eq!((r.patched, r.unchanged), (1, 1), "{r:?}");
    // a changed prediction inside the object's interval waits
    let longer = |k: &JobKey, p: JobPhase| {
        predict(k, p).map(|mut x| {
            x.runtime = x.runtime.map(|(s, i)| (s * 2.0, i));
            x
        })
    };
    clock.set(T0 + 230.0);
    let r = b.write_back(longer, no_advice, false).await;
    assert_eq!((r.patched, r.deferred), (1, 1), "{r:?}");
    assert_eq!(patches(&api).len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trainjobs_kueue_jobs_and_their_workloads_get_the_same_annotations_by_the_leader_only() {
    let api = FakeApi::start(&[TRAINJOBS, BATCH_JOBS, WORKLOADS, EVENTS]).await;
    seed(&api);
    seed_workloads(&api);
    let clock = VClock::new(T0 + 100.0);

    // a follower and a dry-run leader send nothing but reads
    let mut f = backend_with(&api, &clock, WriteBackConfig::default(), follower()).await;
    f.observe().await.expect("snapshot");
    api.clear_requests();
    assert_eq!(
        f.write_back(predict, no_advice, false).await.skipped,
        Some("not the leader")
    );
    let llama = JobKey::new(JobKind::TrainJob, "ml", "llama");
    f.record_event(&llama, "AugurScaled", "x").await.unwrap();
    let mut b = backend_with(&api, &clock, WriteBackConfig::default(), Hooks::default()).await;
    b.observe().await.expect("snapshot");
    assert_eq!(
        b.write_back(predict, no_advice, true).await.skipped,
        Some("dry-run")
    );
    assert!(api.requests().iter().all(|r| r.method == "GET"));

    let r = b.write_back(predict, no_advice, false).await;
    assert_eq!((r.patched, r.failed), (8, 0), "{r:?}");
    let sent = patches(&api);
    assert_eq!(
        paths(&sent),
        BTreeSet::from([
            "/apis/kubeflow.org/v1/namespaces/ml/pytorchjobs/a",
            "/apis/kubeflow.org/v1/namespaces/ml/pytorchjobs/b",
            "/apis/trainer.kubeflow.org/v1alpha1/namespaces/ml/trainjobs/llama",
            "/apis/trainer.kubeflow.org/v1alpha1/namespaces/ml/trainjobs/tiny",
            "/apis/batch/v1/namespaces/ml/jobs/sweep",
            "/apis/batch/v1/namespaces/ml/jobs/etl",
            "/apis/kueue.x-k8s.io/v1beta1/namespaces/ml/workloads/trainjob-tiny",
            "/apis/kueue.x-k8s.io/v1beta1/namespaces/ml/workloads/job-etl",
        ]),
        "not the Job without the queue label nor the JobSet's; not sweep's admitted Workload"
    );
    // the exact bodies: a merge patch of metadata.annotations, the PyTorchJobs' set
    let body = |path: &str| {
        sent.iter()
            .find(|r| r.path == path)
            .and_then(|r| r.body.clone())
            .expect("patched")
    };
    let (trainjobs, jobs) = (
        "/apis/trainer.kubeflow.org/v1alpha1/namespaces/ml/trainjobs",
        "/apis/batch/v1/namespaces/ml/jobs",
    );
    for (path, kind, name, phase) in [
        (trainjobs, JobKind::TrainJob, "llama", JobPhase::Running),
        (trainjobs, JobKind::TrainJob, "tiny", JobPhase::Queued),
        (jobs, JobKind::Job, "sweep", JobPhase::Running),
        (jobs, JobKind::Job, "etl", JobPhase::Queued),
    ] {
        let p = predict(&JobKey::new(kind, "ml", name), phase).unwrap();
        let want = json!({ "metadata": { "annotations": p.job_annotations() } });
        assert_eq!(body(&format!("{path}/{name}")), want, "{name}");
    }
    let etl = JobKey::new(JobKind::Job, "ml", "etl");
    assert_eq!(
        body("/apis/kueue.x-k8s.io/v1beta1/namespaces/ml/workloads/job-etl"),
        json!({ "metadata": { "annotations":
            predict(&etl, JobPhase::Queued).unwrap().workload_annotations() } })
    );
    assert!(sent
        .iter()
        .all(|r| r.content_type.as_deref() == Some("application/merge-patch+json")));
    let key = |k: &str| format!("{WRITEBACK_PREFIX}{k}");
    let etl_wl = api.get(WORKLOADS, "ml", "job-etl").unwrap();
    assert_eq!(
        etl_wl["metadata"]["annotations"][key("start-bound")],
        "2026-01-01T00:30:00Z"
    );
    // specs untouched
    assert_eq!(
        api.get(BATCH_JOBS, "ml", "sweep").unwrap()["spec"]["parallelism"],
        2
    );
    assert_eq!(
        api.get(TRAINJOBS, "ml", "llama").unwrap()["spec"]["trainer"]["numNodes"],
        2
    );

    // the same predictions: nothing; an Event on the TrainJob names its kind
    api.clear_requests();
    assert_eq!(b.write_back(predict, no_advice, false).await.unchanged, 8);
    assert!(patches(&api).is_empty());
    b.record_event(&llama, "AugurScaled", "m").await.unwrap();
    let events = api.list(EVENTS);
    assert_eq!(events.len(), 1, "the follower posted none: {events:?}");
    assert_eq!(events[0]["involvedObject"]["kind"], "TrainJob");
    assert_eq!(
        events[0]["involvedObject"]["apiVersion"],
        "trainer.kubeflow.org/v1alpha1"
    );

    // the rate limits hold over all kinds: one patch a minute
    let limits = WriteBackConfig {
        min_interval_s: 60.0,
        max_patches_per_minute: 1,
        ..WriteBackConfig::default()
    };
    let mut l = backend_with(&api, &clock, limits, Hooks::default()).await;
    l.observe().await.expect("snapshot");
    let longer = |k: &JobKey, p: JobPhase| {
        predict(k, p).map(|mut x| {
            x.failure_probability = Some(0.5);
            x
        })
    };
    api.clear_requests();
    let r = l.write_back(longer, no_advice, false).await;
    assert_eq!((r.patched, r.deferred), (1, 7), "{r:?}");
    assert_eq!(patches(&api).len(), 1);
}

/// The advisor's answers by job name (what it says now), and the jobs it was asked about.
#[derive(Default)]
struct Advisor {
    says: std::collections::HashMap<String, JobAdvice>,
    asked: Vec<String>,
}

impl Advisor {
    fn says(&mut self, job: &str, headline: &str, gpus: u32) {
        let a = JobAdvice {
            headline: headline.into(),
            gpus: Some(gpus),
            ..JobAdvice::default()
        };
        self.says.insert(job.into(), a);
    }

    fn advise(&mut self, k: &JobKey) -> AdviceAnswer {
        self.asked.push(k.name.clone());
        match self.says.get(&k.name) {
            Some(a) => AdviceAnswer::Differs(a.clone()),
            None => AdviceAnswer::Same,
        }
    }
}

/// The body of the one PATCH sent to `path`.
fn body_to(api: &FakeApi, path: &str) -> Value {
    let sent: Vec<_> = patches(api)
        .into_iter()
        .filter(|r| r.path == path)
        .collect();
    assert_eq!(sent.len(), 1, "one PATCH to {path}: {sent:?}");
    sent[0].body.clone().expect("body")
}

const PJ_B: &str = "/apis/kubeflow.org/v1/namespaces/ml/pytorchjobs/b";
const JOB_ETL: &str = "/apis/batch/v1/namespaces/ml/jobs/etl";
const WL_ETL: &str = "/apis/kueue.x-k8s.io/v1beta1/namespaces/ml/workloads/job-etl";

/// What [`predict`] writes on a queued job, with `extra` keys (`null` removes one).
fn queued_body(extra: Value) -> Value {
    let mut a = json!({
        "predicted.augur.dev/runtime-s": "3600",
        "predicted.augur.dev/runtime-interval-s": "2400-5400",
        "predicted.augur.dev/runtime-coverage": "0.80",
        "predicted.augur.dev/start": "2026-01-01T00:10:00Z",
        "predicted.augur.dev/start-bound": "2026-01-01T00:30:00Z",
        "predicted.augur.dev/start-coverage": "0.95",
        "predicted.augur.dev/eta": "2026-01-01T01:10:00Z",
        "predicted.augur.dev/model-versions": "runtime=1",
    });
    for (k, v) in extra.as_object().expect("object") {
        a[k] = v.clone();
    }
    json!({ "metadata": { "annotations": a } })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_jobs_get_the_advice_held_between_recomputations_and_removed_when_it_stops_differing_or_they_start(
) {
    let api = FakeApi::start(&[TRAINJOBS, BATCH_JOBS, WORKLOADS, EVENTS]).await;
    seed(&api);
    seed_workloads(&api);
    let clock = VClock::new(T0 + 100.0);
    let limits = WriteBackConfig {
        advice_every_s: 300.0,
        ..WriteBackConfig::default()
    };
    let mut b = backend_with(&api, &clock, limits, Hooks::default()).await;
    b.observe().await.expect("snapshot");
    let advisor = std::sync::Mutex::new(Advisor::default());
    let advise = |k: &JobKey| advisor.lock().unwrap().advise(k);
    {
        let mut a = advisor.lock().unwrap();
        a.says("b", "8 GPUs: starts ~2 h sooner, finishes ~3 h sooner", 8);
        a.says("etl", "1 GPU: starts ~5 h sooner, finishes ~4 h sooner", 1);
        // the advisor has an answer for a running job too: it is never asked
        a.says("a", "2 GPUs: finishes ~1 h sooner", 2);
    }
    api.clear_requests();
    let r = b.write_back(predict, advise, false).await;
    assert_eq!((r.patched, r.failed), (8, 0), "{r:?}");
    let mut asked = advisor.lock().unwrap().asked.clone();
    asked.sort();
    assert_eq!(
        asked,
        ["b", "etl", "tiny"],
        "only the queued jobs are advised"
    );
    // the queued PyTorchJob and the Kueue-managed Job: exact bodies
    let advice_b = json!({
        "predicted.augur.dev/advice": "8 GPUs: starts ~2 h sooner, finishes ~3 h sooner",
        "predicted.augur.dev/advice-gpus": "8",
    });
    assert_eq!(body_to(&api, PJ_B), queued_body(advice_b.clone()));
    assert_eq!(
        body_to(&api, JOB_ETL),
        queued_body(json!({
            "predicted.augur.dev/advice": "1 GPU: starts ~5 h sooner, finishes ~4 h sooner",
            "predicted.augur.dev/advice-gpus": "1",
        }))
    );
    // a queued job without meaningful advice, running jobs and Workloads: no advice key
    for p in patches(&api) {
        if p.path == PJ_B || p.path == JOB_ETL {
            continue;
        }
        let keys = p.body.as_ref().unwrap()["metadata"]["annotations"].clone();
        assert!(
            keys.as_object()
                .unwrap()
                .keys()
                .all(|k| !k.starts_with("predicted.augur.dev/advice")),
            "{}: {keys}",
            p.path
        );
    }
    assert_eq!(
        api.get(JOBS, "ml", "b").unwrap()["metadata"]["annotations"]["predicted.augur.dev/advice"],
        "8 GPUs: starts ~2 h sooner, finishes ~3 h sooner"
    );

    // inside the hold the advice is not recomputed: a flapping advisor patches nothing
    caught_up(&b, &api).await;
    advisor
        .lock()
        .unwrap()
        .says("b", "8 GPUs: starts ~3 h sooner, finishes ~4 h sooner", 8);
    clock.set(T0 + 399.0);
    api.clear_requests();
    let r = b.write_back(predict, advise, false).await;
    assert_eq!((r.patched, r.unchanged), (0, 8), "{r:?}");
    assert_eq!(advisor.lock().unwrap().asked.len(), 3);

    // due again: b's advice stops differing, so its keys are removed with null
    advisor.lock().unwrap().says.remove("b");
    clock.set(T0 + 400.0);
    let r = b.write_back(predict, advise, false).await;
    assert_eq!((r.patched, r.unchanged), (1, 7), "{r:?}");
    assert_eq!(advisor.lock().unwrap().asked.len(), 6);
    assert_eq!(
        body_to(&api, PJ_B),
        queued_body(json!({
            "predicted.augur.dev/advice": null,
            "predicted.augur.dev/advice-gpus": null,
        }))
    );
    let shown = api.get(JOBS, "ml", "b").unwrap()["metadata"]["annotations"].clone();
    assert!(shown.get("predicted.augur.dev/advice").is_none(), "{shown}");
    assert_eq!(shown["predicted.augur.dev/runtime-s"], "3600");
    // the watch cache catches up: the removal is not sent again
    caught_up(&b, &api).await;
    api.clear_requests();
    clock.set(T0 + 470.0);
    let r = b.write_back(predict, advise, false).await;
    assert_eq!(r.patched, 0, "{r:?}");

    // Kueue admits etl and it starts: its advice and start keys go at once, from the Job and
    // its Workload, without asking the advisor
    let mut etl = api.get(BATCH_JOBS, "ml", "etl").unwrap();
    set_job_started(&mut etl, T0 + 480.0, 2);
    api.put(BATCH_JOBS, etl);
    for i in 0..2 {
        api.put(PODS, job_pod("ml", "etl", i, 1, Some("n0")));
    }
    let mut wl = workload_of("batch/v1", "Job", "ml", "etl", true);
    wl["metadata"]["annotations"] =
        api.get(WORKLOADS, "ml", "job-etl").unwrap()["metadata"]["annotations"].clone();
    api.put(WORKLOADS, wl);
    caught_up(&b, &api).await;
    b.observe().await.expect("snapshot");
    let before = advisor.lock().unwrap().asked.len();
    clock.set(T0 + 500.0);
    api.clear_requests();
    let r = b.write_back(predict, advise, false).await;
    assert_eq!(r.patched, 2, "{r:?}");
    assert_eq!(advisor.lock().unwrap().asked.len(), before);
    assert_eq!(
        body_to(&api, JOB_ETL),
        json!({ "metadata": { "annotations": {
            "predicted.augur.dev/runtime-s": "3600",
            "predicted.augur.dev/runtime-interval-s": "2400-5400",
            "predicted.augur.dev/runtime-coverage": "0.80",
            "predicted.augur.dev/eta": "2026-01-01T01:10:00Z",
            "predicted.augur.dev/model-versions": "runtime=1",
            "predicted.augur.dev/start": null,
            "predicted.augur.dev/start-bound": null,
            "predicted.augur.dev/start-coverage": null,
            "predicted.augur.dev/advice": null,
            "predicted.augur.dev/advice-gpus": null,
        } } })
    );
    assert_eq!(
        body_to(&api, WL_ETL),
        json!({ "metadata": { "annotations": {
            "predicted.augur.dev/start": null,
            "predicted.augur.dev/start-bound": null,
            "predicted.augur.dev/start-coverage": null,
            "predicted.augur.dev/eta": null,
            "predicted.augur.dev/model-versions": null,
        } } })
    );
    let wl = api.get(WORKLOADS, "ml", "job-etl").unwrap();
    assert!(wl["metadata"]["annotations"]
        .as_object()
        .is_none_or(|a| a.keys().all(|k| !k.starts_with(WRITEBACK_PREFIX))));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_advice_waits_out_the_objects_interval_and_neither_dry_run_nor_a_follower_advises(
) {
    let api = FakeApi::start(&[EVENTS]).await;
    seed(&api);
    let clock = VClock::new(T0 + 100.0);
    let advisor = std::sync::Mutex::new(Advisor::default());
    let advise = |k: &JobKey| advisor.lock().unwrap().advise(k);
    advisor
        .lock()
        .unwrap()
        .says("b", "8 GPUs: starts ~2 h sooner, finishes ~3 h sooner", 8);

    // a follower and a dry-run leader neither advise nor write
    let mut f = backend_with(&api, &clock, WriteBackConfig::default(), follower()).await;
    api.clear_requests();
    assert_eq!(
        f.write_back(predict, advise, false).await.skipped,
        Some("not the leader")
    );
    // recomputed every round: only the object's interval holds the advice back
    let limits = WriteBackConfig {
        min_interval_s: 120.0,
        advice_every_s: 0.0,
        ..WriteBackConfig::default()
    };
    let mut b = backend_with(&api, &clock, limits, Hooks::default()).await;
    b.observe().await.expect("snapshot");
    assert_eq!(
        b.write_back(predict, advise, true).await.skipped,
        Some("dry-run")
    );
    assert!(patches(&api).is_empty());
    assert!(advisor.lock().unwrap().asked.is_empty());

    let r = b.write_back(predict, advise, false).await;
    assert_eq!(r.patched, 2, "{r:?}");
    assert_eq!(
        body_to(&api, PJ_B)["metadata"]["annotations"]["predicted.augur.dev/advice"],
        "8 GPUs: starts ~2 h sooner, finishes ~3 h sooner"
    );
    assert_eq!(advisor.lock().unwrap().asked, ["b"]);

    // a second change inside the interval: b could not be patched, so it is not even advised
    advisor
        .lock()
        .unwrap()
        .says("b", "4 GPUs: starts ~1 h sooner, finishes ~1 h sooner", 4);
    caught_up(&b, &api).await;
    api.clear_requests();
    clock.set(T0 + 219.0);
    let r = b.write_back(predict, advise, false).await;
    assert_eq!(r.patched, 0, "{r:?}");
    assert!(patches(&api).is_empty());
    assert_eq!(advisor.lock().unwrap().asked, ["b"]);

    // once the interval has passed, it is written
    clock.set(T0 + 220.0);
    let r = b.write_back(predict, advise, false).await;
    assert_eq!(r.patched, 1, "{r:?}");
    assert_eq!(
        body_to(&api, PJ_B),
        queued_body(json!({
            "predicted.augur.dev/advice": "4 GPUs: starts ~1 h sooner, finishes ~1 h sooner",
            "predicted.augur.dev/advice-gpus": "4",
        }))
    );
    assert_eq!(advisor.lock().unwrap().asked, ["b", "b"]);
}
