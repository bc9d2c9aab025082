//! Models for the service: load the served versions from the registry, train them from the
//! bundled sample on first start, retrain them from the ingested history.
//!
//! Training follows `augur train`: the model measured on a time-ordered 80/20 split is the
//! one stored, with its held-out metrics. The queue-wait predictor is stored as kind
//! `queue_wait` next to `runtime` in the same registry.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use augur_datasets::{JobRecord, ReadOptions};
use augur_features::failure_label;
use augur_predictor::convergence::load_bundled_mlperf;
use augur_predictor::dag::{load_bundled_dag_sets, DagDataset, DagPredictor};
use augur_predictor::queue_wait::known_wait;
use augur_predictor::registry::{Artifact, Selector};
use augur_predictor::{
    score_runtime, train_and_evaluate_convergence, train_and_evaluate_failure,
    train_and_evaluate_queue_wait_with, ArtifactMeta, ConvergencePredictor, FailurePredictor,
    ModelRegistry, QueueWaitPredictor, QueueWaitRun, RegistryError, RuntimePredictor, RuntimeSplit,
};
use serde::Serialize;

use super::metrics::Metrics;
use super::model_gate::{
    failure_scores_on_newest, queue_wait_mae_s_on_newest, runtime_mae_log_on_newest, Gate, Scores,
    Verdict, MAE_LOG, MAE_S, MAKESPAN_MAE_LOG, PR_AUC,
};
use super::online::{Served, ServedModels};
use crate::model_store::{
    convergence_metrics, failure_metrics, queue_wait_metrics, runtime_metrics, save_artifact,
    Source,
};
use crate::trace_sources::load_sources;
use crate::trainers;

/// Registry kind of the queue-wait predictor.
pub const QUEUE_WAIT_KIND: &str = "queue_wait";
/// Registry kind of the runtime predictor.
pub const RUNTIME_KIND: &str = "runtime";

/// Registry kind of the failure predictor.
pub const FAILURE_KIND: &str = "failure";
/// Registry kind of the convergence predictor.
pub const CONVERGENCE_KIND: &str = "convergence";
/// Registry kind of the DAG (stage run time and makespan) predictor.
pub const DAG_KIND: &str = "dag";

/// GRU epochs of the DAG model the service trains (`augur evaluate --task dag` runs up to
/// 40, early-stopped on held-out groups): a few keep the first-start training short; the
/// time it takes is measured in docs/dag.md.
pub const SERVE_DAG_EPOCHS: usize = 3;

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
    /// Why a model was not trained (e.g. too few jobs with a known wait): `kind: why`.
    pub skipped: Vec<String>,
    /// The same by kind.
    #[serde(default)]
    pub not_trained: BTreeMap<String, String>,
    /// Trained and saved but not promoted, with the reason (`kind vN: why`).
    #[serde(default)]
    pub kept: Vec<String>,
    /// Per kind trained: promoted or kept, why, and the held-out numbers compared.
    #[serde(default)]
    pub verdicts: Vec<Verdict>,
    /// Wall seconds of each phase: training, judging and saving each kind (`runtime`,
    /// `queue_wait`, `failure`; the three run side by side), and for a retrain the rebuild
    /// of the online state for the models it promoted (`rebuild`, after them).
    #[serde(default)]
    pub seconds: BTreeMap<String, f64>,
}

/// Whether a newly trained version is promoted (served).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Promotion {
    /// Always (first start: nothing is served yet).
    Always,
    /// Only when it passes the gate against the served version on the newest slice
    /// (see [`super::model_gate`]).
    IfNotWorse(Gate),
}

impl Promotion {
    fn gate(self) -> Option<Gate> {
        match self {
            Promotion::Always => None,
            Promotion::IfNotWorse(g) => Some(g),
        }
    }
}

