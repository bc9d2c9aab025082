//! Models for the service: load the served versions from the registry, train them from the
//! bundled sample on first start, retrain them from the ingested history.
//!
//! Training follows `augur train`: the model measured on a time-ordered 80/20 split is the
//! one stored, with its held-out metrics. The queue-wait predictor is stored as kind
//! `queue_wait` next to `runtime` in the same registry.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use augur_datasets::bundled::Dataset;
use augur_datasets::{JobRecord, ReadOptions};
use augur_predictor::convergence::load_bundled_mlperf;
use augur_predictor::registry::Selector;
use augur_predictor::{
    evaluate_convergence, evaluate_failure, evaluate_queue_wait, evaluate_runtime, ArtifactMeta,
    ConvergencePredictor, ConvergenceTrainer, FailurePredictor, FailureTrainer, ModelRegistry,
    NewArtifact, QueueWaitPredictor, QueueWaitTrainer, RegistryError, RuntimePredictor,
};
use serde::Serialize;

use super::online::{Served, ServedModels};

/// Registry kind of the queue-wait predictor.
pub const QUEUE_WAIT_KIND: &str = "queue_wait";
/// Registry kind of the runtime predictor.
pub const RUNTIME_KIND: &str = "runtime";

/// Registry kind of the failure predictor.
pub const FAILURE_KIND: &str = "failure";
/// Registry kind of the convergence predictor.
pub const CONVERGENCE_KIND: &str = "convergence";

/// What a training run produced.
#[derive(Debug, Clone, Serialize)]
pub struct TrainReport {
    pub source: String,
    pub jobs: usize,
    pub runtime: Option<ArtifactMeta>,
    pub queue_wait: Option<ArtifactMeta>,
    pub failure: Option<ArtifactMeta>,
    /// Why a model was not trained (e.g. too few jobs with a known wait).
    pub skipped: Vec<String>,
}

/// Loads the served version (promoted, else latest) of each kind; a kind with no version
/// yet is `None`.
pub fn load_serving(registry: &ModelRegistry) -> anyhow::Result<ServedModels> {
    let runtime = match registry.load::<RuntimePredictor>(Selector::Serving) {
        Ok((m, meta)) => Some(Served {
            model: Arc::new(m),
            meta,
        }),
        Err(RegistryError::Empty { .. }) => None,
        Err(e) => return Err(e).context("loading the served runtime model"),
    };
    let queue_wait = match registry.load::<QueueWaitPredictor>(Selector::Serving) {
        Ok((m, meta)) => Some(Served {
            model: Arc::new(m),
            meta,
        }),
        Err(RegistryError::Empty { .. }) => None,
        Err(e) => return Err(e).context("loading the served queue-wait model"),
    };
    let failure = match registry.load::<FailurePredictor>(Selector::Serving) {
        Ok((m, meta)) => Some(Served {
            model: Arc::new(m),
            meta,
        }),
        Err(RegistryError::Empty { .. }) => None,
        Err(e) => return Err(e).context("loading the served failure model"),
    };
    let convergence = match registry.load::<ConvergencePredictor>(Selector::Serving) {
        Ok((m, meta)) => Some(Served {
            model: Arc::new(m),
            meta,
        }),
        Err(RegistryError::Empty { .. }) => None,
        Err(e) => return Err(e).context("loading the served convergence model"),
    };
    Ok(ServedModels {
        runtime,
        queue_wait,
        failure,
        convergence,
    })
}

/// Whether the registry has no version of either kind the service serves.
pub fn registry_is_empty(registry: &ModelRegistry) -> anyhow::Result<bool> {
    Ok(registry.version_numbers(RUNTIME_KIND)?.is_empty()
        && registry.version_numbers(QUEUE_WAIT_KIND)?.is_empty()
        && registry.version_numbers(FAILURE_KIND)?.is_empty())
}

/// The jobs of a bundled dataset, the first `limit` by submit time if given.
pub fn bundled_jobs(name: &str, limit: Option<usize>) -> anyhow::Result<Vec<JobRecord>> {
    let ds = Dataset::parse(name)?;
    let (table, _) = ds
        .load(&ReadOptions::default())
        .with_context(|| format!("reading the bundled {name} trace"))?;
    let mut jobs = table.to_records()?;
    jobs.sort_by(|a, b| a.submit_time.total_cmp(&b.submit_time));
    if let Some(n) = limit {
        jobs.truncate(n);
    }
    Ok(jobs)
}

