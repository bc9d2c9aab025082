//! Acting on a cluster: sizing a job after the safety checks (leader, fresh snapshot, job
//! state, its kind's bounds, checkpoint or grace period before a scale-down, hourly action
//! budget), in dry-run only logging what it would do. A `PyTorchJob` is sized through its
//! `/scale` subresource, an elastic Kueue `batch/v1` Job by a merge patch of its
//! `spec.parallelism`; both carry the `resourceVersion` just read. TrainJobs have no bounds
//! and are never sized.

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{json, Value};

use super::backend::{KubeBackend, ScaleRecord};
use super::kinds::JobKind;
use super::objects::{JobFacts, JobState, CHECKPOINT_ANNOTATION};
use super::safety::{into_error, with_timeout, Failure, Safety};
use crate::cluster::JobId;
use crate::error::{BackendError, ErrorKind};

impl KubeBackend {
    /// Sizes `job` to `workers` GPUs: `admit` for a queued job, else a rescale.
    pub(super) async fn scale(
        &mut self,
        job: JobId,
        workers: u32,
        admit: bool,
    ) -> Result<(), BackendError> {
        let now = self.now();
        let Some((f, target)) = self.check_scale(job, workers, admit, now)? else {
            return Ok(());
        };
        let dry_run = self.cfg.safety.dry_run;
        if dry_run {
            tracing::info!(job = %f.key, from = f.spec_replicas, to = target, admit, "dry run: would scale");
        } else {
            self.patch_scale(job, &f, target).await?;
            tracing::info!(job = %f.key, from = f.spec_replicas, to = target, admit, "scaled");
        }
        self.budget.record(job, now);
        if !dry_run {
            self.memory.last_rescale.insert(f.key.clone(), now);
        }
        self.scales.push(ScaleRecord {
            time: now,
            job: f.key,
            from: f.spec_replicas,
            to: target,
            dry_run,
        });
        Ok(())
    }

    /// The job's facts and its target worker replicas when sizing it to `workers` GPUs is
    /// allowed and changes something; `None` when it already has that size.
    fn check_scale(
        &mut self,
        job: JobId,
        workers: u32,
        admit: bool,
        now: f64,
    ) -> Result<Option<(JobFacts, u32)>, BackendError> {
        let err = |k: ErrorKind, m: String| Err(BackendError::new(k, Some(job), m));
        if let Some(g) = &self.hooks.leader {
            if !g.may_act(now) {
                return err(
                    ErrorKind::Unavailable,
                    "not the leader (lease not held or not renewed)".into(),
                );
            }
        }
        let Some(f) = self.facts.get(&job).cloned() else {
            return err(ErrorKind::NotFound, "not in the last snapshot".into());
        };
        let age = now - self.snapshot_time.unwrap_or(f64::NEG_INFINITY);
        if age > self.cfg.safety.max_snapshot_age_s {
            return err(
                ErrorKind::Conflict,
                format!(
                    "stale snapshot ({age:.1} s old > {} s); observe again",
                    self.cfg.safety.max_snapshot_age_s
                ),
            );
        }
        match (admit, f.state) {
            (true, JobState::Running) => {
                return err(
                    ErrorKind::Invalid,
                    format!("{} is running, not queued", f.key),
                )
            }
            (false, JobState::Queued) => {
                return err(
                    ErrorKind::Invalid,
                    format!("{} is queued, not running", f.key),
                )
            }
            _ => {}
        }
        let target = workers / f.gpus_per_worker;
        if target == f.spec_replicas {
            // nothing to patch: the cluster's scheduler admits / the job already has this size
            return Ok(None);
        }
        self.check_bounds_and_budget(job, &f, target, admit, now)?;
        Ok(Some((f, target)))
    }

    /// Refuses a target outside the job's `elasticPolicy` (or a job without one), a scale-down
    /// of a running job with no known checkpoint inside the grace period, and an action over
    /// the job's hourly budget.
    fn check_bounds_and_budget(
        &mut self,
        job: JobId,
        f: &JobFacts,
        target: u32,
        admit: bool,
        now: f64,
    ) -> Result<(), BackendError> {
        let err = |k: ErrorKind, m: String| Err(BackendError::new(k, Some(job), m));
        let kind = f.key.kind;
        let Some((lo, hi)) = f.bounds else {
            return err(
                ErrorKind::Invalid,
                format!("{} {}; observed, never scaled", f.key, kind.observed_only()),
            );
        };
        if target < lo || target > hi {
            return err(
                ErrorKind::Invalid,
                format!(
                    "{} replicas {target} outside {} [{lo}, {hi}]",
                    f.key,
                    kind.bounds_field()
                ),
            );
        }
        let s = &self.cfg.safety;
        if !admit && target < f.spec_replicas {
            let run_s = now - f.started;
            if f.last_checkpoint.is_none() && run_s < s.scale_down_grace_s {
                return err(
                    ErrorKind::Invalid,
                    format!(
                        "scale-down of {} held: no {CHECKPOINT_ANNOTATION} annotation and its run ({run_s:.0} s) is younger than the {} s grace period",
                        f.key, s.scale_down_grace_s
                    ),
                );
            }
        }
        let used = self.budget.used(job, now);
        if used >= s.max_actions_per_job_per_hour {
            return err(
                ErrorKind::Invalid,
                format!(
                    "{} rate-limited: {used} actions in the last hour (max {})",
                    f.key, s.max_actions_per_job_per_hour
                ),
            );
        }
        Ok(())
    }

