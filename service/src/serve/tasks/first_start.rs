//! First-start training: the models the registry lacks, trained in the background and each
//! served as soon as it is saved.
//!
//! The runtime model comes first, alone (it has the cores to itself): once it is served,
//! `/readyz` is 200. The other kinds trained on the job history (queue wait, failure) then
//! train side by side, the queue-wait kind reusing the run-time model just trained (the same
//! model a run training all of them together shares), then the kinds trained on bundled data
//! (convergence, DAG). Each is swapped in as it is saved, one swap at a time
//! ([`AppState::reload_models`]). Until a kind is served its predictions answer 503
//! `model_not_available`; `/readyz` lists the kinds still training ([`FirstStart::training`])
//! and the ones whose training failed ([`FirstStart::failed`]), which are also logged as
//! errors. A failed kind does not make the service unready: the kinds served keep answering.
//!
//! The history kinds still to train are kept beside the registry (`first-start.json`): a
//! service stopped before they were all trained trains the rest at its next start, from
//! the same bootstrap history.

use std::collections::{BTreeMap, BTreeSet};
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use augur_datasets::JobRecord;
use augur_predictor::{ModelKind, ModelRegistry, RegistryError};

use super::training::{self, side_by_side};
use crate::serve::kinds::{self, HistoryRun, Promotion, ServedKind, Shared, TrainedOn};
use crate::serve::state::online::ServedModels;
use crate::serve::{lock, AppState};

/// What the first-start training is doing: the kinds still to be served, and the ones whose
/// training failed (with why). Read by `/readyz`.
#[derive(Debug, Default)]
pub struct FirstStart {
    inner: std::sync::Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    training: BTreeSet<ModelKind>,
    failed: BTreeMap<ModelKind, String>,
}

impl FirstStart {
    /// The kinds `kinds` are to be trained.
    pub fn begin(&self, kinds: impl IntoIterator<Item = ModelKind>) {
        lock(&self.inner).training.extend(kinds);
    }

    /// `kind` is done: served, or not trainable (its 503 says why); a failure of an earlier
    /// attempt (on another history) no longer counts.
    pub fn done(&self, kind: ModelKind) {
        let mut i = lock(&self.inner);
        i.training.remove(&kind);
        i.failed.remove(&kind);
    }

    /// Training `kind` failed (`why`): it is not served.
    pub fn fail(&self, kind: ModelKind, why: String) {
        let mut i = lock(&self.inner);
        i.training.remove(&kind);
        i.failed.insert(kind, why);
    }

    /// The kinds still training, in kind order.
    pub fn training(&self) -> Vec<ModelKind> {
        lock(&self.inner).training.iter().copied().collect()
    }

    /// The kinds whose first-start training failed, and why.
    pub fn failed(&self) -> BTreeMap<ModelKind, String> {
        lock(&self.inner).failed.clone()
    }

    /// Whether a kind trained on the job history is still training (the retrain schedule
    /// waits for those, not for the kinds trained on bundled data).
    pub fn running(&self) -> bool {
        lock(&self.inner).training.iter().any(|k| is_history(*k))
    }

    /// The history kinds still to train: training, or failed (the next start tries again).
    fn pending(&self) -> Vec<ModelKind> {
        let i = lock(&self.inner);
        let mut kinds: BTreeSet<ModelKind> = i.training.iter().copied().collect();
        kinds.extend(i.failed.keys().copied());
        kinds.into_iter().filter(|k| is_history(*k)).collect()
    }
}

/// Whether `kind` is trained on a job history.
fn is_history(kind: ModelKind) -> bool {
    kinds::spec(kind).is_some_and(|s| s.trained_on() == TrainedOn::History)
}

/// Where the history kinds a first start has still to train are kept.
fn pending_path(registry: &ModelRegistry) -> PathBuf {
    registry.root().join("first-start.json")
}

/// The history kinds the first start has to train: every one when the registry has none,
/// else those a first start cut short left to train (and still without a version).
pub fn needs_history(registry: &ModelRegistry) -> Result<Vec<ModelKind>, RegistryError> {
    let history = kinds::registered()
        .iter()
        .filter(|k| k.trained_on() == TrainedOn::History)
        .map(|k| k.kind());
    if training::registry_is_empty(registry)? {
        return Ok(history.collect());
    }
    let pending: Vec<String> = std::fs::read(pending_path(registry))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    let mut out = Vec::new();
    for kind in history {
        if pending.iter().any(|p| p == kind.name())
            && registry.version_numbers(kind.name())?.is_empty()
        {
            out.push(kind);
        }
    }
    Ok(out)
}