/// Loads the version to serve of each kind (promoted, else latest); a kind with no version
/// yet is `None`. A version that does not load is logged as an ERROR and counted in
/// `augur_model_load_failures_total`, and the previous good one is served instead (the
/// versions promoted before it, newest first, then the other saved versions).
pub fn load_serving(registry: &ModelRegistry, metrics: &Metrics) -> anyhow::Result<ServedModels> {
    let mut unloadable = std::collections::BTreeMap::new();
    Ok(ServedModels {
        runtime: load_good::<RuntimePredictor>(registry, metrics, &mut unloadable)?,
        queue_wait: load_good::<QueueWaitPredictor>(registry, metrics, &mut unloadable)?,
        failure: load_good::<FailurePredictor>(registry, metrics, &mut unloadable)?,
        convergence: load_good::<ConvergencePredictor>(registry, metrics, &mut unloadable)?,
        dag: load_good::<DagPredictor>(registry, metrics, &mut unloadable)?,
        unloadable,
    })
}

/// The first version of `T` that loads, in the order of [`load_serving`]; when versions are
/// saved but none loads, why goes into `unloadable` under the kind.
fn load_good<T: Artifact>(
    registry: &ModelRegistry,
    metrics: &Metrics,
    unloadable: &mut std::collections::BTreeMap<&'static str, String>,
) -> anyhow::Result<Option<Served<T>>> {
    let kind = T::KIND;
    let saved = registry
        .version_numbers(kind)
        .with_context(|| format!("listing the saved {kind} versions"))?;
    let mut candidates = Vec::new();
    match registry.resolve(kind, Selector::Serving) {
        Ok(v) => candidates.push(v),
        Err(RegistryError::Empty { .. }) => return Ok(None),
        Err(e) => {
            tracing::error!(kind, error = %e, "the promoted pointer cannot be read; serving the newest version that loads");
            metrics.observe_model_load_failure(kind);
        }
    }
    if let Ok(Some(p)) = registry.promotion(kind) {
        candidates.extend(p.history.iter().rev());
    }
    candidates.extend(saved.iter().rev());
    let mut tried = Vec::new();
    let mut first_error = None;
    for v in candidates {
        if tried.contains(&v) {
            continue;
        }
        match registry.load::<T>(Selector::Version(v)) {
            Ok((model, meta)) => {
                if !tried.is_empty() {
                    tracing::error!(kind, serving = v, unloadable = ?tried, "serving the previous good version");
                }
                return Ok(Some(Served {
                    model: Arc::new(model),
                    meta,
                }));
            }
            Err(e) => {
                tracing::error!(kind, version = v, error = %e, "a saved model version cannot be loaded");
                metrics.observe_model_load_failure(kind);
                first_error.get_or_insert_with(|| format!("v{v}: {e}"));
                tried.push(v);
            }
        }
    }
    tracing::error!(kind, unloadable = ?tried, "no saved version loads; the kind is not served");
    if let Some(e) = first_error {
        unloadable.insert(
            kind,
            format!("no saved {kind} version loads ({} tried); {e}", tried.len()),
        );
    }
    Ok(None)
}

/// Whether version `version` of `kind` loads (integrity, format, feature schema, payload):
/// checked before it is promoted or rolled back to.
pub fn check_loads(
    registry: &ModelRegistry,
    kind: &str,
    version: u32,
) -> Result<(), RegistryError> {
    let at = Selector::Version(version);
    match kind {
        RUNTIME_KIND => registry.load::<RuntimePredictor>(at).map(|_| ()),
        QUEUE_WAIT_KIND => registry.load::<QueueWaitPredictor>(at).map(|_| ()),
        FAILURE_KIND => registry.load::<FailurePredictor>(at).map(|_| ()),
        CONVERGENCE_KIND => registry.load::<ConvergencePredictor>(at).map(|_| ()),
        DAG_KIND => registry.load::<DagPredictor>(at).map(|_| ()),
        _ => registry.verify(kind, version).map(|_| ()),
    }
}

