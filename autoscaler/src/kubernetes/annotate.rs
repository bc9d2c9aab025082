//! The write-back's requests ([`KubeBackend::write_back`], [`KubeBackend::record_event`]):
//! JSON merge patches of `metadata.annotations` on the objects the watch caches hold (jobs of
//! every kind and their Kueue Workloads), and a `Normal` Event on a job; only by the lease
//! holder, never in dry-run.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::json;

use super::api::workload_resource;
use super::backend::KubeBackend;
use super::kinds::JobKind;
use super::objects::{owner_job, JobKey, JobState};
use super::safety::{into_error, with_timeout};
use super::workloads::job_view;
use super::writeback::{Admission, JobPhase, JobPredictions, WriteBackReport, WriteTarget};
use crate::error::BackendError;

impl KubeBackend {
    /// Writes `predict`'s answer for every queued or running job of every watched kind
    /// (PyTorchJob, TrainJob, Kueue-managed Job) onto it (and onto the Kueue `Workload` it
    /// owns, when Kueue is watched), within the rate limits; nothing
    /// when this replica is not the leader or `dry_run`. `predict` is called for all jobs
    /// before the first request goes out.
    pub async fn write_back(
        &mut self,
        predict: impl Fn(&JobKey, JobPhase) -> Option<JobPredictions>,
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
        let planned = self.plan_write_back(&predict);
        self.writeback
            .retain(|t| planned.iter().any(|(p, _)| p == t));
        for (target, annotations) in planned {
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
            match self.patch_annotations(&target, &annotations).await {
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

    /// Every object to annotate and its annotations, from the watch caches.
    fn plan_write_back(
        &self,
        predict: &impl Fn(&JobKey, JobPhase) -> Option<JobPredictions>,
    ) -> Vec<(WriteTarget, BTreeMap<String, String>)> {
        let mut out = Vec::new();
        let mut owners: HashMap<JobKey, JobPredictions> = HashMap::new();
        let states: HashMap<&JobKey, JobState> =
            self.facts.values().map(|f| (&f.key, f.state)).collect();
        let objects = JobKind::ALL
            .into_iter()
            .flat_map(|k| self.job_objects(k).into_iter().map(move |o| (k, o)));
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
            let Some(p) = predict(&v.key, phase) else {
                continue;
            };
            let a = p.job_annotations();
            if !a.is_empty() {
                out.push((WriteTarget::Job(v.key.clone()), a));
            }
            if phase == JobPhase::Queued {
                owners.insert(v.key, p);
            }
        }
        for wl in self.workload_objects() {
            let (Some(ns), Some(name)) = (&wl.metadata.namespace, &wl.metadata.name) else {
                continue;
            };
            let Some(p) = owner_job(&wl).and_then(|k| owners.get(&k)) else {
                continue;
            };
            let a = p.workload_annotations();
            if !a.is_empty() {
                out.push((WriteTarget::Workload(ns.clone(), name.clone()), a));
            }
        }
        out
    }

    /// A JSON merge patch of `metadata.annotations` only.
    async fn patch_annotations(
        &self,
        target: &WriteTarget,
        annotations: &BTreeMap<String, String>,
    ) -> Result<(), BackendError> {
        let (ar, ns, name) = match target {
            WriteTarget::Job(k) => (k.kind.resource(), &k.namespace, &k.name),
            WriteTarget::Workload(ns, name) => (workload_resource(), ns, name),
        };
        let api: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), ns, &ar);
        let patch = json!({ "metadata": { "annotations": annotations } });
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
