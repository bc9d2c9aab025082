//! Models for the service: load the served versions from the registry, train them from the
//! bundled sample on first start, retrain them from the ingested history. Each loop runs
//! over the registered kinds ([`crate::serve::kinds::registered`]); what is particular to a kind
//! is in its file under `kinds/`.
//!
//! Training follows `augur train`: the model measured on a time-ordered 80/20 split is the
//! one stored, with its held-out metrics.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use anyhow::Context;
use augur_datasets::{JobRecord, ReadOptions};
use augur_predictor::registry::Selector;
use augur_predictor::{ArtifactMeta, ModelKind, ModelRegistry, RegistryError};
use serde::Serialize;

use super::model_gate::Verdict;
use crate::model_store::Source;
use crate::serve::http::metrics::Metrics;
use crate::serve::kinds::{
    self, CannotTrain, FinishOnDrop, HistoryRun, Judged, Promotion, ServedKind, ServedModel,
    Shared, TrainError, TrainedOn,
};
use crate::serve::state::online::ServedModels;
use crate::trace_sources::load_sources;

/// What a training run produced.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct TrainReport {
    pub source: String,
    pub jobs: usize,
    /// The registry metadata of each version saved, by kind trained on the history
    /// (`null`: not trained).
    #[serde(flatten)]
    #[schema(value_type = Object)]
    pub trained: BTreeMap<ModelKind, Option<ArtifactMeta>>,
    /// Why a model was not trained (e.g. too few jobs with a known wait): `kind: why`.
    pub skipped: Vec<String>,
    /// The same by kind.
    #[serde(default)]
    #[schema(value_type = BTreeMap<String, String>)]
    pub not_trained: BTreeMap<ModelKind, String>,
    /// Trained and saved but not promoted, with the reason (`kind vN: why`).
    #[serde(default)]
    pub kept: Vec<String>,
    /// Per kind trained: promoted or kept, why, and the held-out numbers compared.
    #[serde(default)]
    pub verdicts: Vec<Verdict>,
    /// Wall seconds of each phase: training, judging and saving each kind (`runtime`,
    /// `queue_wait`, `failure`; they run side by side), and for a retrain the rebuild
    /// of the online state for the models it promoted (`rebuild`, after them).
    #[serde(default)]
    pub seconds: BTreeMap<String, f64>,
}

impl TrainReport {
    /// The version of `kind` this run saved, if any.
    pub fn version(&self, kind: ModelKind) -> Option<u32> {
        self.trained.get(&kind)?.as_ref().map(|m| m.version)
    }
}

/// Why the served models could not be loaded (a registry that cannot be listed; a version
/// that does not load is skipped, see [`load_serving`]).
#[derive(Debug, thiserror::Error)]
#[error("listing the saved {kind} versions: {source}")]
pub struct LoadError {
    pub kind: ModelKind,
    #[source]
    pub source: RegistryError,
}

/// Loads the version to serve of each kind (promoted, else latest); a kind with no version
/// yet is not served. A version that does not load is logged as an ERROR and counted in
/// `augur_model_load_failures_total`, and the previous good one is served instead (the
/// versions promoted before it, newest first, then the other saved versions).
pub fn load_serving(
    registry: &ModelRegistry,
    metrics: &Metrics,
) -> Result<ServedModels, LoadError> {
    let mut models = ServedModels::default();
    for spec in kinds::registered() {
        if let Some(m) = load_good(*spec, registry, metrics, &mut models.unloadable)? {
            models.insert(m);
        }
    }
    Ok(models)
}

/// The first version of `spec`'s kind that loads, in the order of [`load_serving`]; when
/// versions are saved but none loads, why goes into `unloadable` under the kind.
fn load_good(
    spec: &dyn ServedKind,
    registry: &ModelRegistry,
    metrics: &Metrics,
    unloadable: &mut BTreeMap<ModelKind, String>,
) -> Result<Option<std::sync::Arc<dyn ServedModel>>, LoadError> {
    let kind = spec.kind().name();
    let saved = registry.version_numbers(kind).map_err(|source| LoadError {
        kind: spec.kind(),
        source,
    })?;
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
        match spec.load(registry, Selector::Version(v)) {
            Ok(model) => {
                if !tried.is_empty() {
                    tracing::error!(kind, serving = v, unloadable = ?tried, "serving the previous good version");
                }
                return Ok(Some(model));
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
            spec.kind(),
            format!("no saved {kind} version loads ({} tried); {e}", tried.len()),
        );
    }
    Ok(None)
}