    /// Reads the job's size, checks it still is what the snapshot saw, and patches it with the
    /// read `resourceVersion`; 409 re-reads, 429/5xx/timeouts back off with jitter.
    async fn patch_scale(&self, job: JobId, f: &JobFacts, target: u32) -> Result<(), BackendError> {
        let api: Api<DynamicObject> = Api::namespaced_with(
            self.client.clone(),
            &f.key.namespace,
            &f.key.kind.resource(),
        );
        let s = &self.cfg.safety;
        let attempts = s.attempts.max(1);
        let mut attempt = 0;
        loop {
            attempt += 1;
            if let Some(g) = &self.hooks.leader {
                if !g.may_act(self.now()) {
                    return Err(BackendError::new(
                        ErrorKind::Unavailable,
                        Some(job),
                        "lost the lease while acting",
                    ));
                }
            }
            let failure = match read_size(s, &api, f).await {
                Err(e) => e,
                Ok((current, _)) if current == target => {
                    // done (by an earlier attempt whose answer was lost, or by someone else)
                    return Ok(());
                }
                Ok((current, _)) if current != f.spec_replicas => {
                    return Err(BackendError::new(
                        ErrorKind::Conflict,
                        Some(job),
                        format!(
                            "{} has {current} worker replicas, the snapshot saw {}: not acting on a stale view",
                            f.key, f.spec_replicas
                        ),
                    ));
                }
                Ok((_, rv)) => match write_size(s, &api, f, rv, target).await {
                    Ok(()) => return Ok(()),
                    Err(e) => e,
                },
            };
            match failure {
                Failure::Permanent(..) => return Err(into_error(failure, Some(job))),
                _ if attempt >= attempts => return Err(into_error(failure, Some(job))),
                Failure::Conflict(ref m) => {
                    tracing::debug!(job = %f.key, attempt, "conflict, re-reading: {m}");
                }
                Failure::Transient(ref m, retry_after) => {
                    let wait = s.backoff(attempt, retry_after);
                    tracing::debug!(job = %f.key, attempt, ?wait, "backing off: {m}");
                    tokio::time::sleep(wait).await;
                }
            }
        }
    }
}

/// A TrainJob has no size Augur may change (its bounds are always `None`; this is the guard).
fn never_scaled() -> Failure {
    Failure::Permanent(
        ErrorKind::Invalid,
        "TrainJobs are never scaled (spec.trainer.numNodes is immutable, no /scale subresource)"
            .into(),
    )
}

/// The job's current size and `resourceVersion`: a PyTorchJob's `/scale` `spec.replicas`, a
/// Job's `spec.parallelism`.
async fn read_size(
    s: &Safety,
    api: &Api<DynamicObject>,
    f: &JobFacts,
) -> Result<(u32, Option<String>), Failure> {
    let name = &f.key.name;
    match f.key.kind {
        JobKind::PyTorchJob => {
            let scale = with_timeout(s, api.get_scale(name)).await?;
            let current = scale.spec.as_ref().and_then(|sp| sp.replicas);
            Ok((
                current.and_then(|r| u32::try_from(r).ok()).unwrap_or(0),
                scale.metadata.resource_version,
            ))
        }
        JobKind::TrainJob => Err(never_scaled()),
        JobKind::Job => {
            let obj = with_timeout(s, api.get(name)).await?;
            let current = obj
                .data
                .pointer("/spec/parallelism")
                .and_then(Value::as_u64)
                .and_then(|n| u32::try_from(n).ok())
                .unwrap_or(1);
            Ok((current, obj.metadata.resource_version))
        }
    }
}

/// Sizes the job to `target` with a merge patch carrying `rv` (a precondition: 409 when the
/// object changed since it was read).
async fn write_size(
    s: &Safety,
    api: &Api<DynamicObject>,
    f: &JobFacts,
    rv: Option<String>,
    target: u32,
) -> Result<(), Failure> {
    let name = &f.key.name;
    let pp = PatchParams::default();
    match f.key.kind {
        JobKind::PyTorchJob => {
            let patch = json!({
                "metadata": { "resourceVersion": rv },
                "spec": { "replicas": target },
            });
            with_timeout(s, api.patch_scale(name, &pp, &Patch::Merge(&patch))).await?;
        }
        JobKind::TrainJob => return Err(never_scaled()),
        JobKind::Job => {
            let patch = json!({
                "metadata": { "resourceVersion": rv },
                "spec": { "parallelism": target },
            });
            with_timeout(s, api.patch(name, &pp, &Patch::Merge(&patch))).await?;
        }
    }
    Ok(())
}
