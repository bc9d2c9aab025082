//! Whether a newly trained version replaces the served one.
//!
//! Both are scored on the same held-out slice: the newest 20% of the history by submit time
//! (the test part of the time-ordered split the new version was evaluated on). The new
//! version is promoted only when (checked in this order; the first that fails is the reason)
//! - the slice holds at least `min_test_jobs` labelled jobs,
//! - its primary metric there is not worse than the served version's: runtime `mae_log`,
//!   queue-wait `mae_s` (lower is better), failure `pr_auc` (higher is better),
//! - its interval's coverage there is not below nominal − [`COVERAGE_TOLERANCE`] (runtime
//!   80%, queue wait 95%; failure answers have no interval).
//!
//! A kind with no served version gets the new one when the first two hold.

use augur_datasets::{JobRecord, TimeSplit};
use augur_features::{batch_features, failure_batch_features, failure_label};
use augur_predictor::failure::SvmScratch;
use augur_predictor::metrics::classification::{average_precision, brier};
use augur_predictor::metrics::mae_log;
use augur_predictor::queue_wait::{known_wait, replay_queue_features, QueueJob};
use augur_predictor::{FailurePredictor, QueueWaitPredictor, RuntimePredictor};
use serde::Serialize;

/// How far below its nominal coverage a new version's interval may fall on the held-out
/// slice and still be promoted.
pub const COVERAGE_TOLERANCE: f64 = 0.05;

/// The promotion rule of a retrain (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Gate {
    /// Fewest labelled jobs in the held-out slice for a promotion.
    pub min_test_jobs: usize,
}

/// A primary metric and which way is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Metric {
    pub name: &'static str,
    pub higher_is_better: bool,
}

/// Runtime: mean absolute error of log seconds.
pub const MAE_LOG: Metric = Metric {
    name: "mae_log",
    higher_is_better: false,
};
/// Queue wait: mean absolute error, seconds.
pub const MAE_S: Metric = Metric {
    name: "mae_s",
    higher_is_better: false,
};
/// Failure: area under the precision-recall curve.
pub const PR_AUC: Metric = Metric {
    name: "pr_auc",
    higher_is_better: true,
};
/// DAG: mean absolute error of log makespan seconds.
pub const MAKESPAN_MAE_LOG: Metric = Metric {
    name: "makespan_mae_log",
    higher_is_better: false,
};

/// What a new version and the served one scored on the held-out slice.
#[derive(Debug, Clone, PartialEq)]
pub struct Scores {
    pub metric: Metric,
    /// Labelled jobs in the held-out slice.
    pub test_jobs: usize,
    /// The new version's primary metric.
    pub new: Option<f64>,
    /// The new version's interval coverage and its nominal level.
    pub coverage: Option<(f64, f64)>,
    /// The served version and its primary metric on the same jobs (`None`: none served).
    pub served: Option<(u32, Option<f64>)>,
}

/// The decision on one new version, with the numbers it rests on.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Verdict {
    /// `runtime`, `queue_wait`, `failure` or `dag`.
    pub kind: String,
    /// The new version (saved either way); none when the history could not train one
    /// (`reason` says why, the served version stays).
    pub version: Option<u32>,
    /// Whether it is served now.
    pub promoted: bool,
    /// Why, with the numbers.
    pub reason: String,
    /// The primary metric compared.
    pub metric: String,
    /// Labelled jobs in the held-out slice (the newest 20% by submit time).
    pub test_jobs: usize,
    /// The new version's primary metric on the slice.
    pub new_score: Option<f64>,
    /// The version served before and its primary metric on the same jobs.
    pub served_version: Option<u32>,
    pub served_score: Option<f64>,
    /// The new version's interval coverage on the slice, and the nominal level.
    pub coverage: Option<f64>,
    pub nominal_coverage: Option<f64>,
}

impl Verdict {
    /// The decision on `scores` for version `version` of `kind`: under `gate`, or always
    /// promoted without one (first start).
    pub fn judge(kind: &str, version: u32, scores: &Scores, gate: Option<Gate>) -> Verdict {
        let (promoted, reason) = match gate {
            None => (true, "trained at first start".to_string()),
            Some(g) => decide(scores, g),
        };
        Verdict {
            kind: kind.to_string(),
            version: Some(version),
            promoted,
            reason,
            metric: scores.metric.name.to_string(),
            test_jobs: scores.test_jobs,
            new_score: scores.new,
            served_version: scores.served.map(|(v, _)| v),
            served_score: scores.served.and_then(|(_, s)| s),
            coverage: scores.coverage.map(|c| c.0),
            nominal_coverage: scores.coverage.map(|c| c.1),
        }
    }

