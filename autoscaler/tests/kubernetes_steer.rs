//! Steering a queued job to a GPU type on Kubernetes, against the wire-level fake API: the
//! exact merge patch (a `nodeSelector` on the GPU product label in every pod template, or a
//! TrainJob's `podTemplateOverrides` entry for its trainer nodes; the type and reason as
//! annotations, the `resourceVersion` read), only for a suspended job that never started,
//! never over a template the user pinned, and nothing written in dry-run. The watches read the
//! selected type back: at the submit when the job names one, as a `Typed` event when it is
//! named later (the steer, Kueue's admission).

mod fixtures;

use augur_autoscaler::kubernetes::{
    ClusterEvent, Hooks, JobKey, KubeBackend, GPU_TYPE_ANNOTATION, GPU_TYPE_REASON_ANNOTATION,
};
use augur_autoscaler::{Action, ClusterBackend, Decision, ErrorKind, JobId, Reason};
use augur_kube_fake::*;
use fixtures::*;
use serde_json::{json, Value};

const V100: &str = "Tesla-V100-SXM2-32GB";
const A100: &str = "NVIDIA-A100-SXM4-80GB";
const LABEL: &str = "nvidia.com/gpu.product";
const TRAINJOB_T: &str = "/apis/trainer.kubeflow.org/v1alpha1/namespaces/ml/trainjobs/t";

