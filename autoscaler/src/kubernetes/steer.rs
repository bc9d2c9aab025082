//! Steering a queued job to a GPU type before it starts, the way a queue controller may:
//! while a job is suspended and has never started, the scheduling directives of its pod
//! template are mutable (Kubernetes' mutable scheduling directives of suspended Jobs; Kueue
//! itself injects its ResourceFlavor's node labels the same way at admission). Augur adds a
//! `nodeSelector` on the node label naming the GPU model (`nvidia.com/gpu.product` by default)
//! to every pod template of the job, and writes the chosen type and its reason as annotations,
//! in one merge patch carrying the `resourceVersion` it read ([`type_reason`]: the type and
//! how much faster the job runs there than on the others). A job that selects the type already
//! is not written to again. Under Kueue, the flavor
//! assignment then only considers ResourceFlavors whose node labels match the selector, so the
//! ClusterQueue's flavor order is kept among them and Kueue still admits. Nothing else is
//! overridden: a template that already selects another value of the label is left alone (the
//! user pinned it), and a started or unsuspended job is refused (its pods are the
//! scheduler's). Dry-run logs only.
//!
//! A TrainJob's pod templates live in its runtime; the TrainJob carries
//! `spec.podTemplateOverrides` (`[{targetJobs: [{name}], spec: {nodeSelector, …}}]`, later
//! entries over earlier ones), which the Trainer's webhook lets change only while the TrainJob
//! is suspended and its JobSet has no active pods: Augur appends one entry for the trainer
//! nodes (`node`) with the selector. A merge patch replaces a list whole, so the patch carries
//! the overrides it read plus its own, under the read `resourceVersion` (nothing written in
//! between is lost: a 409 instead). Kueue's TrainJob integration adds its flavor's node labels
//! the same way at admission.
//!
//! The type a job will get ([`selected_type`]) is read back from the same place by the
//! watches, whoever set it (Augur, the user, Kueue at admission), so the run-time prediction
//! follows the object, not Augur's intent.

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{json, Map, Value};

use super::backend::{KubeBackend, SteerRecord};
use super::kinds::JobKind;
use super::objects::JobState;
use super::safety::{into_error, with_timeout, Failure};
use super::snapshot::UNKNOWN_GPU_TYPE;
use crate::cluster::JobId;
use crate::decision::Reason;
use crate::error::{BackendError, ErrorKind};

/// Annotation naming the GPU type Augur steered a job to.
pub const GPU_TYPE_ANNOTATION: &str = "augur.dev/gpu-type";
/// Annotation saying why (the decision's reason, as JSON).
pub const GPU_TYPE_REASON_ANNOTATION: &str = "augur.dev/gpu-type-reason";

/// Steers remembered (the newest; a dry run repeats its steer at every decision).
pub const STEERS_KEPT: usize = 1000;

/// The reason written on a job steered to type `chosen`, for people: how fast the job runs
/// there against each other type of the snapshot (`speeds`: the job's, by type index), its gain
/// there (its speed over the type's typical one) and the admission step, e.g.
/// `Tesla-V100: 3.1x faster than Tesla-K80 for this job (gain 1.52 over the type's typical
/// speed; admitted as shortest_predicted)`.
pub fn type_reason(types: &[String], speeds: &[f64], chosen: u16, reason: &Reason) -> String {
    let t = usize::from(chosen);
    let name = types.get(t).map_or("?", String::as_str);
    let mine = speeds.get(t).copied().unwrap_or(1.0);
    let mut slower = false;
    let against: Vec<String> = types
        .iter()
        .zip(speeds)
        .enumerate()
        .filter(|(u, _)| *u != t)
        .map(|(_, (other, &s))| {
            let f = mine / s;
            if f >= 1.05 {
                format!("{f:.1}x faster than {other}")
            } else if f <= 1.0 / 1.05 {
                slower = true;
                format!("{:.1}x slower than {other}", 1.0 / f)
            } else {
                format!("as fast as {other}")
            }
        })
        .collect();
    let mut text = if against.is_empty() {
        format!("{name}: the only GPU type")
    } else {
        format!("{name}: {} for this job", against.join(", "))
    };
    if let Reason::TypeGain { gain, step, .. } = reason {
        text.push_str(&format!(
            " (gain {gain:.2} over the type's typical speed; admitted as {step})"
        ));
    } else {
        text.push_str(&format!(" ({})", reason.name()));
    }
    if slower {
        text.push_str(
            "; the faster type is left to jobs that gain more there, or has no room for it",
        );
    }
    text
}

