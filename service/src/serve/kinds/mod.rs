//! The kinds of model the service serves, each behind one trait, and the one list of them
//! ([`registered`]). Every loop of the service over kinds (loading at start, first-start
//! training, retraining and its gate, the online state, snapshots, retention, `/v1/models`,
//! promote and rollback, [`super::ServeEvent::ModelsSwapped`]) iterates over that list.
//!
//! Three traits, one per role:
//! - [`ServedKind`]: the kind itself (a unit struct per kind): how a version is loaded from
//!   the registry, what it is trained on and how, scored for the retrain gate
//!   ([`super::tasks::model_gate`]).
//! - [`ServedModel`]: a loaded version (its model and registry metadata), which starts or
//!   restores its online state and says which profile fields it reads. Implemented once
//!   for [`Served<T>`] over each model type's [`KindModel`].
//! - [`KindOnline`]: a served version's online state: observes each stored event (filling
//!   its answer at a submit), forgets a run past the retention window, saves itself for a
//!   snapshot. Typed predictions reach it by downcasting ([`KindOnline::as_any`]).
//!
//! # Adding a kind
//! 1. Its predictor folder in `augur-predictor` and its variant in `ModelKind`.
//! 2. A file here (`kinds/<kind>.rs`): a unit struct implementing [`ServedKind`], and
//!    [`KindModel`] for its model type (its online state, if any, implementing
//!    [`KindOnline`]); a typed accessor on [`ServedModels`] when a handler needs the model.
//! 3. One line in [`registered`].
//! 4. If it answers at a submit: its field in [`AnswersAtSubmit`] (and in
//!    [`super::state::online::JobInfo`] when `GET /v1/jobs/{id}` shows it); if it has a predict
//!    endpoint, its handler in `api/`.
//!
//! The tests in `serve/tests/kinds.rs` loop over this list: they then check the new kind
//! is loaded at start, snapshotted and restored, listed, promoted, rolled back and in
//! `ModelsSwapped`.

pub mod answers;
pub mod convergence;
pub mod dag;
pub mod failure;
pub mod queue_wait;
pub mod runtime;
pub mod saved;

use std::any::Any;
use std::collections::BTreeMap;
use std::sync::{Arc, Condvar, Mutex};

use augur_datasets::JobRecord;
use augur_features::TrainingRanges;
use augur_predictor::registry::Selector;
use augur_predictor::{
    Artifact, ArtifactMeta, JobEvent, ModelKind, ModelRegistry, PredictorError, RegistryError,
};
use serde::{Deserialize, Serialize};

use self::answers::{FailureAnswer, RuntimeAnswer, WaitAnswer};
pub use self::saved::{decode_state, encode_state, SavedError};
use super::tasks::model_gate::{Gate, Scores, Verdict};
use crate::model_store::{save_artifact, SaveError, Source};

/// Every kind the service serves, in the order it trains, lists and reports them (the
/// order of `ModelKind::ALL`; a test checks both lists hold the same kinds).
pub fn registered() -> &'static [&'static dyn ServedKind] {
    &[
        &runtime::Runtime,
        &queue_wait::QueueWait,
        &failure::Failure,
        &convergence::Convergence,
        &dag::Dag,
    ]
}

/// The registered kind `kind`.
pub fn spec(kind: ModelKind) -> Option<&'static dyn ServedKind> {
    registered().iter().copied().find(|k| k.kind() == kind)
}

/// The registered kind named `name` (its registry folder name).
pub fn by_name(name: &str) -> Option<&'static dyn ServedKind> {
    ModelKind::from_name(name).and_then(spec)
}

/// What the service trains a kind on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrainedOn {
    /// A job history: the bootstrap trace at first start, the ingested history on a
    /// retrain (judged by the gate).
    History,
    /// Data bundled with the service (`what`), at first start only.
    Bundled { what: &'static str },
}