    /// The verdict on a kind the history cannot train: nothing new, `served_version` (if
    /// any) stays served, `reason` says what the history lacks.
    pub fn not_trained(
        kind: &str,
        metric: Metric,
        served_version: Option<u32>,
        reason: String,
    ) -> Verdict {
        Verdict {
            kind: kind.to_string(),
            version: None,
            promoted: false,
            reason,
            metric: metric.name.to_string(),
            test_jobs: 0,
            new_score: None,
            served_version,
            served_score: None,
            coverage: None,
            nominal_coverage: None,
        }
    }
}

fn decide(s: &Scores, gate: Gate) -> (bool, String) {
    let m = s.metric.name;
    if s.test_jobs < gate.min_test_jobs {
        return (
            false,
            format!(
                "{} held-out test jobs; a promotion needs at least {} (min_test_jobs)",
                s.test_jobs, gate.min_test_jobs
            ),
        );
    }
    let Some(new) = s.new.filter(|v| v.is_finite()) else {
        return (false, format!("no held-out {m} for the new version"));
    };
    let n = s.test_jobs;
    let served_note = match s.served {
        None => "no model was served".to_string(),
        Some((served_v, served)) => {
            let Some(old) = served.filter(|v| v.is_finite()) else {
                return (
                    false,
                    format!("held-out {m} {new:.4}; the served v{served_v} could not be scored on the same jobs, so it stays"),
                );
            };
            let not_worse = if s.metric.higher_is_better {
                new >= old
            } else {
                new <= old
            };
            if !not_worse {
                return (
                    false,
                    format!("held-out {m} {new:.4} is worse than the served v{served_v}'s {old:.4} on the same {n} jobs"),
                );
            }
            format!("not worse than the served v{served_v}'s {old:.4} on the same {n} jobs")
        }
    };
    if let Some((cov, nominal)) = s.coverage {
        if cov.is_nan() || cov < nominal - COVERAGE_TOLERANCE {
            return (
                false,
                format!(
                    "held-out interval coverage {cov:.3} is below the nominal {nominal:.2} minus the tolerance {COVERAGE_TOLERANCE}"
                ),
            );
        }
    }
    (true, format!("held-out {m} {new:.4}; {served_note}"))
}

/// Test rows of the time-ordered 80/20 split of `jobs` (the newest 20% by submit time)
/// that pass `labelled`, as the evaluations pick them.
fn newest_slice(jobs: &[JobRecord], labelled: impl Fn(&JobRecord) -> bool) -> Vec<usize> {
    let submit: Vec<f64> = jobs.iter().map(|j| j.submit_time).collect();
    let split = TimeSplit::default_for(&submit);
    split
        .test()
        .iter()
        .copied()
        .filter(|&i| labelled(&jobs[i]))
        .collect()
}

/// Held-out `mae_log` of a runtime predictor on the newest 20% of `jobs` (features replayed
/// over the whole trace, as offline and online agree); `None` with no scored job.
pub fn runtime_mae_log_on_newest(model: &RuntimePredictor, jobs: &[JobRecord]) -> Option<f64> {
    let rows = newest_slice(jobs, |j| j.duration.is_some_and(f64::is_finite));
    if rows.is_empty() {
        return None;
    }
    let x = batch_features(jobs, &model.schema);
    let d = model.schema.len();
    let mut pred = Vec::with_capacity(rows.len());
    let mut actual = Vec::with_capacity(rows.len());
    for &i in &rows {
        pred.push(model.predict_log(&x[i * d..(i + 1) * d]).exp());
        actual.push(jobs[i].duration.unwrap_or(f64::NAN));
    }
    Some(mae_log(&pred, &actual))
}

