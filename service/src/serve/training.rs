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
use augur_datasets::{JobRecord, ReadOptions, TimeSplit};
use augur_features::batch_features;
use augur_predictor::convergence::load_bundled_mlperf;
use augur_predictor::metrics::mae_log;
use augur_predictor::queue_wait::{known_wait, replay_queue_features, QueueJob};
use augur_predictor::registry::Selector;
use augur_predictor::{
    train_and_evaluate_convergence, train_and_evaluate_failure, train_and_evaluate_queue_wait,
    train_and_evaluate_runtime, ArtifactMeta, ConvergencePredictor, FailurePredictor,
    ModelRegistry, QueueWaitPredictor, RegistryError, RuntimePredictor,
};
use serde::Serialize;

use super::online::{Served, ServedModels};
use crate::model_store::{
    convergence_metrics, failure_metrics, queue_wait_metrics, runtime_metrics, save_artifact,
};
use crate::trainers;

/// Registry kind of the queue-wait predictor.
pub const QUEUE_WAIT_KIND: &str = "queue_wait";
/// Registry kind of the runtime predictor.
pub const RUNTIME_KIND: &str = "runtime";

/// Registry kind of the failure predictor.
pub const FAILURE_KIND: &str = "failure";
/// Registry kind of the convergence predictor.
pub const CONVERGENCE_KIND: &str = "convergence";

/// What a training run produced.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct TrainReport {
    pub source: String,
    pub jobs: usize,
    /// The registry metadata of each version saved.
    #[schema(value_type = Option<Object>)]
    pub runtime: Option<ArtifactMeta>,
    #[schema(value_type = Option<Object>)]
    pub queue_wait: Option<ArtifactMeta>,
    #[schema(value_type = Option<Object>)]
    pub failure: Option<ArtifactMeta>,
    /// Why a model was not trained (e.g. too few jobs with a known wait).
    pub skipped: Vec<String>,
    /// Trained and saved but not promoted, with the reason (background retrains only: the
    /// served model scored better on the newest slice).
    #[serde(default)]
    pub kept: Vec<String>,
}

/// Whether a newly trained version is promoted (served).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Promotion {
    /// Always (first start, `POST /v1/models/retrain`).
    Always,
    /// Only when the kind has no served version yet, or when the new version's held-out
    /// metric on the newest slice (the last 20% by submit time) is not worse than the served
    /// version's on the same jobs: runtime `mae_log`, queue-wait `mae_s`. A failure model
    /// is promoted only when none is served (no same-slice comparison for it yet).
    IfNotWorse,
}

/// What happened to a trained version.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    Promoted,
    /// Saved, not promoted; why.
    Kept(String),
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
    train_and_save_with(registry, source, jobs, trees, Promotion::Always)
}