/// Whether version `version` of `kind` loads (integrity, format, feature schema, payload):
/// checked before it is promoted or rolled back to.
pub fn check_loads(
    registry: &ModelRegistry,
    kind: ModelKind,
    version: u32,
) -> Result<(), RegistryError> {
    let at = Selector::Version(version);
    match kinds::spec(kind) {
        Some(spec) => spec.load(registry, at).map(|_| ()),
        None => registry.verify(kind.name(), version).map(|_| ()),
    }
}

/// Whether the registry has no version of any kind trained on a job history.
pub fn registry_is_empty(registry: &ModelRegistry) -> Result<bool, RegistryError> {
    for spec in kinds::registered() {
        if spec.trained_on() == TrainedOn::History
            && !registry.version_numbers(spec.kind().name())?.is_empty()
        {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The kinds trained on bundled data that have no version yet (trained at first start).
pub fn needs_bundled(registry: &ModelRegistry) -> Result<Vec<ModelKind>, RegistryError> {
    let mut out = Vec::new();
    for spec in kinds::registered() {
        if matches!(spec.trained_on(), TrainedOn::Bundled { .. })
            && registry.version_numbers(spec.kind().name())?.is_empty()
        {
            out.push(spec.kind());
        }
    }
    Ok(out)
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

/// What the history lacks for `kind`, when it lacks a field entirely or mostly (fewer than
/// one job in ten has it): the reason a kind cannot be trained, named by the field (start
/// times for queue wait, statuses for failure, durations for run time).
pub fn missing_field(kind: ModelKind, jobs: &[JobRecord]) -> Option<String> {
    kinds::spec(kind)?.missing_field(jobs)
}

/// Trains the predictors on `jobs` (80/20 by submit time, metrics on the 20%), saves them
/// as new versions and promotes them. A predictor that cannot be trained (too few labelled
/// jobs, e.g. a trace without start times has no queue waits) is skipped with the reason.
pub fn train_and_save(
    registry: &ModelRegistry,
    source: &str,
    jobs: &[JobRecord],
    trees: Option<usize>,
) -> Result<TrainReport, TrainError> {
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

/// A kind's training result and the wall seconds it took.
type Timed = (Result<Result<Judged, CannotTrain>, TrainError>, f64);

/// [`train_and_save`] with a promotion policy against the `served` models: every version
/// trained is saved; it is promoted as `promotion` says (see [`TrainReport::verdicts`]).
/// The kinds train side by side: each is deterministic, so the models are the ones a
/// sequential run trains, and one's serial stretches leave the cores to another.
pub fn train_and_save_with(
    registry: &ModelRegistry,
    source: Source<'_>,
    jobs: &[JobRecord],
    trees: Option<usize>,
    promotion: Promotion,
    served: &ServedModels,
) -> Result<TrainReport, TrainError> {
    let specs: Vec<&dyn ServedKind> = kinds::registered()
        .iter()
        .copied()
        .filter(|k| k.trained_on() == TrainedOn::History)
        .collect();
    let shared = Shared::new(specs.iter().map(|k| k.kind()));
    let run = HistoryRun {
        registry,
        source,
        jobs,
        trees,
        promotion,
        served,
        shared: &shared,
    };
    let results: Vec<Timed> = side_by_side(&run, &specs, |spec| {
        let t = Instant::now();
        let r = spec.train(&run);
        (r, t.elapsed().as_secs_f64())
    })
    .into_iter()
    .map(|r| r.unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
    .collect();
    let mut report = TrainReport {
        source: source.name.to_string(),
        jobs: jobs.len(),
        trained: BTreeMap::new(),
        skipped: Vec::new(),
        not_trained: BTreeMap::new(),
        kept: Vec::new(),
        verdicts: Vec::new(),
        seconds: BTreeMap::new(),
    };
    for (spec, (trained, secs)) in specs.iter().zip(results) {
        let kind = spec.kind();
        let meta = record(&mut report, *spec, jobs, trained?);
        report.trained.insert(kind, meta);
        report.seconds.insert(kind.name().to_string(), secs);
    }
    Ok(report)
}

/// What a thread of [`side_by_side`] ended with: its value, or the payload of its panic.
pub type Joined<T> = std::thread::Result<T>;

/// Runs `each` for every kind of `specs` side by side (a thread each), the kind marked done
/// in `run.shared` when `each` returns or panics (no kind waits forever for it); the
/// results in the order of `specs`, a panic as its payload.
pub fn side_by_side<T: Send>(
    run: &HistoryRun<'_>,
    specs: &[&dyn ServedKind],
    each: impl Fn(&dyn ServedKind) -> T + Sync,
) -> Vec<Joined<T>> {
    std::thread::scope(|s| {
        let handles: Vec<_> = specs
            .iter()
            .map(|spec| {
                let each = &each;
                s.spawn(move || {
                    let _done = FinishOnDrop {
                        shared: run.shared,
                        kind: spec.kind(),
                    };
                    each(*spec)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join()).collect()
    })
}

/// Puts what training `spec`'s kind gave into `report`; returns the version saved.
fn record(
    report: &mut TrainReport,
    spec: &dyn ServedKind,
    jobs: &[JobRecord],
    trained: Result<Judged, CannotTrain>,
) -> Option<ArtifactMeta> {
    let kind = spec.kind().name();
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
            let why = match spec.missing_field(jobs) {
                Some(missing) => format!("{missing}; {why}"),
                None => why.to_string(),
            };
            report.skipped.push(format!("{kind}: {why}"));
            report.not_trained.insert(spec.kind(), why);
            None
        }
    }
}

/// Trains, saves and promotes the model of one `kind` trained on a history (alone: the
/// queue-wait kind then trains its own run-time model); `Ok(Err(why))` when the jobs
/// cannot train one.
pub fn train_kind(
    kind: ModelKind,
    registry: &ModelRegistry,
    source: &str,
    jobs: &[JobRecord],
    trees: Option<usize>,
) -> Result<Result<ArtifactMeta, CannotTrain>, TrainError> {
    let Some(spec) = kinds::spec(kind) else {
        return Ok(Err(CannotTrain::NotFromHistory { kind }));
    };
    let none = ServedModels::default();
    let shared = Shared::new([kind]);
    let run = HistoryRun {
        registry,
        source: source.into(),
        jobs,
        trees,
        promotion: Promotion::Always,
        served: &none,
        shared: &shared,
    };
    let trained = spec.train(&run);
    shared.finish(kind);
    Ok(trained?.map(|(meta, _)| meta))
}

/// Trains, saves and promotes the model of `kind` on its bundled data; `Ok(Err(why))` when
/// the data cannot train one.
pub fn train_bundled(
    kind: ModelKind,
    registry: &ModelRegistry,
    trees: Option<usize>,
) -> Result<Result<ArtifactMeta, CannotTrain>, TrainError> {
    match kinds::spec(kind) {
        Some(spec) => spec.train_bundled(registry, trees),
        None => Ok(Err(CannotTrain::NotBundled { kind })),
    }
}

/// Where the reasons the first-start training skipped kinds are kept, so a restart still
/// answers them in the 503 of those kinds.
fn not_trained_path(registry: &ModelRegistry) -> std::path::PathBuf {
    registry.root().join("not-trained.json")
}

/// Keeps `not_trained` (kind → reason) beside the registry.
pub fn save_not_trained(
    registry: &ModelRegistry,
    not_trained: &BTreeMap<ModelKind, String>,
) -> anyhow::Result<()> {
    let path = not_trained_path(registry);
    std::fs::write(&path, serde_json::to_vec_pretty(not_trained)?)
        .with_context(|| format!("writing {}", path.display()))
}

/// The reasons kept by [`save_not_trained`], for the kinds that still have no version
/// (none when there is no such file or it cannot be read; a kind this build does not know
/// is left out).
pub fn load_not_trained(registry: &ModelRegistry) -> BTreeMap<ModelKind, String> {
    let Ok(bytes) = std::fs::read(not_trained_path(registry)) else {
        return BTreeMap::new();
    };
    let map: BTreeMap<String, String> = serde_json::from_slice(&bytes).unwrap_or_default();
    map.into_iter()
        .filter_map(|(name, why)| Some((ModelKind::from_name(&name)?, why)))
        .filter(|(kind, _)| {
            registry
                .version_numbers(kind.name())
                .map(|v| v.is_empty())
                .unwrap_or(false)
        })
        .collect()
}

/// Opens the registry under the data folder.
pub fn open_registry(data_dir: &Path) -> anyhow::Result<ModelRegistry> {
    ModelRegistry::open(data_dir.join("models")).context("opening the model registry")
}