/// Held-out `mae_s` of a queue-wait predictor on the newest 20% of `jobs` (jobs with a
/// known wait), its features replayed over the whole trace with its own run-time model and
/// capacity; `None` with no scored job.
pub fn queue_wait_mae_s_on_newest(
    model: &QueueWaitPredictor,
    jobs: &[JobRecord],
) -> anyhow::Result<Option<f64>> {
    let rows = newest_slice(jobs, |j| known_wait(j).is_some());
    if rows.is_empty() {
        return Ok(None);
    }
    let schema = &model.runtime.schema;
    let hx = batch_features(jobs, schema);
    let h = schema.len();
    let queue_jobs: Vec<QueueJob> = jobs
        .iter()
        .enumerate()
        .map(|(i, j)| {
            let rt = model.runtime.predict_log(&hx[i * h..(i + 1) * h]).exp();
            QueueJob::from_record(j, model.resource, rt)
        })
        .collect();
    let qx = replay_queue_features(jobs, &queue_jobs, model.capacity)?;
    let qd = qx.len() / jobs.len().max(1);
    let mut row = vec![0.0f32; h + qd];
    let mut abs_err = 0.0;
    for &i in &rows {
        row[..h].copy_from_slice(&hx[i * h..(i + 1) * h]);
        row[h..].copy_from_slice(&qx[i * qd..(i + 1) * qd]);
        let p = model.predict_row(&row).seconds;
        abs_err += (p - known_wait(&jobs[i]).unwrap_or(0.0)).abs();
    }
    Ok(Some(abs_err / rows.len() as f64))
}

/// Held-out `(pr_auc, brier)` of a failure predictor's served probability on the newest
/// 20% of `jobs` (jobs with a known outcome); `None` with no scored job.
pub fn failure_scores_on_newest(
    model: &FailurePredictor,
    jobs: &[JobRecord],
) -> Option<(f64, f64)> {
    let rows = newest_slice(jobs, |j| failure_label(j.status).is_some());
    if rows.is_empty() {
        return None;
    }
    let x = failure_batch_features(jobs, &model.schema);
    let d = model.schema.len();
    let mut scratch = SvmScratch::default();
    let mut probs = Vec::with_capacity(rows.len());
    let mut labels = Vec::with_capacity(rows.len());
    for &i in &rows {
        probs.push(
            model
                .predict_row(&x[i * d..(i + 1) * d], &mut scratch)
                .probability,
        );
        labels.push(failure_label(jobs[i].status).unwrap_or(false));
    }
    Some((average_precision(&probs, &labels), brier(&probs, &labels)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scores(test_jobs: usize, new: f64, cov: f64, served: Option<f64>) -> Scores {
        Scores {
            metric: MAE_LOG,
            test_jobs,
            new: Some(new),
            coverage: Some((cov, 0.8)),
            served: served.map(|s| (1, Some(s))),
        }
    }

    const GATE: Option<Gate> = Some(Gate { min_test_jobs: 50 });

    #[test]
    fn too_few_test_jobs_are_not_promoted_even_with_no_served_model() {
        let v = Verdict::judge("runtime", 2, &scores(1, 6.7, 0.0, None), GATE);
        assert!(!v.promoted);
        assert!(v.reason.contains("1 held-out test jobs"), "{}", v.reason);
    }

    #[test]
    fn low_coverage_is_not_promoted() {
        let v = Verdict::judge("runtime", 2, &scores(500, 0.5, 0.70, Some(0.9)), GATE);
        assert!(!v.promoted);
        assert!(v.reason.contains("coverage 0.700"), "{}", v.reason);
        let v = Verdict::judge("runtime", 2, &scores(500, 0.5, 0.76, Some(0.9)), GATE);
        assert!(v.promoted, "{}", v.reason);
    }

    #[test]
    fn a_worse_primary_metric_keeps_the_served_version() {
        let v = Verdict::judge("runtime", 2, &scores(500, 1.2, 0.8, Some(0.9)), GATE);
        assert!(!v.promoted);
        assert_eq!(v.served_version, Some(1));
        assert_eq!(v.served_score, Some(0.9));
        assert!(v.reason.starts_with("held-out mae_log 1.2000 is worse"));
        let mut s = scores(500, 0.3, 0.8, Some(0.4));
        s.metric = PR_AUC; // higher is better: 0.3 < 0.4 is worse
        assert!(!Verdict::judge("failure", 2, &s, GATE).promoted);
    }

    #[test]
    fn without_a_gate_everything_is_promoted() {
        assert!(Verdict::judge("runtime", 1, &scores(1, 6.7, 0.0, None), None).promoted);
    }
}