/// Keeps the history kinds of `first` still to train (none: the file is removed).
fn save_pending(registry: &ModelRegistry, first: &FirstStart) -> anyhow::Result<()> {
    let path = pending_path(registry);
    let pending: Vec<&str> = first.pending().into_iter().map(|k| k.name()).collect();
    if pending.is_empty() {
        return match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(e).with_context(|| format!("removing {}", path.display()))
            }
            _ => Ok(()),
        };
    }
    std::fs::write(&path, serde_json::to_vec(&pending)?)
        .with_context(|| format!("writing {}", path.display()))
}

/// Starts training, in the background, the history kinds `history` (on the cluster's own
/// history or the bootstrap trace) and the kinds trained on bundled data `bundled`; the
/// kinds are listed as training before this returns (before `/readyz` can be asked).
pub fn spawn(state: AppState, history: Vec<ModelKind>, bundled: Vec<ModelKind>) {
    let dataset = state.config.bootstrap_dataset.clone();
    if !history.is_empty() {
        let names: Vec<&str> = history.iter().map(|k| k.name()).collect();
        eprintln!(
            "augur serve: training {} on the bundled {dataset} trace in the background (/readyz answers 503 until the runtime model is served; it lists the kinds still training)",
            names.join(", ")
        );
    }
    state
        .first_start
        .begin(history.iter().chain(&bundled).copied());
    tokio::task::spawn_blocking(move || {
        if !history.is_empty() {
            train_history_kinds(&state, &dataset, &history);
        }
        for kind in bundled {
            train_bundled(&state, kind);
        }
    });
}

/// Trains the history kinds `wanted` on the bootstrap history (`dataset`: bundled names,
/// trace files and folders, comma-separated) or the cluster's own (Slurm's accounting, when
/// it trains a runtime model), the runtime kind first; each is served as it is saved. A kind
/// the history cannot train answers 503 with the reason.
pub fn train_history_kinds(state: &AppState, dataset: &str, wanted: &[ModelKind]) {
    let started = Instant::now();
    if let Err(e) = save_pending(&state.registry, &state.first_start) {
        tracing::error!(error = %format!("{e:#}"), "keeping the kinds the first start trains failed");
    }
    let specs: Vec<&dyn ServedKind> = wanted.iter().filter_map(|k| kinds::spec(*k)).collect();
    let (first, rest): (Vec<&dyn ServedKind>, Vec<&dyn ServedKind>) = specs
        .iter()
        .copied()
        .partition(|k| k.kind() == ModelKind::Runtime);
    let none = ServedModels::default();
    let run_on = |source: &str, jobs: &[JobRecord], first_only: bool| -> bool {
        let shared = Shared::new(specs.iter().map(|k| k.kind()));
        let run = HistoryRun {
            registry: &state.registry,
            source: source.into(),
            jobs,
            trees: state.config.trees,
            promotion: Promotion::Always,
            served: &none,
            shared: &shared,
        };
        let runtime_served = side_by_side(&run, &first, |spec| {
            train_and_serve(state, &run, spec, started, first_only)
        })
        .into_iter()
        .all(|r| r.unwrap_or(false));
        if first_only && !runtime_served {
            return false;
        }
        side_by_side(&run, &rest, |spec| {
            train_and_serve(state, &run, spec, started, false)
        });
        true
    };
    // the cluster's own history (Slurm's accounting), when it has enough finished jobs and
    // trains a runtime model (without one nothing is served: the bundled trace instead)
    if let Some((source, jobs)) = state.ext.backend.training_history(state) {
        if run_on(&source, &jobs, true) {
            return;
        }
        eprintln!(
            "augur serve: the {source} history did not train the runtime model; training on the bundled trace"
        );
    }
    let sources = training::bootstrap_sources(dataset);
    let format = state.config.bootstrap_format.as_deref();
    match training::bootstrap_jobs(&sources, format, state.config.bootstrap_limit) {
        Ok(jobs) => {
            run_on(dataset, &jobs, false);
        }
        Err(e) => {
            let why = format!("reading the bootstrap history {dataset}: {e:#}");
            tracing::error!(error = %why, "first-start training failed");
            eprintln!("augur serve: ERROR: first-start training failed: {why}");
            for spec in &specs {
                state.first_start.fail(spec.kind(), why.clone());
            }
        }
    }
}

