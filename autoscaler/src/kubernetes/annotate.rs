//! The write-back's requests ([`KubeBackend::write_back`], [`KubeBackend::record_event`]):
//! JSON merge patches of `metadata.annotations` on the objects the watch caches hold (jobs of
//! every kind and their Kueue Workloads; keys Augur wrote that no longer apply set to `null`),
//! and a `Normal` Event on a job; only by the lease holder, never in dry-run.

use std::collections::{BTreeMap, HashMap, HashSet};

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{json, Map, Value};

use super::api::workload_resource;
use super::backend::KubeBackend;
use super::kinds::JobKind;
use super::objects::{owner_job, JobKey, JobState};
use super::safety::{into_error, with_timeout};
use super::workloads::job_view;
use super::writeback::{
    Admission, AdviceAnswer, JobPhase, JobPredictions, WriteBackReport, WriteTarget,
    WRITEBACK_PREFIX,
};
use crate::error::BackendError;

/// An unfinished job as the write-back sees it.
struct LiveJob {
    key: JobKey,
    phase: JobPhase,
    /// The keys under [`WRITEBACK_PREFIX`] its object shows.
    shown: Vec<String>,
}

/// One object's write: the annotations it should show, and the keys it shows that it should
/// not (removed with `null`).
struct Planned {
    target: WriteTarget,
    annotations: BTreeMap<String, String>,
    removed: Vec<String>,
}

impl Planned {
    /// Nothing when there is nothing to set and nothing to remove.
    fn new(
        target: WriteTarget,
        annotations: BTreeMap<String, String>,
        shown: &[String],
    ) -> Option<Planned> {
        let removed: Vec<String> = shown
            .iter()
            .filter(|k| !annotations.contains_key(*k))
            .cloned()
            .collect();
        (!annotations.is_empty() || !removed.is_empty()).then_some(Planned {
            target,
            annotations,
            removed,
        })
    }
}

/// The annotation keys under [`WRITEBACK_PREFIX`] an object shows (the watch cache's view).
fn shown_keys(obj: &DynamicObject) -> Vec<String> {
    obj.metadata
        .annotations
        .iter()
        .flatten()
        .map(|(k, _)| k)
        .filter(|k| k.starts_with(WRITEBACK_PREFIX))
        .cloned()
        .collect()
}

impl KubeBackend {
    /// Writes `predict`'s answer for every queued or running job of every watched kind
    /// (PyTorchJob, TrainJob, Kueue-managed Job) onto it (and onto the Kueue `Workload` it
    /// owns, when Kueue is watched), within the rate limits; nothing
    /// when this replica is not the leader or `dry_run`. Queued jobs also carry the advice
    /// `advise` gives, held between its recomputations ([`AdviceMemo`](super::writeback::AdviceMemo)): `advise` runs only
    /// for the jobs whose advice is due and that could be patched now, at most
    /// `advice_per_round` a round. `predict` and `advise` are called before the first request
    /// goes out. Keys Augur wrote that the new set lacks are removed (`null`).
    pub async fn write_back(
        &mut self,
        predict: impl Fn(&JobKey, JobPhase) -> Option<JobPredictions>,
        mut advise: impl FnMut(&JobKey) -> AdviceAnswer,
        dry_run: bool,
    ) -> WriteBackReport {
        let now = self.now();
        let mut report = WriteBackReport::default();
        if dry_run {
            report.skipped = Some("dry-run");
            return report;
        }
        if self.hooks.leader.as_ref().is_some_and(|g| !g.may_act(now)) {
            report.skipped = Some("not the leader");
            return report;
        }
        let jobs = self.live_jobs();
        let queued: HashSet<&JobKey> = jobs
            .iter()
            .filter(|j| j.phase == JobPhase::Queued)
            .map(|j| &j.key)
            .collect();
        self.advice.retain(|k| queued.contains(&k));
        let writable = queued.iter().copied().filter(|k| {
            self.writeback
                .may_patch(now, &WriteTarget::Job((*k).clone()))
        });
        for key in self.advice.due(now, writable) {
            let a = advise(&key);
            self.advice.set(now, key, a);
        }
        let planned = self.plan_write_back(&jobs, &predict);
        self.writeback
            .retain(|t| planned.iter().any(|p| &p.target == t));
        for Planned {
            target,
            annotations,
            removed,
        } in planned
        {
            match self.writeback.admit(now, &target, &annotations) {
                Admission::Write => {}
                Admission::Unchanged => {
                    report.unchanged += 1;
                    continue;
                }
                Admission::TooSoon | Admission::OverBudget => {
                    report.deferred += 1;
                    continue;
                }
            }
            match self
                .patch_annotations(&target, &annotations, &removed)
                .await
            {
                Ok(()) => {
                    report.patched += 1;
                    self.writeback.written(now, target, annotations);
                }
                Err(e) => {
                    report.failed += 1;
                    tracing::warn!(target = ?target, error = %e, "writing predictions failed; retried next round");
                }
            }
        }
        report
    }