/// Whether the registry has no version of either kind the service serves.
pub fn registry_is_empty(registry: &ModelRegistry) -> anyhow::Result<bool> {
    Ok(registry.version_numbers(RUNTIME_KIND)?.is_empty()
        && registry.version_numbers(QUEUE_WAIT_KIND)?.is_empty()
        && registry.version_numbers(FAILURE_KIND)?.is_empty())
}

/// The jobs of a bundled dataset, the first `limit` by submit time if given.
pub fn bundled_jobs(name: &str, limit: Option<usize>) -> anyhow::Result<Vec<JobRecord>> {
    bootstrap_jobs(&[name.to_string()], None, limit)
}

/// The sources named by the `bootstrap_dataset` setting: comma-separated bundled dataset
/// names, trace files and folders.
pub fn bootstrap_sources(setting: &str) -> Vec<String> {
    setting
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// The jobs of every source together (read as `format` when given, else detected), the
/// first `limit` by submit time if given.
pub fn bootstrap_jobs(
    sources: &[String],
    format: Option<&str>,
    limit: Option<usize>,
) -> anyhow::Result<Vec<JobRecord>> {
    let mut jobs: Vec<JobRecord> = load_sources(sources, format, &ReadOptions::default())?
        .into_iter()
        .flat_map(|(_, jobs)| jobs)
        .collect();
    jobs.sort_by(|a, b| a.submit_time.total_cmp(&b.submit_time));
    if let Some(n) = limit {
        jobs.truncate(n);
    }
    Ok(jobs)
}

/// What the history lacks for a kind, when it lacks a field entirely or mostly (fewer than
/// one job in ten has it): the reason a kind cannot be trained, named by the field (start
/// times for queue wait, statuses for failure, durations for run time).
pub fn missing_field(kind: &str, jobs: &[JobRecord]) -> Option<String> {
    let n = jobs.len();
    let count = |has: &dyn Fn(&JobRecord) -> bool| jobs.iter().filter(|j| has(j)).count();
    let (field, have) = match kind {
        RUNTIME_KIND => (
            "run times (a duration, or start and end times)",
            count(&|j| j.duration.is_some_and(f64::is_finite)),
        ),
        QUEUE_WAIT_KIND => (
            "start times (a queue wait is start − submit)",
            count(&|j| known_wait(j).is_some()),
        ),
        FAILURE_KIND => (
            "job statuses (completed / failed / killed)",
            count(&|j| failure_label(j.status).is_some()),
        ),
        _ => return None,
    };
    (have * 10 < n.max(1)).then(|| format!("only {have} of {n} jobs have {field}"))
}

/// Trains the predictors on `jobs` (80/20 by submit time, metrics on the 20%), saves them
/// as new versions and promotes them. A predictor that cannot be trained (too few labelled
/// jobs, e.g. a trace without start times has no queue waits) is skipped with the reason.
pub fn train_and_save(
    registry: &ModelRegistry,
    source: &str,
    jobs: &[JobRecord],
    trees: Option<usize>,
) -> anyhow::Result<TrainReport> {
    let none = ServedModels::default();
    train_and_save_with(
        registry,
        source.into(),
        jobs,
        trees,
        Promotion::Always,
        &none,
    )
}

/// [`train_and_save`] with a promotion policy against the `served` models: every version
/// trained is saved; it is promoted as `promotion` says (see [`TrainReport::verdicts`]).
pub fn train_and_save_with(
    registry: &ModelRegistry,
    source: Source<'_>,
    jobs: &[JobRecord],
    trees: Option<usize>,
    promotion: Promotion,
    served: &ServedModels,
) -> anyhow::Result<TrainReport> {
    let mut report = TrainReport {
        source: source.name.to_string(),
        jobs: jobs.len(),
        runtime: None,
        queue_wait: None,
        failure: None,
        skipped: Vec::new(),
        not_trained: BTreeMap::new(),
        kept: Vec::new(),
        verdicts: Vec::new(),
        seconds: BTreeMap::new(),
    };
    let mut record = |kind: &str, trained: Result<(ArtifactMeta, Verdict), String>| {
        let trained = trained.map_err(|why| match missing_field(kind, jobs) {
            Some(missing) => format!("{missing}; {why}"),
            None => why,
        });
        match trained {
            Ok((meta, verdict)) => {
                if !verdict.promoted {
                    report
                        .kept
                        .push(format!("{kind} v{}: {}", meta.version, verdict.reason));
                }
                report.verdicts.push(verdict);
                Some(meta)
            }
            Err(why) => {
                report.skipped.push(format!("{kind}: {why}"));
                report.not_trained.insert(kind.to_string(), why);
                None
            }
        }
    };
    // the three kinds train side by side: each is deterministic, so the models are the
    // ones a sequential run trains, and one's serial stretches leave the cores to another
    type Trained = anyhow::Result<Result<(ArtifactMeta, Verdict), String>>;
    let timed = |f: &dyn Fn() -> Trained| {
        let t = Instant::now();
        let r = f();
        (r, t.elapsed().as_secs_f64())
    };
    // the queue-wait model's queue features need the run-time model the runtime kind
    // trains on the same jobs: it waits for that model rather than train it again
    let (rt_model_tx, rt_model_rx) = std::sync::mpsc::sync_channel::<RuntimePredictor>(1);
    let ((rt, rt_s), (qw, qw_s), (fl, fl_s)) = std::thread::scope(|s| {
        let qw = s.spawn(move || {
            // none when the runtime kind could not train one: then it trains its own
            let runtime = rt_model_rx.recv().ok();
            let train = || {
                let rt = runtime.as_ref();
                train_queue_wait_with(registry, source, jobs, trees, promotion, served, rt)
            };
            timed(&train)
        });
        let fl = s.spawn(|| {
            timed(&|| train_failure_with(registry, source, jobs, trees, promotion, served))
        });
        let send = |m: &RuntimePredictor| {
            let _ = rt_model_tx.try_send(m.clone());
        };
        let rt =
            timed(&|| train_runtime_with(registry, source, jobs, trees, promotion, served, &send));
        drop(rt_model_tx);
        let join = |h: std::thread::ScopedJoinHandle<'_, (Trained, f64)>| {
            h.join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        };
        (rt, join(qw), join(fl))
    });
    let runtime = record(RUNTIME_KIND, rt?);
    let queue_wait = record(QUEUE_WAIT_KIND, qw?);
    let failure = record(FAILURE_KIND, fl?);
    let seconds = [
        (RUNTIME_KIND, rt_s),
        (QUEUE_WAIT_KIND, qw_s),
        (FAILURE_KIND, fl_s),
    ];
    report.runtime = runtime;
    report.queue_wait = queue_wait;
    report.failure = failure;
    report.seconds = seconds
        .into_iter()
        .map(|(kind, s)| (kind.to_string(), s))
        .collect();
    Ok(report)
}