/// Trains `spec`'s kind on `run` and serves it; `true` once it is served. Not trainable on
/// these jobs: the reason is kept for its 503 (unless `retried`: the caller tries another
/// history). Failed (the registry, the swap, a panic): logged as an error and
/// listed as failed.
fn train_and_serve(
    state: &AppState,
    run: &HistoryRun<'_>,
    spec: &dyn ServedKind,
    started: Instant,
    retried: bool,
) -> bool {
    let kind = spec.kind();
    let t = Instant::now();
    let trained = std::panic::catch_unwind(AssertUnwindSafe(|| spec.train(run)))
        .unwrap_or_else(|panic| Err(panicked(panic)));
    let outcome = trained.map_err(anyhow::Error::from).and_then(|r| match r {
        Ok((meta, _)) => {
            state.reload_models().context("serving the new version")?;
            Ok(Ok(meta))
        }
        Err(why) => Ok(Err(why)),
    });
    match outcome {
        Ok(Ok(meta)) => {
            eprintln!(
                "augur serve: {kind} model v{} trained on {} ({} jobs) in {:.1} s, served {:.1} s after the start of training",
                meta.version,
                run.source.name,
                run.jobs.len(),
                t.elapsed().as_secs_f64(),
                started.elapsed().as_secs_f64(),
            );
            finish(state, kind, None);
            true
        }
        Ok(Err(why)) => {
            let why = match spec.missing_field(run.jobs) {
                Some(missing) => format!("{missing}; {why}"),
                None => why.to_string(),
            };
            eprintln!("augur serve:   not trained: {kind}: {why}");
            tracing::warn!("not trained at first start: {kind}: {why}");
            if !retried {
                finish(state, kind, Some(why));
            }
            false
        }
        Err(e) => {
            fail(state, kind, &format!("{e:#}"));
            false
        }
    }
}

/// `kind` is done (served, or `not_trained` with the reason its 503 gives).
fn finish(state: &AppState, kind: ModelKind, not_trained: Option<String>) {
    if let Some(why) = not_trained {
        let kept = {
            let mut o = state.online_mut();
            o.not_trained.insert(kind, why);
            o.not_trained.clone()
        };
        if let Err(e) = training::save_not_trained(&state.registry, &kept) {
            tracing::error!(error = %format!("{e:#}"), "keeping why {kind} was not trained failed");
        }
    }
    state.first_start.done(kind);
    if let Err(e) = save_pending(&state.registry, &state.first_start) {
        tracing::error!(error = %format!("{e:#}"), "keeping the kinds the first start trains failed");
    }
}

/// Training `kind` failed: said loudly, listed by `/readyz` (it stays pending for the next
/// start).
fn fail(state: &AppState, kind: ModelKind, why: &str) {
    tracing::error!(%kind, error = %why, "first-start training failed; the kind is not served");
    eprintln!("augur serve: ERROR: training the {kind} model failed: {why}");
    state.first_start.fail(kind, why.to_string());
}

/// A panic's message as an error.
fn panicked(panic: Box<dyn std::any::Any + Send>) -> kinds::TrainError {
    let message = panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".to_string());
    kinds::TrainError::Panicked(message)
}

/// Trains the `kind` model on its bundled data and serves it; logs how long it took, or
/// why it was not trained (kept, so its answers can say why).
fn train_bundled(state: &AppState, kind: ModelKind) {
    let what = match kinds::spec(kind).map(|k| k.trained_on()) {
        Some(TrainedOn::Bundled { what }) => what,
        _ => "bundled data",
    };
    let started = Instant::now();
    let result = std::panic::catch_unwind(AssertUnwindSafe(|| {
        training::train_bundled(kind, &state.registry, state.config.trees)
    }))
    .unwrap_or_else(|panic| Err(panicked(panic)))
    .map_err(anyhow::Error::from)
    .and_then(|r| {
        if r.is_ok() {
            state.reload_models().context("serving the new version")?;
        }
        Ok(r)
    });
    match result {
        Ok(Ok(meta)) => {
            eprintln!(
                "augur serve: {kind} model v{} trained on {what} in {:.1} s",
                meta.version,
                started.elapsed().as_secs_f64()
            );
            finish(state, kind, None);
        }
        Ok(Err(why)) => {
            eprintln!("augur serve:   not trained: {kind}: {why}");
            finish(state, kind, Some(why.to_string()));
        }
        Err(e) => fail(state, kind, &format!("{e:#}")),
    }
}

/// The history kinds the first start trains, in order, when none is trained yet (tests).
#[cfg(test)]
pub fn all_history_kinds() -> Vec<ModelKind> {
    kinds::registered()
        .iter()
        .filter(|k| k.trained_on() == TrainedOn::History)
        .map(|k| k.kind())
        .collect()
}