    /// The unfinished jobs of every watched kind: key, phase and the annotations under
    /// [`WRITEBACK_PREFIX`] their object shows.
    fn live_jobs(&self) -> Vec<LiveJob> {
        let states: HashMap<&JobKey, JobState> =
            self.facts.values().map(|f| (&f.key, f.state)).collect();
        let objects = JobKind::ALL
            .into_iter()
            .flat_map(|k| self.job_objects(k).into_iter().map(move |o| (k, o)));
        let mut out = Vec::new();
        for (kind, obj) in objects {
            let Some(v) = job_view(kind, &obj, &self.cfg.observe.gpu_resource) else {
                continue;
            };
            if v.finished.is_some() {
                continue;
            }
            // the last snapshot's view (suspension, Kueue admission, Volcano phase), else the
            // job's start
            let phase = match states.get(&v.key) {
                Some(JobState::Running) => JobPhase::Running,
                Some(JobState::Queued) => JobPhase::Queued,
                None if v.start_time.is_some() && !v.suspended => JobPhase::Running,
                None => JobPhase::Queued,
            };
            out.push(LiveJob {
                key: v.key,
                phase,
                shown: shown_keys(&obj),
            });
        }
        out
    }

    /// Every object to annotate, its annotations and the keys to remove, from the watch caches.
    fn plan_write_back(
        &self,
        jobs: &[LiveJob],
        predict: &impl Fn(&JobKey, JobPhase) -> Option<JobPredictions>,
    ) -> Vec<Planned> {
        let mut out = Vec::new();
        let mut owners: HashMap<&JobKey, Option<JobPredictions>> = HashMap::new();
        for job in jobs {
            let Some(mut p) = predict(&job.key, job.phase) else {
                continue;
            };
            p.advice = match job.phase {
                JobPhase::Queued => self.advice.get(&job.key).cloned(),
                JobPhase::Running => None,
            };
            let a = p.job_annotations();
            out.extend(Planned::new(
                WriteTarget::Job(job.key.clone()),
                a,
                &job.shown,
            ));
            owners.insert(&job.key, (job.phase == JobPhase::Queued).then_some(p));
        }
        for wl in self.workload_objects() {
            let (Some(ns), Some(name)) = (&wl.metadata.namespace, &wl.metadata.name) else {
                continue;
            };
            let Some(owner) = owner_job(&wl).and_then(|k| owners.get(&k)) else {
                continue;
            };
            // a queued job's Workload shows when it starts; once admitted, nothing
            let a = owner
                .as_ref()
                .map(JobPredictions::workload_annotations)
                .unwrap_or_default();
            let target = WriteTarget::Workload(ns.clone(), name.clone());
            out.extend(Planned::new(target, a, &shown_keys(&wl)));
        }
        out
    }

    /// A JSON merge patch of `metadata.annotations` only: `annotations` set, `removed` `null`.
    async fn patch_annotations(
        &self,
        target: &WriteTarget,
        annotations: &BTreeMap<String, String>,
        removed: &[String],
    ) -> Result<(), BackendError> {
        let (ar, ns, name) = match target {
            WriteTarget::Job(k) => (k.kind.resource(), &k.namespace, &k.name),
            WriteTarget::Workload(ns, name) => (workload_resource(), ns, name),
        };
        let api: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), ns, &ar);
        let mut body: Map<String, Value> = annotations
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        body.extend(removed.iter().map(|k| (k.clone(), Value::Null)));
        let patch = json!({ "metadata": { "annotations": body } });
        with_timeout(
            &self.cfg.safety,
            api.patch(name, &PatchParams::default(), &Patch::Merge(&patch)),
        )
        .await
        .map(|_| ())
        .map_err(|f| into_error(f, None))
    }

    /// Posts a `Normal` Kubernetes Event on the job `job` (what `kubectl describe`
    /// shows under Events), from the component `augur`. Only the leader posts.
    pub async fn record_event(
        &self,
        job: &JobKey,
        reason: &str,
        message: &str,
    ) -> Result<(), BackendError> {
        let now = self.now();
        if self.hooks.leader.as_ref().is_some_and(|g| !g.may_act(now)) {
            return Ok(());
        }
        let ar = job.kind.resource();
        let uid = self
            .job_objects(job.kind)
            .into_iter()
            .find(|o| {
                o.metadata.namespace.as_deref() == Some(&job.namespace)
                    && o.metadata.name.as_deref() == Some(&job.name)
            })
            .and_then(|o| o.metadata.uid.clone());
        let ts = Timestamp::from_second(now as i64).unwrap_or(Timestamp::UNIX_EPOCH);
        let event = Event {
            metadata: ObjectMeta {
                generate_name: Some(format!("{}.", job.name)),
                namespace: Some(job.namespace.clone()),
                ..ObjectMeta::default()
            },
            involved_object: ObjectReference {
                api_version: Some(ar.api_version.clone()),
                kind: Some(ar.kind.clone()),
                name: Some(job.name.clone()),
                namespace: Some(job.namespace.clone()),
                uid,
                ..ObjectReference::default()
            },
            reason: Some(reason.to_string()),
            message: Some(message.to_string()),
            type_: Some("Normal".into()),
            source: Some(EventSource {
                component: Some("augur".into()),
                host: None,
            }),
            reporting_component: Some("augur".into()),
            first_timestamp: Some(Time(ts)),
            last_timestamp: Some(Time(ts)),
            count: Some(1),
            ..Event::default()
        };
        let api: Api<Event> = Api::namespaced(self.client.clone(), &job.namespace);
        with_timeout(&self.cfg.safety, api.create(&PostParams::default(), &event))
            .await
            .map(|_| ())
            .map_err(|f| into_error(f, None))
    }
}