/// The `new` model and the served version of its kind (`None`: none served) scored by
/// `score`, side by side (each scoring reads the same jobs on its own).
fn score_new_and_served<T: Send + Sync>(
    new: &T,
    served: &Option<Served<T>>,
    score: impl Fn(&T) -> Option<f64> + Sync,
) -> (Option<f64>, Option<(u32, Option<f64>)>) {
    rayon::join(
        || score(new),
        || served.as_ref().map(|s| (s.meta.version, score(&s.model))),
    )
}

/// Saves `predictor`, judges it and promotes it when the verdict says so.
fn save_and_judge<T: Artifact>(
    registry: &ModelRegistry,
    saved: (
        &T,
        Source<'_>,
        usize,
        BTreeMap<String, f64>,
        BTreeMap<String, String>,
    ),
    scores: &Scores,
    promotion: Promotion,
) -> anyhow::Result<(ArtifactMeta, Verdict)> {
    let (predictor, source, rows, metrics, notes) = saved;
    let meta = save_artifact(registry, predictor, source, rows, metrics, notes)?;
    let verdict = Verdict::judge(T::KIND, meta.version, scores, promotion.gate());
    if verdict.promoted {
        registry.promote(T::KIND, meta.version)?;
    }
    Ok((meta, verdict))
}