/// The seeded cluster plus `q`, a suspended Kueue Job (2 pods × 1 GPU), and `p`, a suspended
/// PyTorchJob with a master and 2 workers.
async fn start() -> FakeApi {
    let api = FakeApi::start(&[TRAINJOBS, BATCH_JOBS, WORKLOADS]).await;
    seed(&api);
    api.put(
        BATCH_JOBS,
        batch_job("ml", "q", 2, Some(2), 1, Some("team-a"), T0 - 5.0),
    );
    let mut p = suspended_pytorchjob("p", 2, T0 - 4.0);
    p["spec"]["elasticPolicy"] =
        json!({ "minReplicas": 1, "maxReplicas": 4, "rdzvBackend": "c10d" });
    p["spec"]["pytorchReplicaSpecs"]["Master"] = p["spec"]["pytorchReplicaSpecs"]["Worker"].clone();
    p["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] = json!(1);
    api.put(JOBS, p);
    api
}

/// PyTorchJob `ml/{name}` of `workers` one-GPU workers, held suspended (`runPolicy.suspend`).
fn suspended_pytorchjob(name: &str, workers: u32, created: f64) -> Value {
    let mut j = pytorchjob("ml", name, workers, 1, None, created);
    j["spec"]["runPolicy"] = json!({ "suspend": true });
    j
}

/// Admit `job` with `workers` on GPU type `t`, for a type-gain reason.
fn admit_on(job: JobId, workers: u32, t: u16) -> Decision {
    Decision {
        action: Action::Admit {
            job,
            workers,
            gpu_type: Some(t),
        },
        reason: Reason::TypeGain {
            gpu_type: t,
            speed: 6.0,
            gain: 1.5,
            step: "shortest_predicted",
        },
    }
}

/// The reason written (no speeds hook: every job runs at its type's nominal speed, 1).
const REASON: &str = "Tesla-V100-SXM2-32GB: as fast as NVIDIA-A100-SXM4-80GB for this job (gain 1.50 over the type's typical speed; admitted as shortest_predicted)";

fn v100(s: &augur_autoscaler::ClusterState) -> u16 {
    s.gpu_types.iter().position(|t| t.name == V100).unwrap() as u16
}

/// Every request that is not a read.
fn written(api: &FakeApi) -> Vec<Request> {
    api.requests()
        .into_iter()
        .filter(|r| r.method != "GET")
        .collect()
}

fn patches(api: &FakeApi) -> Vec<Request> {
    api.requests()
        .into_iter()
        .filter(|r| r.method == "PATCH")
        .collect()
}

async fn observed(api: &FakeApi, dry_run: bool) -> (KubeBackend, augur_autoscaler::ClusterState) {
    observed_with(api, dry_run, Hooks::default()).await
}

async fn observed_with(
    api: &FakeApi,
    dry_run: bool,
    hooks: Hooks,
) -> (KubeBackend, augur_autoscaler::ClusterState) {
    let clock = VClock::new(T0 + 100.0);
    let safety = augur_autoscaler::kubernetes::Safety {
        dry_run,
        ..fast_safety()
    };
    let mut b = backend(api, &clock, safety, hooks).await;
    let s = b.observe().await.unwrap();
    api.clear_requests();
    (b, s)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suspended_kueue_job_gets_the_types_node_selector_and_annotations_in_one_patch() {
    let api = start().await;
    let (mut b, s) = observed(&api, false).await;
    let t = v100(&s);
    assert_eq!(t, 1, "the reason below names type 1");
    let q = job_id(&s, &b, "q");
    let rv = api.get(BATCH_JOBS, "ml", "q").unwrap()["metadata"]["resourceVersion"].clone();
    b.apply(admit_on(q, 2, t)).await.expect("steered");
    let sent = patches(&api);
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0].path, "/apis/batch/v1/namespaces/ml/jobs/q");
    assert_eq!(
        sent[0].content_type.as_deref(),
        Some("application/merge-patch+json")
    );
    let body: Value = sent[0].body.clone().expect("body");
    assert_eq!(
        body,
        json!({
            "metadata": {
                "resourceVersion": rv,
                "annotations": { GPU_TYPE_ANNOTATION: V100, GPU_TYPE_REASON_ANNOTATION: REASON },
            },
            "spec": { "template": { "spec": { "nodeSelector": { LABEL: V100 } } } },
        })
    );
    // the stored Job keeps its suspension (Kueue admits it) and carries the selector
    let stored = api.get(BATCH_JOBS, "ml", "q").unwrap();
    assert_eq!(stored["spec"]["suspend"], json!(true));
    assert_eq!(
        stored["spec"]["template"]["spec"]["nodeSelector"][LABEL],
        json!(V100)
    );
    assert_eq!(b.steers().len(), 1);
    assert!(!b.steers()[0].dry_run);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_pod_template_of_a_suspended_pytorchjob_is_steered() {
    let api = start().await;
    let (mut b, s) = observed(&api, false).await;
    let p = job_id(&s, &b, "p");
    let rv = api.get(JOBS, "ml", "p").unwrap()["metadata"]["resourceVersion"].clone();
    // admitted at the size it has: the steer is the only write
    b.apply(admit_on(p, 2, v100(&s))).await.expect("steered");
    let sent = patches(&api);
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(
        sent[0].path,
        "/apis/kubeflow.org/v1/namespaces/ml/pytorchjobs/p"
    );
    let sel = json!({ "template": { "spec": { "nodeSelector": { LABEL: V100 } } } });
    assert_eq!(
        sent[0].body.clone().expect("body"),
        json!({
            "metadata": {
                "resourceVersion": rv,
                "annotations": { GPU_TYPE_ANNOTATION: V100, GPU_TYPE_REASON_ANNOTATION: REASON },
            },
            "spec": { "pytorchReplicaSpecs": { "Master": sel, "Worker": sel } },
        })
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn running_and_pinned_jobs_are_refused_and_dry_run_writes_nothing() {
    let api = start().await;
    // q's template already pins the other product
    let mut q = api.get(BATCH_JOBS, "ml", "q").unwrap();
    q["spec"]["template"]["spec"]["nodeSelector"] = json!({ LABEL: "NVIDIA-A100-SXM4-80GB" });
    api.put(BATCH_JOBS, q);
    let (mut b, s) = observed(&api, false).await;
    let t = v100(&s);
    // a: running since T0; b: pending pods, never suspended
    for name in ["a", "b"] {
        let id = job_id(&s, &b, name);
        let e = b.apply(admit_on(id, 4, t)).await.unwrap_err();
        assert_eq!(e.kind, ErrorKind::Invalid, "{name}: {e}");
        assert!(e.message.contains("not steered"), "{e}");
    }
    let e = b
        .apply(admit_on(job_id(&s, &b, "q"), 2, t))
        .await
        .unwrap_err();
    assert!(e.message.contains("not overriding"), "{e}");
    assert!(patches(&api).is_empty());
    assert!(b.steers().is_empty());

    // dry-run: the steer is recorded, nothing is read or written
    let api = start().await;
    let (mut b, s) = observed(&api, true).await;
    let p = job_id(&s, &b, "p");
    b.apply(admit_on(p, 2, v100(&s))).await.expect("dry run");
    let to_p = api.requests_to("/pytorchjobs/p");
    assert!(to_p.is_empty(), "{to_p:?}");
    assert!(patches(&api).is_empty());
    assert_eq!(b.steers().len(), 1);
    assert!(b.steers()[0].dry_run);
    assert_eq!(b.steers()[0].gpu_type, V100);
}

/// A suspended TrainJob `t` in Kueue's queue (1 node × 1 GPU) with an override of its
/// initializer already there.
fn suspended_trainjob(api: &FakeApi) {
    let mut t = trainjob("ml", "t", 1, 1, Some("team-a"), T0 - 3.0);
    t["spec"]["podTemplateOverrides"] = json!([
        { "targetJobs": [{ "name": "dataset-initializer" }],
          "spec": { "serviceAccountName": "init-sa" } },
    ]);
    api.put(TRAINJOBS, t);
}

/// The GPU types the watches told for `name`: at its submit, then each `Typed`.
fn told(seen: &[ClusterEvent], key: &JobKey) -> Vec<(f64, Option<String>)> {
    seen.iter()
        .filter_map(|e| match e {
            ClusterEvent::Submitted { job, gpu_type, .. } if job == key => {
                Some((0.0, gpu_type.clone()))
            }
            ClusterEvent::Typed {
                job,
                time,
                gpu_type,
            } if job == key => Some((time - T0, Some(gpu_type.clone()))),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suspended_trainjob_gets_an_override_of_its_trainer_nodes_and_the_watch_reads_the_type() {
    let api = start().await;
    suspended_trainjob(&api);
    // a Job its owner pinned to the A100s at creation
    let mut pinned = batch_job("ml", "pinned", 1, Some(1), 1, Some("team-a"), T0 - 2.0);
    pinned["spec"]["template"]["spec"]["nodeSelector"] = json!({ LABEL: A100 });
    api.put(BATCH_JOBS, pinned);
    let (hooks, seen) = recording_hooks();
    let (mut b, s) = observed_with(&api, false, hooks).await;
    let t = job_id(&s, &b, "t");
    let rv = api.get(TRAINJOBS, "ml", "t").unwrap()["metadata"]["resourceVersion"].clone();
    b.apply(admit_on(t, 1, v100(&s))).await.expect("steered");
    let sent = patches(&api);
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0].path, TRAINJOB_T);
    assert_eq!(
        sent[0].content_type.as_deref(),
        Some("application/merge-patch+json")
    );
    // the list is replaced whole: the override read, then the trainer nodes' selector
    assert_eq!(
        sent[0].body.clone().expect("body"),
        json!({
            "metadata": {
                "resourceVersion": rv,
                "annotations": { GPU_TYPE_ANNOTATION: V100, GPU_TYPE_REASON_ANNOTATION: REASON },
            },
            "spec": { "podTemplateOverrides": [
                { "targetJobs": [{ "name": "dataset-initializer" }],
                  "spec": { "serviceAccountName": "init-sa" } },
                { "targetJobs": [{ "name": "node" }],
                  "spec": { "nodeSelector": { LABEL: V100 } } },
            ] },
        })
    );
    let stored = api.get(TRAINJOBS, "ml", "t").unwrap();
    assert_eq!(
        stored["spec"]["suspend"],
        json!(true),
        "Kueue still admits it"
    );
    assert_eq!(
        stored["spec"]["podTemplateOverrides"][1]["spec"]["nodeSelector"][LABEL],
        json!(V100)
    );

    // the watches read the type back: named later for t (at the backend's clock), at the
    // submit for the pinned Job, never for q
    caught_up(&b, &api).await;
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        told(
            &seen,
            &JobKey::new(augur_autoscaler::kubernetes::JobKind::TrainJob, "ml", "t")
        ),
        vec![(0.0, None), (100.0, Some(V100.to_string()))]
    );
    assert_eq!(
        told(
            &seen,
            &JobKey::new(augur_autoscaler::kubernetes::JobKind::Job, "ml", "pinned")
        ),
        vec![(0.0, Some(A100.to_string()))]
    );
    assert_eq!(
        told(
            &seen,
            &JobKey::new(augur_autoscaler::kubernetes::JobKind::Job, "ml", "q")
        ),
        vec![(0.0, None)]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trainjobs_pinned_or_with_active_pods_are_refused_and_dry_run_writes_nothing() {
    let api = start().await;
    suspended_trainjob(&api);
    // u: its trainer nodes already pinned to the A100s; w: suspended again, pods still active
    let mut u = trainjob("ml", "u", 1, 1, Some("team-a"), T0 - 3.0);
    u["spec"]["podTemplateOverrides"] = json!([
        { "targetJobs": [{ "name": "node" }], "spec": { "nodeSelector": { LABEL: A100 } } },
    ]);
    api.put(TRAINJOBS, u);
    let mut w = trainjob("ml", "w", 1, 1, Some("team-a"), T0 - 3.0);
    w["status"] = json!({ "jobsStatus": [{ "name": "node", "active": 1, "ready": 0,
        "succeeded": 0, "failed": 0, "suspended": 0 }] });
    api.put(TRAINJOBS, w);
    let (mut b, s) = observed(&api, false).await;
    let t = v100(&s);
    let e = b
        .apply(admit_on(job_id(&s, &b, "u"), 1, t))
        .await
        .unwrap_err();
    assert!(e.message.contains("not overriding"), "{e}");
    let e = b
        .apply(admit_on(job_id(&s, &b, "w"), 1, t))
        .await
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Conflict, "{e}");
    assert!(e.message.contains("active pods"), "{e}");
    assert!(patches(&api).is_empty());
    assert!(b.steers().is_empty());

    let api = start().await;
    suspended_trainjob(&api);
    let (mut b, s) = observed(&api, true).await;
    b.apply(admit_on(job_id(&s, &b, "t"), 1, v100(&s)))
        .await
        .expect("dry run");
    let to_t = api.requests_to("/trainjobs/t");
    assert!(to_t.is_empty(), "{to_t:?}");
    assert!(patches(&api).is_empty());
    assert_eq!(b.steers().len(), 1);
    assert!(b.steers()[0].dry_run);
}

// ---- the live controller choosing the type ----

const K80: &str = "Tesla-K80";

/// A cluster of two GPU types, a 4-GPU V100 node and an 8-GPU K80 node, and two suspended
/// PyTorchJobs of 4 one-GPU workers: `a3c-agent` (its model gains 2.1x on a V100, predicted
/// 1 h) and `cyclegan-train` (8.8x, predicted 10 h). Only one fits on the V100.
async fn two_types() -> FakeApi {
    let api = FakeApi::start(&[]).await;
    api.put(NODES, node("k80-0", 8, K80, "a", true));
    api.put(NODES, node("v100-0", 4, V100, "a", true));
    for (name, predicted, created) in [
        ("a3c-agent", 3600, T0 - 10.0),
        ("cyclegan-train", 36000, T0 - 5.0),
    ] {
        let mut j = suspended_pytorchjob(name, 4, created);
        j["metadata"]["annotations"] =
            json!({ "augur.dev/predicted-runtime-s": predicted.to_string() });
        api.put(JOBS, j);
    }
    api
}

/// Speeds as the service gives them, from the measured scaling ([`Reshaper::ratio`]) with
/// the run times predicted for the K80: a job's own by its name, a type's typical one for no
/// name.
fn reshaper_speeds() -> augur_autoscaler::kubernetes::SpeedHint {
    use augur_autoscaler::kubernetes::{JobView, TypeSpeeds};
    use augur_autoscaler::scaling::reshape::{Reshaper, Shape};
    let r = std::sync::Arc::new(Reshaper::bundled().expect("the bundled scaling data"));
    let shape = |t: &str| Shape {
        gpus: 1.0,
        gpu_type: Some(t.to_string()),
    };
    std::sync::Arc::new(move |types: &[String], views: &[&JobView]| {
        let speeds = |name: Option<&str>| -> Vec<f64> {
            types
                .iter()
                .map(|t| 1.0 / r.ratio(name, &shape(K80), &shape(t), &[]).ratio)
                .collect()
        };
        TypeSpeeds {
            typical: speeds(None),
            jobs: views
                .iter()
                .map(|v| Some(speeds(Some(&v.key.name))))
                .collect(),
        }
    })
}

/// The live loop (the knobs `augur serve --backend kubernetes` runs) over a backend on `api`
/// with the speeds hook.
async fn live_loop(
    api: &FakeApi,
    dry_run: bool,
) -> augur_autoscaler::live::LiveLoop<KubeBackend, augur_autoscaler::ElasticController> {
    use augur_autoscaler::live::{LiveConfig, LiveLoop};
    use augur_autoscaler::{ElasticController, ElasticParams, ScalingModel};
    let clock = VClock::new(T0 + 100.0);
    let hooks = Hooks {
        type_speeds: Some(reshaper_speeds()),
        ..Hooks::default()
    };
    let b = backend(api, &clock, fast_safety(), hooks).await;
    api.clear_requests();
    let mut l = LiveLoop::new(
        b,
        ElasticController::new(ElasticParams::live(), ScalingModel::default()),
        LiveConfig {
            decisions_kept: 100,
            history_kept: 10,
            history_every_s: 15.0,
        },
    );
    l.set_dry_run(dry_run);
    l
}

/// The decisions of the loop: (job name, action, GPU type named, reason name).
fn decided(
    l: &augur_autoscaler::live::LiveLoop<KubeBackend, augur_autoscaler::ElasticController>,
) -> Vec<(String, &'static str, Option<String>, &'static str)> {
    let b = l.backend();
    // the snapshot's types in the order of their first node by name
    let types = [K80.to_string(), V100.to_string()];
    l.decisions()
        .map(|d| {
            let a = d.decision.action;
            let t = match a {
                Action::Admit { gpu_type, .. } => gpu_type.map(|t| types[usize::from(t)].clone()),
                _ => None,
            };
            let name = b.job_key(a.job()).map_or(String::new(), |k| k.name.clone());
            (name, a.name(), t, d.decision.reason.name())
        })
        .collect()
}

/// What the live controller decides for [`two_types`]: a3c ranks first (shorter); cyclegan
/// gains more on the one V100 that fits one of them, so a3c takes the K80 where it loses
/// least, cyclegan the V100.
fn steered() -> Vec<(String, &'static str, Option<String>, &'static str)> {
    vec![
        (
            "a3c-agent".to_string(),
            "admit",
            Some(K80.to_string()),
            "type_gain",
        ),
        (
            "cyclegan-train".to_string(),
            "admit",
            Some(V100.to_string()),
            "type_gain",
        ),
    ]
}

const A3C_REASON: &str = "Tesla-K80: 2.1x slower than Tesla-V100-SXM2-32GB for this job (gain 1.00 over the type's typical speed; admitted as shortest_predicted); the faster type is left to jobs that gain more there, or has no room for it";
const CYCLEGAN_REASON: &str = "Tesla-V100-SXM2-32GB: 8.8x faster than Tesla-K80 for this job (gain 2.16 over the type's typical speed; admitted as shortest_predicted)";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_live_controller_steers_each_queued_job_to_the_type_where_it_gains_most() {
    let api = two_types().await;
    let mut l = live_loop(&api, false).await;
    let rv = |name: &str| api.get(JOBS, "ml", name).unwrap()["metadata"]["resourceVersion"].clone();
    let (rv_a3c, rv_gan) = (rv("a3c-agent"), rv("cyclegan-train"));
    let report = l.step(std::time::Duration::from_secs(1)).await;
    assert!(report.error.is_none(), "{report:?}");
    assert_eq!(decided(&l), steered());
    let sent = patches(&api);
    assert_eq!(sent.len(), 2, "{sent:?}");
    let selector =
        |t: &str| json!({ "Worker": { "template": { "spec": { "nodeSelector": { LABEL: t } } } } });
    for (sent, (name, rv, t, reason)) in sent.iter().zip([
        ("a3c-agent", &rv_a3c, K80, A3C_REASON),
        ("cyclegan-train", &rv_gan, V100, CYCLEGAN_REASON),
    ]) {
        assert_eq!(
            sent.path,
            format!("/apis/kubeflow.org/v1/namespaces/ml/pytorchjobs/{name}")
        );
        assert_eq!(
            sent.body.clone().expect("body"),
            json!({
                "metadata": {
                    "resourceVersion": rv,
                    "annotations": { GPU_TYPE_ANNOTATION: t, GPU_TYPE_REASON_ANNOTATION: reason },
                },
                "spec": { "pytorchReplicaSpecs": selector(t) },
            })
        );
    }
    // nothing but the two steers was written: no suspend, no resume, no scale
    let writes = written(&api);
    assert_eq!(writes.len(), 2, "{writes:?}");
    for name in ["a3c-agent", "cyclegan-train"] {
        assert_eq!(
            api.get(JOBS, "ml", name).unwrap()["spec"]["runPolicy"]["suspend"],
            json!(true)
        );
    }

    // the next decisions (the jobs still wait for their queue) keep each on its type and
    // write nothing again
    caught_up(l.backend(), &api).await;
    api.clear_requests();
    for _ in 0..3 {
        let report = l.step(std::time::Duration::from_secs(20)).await;
        assert!(report.error.is_none(), "{report:?}");
    }
    let writes = written(&api);
    assert!(writes.is_empty(), "{writes:?}");
    let last: Vec<_> = decided(&l).into_iter().rev().take(2).collect();
    for d in steered() {
        assert!(last.contains(&d), "{last:?}");
    }
    assert!(l
        .decisions()
        .all(|d| d.error.is_none() && d.decision.action.name() == "admit"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_live_controller_in_dry_run_chooses_the_same_types_and_writes_nothing() {
    let api = two_types().await;
    let mut l = live_loop(&api, true).await;
    for _ in 0..2 {
        let report = l.step(std::time::Duration::from_secs(20)).await;
        assert!(report.error.is_none(), "{report:?}");
    }
    let got = decided(&l);
    assert_eq!(got[..2], steered());
    let writes = written(&api);
    assert!(writes.is_empty(), "dry-run wrote: {writes:?}");
    assert!(l.backend().steers().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_known_speeds_or_a_second_type_no_queued_job_is_steered() {
    // no speeds hook: nothing says which type suits a job
    let api = two_types().await;
    let clock = VClock::new(T0 + 100.0);
    let b = backend(&api, &clock, fast_safety(), Hooks::default()).await;
    let mut l = augur_autoscaler::live::LiveLoop::new(
        b,
        augur_autoscaler::ElasticController::new(
            augur_autoscaler::ElasticParams::live(),
            augur_autoscaler::ScalingModel::default(),
        ),
        augur_autoscaler::live::LiveConfig {
            decisions_kept: 100,
            history_kept: 10,
            history_every_s: 15.0,
        },
    );
    api.clear_requests();
    l.step(std::time::Duration::from_secs(1)).await;
    assert!(
        decided(&l).iter().all(|d| d.2.is_none()),
        "{:?}",
        decided(&l)
    );
    assert!(patches(&api).is_empty());

    // speeds known, but one GPU type only
    let api = two_types().await;
    api.put(NODES, node("v100-0", 4, K80, "a", true));
    let mut l = live_loop(&api, false).await;
    l.step(std::time::Duration::from_secs(1)).await;
    assert!(
        decided(&l).iter().all(|d| d.2.is_none()),
        "{:?}",
        decided(&l)
    );
    assert!(patches(&api).is_empty());
}