/// Trains both predictors on `jobs` (80/20 by submit time, metrics on the 20%), saves them
/// as new versions and promotes them. A predictor that cannot be trained (too few labelled
/// jobs, e.g. a trace without start times has no queue waits) is skipped with the reason.
pub fn train_and_save(
    registry: &ModelRegistry,
    source: &str,
    jobs: &[JobRecord],
    trees: Option<usize>,
) -> anyhow::Result<TrainReport> {
    let mut report = TrainReport {
        source: source.to_string(),
        jobs: jobs.len(),
        runtime: None,
        queue_wait: None,
        failure: None,
        skipped: Vec::new(),
    };
    match train_runtime(registry, source, jobs, trees)? {
        Ok(meta) => report.runtime = Some(meta),
        Err(why) => report.skipped.push(format!("runtime: {why}")),
    }
    match train_queue_wait(registry, source, jobs, trees)? {
        Ok(meta) => report.queue_wait = Some(meta),
        Err(why) => report.skipped.push(format!("queue_wait: {why}")),
    }
    match train_failure(registry, source, jobs, trees)? {
        Ok(meta) => report.failure = Some(meta),
        Err(why) => report.skipped.push(format!("failure: {why}")),
    }
    Ok(report)
}

/// Trains, saves and promotes the runtime predictor; `Ok(Err(why))` when the jobs cannot
/// train one.
pub fn train_runtime(
    registry: &ModelRegistry,
    source: &str,
    jobs: &[JobRecord],
    trees: Option<usize>,
) -> anyhow::Result<Result<ArtifactMeta, String>> {
    let trainer = crate::evaluate::trainer(trees);
    let mut eval = match evaluate_runtime(jobs, &trainer) {
        Ok(e) => e,
        Err(e) => return Ok(Err(e.to_string())),
    };
    let metrics = crate::train::held_out_metrics(&eval);
    let predictor = eval
        .predictor
        .take()
        .context("the evaluation returned no trained predictor")?;
    let mut info = NewArtifact::new(source, eval.n_train);
    info.metrics = metrics;
    info.notes = notes(&trainer.params.n_trees.to_string(), eval.n_test);
    let meta = registry.save(&predictor, info)?;
    registry.promote(RUNTIME_KIND, meta.version)?;
    Ok(Ok(meta))
}

/// Trains, saves and promotes the queue-wait predictor; `Ok(Err(why))` when the jobs
/// cannot train one.
pub fn train_queue_wait(
    registry: &ModelRegistry,
    source: &str,
    jobs: &[JobRecord],
    trees: Option<usize>,
) -> anyhow::Result<Result<ArtifactMeta, String>> {
    let mut qtrainer = QueueWaitTrainer {
        runtime: crate::evaluate::trainer(trees),
        ..QueueWaitTrainer::default()
    };
    if let Some(n) = trees {
        qtrainer = qtrainer.with_trees(n);
    }
    let mut eval = match evaluate_queue_wait(jobs, &qtrainer) {
        Ok(e) => e,
        Err(e) => return Ok(Err(e.to_string())),
    };
    let predictor = eval
        .predictor
        .take()
        .context("the queue-wait evaluation returned no trained predictor")?;
    let mut metrics = BTreeMap::new();
    if let Some(row) = eval.rows.iter().find(|r| r.method.contains("online")) {
        metrics.insert("mae_s".to_string(), row.mae_s);
        metrics.insert("within60".to_string(), row.within60);
        metrics.insert("within600".to_string(), row.within600);
        if let Some(c) = row.coverage95 {
            metrics.insert("coverage95".to_string(), c);
        }
    }
    metrics.insert("test_jobs".to_string(), eval.n_test as f64);
    metrics.retain(|_, v| v.is_finite());
    let mut info = NewArtifact::new(source, eval.n_train);
    info.metrics = metrics;
    info.notes = notes(&qtrainer.point.n_trees.to_string(), eval.n_test);
    let meta = registry.save(&predictor, info)?;
    registry.promote(QUEUE_WAIT_KIND, meta.version)?;
    Ok(Ok(meta))
}