/// Why a history (or bundled data) cannot train a kind: the reason its answers give.
#[derive(Debug, thiserror::Error)]
pub enum CannotTrain {
    #[error(transparent)]
    Predictor(#[from] PredictorError),
    #[error(transparent)]
    Data(#[from] augur_datasets::DatasetError),
    /// The kind is not trained on a job history.
    #[error("{kind} is not trained on a job history")]
    NotFromHistory { kind: ModelKind },
    /// The kind is not trained on bundled data.
    #[error("{kind} is not trained on bundled data")]
    NotBundled { kind: ModelKind },
}

/// Why a training run failed (not the data: the registry).
#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    #[error(transparent)]
    Save(#[from] SaveError),
    #[error("promoting the new version: {0}")]
    Promote(#[from] RegistryError),
    /// The training panicked (a bug): the message.
    #[error("the training panicked: {0}")]
    Panicked(String),
}

/// Whether a newly trained version is promoted (served).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Promotion {
    /// Always (first start: nothing is served yet).
    Always,
    /// Only when it passes the gate against the served version on the newest slice
    /// (see [`crate::serve::tasks::model_gate`]).
    IfNotWorse(Gate),
}

impl Promotion {
    /// The gate, when there is one.
    pub fn gate(self) -> Option<Gate> {
        match self {
            Promotion::Always => None,
            Promotion::IfNotWorse(g) => Some(g),
        }
    }
}

/// What the ingested history holds, for the verdicts of kinds it does not train.
#[derive(Debug, Clone, Copy, Default)]
pub struct HistoryFacts {
    /// Ingested jobs that carry a DAG.
    pub dag_jobs: usize,
}

/// A version trained on a history: its metadata and the gate's verdict.
pub type Judged = (ArtifactMeta, Verdict);

/// A kind, as the service handles it (see the module docs).
pub trait ServedKind: Sync {
    fn kind(&self) -> ModelKind;

    /// Loads version `at` as a served model.
    fn load(
        &self,
        registry: &ModelRegistry,
        at: Selector,
    ) -> Result<Arc<dyn ServedModel>, RegistryError>;

    /// What the service trains it on.
    fn trained_on(&self) -> TrainedOn;

    /// Trains it on `run.jobs`, saves the version, judges it against the served one and
    /// promotes it when the verdict says so (kinds trained on a history).
    fn train(&self, run: &HistoryRun<'_>) -> Result<Result<Judged, CannotTrain>, TrainError> {
        let _ = run;
        Ok(Err(CannotTrain::NotFromHistory { kind: self.kind() }))
    }

    /// Trains it on its bundled data, saves and promotes it (kinds trained on bundled data).
    fn train_bundled(
        &self,
        registry: &ModelRegistry,
        trees: Option<usize>,
    ) -> Result<Result<ArtifactMeta, CannotTrain>, TrainError> {
        let _ = (registry, trees);
        Ok(Err(CannotTrain::NotBundled { kind: self.kind() }))
    }

    /// What `jobs` lack for this kind when they lack a field entirely or mostly (fewer than
    /// one job in ten has it), named by the field.
    fn missing_field(&self, jobs: &[JobRecord]) -> Option<String> {
        let _ = jobs;
        None
    }

    /// The retrain verdict of a kind the ingested history does not train, made from the
    /// state when the retrain starts (`None`: the report says nothing of it).
    fn not_retrained(&self, served: &ServedModels, history: &HistoryFacts) -> Option<Verdict> {
        let _ = (served, history);
        None
    }
}

/// A loaded version of a kind (see the module docs).
pub trait ServedModel: Send + Sync + std::fmt::Debug {
    fn kind(&self) -> ModelKind;
    fn meta(&self) -> &ArtifactMeta;
    /// The typed [`Served<T>`], for [`ServedModels::typed`].
    fn as_any(&self) -> &dyn Any;
    /// Whether it keeps an online state (fed by the events, saved in snapshots).
    fn has_online(&self) -> bool;
    /// A new, empty online state (`None`: the kind has none).
    fn online(&self) -> Option<Box<dyn KindOnline>>;
    /// The online state `saved` (from [`KindOnline::save`]) restored onto this version.
    fn restore(&self, saved: &[u8]) -> Result<Box<dyn KindOnline>, SavedError>;
    /// Its training ranges and the profile fields it reads (kinds that answer for a
    /// profile).
    fn profile_use(&self) -> Option<ProfileUse<'_>>;
    /// Whether its online state takes the event numbered `seq`: a model trained on the
    /// ingested history sees the log from that history's first event on (the span its
    /// features were trained on), a model trained on a trace the whole log.
    fn feeds(&self, seq: i64) -> bool {
        self.meta()
            .history_from_seq
            .is_none_or(|first| seq >= first)
    }
}

/// A model's training ranges and the profile fields it reads.
pub type ProfileUse<'a> = (&'a TrainingRanges, Vec<&'static str>);

/// A served version's online state (see the module docs).
pub trait KindOnline: Send + Sync {
    /// Applies one event; at a submit, puts the answer it issued (if any) in `answers`.
    fn observe(&mut self, event: &JobEvent<'_>, answers: &mut AnswersAtSubmit);
    /// Drops what it keeps for one finished run (the retention window).
    fn forget(&mut self, job_id: &str);
    /// Its serialised form, for a snapshot.
    fn save(&self) -> Result<Vec<u8>, SavedError>;
    /// The typed state, for the typed predictions.
    fn as_any(&self) -> &dyn Any;
}

/// A model type the service serves: implemented in each kind's file; [`Served<T>`] is then
/// a [`ServedModel`].
pub trait KindModel: Artifact + std::fmt::Debug + Send + Sync + 'static {
    const MODEL_KIND: ModelKind;
    /// Whether [`KindModel::online`] gives a state.
    const HAS_ONLINE: bool;
    fn online(model: Arc<Self>, version: u32) -> Option<Box<dyn KindOnline>>;
    fn restore(
        model: Arc<Self>,
        version: u32,
        saved: &[u8],
    ) -> Result<Box<dyn KindOnline>, SavedError>;
    fn profile_use(&self) -> Option<ProfileUse<'_>> {
        None
    }
}

/// A model being served and its registry metadata.
#[derive(Debug, Clone)]
pub struct Served<T> {
    pub model: Arc<T>,
    pub meta: ArtifactMeta,
}

impl<T: KindModel> ServedModel for Served<T> {
    fn kind(&self) -> ModelKind {
        T::MODEL_KIND
    }
    fn meta(&self) -> &ArtifactMeta {
        &self.meta
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn has_online(&self) -> bool {
        T::HAS_ONLINE
    }
    fn online(&self) -> Option<Box<dyn KindOnline>> {
        T::online(Arc::clone(&self.model), self.meta.version)
    }
    fn restore(&self, saved: &[u8]) -> Result<Box<dyn KindOnline>, SavedError> {
        T::restore(Arc::clone(&self.model), self.meta.version, saved)
    }
    fn profile_use(&self) -> Option<ProfileUse<'_>> {
        self.model.profile_use()
    }
}

/// Loads version `at` of `T` as a served model.
pub fn load_as<T: KindModel>(
    registry: &ModelRegistry,
    at: Selector,
) -> Result<Arc<dyn ServedModel>, RegistryError> {
    let (model, meta) = registry.load::<T>(at)?;
    Ok(Arc::new(Served {
        model: Arc::new(model),
        meta,
    }))
}

/// The models being served, by kind (a kind is absent until trained or loaded).
#[derive(Debug, Clone, Default)]
pub struct ServedModels {
    models: BTreeMap<ModelKind, Arc<dyn ServedModel>>,
    /// The kinds with saved versions none of which loads, and why (a checksum mismatch,
    /// another feature schema, ...).
    pub unloadable: BTreeMap<ModelKind, String>,
}

impl ServedModels {
    /// These models with `model` served for its kind.
    pub fn with<T: KindModel>(mut self, model: Served<T>) -> ServedModels {
        self.insert(Arc::new(model));
        self
    }