/// The replicated job of a TrainJob's runtime that runs the trainer nodes.
pub const TRAINER_TARGET_JOB: &str = "node";

/// JSON pointers to the pod templates (a TrainJob: the pod specs of its overrides of the
/// trainer nodes) of a job of `kind` in `obj`.
fn templates(kind: JobKind, obj: &Value) -> Vec<String> {
    match kind {
        JobKind::Job => vec!["/spec/template".into()],
        JobKind::PyTorchJob => obj
            .pointer("/spec/pytorchReplicaSpecs")
            .and_then(Value::as_object)
            .map(|m| {
                m.keys()
                    .map(|k| format!("/spec/pytorchReplicaSpecs/{k}/template"))
                    .collect()
            })
            .unwrap_or_default(),
        JobKind::TrainJob => trainer_overrides(obj)
            .into_iter()
            .map(|i| format!("/spec/podTemplateOverrides/{i}"))
            .collect(),
    }
}

/// Indexes of a TrainJob's `spec.podTemplateOverrides` that target the trainer nodes.
fn trainer_overrides(obj: &Value) -> Vec<usize> {
    obj.pointer("/spec/podTemplateOverrides")
        .and_then(Value::as_array)
        .map(|os| {
            os.iter()
                .enumerate()
                .filter(|(_, o)| {
                    o.get("targetJobs")
                        .and_then(Value::as_array)
                        .is_some_and(|ts| {
                            ts.iter().any(|t| {
                                t.get("name").and_then(Value::as_str) == Some(TRAINER_TARGET_JOB)
                            })
                        })
                })
                .map(|(i, _)| i)
                .collect()
        })
        .unwrap_or_default()
}

/// `ptr/spec/nodeSelector/<label>` as a JSON pointer.
fn selector_ptr(ptr: &str, label: &str) -> String {
    format!(
        "{ptr}/spec/nodeSelector/{}",
        label.replace('~', "~0").replace('/', "~1")
    )
}

/// The value of node label `label` the pod templates of `obj` (a `kind` job; its spec at
/// `/spec`) select: the GPU type it will get. A TrainJob's last override wins, as the
/// Trainer applies them; the selector of its runtime's own template is not read.
pub fn selected_type(kind: JobKind, obj: &Value, label: &str) -> Option<String> {
    let ptrs = templates(kind, obj);
    let mut found = ptrs
        .iter()
        .filter_map(|p| obj.pointer(&selector_ptr(p, label)).and_then(Value::as_str));
    match kind {
        JobKind::TrainJob => found.next_back(),
        _ => found.next(),
    }
    .map(str::to_string)
}

/// The merge patch steering `obj` (a `kind` job) to `value` of node label `label`, with the
/// annotations and the `resourceVersion` precondition; `Err` when a template already selects
/// another value of the label.
pub fn steer_patch(
    kind: JobKind,
    obj: &Value,
    label: &str,
    value: &str,
    reason: &str,
) -> Result<Value, String> {
    let ptrs = templates(kind, obj);
    if ptrs.is_empty() && kind != JobKind::TrainJob {
        return Err(format!(
            "a {} has no pod template Augur may change",
            kind.qualified()
        ));
    }
    let mut patch = json!({
        "metadata": {
            "resourceVersion": obj.pointer("/metadata/resourceVersion").cloned().unwrap_or(Value::Null),
            "annotations": {
                GPU_TYPE_ANNOTATION: value,
                GPU_TYPE_REASON_ANNOTATION: reason,
            },
        },
    });
    for ptr in &ptrs {
        if let Some(current) = obj
            .pointer(&selector_ptr(ptr, label))
            .and_then(Value::as_str)
        {
            if current != value {
                return Err(format!(
                    "its pod template ({ptr}) already selects {label}={current}; not overriding it"
                ));
            }
        }
    }
    if kind == JobKind::TrainJob {
        if selected_type(kind, obj, label).as_deref() == Some(value) {
            // already there: only the annotations
            return Ok(patch);
        }
        // the list is replaced whole: the overrides read, then the trainer nodes' selector
        let mut overrides = obj
            .pointer("/spec/podTemplateOverrides")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        overrides.push(json!({
            "targetJobs": [{ "name": TRAINER_TARGET_JOB }],
            "spec": { "nodeSelector": { label: value } },
        }));
        patch["spec"] = json!({ "podTemplateOverrides": overrides });
        return Ok(patch);
    }
    for ptr in ptrs {
        // build {spec: {..: {template: {spec: {nodeSelector: {label: value}}}}}} along ptr
        let mut at = &mut patch;
        for seg in ptr
            .trim_start_matches('/')
            .split('/')
            .chain(["spec", "nodeSelector"])
        {
            let Some(m) = at.as_object_mut() else {
                return Err("malformed patch".into());
            };
            at = m
                .entry(seg.to_string())
                .or_insert_with(|| Value::Object(Map::new()));
        }
        if let Some(m) = at.as_object_mut() {
            m.insert(label.to_string(), Value::String(value.to_string()));
        }
    }
    Ok(patch)
}

