//! The reconcile loop over any [`ClusterBackend`], in the spirit of kube-rs controllers: one
//! `reconcile` call observes the cluster, asks the policy, applies its decisions in order, and
//! leaves what failed for the next call (the backend is observed afresh, so nothing stale is
//! retried blindly).

use crate::backend::ClusterBackend;
use crate::decision::{Decision, DecisionRecord};
use crate::error::BackendError;
use crate::policies::policy::Policy;

/// What one reconcile did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReconcileReport {
    /// Decisions applied.
    pub applied: usize,
    /// The decision that failed for good (permanent error, or retries used up), if any: the
    /// rest of that batch was planned on it and is left for the next reconcile.
    pub failed: Option<(Decision, BackendError)>,
    /// Decisions not tried because an earlier one failed.
    pub skipped: usize,
    /// Retries spent on retryable errors.
    pub retries: u32,
    /// When the policy wants to be asked again at the latest.
    pub wake_at: Option<f64>,
}

/// A policy driving a backend.
#[derive(Debug)]
pub struct Controller<P> {
    pub policy: P,
    /// Attempts per action for retryable errors (≥ 1).
    pub max_attempts: u32,
    log: Vec<DecisionRecord>,
}

impl<P: Policy> Controller<P> {
    /// A controller trying each action up to 3 times.
    pub fn new(policy: P) -> Controller<P> {
        Controller {
            policy,
            max_attempts: 3,
            log: Vec::new(),
        }
    }

    /// Every decision taken so far, with its outcome.
    pub fn log(&self) -> &[DecisionRecord] {
        &self.log
    }

    /// Takes the decisions logged so far, leaving the log empty (a long-running loop keeps its
    /// own bounded history instead of letting the log grow).
    pub fn take_log(&mut self) -> Vec<DecisionRecord> {
        std::mem::take(&mut self.log)
    }

    /// Observe, decide, act. An error observing the cluster is returned (requeue and try
    /// again); errors acting are reported in the [`ReconcileReport`].
    pub async fn reconcile<B: ClusterBackend>(
        &mut self,
        backend: &mut B,
    ) -> Result<ReconcileReport, BackendError> {
        let snap = backend.observe().await?;
        let mut decisions = Vec::new();
        let mut report = ReconcileReport {
            wake_at: self.policy.decide(&snap, &mut decisions),
            ..Default::default()
        };
        let total = decisions.len();
        for (k, d) in decisions.into_iter().enumerate() {
            let mut attempt = 1;
            let result = loop {
                match backend.apply(d).await {
                    Err(e) if e.is_retryable() && attempt < self.max_attempts.max(1) => {
                        attempt += 1;
                        report.retries += 1;
                    }
                    other => break other,
                }
            };
            self.log.push(DecisionRecord {
                time: snap.time,
                decision: d,
                error: result.as_ref().err().map(ToString::to_string),
            });
            match result {
                Ok(()) => report.applied += 1,
                Err(e) => {
                    report.failed = Some((d, e));
                    report.skipped = total - k - 1;
                    break;
                }
            }
        }
        Ok(report)
    }
}