/// Trains, saves and promotes the runtime predictor; `Ok(Err(why))` when the jobs cannot
/// train one.
pub fn train_runtime(
    registry: &ModelRegistry,
    source: &str,
    jobs: &[JobRecord],
    trees: Option<usize>,
) -> anyhow::Result<Result<ArtifactMeta, String>> {
    let none = ServedModels::default();
    Ok(train_runtime_with(
        registry,
        source.into(),
        jobs,
        trees,
        Promotion::Always,
        &none,
        &|_| {},
    )?
    .map(|(m, _)| m))
}

/// [`train_runtime`], promoting as `promotion` says.
pub fn train_runtime_with(
    registry: &ModelRegistry,
    source: Source<'_>,
    jobs: &[JobRecord],
    trees: Option<usize>,
    promotion: Promotion,
    served: &ServedModels,
    trained: &dyn Fn(&RuntimePredictor),
) -> anyhow::Result<Result<(ArtifactMeta, Verdict), String>> {
    let trainer = trainers::runtime(trees);
    let t0 = Instant::now();
    let split = RuntimeSplit::build(jobs).and_then(|split| {
        let p = trainer.train(&split.schema, &split.x, &split.y_log, &split.train_rows)?;
        Ok((split, p))
    });
    let (split, predictor) = match split {
        Ok(trained) => trained,
        Err(e) => return Ok(Err(e.to_string())),
    };
    trained(&predictor);
    let eval = match score_runtime(jobs, &split, &predictor, t0.elapsed().as_secs_f64()) {
        Ok(eval) => eval,
        Err(e) => return Ok(Err(e.to_string())),
    };
    let metrics = runtime_metrics(&eval);
    let gated = promotion != Promotion::Always;
    let score = |m: &RuntimePredictor| gated.then(|| runtime_mae_log_on_newest(m, jobs)).flatten();
    let (new, served_now) = score_new_and_served(&predictor, &served.runtime, score);
    let scores = Scores {
        metric: MAE_LOG,
        test_jobs: eval.n_test,
        new: new.or_else(|| metrics.get("mae_log").copied()),
        coverage: metrics.get("coverage80").map(|&c| (c, 0.8)),
        served: served_now,
    };
    let notes = notes(&trainer.params.n_trees.to_string(), eval.n_test);
    let saved = (&predictor, source, eval.n_train, metrics, notes);
    Ok(Ok(save_and_judge(registry, saved, &scores, promotion)?))
}

/// Trains, saves and promotes the queue-wait predictor; `Ok(Err(why))` when the jobs
/// cannot train one.
pub fn train_queue_wait(
    registry: &ModelRegistry,
    source: &str,
    jobs: &[JobRecord],
    trees: Option<usize>,
) -> anyhow::Result<Result<ArtifactMeta, String>> {
    let none = ServedModels::default();
    Ok(train_queue_wait_with(
        registry,
        source.into(),
        jobs,
        trees,
        Promotion::Always,
        &none,
        None,
    )?
    .map(|(m, _)| m))
}