/// Trains, saves and promotes the failure predictor; `Ok(Err(why))` when the jobs cannot
/// train one (e.g. no job statuses, as in the bundled Philly trace).
pub fn train_failure(
    registry: &ModelRegistry,
    source: &str,
    jobs: &[JobRecord],
    trees: Option<usize>,
) -> anyhow::Result<Result<ArtifactMeta, String>> {
    let mut trainer = FailureTrainer::default();
    if let Some(n) = trees {
        trainer.gbdt.n_trees = n.max(1);
    }
    let mut eval = match evaluate_failure(jobs, &trainer) {
        Ok(e) => e,
        Err(e) => return Ok(Err(e.to_string())),
    };
    let predictor = eval
        .predictor
        .take()
        .context("the failure evaluation returned no trained predictor")?;
    let mut metrics = BTreeMap::new();
    for r in &eval.rows {
        metrics.insert(format!("{} roc_auc", r.method), r.roc_auc);
        metrics.insert(format!("{} brier", r.method), r.brier);
    }
    metrics.insert("base_rate_test".to_string(), eval.base_rate_test);
    metrics.insert("test_jobs".to_string(), eval.n_test as f64);
    metrics.retain(|_, v| v.is_finite());
    let mut info = NewArtifact::new(source, eval.n_train);
    info.metrics = metrics;
    info.notes = notes(&trainer.gbdt.n_trees.to_string(), eval.n_test);
    let meta = registry.save(&predictor, info)?;
    registry.promote(FAILURE_KIND, meta.version)?;
    Ok(Ok(meta))
}

fn notes(max_trees: &str, n_test: usize) -> BTreeMap<String, String> {
    let mut notes = BTreeMap::new();
    notes.insert("max_trees".to_string(), max_trees.to_string());
    notes.insert(
        "metrics_on".to_string(),
        format!("last 20% of labelled jobs by submit time ({n_test} jobs, held out)"),
    );
    notes.insert(
        "trained_on".to_string(),
        "first 80% of labelled jobs by submit time".to_string(),
    );
    notes.insert("trained_by".to_string(), "augur serve".to_string());
    notes
}

/// Whether the registry has no convergence model yet.
pub fn needs_convergence(registry: &ModelRegistry) -> anyhow::Result<bool> {
    Ok(registry.version_numbers(CONVERGENCE_KIND)?.is_empty())
}

/// Trains the convergence predictor on the bundled MLPerf v1.0 runs (first 80% by run start;
/// metrics on the last 20%, as `augur evaluate --task convergence`), saves and promotes it.
pub fn train_convergence(
    registry: &ModelRegistry,
    trees: Option<usize>,
) -> anyhow::Result<Result<ArtifactMeta, String>> {
    let runs = match load_bundled_mlperf() {
        Ok(r) => r,
        Err(e) => return Ok(Err(e.to_string())),
    };
    let mut trainer = ConvergenceTrainer::default();
    if let Some(n) = trees {
        trainer.trees = n.max(10);
    }
    let mut eval = match evaluate_convergence(&runs, &trainer) {
        Ok(e) => e,
        Err(e) => return Ok(Err(e.to_string())),
    };
    let predictor = eval
        .predictor
        .take()
        .context("the convergence evaluation returned no trained predictor")?;
    let mut metrics = BTreeMap::new();
    for s in eval.scores.iter().filter(|s| s.group == "all") {
        for m in &s.methods {
            metrics.insert(
                format!("{} median_rel_error@{:.0}%", m.method, s.prefix * 100.0),
                m.median_rel_error,
            );
            if let Some(c) = m.coverage {
                metrics.insert(
                    format!("{} coverage80@{:.0}%", m.method, s.prefix * 100.0),
                    c,
                );
            }
        }
    }
    metrics.insert("test_runs".to_string(), eval.n_test_runs as f64);
    metrics.retain(|_, v| v.is_finite());
    let mut info = NewArtifact::new("mlperf", eval.n_train_runs);
    info.metrics = metrics;
    info.notes = notes(&trainer.trees.to_string(), eval.n_test_runs);
    let meta = registry.save(&predictor, info)?;
    registry.promote(CONVERGENCE_KIND, meta.version)?;
    Ok(Ok(meta))
}

/// Opens the registry under the data folder.
pub fn open_registry(data_dir: &Path) -> anyhow::Result<ModelRegistry> {
    ModelRegistry::open(data_dir.join("models")).context("opening the model registry")
}