impl KubeBackend {
    /// Steers queued `job` to GPU type `gpu_type` of the last snapshot (see the module).
    pub(super) async fn steer(
        &mut self,
        job: JobId,
        gpu_type: u16,
        reason: Reason,
    ) -> Result<(), BackendError> {
        let err = |k: ErrorKind, m: String| Err(BackendError::new(k, Some(job), m));
        let now = self.now();
        if let Some(g) = &self.hooks.leader {
            if !g.may_act(now) {
                return err(ErrorKind::Unavailable, "not the leader".into());
            }
        }
        let Some(f) = self.facts.get(&job).cloned() else {
            return err(ErrorKind::NotFound, "not in the last snapshot".into());
        };
        let Some(value) = self.gpu_types.get(usize::from(gpu_type)).cloned() else {
            return err(ErrorKind::Invalid, format!("no GPU type {gpu_type}"));
        };
        if f.gpu_type.as_deref() == Some(value.as_str()) {
            // there already (steered before, or the owner's choice): nothing to write
            return Ok(());
        }
        if value == UNKNOWN_GPU_TYPE {
            return err(
                ErrorKind::Invalid,
                format!("{}: the nodes of that type carry no GPU product label for a selector to name; not steered", f.key),
            );
        }
        if f.state != JobState::Queued || !f.suspended || f.ever_started {
            return err(
                ErrorKind::Invalid,
                format!(
                    "{} is not suspended and never started: its pods are the scheduler's; not steered to {value}",
                    f.key
                ),
            );
        }
        let speeds = self.queued_speeds.get(&job).map_or(&[][..], Vec::as_slice);
        let reason_text = type_reason(&self.gpu_types, speeds, gpu_type, &reason);
        let dry_run = self.cfg.safety.dry_run;
        if !dry_run {
            let api: Api<DynamicObject> = Api::namespaced_with(
                self.client.clone(),
                &f.key.namespace,
                &f.key.kind.resource(),
            );
            let label = self.cfg.observe.gpu_product_label.clone();
            let s = &self.cfg.safety;
            let obj = with_timeout(s, api.get(&f.key.name))
                .await
                .map_err(|e| into_error(e, Some(job)))?;
            let obj = serde_json::to_value(&obj).unwrap_or(Value::Null);
            let suspended = match f.key.kind {
                JobKind::PyTorchJob => obj.pointer("/spec/runPolicy/suspend"),
                _ => obj.pointer("/spec/suspend"),
            }
            .and_then(Value::as_bool)
            .unwrap_or(false);
            // a TrainJob's JobSet may still have pods (being suspended again): the Trainer
            // refuses a change of its overrides then
            let active = obj
                .pointer("/status/jobsStatus")
                .and_then(Value::as_array)
                .is_some_and(|js| {
                    js.iter()
                        .any(|j| j.get("active").and_then(Value::as_u64).unwrap_or(0) > 0)
                });
            if !suspended || active || obj.pointer("/status/startTime").is_some() {
                return err(
                    ErrorKind::Conflict,
                    format!(
                        "{} started since the snapshot or still has active pods; not steered",
                        f.key
                    ),
                );
            }
            let patch =
                steer_patch(f.key.kind, &obj, &label, &value, &reason_text).map_err(|m| {
                    BackendError::new(ErrorKind::Invalid, Some(job), format!("{}: {m}", f.key))
                })?;
            with_timeout(
                s,
                api.patch(&f.key.name, &PatchParams::default(), &Patch::Merge(&patch)),
            )
            .await
            .map_err(|e: Failure| into_error(e, Some(job)))?;
        }
        tracing::info!(job = %f.key, gpu_type = %value, dry_run, "steered to a GPU type");
        if self.steers.len() >= STEERS_KEPT {
            self.steers.remove(0);
        }
        self.steers.push(SteerRecord {
            time: now,
            job: f.key,
            gpu_type: value,
            reason: reason_text,
            dry_run,
        });
        Ok(())
    }
}