/// [`train_queue_wait`], promoting as `promotion` says.
pub fn train_queue_wait_with(
    registry: &ModelRegistry,
    source: Source<'_>,
    jobs: &[JobRecord],
    trees: Option<usize>,
    promotion: Promotion,
    served: &ServedModels,
    runtime: Option<&RuntimePredictor>,
) -> anyhow::Result<Result<(ArtifactMeta, Verdict), String>> {
    let qtrainer = trainers::queue_wait_all_capped(trees);
    // the runtime kind's model was trained by `qtrainer.runtime` (both are
    // `trainers::runtime(trees)`) on these jobs; the stored metrics are the model's own rows
    let run = QueueWaitRun {
        runtime,
        model_only: true,
    };
    let (predictor, eval) = match train_and_evaluate_queue_wait_with(jobs, &qtrainer, run) {
        Ok(trained) => trained,
        Err(e) => return Ok(Err(e.to_string())),
    };
    let metrics = queue_wait_metrics(&eval);
    let gated = promotion != Promotion::Always;
    let score = |m: &QueueWaitPredictor| {
        gated
            .then(|| queue_wait_mae_s_on_newest(m, jobs).ok().flatten())
            .flatten()
    };
    let (new, served_now) = score_new_and_served(&predictor, &served.queue_wait, score);
    let scores = Scores {
        metric: MAE_S,
        test_jobs: eval.n_test,
        new: new.or_else(|| metrics.get("mae_s").copied()),
        coverage: metrics.get("coverage95").map(|&c| (c, 0.95)),
        served: served_now,
    };
    let notes = notes(&qtrainer.point.n_trees.to_string(), eval.n_test);
    let saved = (&predictor, source, eval.n_train, metrics, notes);
    Ok(Ok(save_and_judge(registry, saved, &scores, promotion)?))
}

/// Trains, saves and promotes the failure predictor; `Ok(Err(why))` when the jobs cannot
/// train one (e.g. no job statuses, as in the bundled Philly trace).
pub fn train_failure(
    registry: &ModelRegistry,
    source: &str,
    jobs: &[JobRecord],
    trees: Option<usize>,
) -> anyhow::Result<Result<ArtifactMeta, String>> {
    let none = ServedModels::default();
    Ok(train_failure_with(
        registry,
        source.into(),
        jobs,
        trees,
        Promotion::Always,
        &none,
    )?
    .map(|(m, _)| m))
}

