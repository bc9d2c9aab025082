//! What the model registry stores with a trained predictor, written once for `augur train`
//! and `augur serve`: the held-out metrics of each kind (measured on the last 20% of the
//! time-ordered split) and [`save_artifact`], which saves a predictor as the next version of
//! its kind with them.

use std::collections::BTreeMap;
use std::path::PathBuf;

use augur_predictor::failure::{METHOD_GBDT, METHOD_PAST_RATE, METHOD_SVM};
use augur_predictor::metrics::{coverage, mae_log, within2x};
use augur_predictor::registry::Artifact;
use augur_predictor::{
    ArtifactMeta, ConvergenceEvaluation, FailureEvaluation, ModelRegistry, NewArtifact,
    QueueWaitEvaluation, RegistryError, RuntimeEvaluation,
};

/// A predictor could not be saved.
#[derive(Debug, thiserror::Error)]
#[error("saving to the registry {}", root.display())]
pub struct SaveError {
    /// The registry's folder.
    pub root: PathBuf,
    #[source]
    pub source: RegistryError,
}

/// What a predictor was trained on: a trace's name, or a service's ingested history and
/// where in its event log that history starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Source<'a> {
    /// The artifacts' `dataset`.
    pub name: &'a str,
    /// See [`ArtifactMeta::history_from_seq`].
    pub history_from_seq: Option<i64>,
}

impl<'a> From<&'a String> for Source<'a> {
    fn from(name: &'a String) -> Source<'a> {
        Source::from(name.as_str())
    }
}

impl<'a> From<&'a str> for Source<'a> {
    /// A trace (or another source outside an event log).
    fn from(name: &'a str) -> Source<'a> {
        Source {
            name,
            history_from_seq: None,
        }
    }
}

/// Saves `predictor` as the next version of its kind in `registry`, with what it was trained
/// on (`source`, `training_rows`), its held-out metrics and its notes.
pub fn save_artifact<'a, T: Artifact>(
    registry: &ModelRegistry,
    predictor: &T,
    source: impl Into<Source<'a>>,
    training_rows: usize,
    metrics: BTreeMap<String, f64>,
    notes: BTreeMap<String, String>,
) -> Result<ArtifactMeta, SaveError> {
    let source = source.into();
    let mut info = NewArtifact::new(source.name, training_rows);
    info.metrics = metrics;
    info.notes = notes;
    info.history_from_seq = source.history_from_seq;
    registry.save(predictor, info).map_err(|source| SaveError {
        root: registry.root().to_path_buf(),
        source,
    })
}

/// The runtime model's metrics on the held-out test jobs, plus the baselines' `mae_log`.
pub fn runtime_metrics(eval: &RuntimeEvaluation) -> BTreeMap<String, f64> {
    let actual = &eval.test_actual;
    let p: Vec<f64> = eval.test_pred.iter().map(|p| p.seconds).collect();
    let lo: Vec<f64> = eval.test_pred.iter().map(|p| p.lower).collect();
    let hi: Vec<f64> = eval.test_pred.iter().map(|p| p.upper).collect();
    let static_cov = coverage(&lo, &hi, actual);
    let mut m = BTreeMap::new();
    m.insert("mae_log".to_string(), mae_log(&p, actual));
    m.insert("within2x".to_string(), within2x(&p, actual));
    m.insert("coverage80_static".to_string(), static_cov);
    // the service serves online-conformal intervals: that is the headline coverage
    let online = eval.test_methods.iter().find_map(|mp| mp.interval.as_ref());
    let cov = online.map_or(static_cov, |iv| {
        let lo: Vec<f64> = iv.iter().map(|v| v.0).collect();
        let hi: Vec<f64> = iv.iter().map(|v| v.1).collect();
        coverage(&lo, &hi, actual)
    });
    m.insert("coverage80".to_string(), cov);
    for b in eval.test_methods.iter().filter(|mp| mp.interval.is_none()) {
        m.insert(
            format!("baseline mae_log: {}", b.method),
            mae_log(&b.seconds, actual),
        );
    }
    m.insert("test_jobs".to_string(), eval.n_test as f64);
    m.retain(|_, v| v.is_finite());
    m
}

/// The served queue-wait model's metrics on the held-out jobs.
pub fn queue_wait_metrics(eval: &QueueWaitEvaluation) -> BTreeMap<String, f64> {
    // the served model's row (the risk-split bound online when the model has one, else the
    // online adaptive bound; not the baselines' or the hindsight row)
    let mut metrics = BTreeMap::new();
    let served = eval
        .rows
        .iter()
        .find(|r| r.method.starts_with("augur") && r.method.contains("risk-split online"))
        .or_else(|| {
            eval.rows
                .iter()
                .find(|r| r.method.starts_with("augur") && r.method.contains("online"))
        })
        .or_else(|| {
            eval.rows
                .iter()
                .find(|r| r.method.starts_with("augur") && r.metrics.coverage95.is_some())
        });
    if let Some(r) = served.map(|r| &r.metrics) {
        metrics.insert("mae_s".to_string(), r.mae_s);
        metrics.insert("within60".to_string(), r.within60);
        metrics.insert("within600".to_string(), r.within600);
        if let Some(c) = r.coverage95 {
            metrics.insert("coverage95".to_string(), c);
        }
        if let Some(b) = r.median_bound_s {
            metrics.insert("median_bound_s".to_string(), b);
        }
    }
    metrics.insert("test_jobs".to_string(), eval.n_test as f64);
    metrics.retain(|_, v| v.is_finite());
    metrics
}

/// The failure models' (SVM and GBDT) metrics on the held-out labelled jobs.
pub fn failure_metrics(eval: &FailureEvaluation) -> BTreeMap<String, f64> {
    let mut metrics = BTreeMap::new();
    for r in &eval.rows {
        let tag = if r.method == METHOD_SVM {
            "svm"
        } else if r.method == METHOD_GBDT {
            "gbdt"
        } else if r.method == METHOD_PAST_RATE {
            "past_rate"
        } else {
            continue;
        };
        metrics.insert(format!("{tag} roc_auc"), r.metrics.roc_auc);
        metrics.insert(format!("{tag} pr_auc"), r.metrics.pr_auc);
        metrics.insert(format!("{tag} recall_at_10fpr"), r.metrics.recall_at_10fpr);
        metrics.insert(format!("{tag} brier"), r.metrics.brier);
    }
    metrics.insert("base_rate_test".into(), eval.base_rate_test);
    metrics.insert("test_jobs".into(), eval.n_test as f64);
    metrics.retain(|_, v| v.is_finite());
    metrics
}

/// The convergence methods' median relative error (and the 80% interval's coverage) per
/// prefix over all held-out runs.
pub fn convergence_metrics(eval: &ConvergenceEvaluation) -> BTreeMap<String, f64> {
    let mut metrics = BTreeMap::new();
    for s in eval.scores.iter().filter(|s| s.group == "all") {
        for m in &s.methods {
            metrics.insert(
                format!("{} median_rel_error@{:.0}%", m.method, s.prefix * 100.0),
                m.metrics.median_rel_error,
            );
            if let Some(c) = m.metrics.coverage {
                metrics.insert(
                    format!("{} coverage80@{:.0}%", m.method, s.prefix * 100.0),
                    c,
                );
            }
        }
    }
    metrics.insert("test_runs".to_string(), eval.n_test_runs as f64);
    metrics.retain(|_, v| v.is_finite());
    metrics
}