    /// Serves `model` for its kind.
    pub fn insert(&mut self, model: Arc<dyn ServedModel>) {
        self.models.insert(model.kind(), model);
    }

    /// The served model of `kind`.
    pub fn get(&self, kind: ModelKind) -> Option<&dyn ServedModel> {
        self.models.get(&kind).map(|m| &**m)
    }

    /// The served model of `T`'s kind, typed.
    pub fn typed<T: KindModel>(&self) -> Option<&Served<T>> {
        self.get(T::MODEL_KIND)?.as_any().downcast_ref()
    }

    /// The served models, in kind order.
    pub fn iter(&self) -> impl Iterator<Item = &dyn ServedModel> {
        self.models.values().map(|m| &**m)
    }

    /// The served version of `kind`.
    pub fn version(&self, kind: ModelKind) -> Option<u32> {
        self.get(kind).map(|m| m.meta().version)
    }

    /// The served version of every kind served.
    pub fn versions(&self) -> BTreeMap<ModelKind, u32> {
        self.iter().map(|m| (m.kind(), m.meta().version)).collect()
    }
}

/// The answers the served predictors issued for a job at its submit (stored as its
/// prediction record).
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct AnswersAtSubmit {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<RuntimeAnswer>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_wait: Option<WaitAnswer>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<FailureAnswer>,
}

/// What a kind trains on when trained on a history, and against what it is judged.
pub struct HistoryRun<'a> {
    pub registry: &'a ModelRegistry,
    pub source: Source<'a>,
    pub jobs: &'a [JobRecord],
    pub trees: Option<usize>,
    pub promotion: Promotion,
    /// The models served now (the gate's reference).
    pub served: &'a ServedModels,
    /// What the kinds training side by side hand each other.
    pub shared: &'a Shared,
}