/// [`train_failure`], promoting as `promotion` says (compared on held-out PR-AUC; the
/// Brier score is in the metrics).
pub fn train_failure_with(
    registry: &ModelRegistry,
    source: Source<'_>,
    jobs: &[JobRecord],
    trees: Option<usize>,
    promotion: Promotion,
    served: &ServedModels,
) -> anyhow::Result<Result<(ArtifactMeta, Verdict), String>> {
    let trainer = trainers::failure(trees);
    let (predictor, eval) = match train_and_evaluate_failure(jobs, &trainer) {
        Ok(e) => e,
        Err(e) => return Ok(Err(e.to_string())),
    };
    let metrics = failure_metrics(&eval);
    let gated = promotion != Promotion::Always;
    let score = |m: &FailurePredictor| {
        gated
            .then(|| failure_scores_on_newest(m, jobs).map(|(pr_auc, _)| pr_auc))
            .flatten()
    };
    let (new, served_now) = score_new_and_served(&predictor, &served.failure, score);
    let scores = Scores {
        metric: PR_AUC,
        test_jobs: eval.n_test,
        new,
        coverage: None,
        served: served_now,
    };
    let notes = notes(&trainer.gbdt.n_trees.to_string(), eval.n_test);
    let saved = (&predictor, source, eval.n_train, metrics, notes);
    Ok(Ok(save_and_judge(registry, saved, &scores, promotion)?))
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

/// Whether the registry has no DAG model yet.
pub fn needs_dag(registry: &ModelRegistry) -> anyhow::Result<bool> {
    Ok(registry.version_numbers(DAG_KIND)?.is_empty())
}

/// Trains the DAG predictor on both bundled DAG sets (TPC-H and WfCommons, read as
/// `augur evaluate --task dag` reads them), saves and promotes it; `Ok(Err(why))` when they
/// cannot be read or cannot train it.
pub fn train_bundled_dag(
    registry: &ModelRegistry,
    trees: Option<usize>,
) -> anyhow::Result<Result<ArtifactMeta, String>> {
    match load_bundled_dag_sets() {
        Ok(data) => train_dag(registry, &data, trees, SERVE_DAG_EPOCHS),
        Err(e) => Ok(Err(e.to_string())),
    }
}

/// Trains the DAG predictor on every job of `data` (`epochs` GRU epochs at most, `trees`
/// caps the per-stage GBDT), saves and promotes it. No held-out metrics are stored: the
/// recipe's held-out numbers are those of `augur evaluate --task dag` (grouped 5-fold
/// cross-validation, docs/dag.md), named in the version's notes.
pub fn train_dag(
    registry: &ModelRegistry,
    data: &DagDataset,
    trees: Option<usize>,
    epochs: usize,
) -> anyhow::Result<Result<ArtifactMeta, String>> {
    let trainer = trainers::dag(trees, Some(epochs));
    let predictor = match trainer.train(data) {
        Ok(p) => p,
        Err(e) => return Ok(Err(e.to_string())),
    };
    let mut notes = BTreeMap::new();
    notes.insert("max_trees".to_string(), trainer.gbdt.n_trees.to_string());
    notes.insert("gru_epochs".to_string(), trainer.gru.epochs.to_string());
    notes.insert(
        "trained_on".to_string(),
        format!("every job of {} ({} jobs)", data.name, data.jobs.len()),
    );
    notes.insert(
        "metrics_on".to_string(),
        "none stored: the recipe's held-out numbers are `augur evaluate --task dag` (grouped 5-fold cross-validation, docs/dag.md)".to_string(),
    );
    notes.insert("trained_by".to_string(), "augur serve".to_string());
    let meta = save_artifact(
        registry,
        &predictor,
        &data.name,
        data.jobs.len(),
        BTreeMap::new(),
        notes,
    )?;
    registry.promote(DAG_KIND, meta.version)?;
    Ok(Ok(meta))
}

/// The retrain verdict of the DAG model: the ingested history cannot train it (a DAG model
/// learns from each stage's measured run time; events carry a job's DAG and its whole
/// duration only), so the served version (`served`, trained on the bundled DAG sets) stays.
pub fn dag_not_retrained(served: Option<u32>, dag_jobs: usize) -> Verdict {
    let stays = match served {
        Some(v) => format!("dag v{v} (trained on the bundled DAG sets) stays served"),
        None => "no dag model is served".to_string(),
    };
    let reason = format!(
        "not retrained: the ingested history cannot train it ({dag_jobs} ingested jobs have a DAG, but events carry no per-stage run times, which it learns from); {stays}"
    );
    Verdict::not_trained(DAG_KIND, MAKESPAN_MAE_LOG, served, reason)
}

/// Where the reasons the first-start training skipped kinds are kept, so a restart still
/// answers them in the 503 of those kinds.
fn not_trained_path(registry: &ModelRegistry) -> std::path::PathBuf {
    registry.root().join("not-trained.json")
}

/// Keeps `not_trained` (kind → reason) beside the registry.
pub fn save_not_trained(
    registry: &ModelRegistry,
    not_trained: &BTreeMap<String, String>,
) -> anyhow::Result<()> {
    let path = not_trained_path(registry);
    std::fs::write(&path, serde_json::to_vec_pretty(not_trained)?)
        .with_context(|| format!("writing {}", path.display()))
}

/// The reasons kept by [`save_not_trained`], for the kinds that still have no version
/// (none when there is no such file or it cannot be read).
pub fn load_not_trained(registry: &ModelRegistry) -> BTreeMap<String, String> {
    let Ok(bytes) = std::fs::read(not_trained_path(registry)) else {
        return BTreeMap::new();
    };
    let mut map: BTreeMap<String, String> = serde_json::from_slice(&bytes).unwrap_or_default();
    map.retain(|kind, _| {
        registry
            .version_numbers(kind)
            .map(|v| v.is_empty())
            .unwrap_or(false)
    });
    map
}

/// Opens the registry under the data folder.
pub fn open_registry(data_dir: &Path) -> anyhow::Result<ModelRegistry> {
    ModelRegistry::open(data_dir.join("models")).context("opening the model registry")
}