/// [`train_and_save`] with a promotion policy: every version trained is saved; it is
/// promoted as `promotion` says (a version kept back is listed in [`TrainReport::kept`]).
pub fn train_and_save_with(
    registry: &ModelRegistry,
    source: &str,
    jobs: &[JobRecord],
    trees: Option<usize>,
    promotion: Promotion,
) -> anyhow::Result<TrainReport> {
    let mut report = TrainReport {
        source: source.to_string(),
        jobs: jobs.len(),
        runtime: None,
        queue_wait: None,
        failure: None,
        skipped: Vec::new(),
        kept: Vec::new(),
    };
    match train_runtime_with(registry, source, jobs, trees, promotion)? {
        Ok((meta, decision)) => {
            if let Decision::Kept(why) = decision {
                report
                    .kept
                    .push(format!("runtime v{}: {why}", meta.version));
            }
            report.runtime = Some(meta);
        }
        Err(why) => report.skipped.push(format!("runtime: {why}")),
    }
    match train_queue_wait_with(registry, source, jobs, trees, promotion)? {
        Ok((meta, decision)) => {
            if let Decision::Kept(why) = decision {
                report
                    .kept
                    .push(format!("queue_wait v{}: {why}", meta.version));
            }
            report.queue_wait = Some(meta);
        }
        Err(why) => report.skipped.push(format!("queue_wait: {why}")),
    }
    match train_failure_with(registry, source, jobs, trees, promotion)? {
        Ok((meta, decision)) => {
            if let Decision::Kept(why) = decision {
                report
                    .kept
                    .push(format!("failure v{}: {why}", meta.version));
            }
            report.failure = Some(meta);
        }
        Err(why) => report.skipped.push(format!("failure: {why}")),
    }
    Ok(report)
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
pub fn runtime_mae_log_on_newest(
    model: &RuntimePredictor,
    jobs: &[JobRecord],
) -> anyhow::Result<Option<f64>> {
    let rows = newest_slice(jobs, |j| j.duration.is_some_and(f64::is_finite));
    if rows.is_empty() {
        return Ok(None);
    }
    let x = batch_features(jobs, &model.schema);
    let d = model.schema.len();
    let mut pred = Vec::with_capacity(rows.len());
    let mut actual = Vec::with_capacity(rows.len());
    for &i in &rows {
        pred.push(model.predict_log(&x[i * d..(i + 1) * d]).exp());
        actual.push(jobs[i].duration.unwrap_or(f64::NAN));
    }
    Ok(Some(mae_log(&pred, &actual)))
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

/// Whether the new version of `kind` replaces the served one under `promotion`: `new_score`
/// and `served_score` score a model on the newest slice (lower is better).
fn decide<T>(
    registry: &ModelRegistry,
    kind: &str,
    metric: &str,
    promotion: Promotion,
    new_model: &T,
    score: impl Fn(&T) -> anyhow::Result<Option<f64>>,
) -> anyhow::Result<Decision>
where
    T: augur_predictor::registry::Artifact,
{
    if promotion == Promotion::Always {
        return Ok(Decision::Promoted);
    }
    let (served, served_meta) = match registry.load::<T>(Selector::Serving) {
        Ok(v) => v,
        Err(RegistryError::Empty { .. }) => return Ok(Decision::Promoted),
        Err(e) => return Err(e).with_context(|| format!("loading the served {kind} model")),
    };
    let (new, old) = match (score(new_model), score(&served)) {
        (Ok(n), Ok(o)) => (n, o),
        (Err(e), _) | (_, Err(e)) => {
            return Ok(Decision::Kept(format!(
                "scoring {metric} on the newest slice failed ({e:#}); the served v{} stays",
                served_meta.version
            )))
        }
    };
    match (new, old) {
        (Some(n), Some(o)) if n.is_finite() && (!o.is_finite() || n <= o) => {
            Ok(Decision::Promoted)
        }
        (Some(n), Some(o)) => Ok(Decision::Kept(format!(
            "held-out {metric} {n:.4} on the newest slice is worse than the served v{}'s {o:.4} on the same jobs",
            served_meta.version
        ))),
        _ => Ok(Decision::Kept(format!(
            "no held-out {metric} on the newest slice to compare with the served v{}",
            served_meta.version
        ))),
    }
}

/// Trains, saves and promotes the runtime predictor; `Ok(Err(why))` when the jobs cannot
/// train one.
pub fn train_runtime(
    registry: &ModelRegistry,
    source: &str,
    jobs: &[JobRecord],
    trees: Option<usize>,
) -> anyhow::Result<Result<ArtifactMeta, String>> {
    Ok(train_runtime_with(registry, source, jobs, trees, Promotion::Always)?.map(|(m, _)| m))
}

/// [`train_runtime`], promoting as `promotion` says.
pub fn train_runtime_with(
    registry: &ModelRegistry,
    source: &str,
    jobs: &[JobRecord],
    trees: Option<usize>,
    promotion: Promotion,
) -> anyhow::Result<Result<(ArtifactMeta, Decision), String>> {
    let trainer = trainers::runtime(trees);
    let (predictor, eval) = match train_and_evaluate_runtime(jobs, &trainer, &mut |_, _| {}) {
        Ok(trained) => trained,
        Err(e) => return Ok(Err(e.to_string())),
    };
    let metrics = runtime_metrics(&eval);
    let decision = decide(
        registry,
        RUNTIME_KIND,
        "mae_log",
        promotion,
        &predictor,
        |m: &RuntimePredictor| runtime_mae_log_on_newest(m, jobs),
    )?;
    let notes = notes(&trainer.params.n_trees.to_string(), eval.n_test);
    let meta = save_artifact(registry, &predictor, source, eval.n_train, metrics, notes)?;
    if decision == Decision::Promoted {
        registry.promote(RUNTIME_KIND, meta.version)?;
    }
    Ok(Ok((meta, decision)))
}

/// Trains, saves and promotes the queue-wait predictor; `Ok(Err(why))` when the jobs
/// cannot train one.
pub fn train_queue_wait(
    registry: &ModelRegistry,
    source: &str,
    jobs: &[JobRecord],
    trees: Option<usize>,
) -> anyhow::Result<Result<ArtifactMeta, String>> {
    Ok(train_queue_wait_with(registry, source, jobs, trees, Promotion::Always)?.map(|(m, _)| m))
}

/// [`train_queue_wait`], promoting as `promotion` says.
pub fn train_queue_wait_with(
    registry: &ModelRegistry,
    source: &str,
    jobs: &[JobRecord],
    trees: Option<usize>,
    promotion: Promotion,
) -> anyhow::Result<Result<(ArtifactMeta, Decision), String>> {
    let qtrainer = trainers::queue_wait_all_capped(trees);
    let (predictor, eval) = match train_and_evaluate_queue_wait(jobs, &qtrainer) {
        Ok(trained) => trained,
        Err(e) => return Ok(Err(e.to_string())),
    };
    let metrics = queue_wait_metrics(&eval);
    let decision = decide(
        registry,
        QUEUE_WAIT_KIND,
        "mae_s",
        promotion,
        &predictor,
        |m: &QueueWaitPredictor| queue_wait_mae_s_on_newest(m, jobs),
    )?;
    let notes = notes(&qtrainer.point.n_trees.to_string(), eval.n_test);
    let meta = save_artifact(registry, &predictor, source, eval.n_train, metrics, notes)?;
    if decision == Decision::Promoted {
        registry.promote(QUEUE_WAIT_KIND, meta.version)?;
    }
    Ok(Ok((meta, decision)))
}

/// Trains, saves and promotes the failure predictor; `Ok(Err(why))` when the jobs cannot
/// train one (e.g. no job statuses, as in the bundled Philly trace).
pub fn train_failure(
    registry: &ModelRegistry,
    source: &str,
    jobs: &[JobRecord],
    trees: Option<usize>,
) -> anyhow::Result<Result<ArtifactMeta, String>> {
    Ok(train_failure_with(registry, source, jobs, trees, Promotion::Always)?.map(|(m, _)| m))
}

/// [`train_failure`], promoting as `promotion` says (under [`Promotion::IfNotWorse`] only
/// when no failure model is served).
pub fn train_failure_with(
    registry: &ModelRegistry,
    source: &str,
    jobs: &[JobRecord],
    trees: Option<usize>,
    promotion: Promotion,
) -> anyhow::Result<Result<(ArtifactMeta, Decision), String>> {
    let trainer = trainers::failure(trees);
    let (predictor, eval) = match train_and_evaluate_failure(jobs, &trainer) {
        Ok(e) => e,
        Err(e) => return Ok(Err(e.to_string())),
    };
    let metrics = failure_metrics(&eval);
    let decision = decide(
        registry,
        FAILURE_KIND,
        "score",
        promotion,
        &predictor,
        |_: &FailurePredictor| Ok(None),
    )?;
    let decision = match decision {
        Decision::Kept(_) => Decision::Kept(
            "a failure model is served; background retrains do not compare failure models yet (promote by hand)".to_string(),
        ),
        d => d,
    };
    let notes = notes(&trainer.gbdt.n_trees.to_string(), eval.n_test);
    let meta = save_artifact(registry, &predictor, source, eval.n_train, metrics, notes)?;
    if decision == Decision::Promoted {
        registry.promote(FAILURE_KIND, meta.version)?;
    }
    Ok(Ok((meta, decision)))
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
    let trainer = trainers::convergence(trees);
    let (predictor, eval) = match train_and_evaluate_convergence(&runs, &trainer) {
        Ok(e) => e,
        Err(e) => return Ok(Err(e.to_string())),
    };
    let metrics = convergence_metrics(&eval);
    let notes = notes(&trainer.trees.to_string(), eval.n_test_runs);
    let meta = save_artifact(
        registry,
        &predictor,
        "mlperf",
        eval.n_train_runs,
        metrics,
        notes,
    )?;
    registry.promote(CONVERGENCE_KIND, meta.version)?;
    Ok(Ok(meta))
}

/// Opens the registry under the data folder.
pub fn open_registry(data_dir: &Path) -> anyhow::Result<ModelRegistry> {
    ModelRegistry::open(data_dir.join("models")).context("opening the model registry")
}