impl HistoryRun<'_> {
    /// Whether the new version is scored on the newest slice (not at first start).
    pub fn gated(&self) -> bool {
        self.promotion != Promotion::Always
    }

    /// The `new` model and the served version of its kind scored by `score`, side by side
    /// (each scoring reads the same jobs on its own).
    pub fn score_new_and_served<T: KindModel>(
        &self,
        new: &T,
        score: impl Fn(&T) -> Option<f64> + Sync,
    ) -> (Option<f64>, Option<(u32, Option<f64>)>) {
        let served = self.served.typed::<T>();
        rayon::join(
            || score(new),
            || served.map(|s| (s.meta.version, score(&s.model))),
        )
    }

    /// Saves `predictor` (trained on `rows` jobs, with its held-out `metrics` and `notes`),
    /// judges it on `scores` and promotes it when the verdict says so.
    pub fn save_and_judge<T: KindModel>(
        &self,
        predictor: &T,
        rows: usize,
        metrics: BTreeMap<String, f64>,
        notes: BTreeMap<String, String>,
        scores: &Scores,
    ) -> Result<Judged, TrainError> {
        let meta = save_artifact(self.registry, predictor, self.source, rows, metrics, notes)?;
        let verdict = Verdict::judge(T::KIND, meta.version, scores, self.promotion.gate());
        if verdict.promoted {
            self.registry.promote(T::KIND, meta.version)?;
        }
        Ok((meta, verdict))
    }
}

/// A model one kind trained and another waits for, as the kinds train side by side (the
/// queue-wait model's queue features need the run-time model the runtime kind trains on
/// the same jobs).
type SharedModel = Arc<dyn Any + Send + Sync>;

/// What the kinds training side by side hand each other: each kind's trained model, once
/// it is done (see [`SharedModel`]).
pub struct Shared {
    /// By kind training in this run: `None` while it trains, then what it published.
    done: Mutex<BTreeMap<ModelKind, Option<Option<SharedModel>>>>,
    changed: Condvar,
}

impl Shared {
    /// For a run training `kinds`.
    pub fn new(kinds: impl IntoIterator<Item = ModelKind>) -> Shared {
        Shared {
            done: Mutex::new(kinds.into_iter().map(|k| (k, None)).collect()),
            changed: Condvar::new(),
        }
    }

    /// Hands `model`, trained by `kind`, to the kinds waiting for it.
    pub fn publish(&self, kind: ModelKind, model: SharedModel) {
        let mut done = super::lock(&self.done);
        done.insert(kind, Some(Some(model)));
        self.changed.notify_all();
    }

    /// Marks `kind` done (without a model if it published none).
    pub fn finish(&self, kind: ModelKind) {
        let mut done = super::lock(&self.done);
        let slot = done.entry(kind).or_insert(None);
        if slot.is_none() {
            *slot = Some(None);
        }
        self.changed.notify_all();
    }

    /// The model `kind` trained in this run, once it is done (`None`: it trained none, or
    /// it does not train in this run).
    pub fn wait(&self, kind: ModelKind) -> Option<SharedModel> {
        let mut done = super::lock(&self.done);
        loop {
            match done.get(&kind) {
                None => return None,
                Some(Some(model)) => return model.clone(),
                Some(None) => {
                    done = self.changed.wait(done).unwrap_or_else(|e| e.into_inner());
                }
            }
        }
    }
}

/// Marks a kind done when dropped (also when its training panics: no kind waits forever).
pub struct FinishOnDrop<'a> {
    pub shared: &'a Shared,
    pub kind: ModelKind,
}

impl Drop for FinishOnDrop<'_> {
    fn drop(&mut self) {
        self.shared.finish(self.kind);
    }
}

/// The notes of a version trained on a history.
pub fn notes(max_trees: &str, n_test: usize) -> BTreeMap<String, String> {
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

/// What the fraction of `jobs` passing `has` says of `field` (see
/// [`ServedKind::missing_field`]).
pub fn mostly_missing(
    jobs: &[JobRecord],
    field: &str,
    has: impl Fn(&JobRecord) -> bool,
) -> Option<String> {
    let n = jobs.len();
    let have = jobs.iter().filter(|j| has(j)).count();
    (have * 10 < n.max(1)).then(|| format!("only {have} of {n} jobs have {field}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kind_waits_for_what_another_publishes_and_never_for_a_kind_not_training() {
        let shared = Shared::new([ModelKind::Runtime, ModelKind::QueueWait]);
        assert!(
            shared.wait(ModelKind::Failure).is_none(),
            "not training here"
        );
        std::thread::scope(|s| {
            let waiter = s.spawn(|| {
                shared
                    .wait(ModelKind::Runtime)
                    .and_then(|m| m.downcast_ref::<u32>().copied())
            });
            shared.publish(ModelKind::Runtime, Arc::new(7u32));
            shared.finish(ModelKind::Runtime);
            assert_eq!(waiter.join().unwrap(), Some(7));
        });
        // a kind that ends (or panics) without publishing releases its waiters with nothing
        std::thread::scope(|s| {
            let waiter = s.spawn(|| shared.wait(ModelKind::QueueWait).is_none());
            drop(FinishOnDrop {
                shared: &shared,
                kind: ModelKind::QueueWait,
            });
            assert!(waiter.join().unwrap());
        });
    }
}
