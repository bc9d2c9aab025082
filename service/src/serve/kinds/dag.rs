//! The DAG kind: stage run times and a DAG job's makespan, trained on the bundled TPC-H and
//! WfCommons DAG sets at first start. It keeps no online state (its answers read the job
//! table and the runtime kind), and the ingested history cannot retrain it: events carry a
//! job's DAG and its whole duration, not each stage's measured run time.

use std::collections::BTreeMap;
use std::sync::Arc;

use augur_predictor::dag::{load_bundled_dag_sets, DagDataset, DagPredictor};
use augur_predictor::registry::Selector;
use augur_predictor::{ArtifactMeta, ModelKind, ModelRegistry, RegistryError};

use super::{
    CannotTrain, HistoryFacts, KindModel, KindOnline, SavedError, Served, ServedKind, ServedModel,
    ServedModels, TrainError, TrainedOn,
};
use crate::model_store::save_artifact;
use crate::serve::tasks::model_gate::{Verdict, MAKESPAN_MAE_LOG};
use crate::trainers;

/// GRU epochs of the DAG model the service trains (`augur evaluate --task dag` runs up to
/// 40, early-stopped on held-out groups): a few keep the first-start training short; the
/// time it takes is measured in docs/dag.md.
pub const SERVE_DAG_EPOCHS: usize = 3;

/// See the module docs.
pub struct Dag;

impl ServedKind for Dag {
    fn kind(&self) -> ModelKind {
        ModelKind::Dag
    }

    fn load(
        &self,
        registry: &ModelRegistry,
        at: Selector,
    ) -> Result<Arc<dyn ServedModel>, RegistryError> {
        super::load_as::<DagPredictor>(registry, at)
    }

    fn trained_on(&self) -> TrainedOn {
        TrainedOn::Bundled {
            what: "the bundled TPC-H and WfCommons DAGs",
        }
    }

    /// Trains on both bundled DAG sets (read as `augur evaluate --task dag` reads them).
    fn train_bundled(
        &self,
        registry: &ModelRegistry,
        trees: Option<usize>,
    ) -> Result<Result<ArtifactMeta, CannotTrain>, TrainError> {
        match load_bundled_dag_sets() {
            Ok(data) => train_dag(registry, &data, trees, SERVE_DAG_EPOCHS),
            Err(e) => Ok(Err(e.into())),
        }
    }

    /// The served version (trained on the bundled DAG sets) stays; the verdict says why.
    fn not_retrained(&self, served: &ServedModels, history: &HistoryFacts) -> Option<Verdict> {
        let dag_jobs = history.dag_jobs;
        let served = served.version(ModelKind::Dag);
        let stays = match served {
            Some(v) => format!("dag v{v} (trained on the bundled DAG sets) stays served"),
            None => "no dag model is served".to_string(),
        };
        let reason = format!(
            "not retrained: the ingested history cannot train it ({dag_jobs} ingested jobs have a DAG, but events carry no per-stage run times, which it learns from); {stays}"
        );
        Some(Verdict::not_trained(
            ModelKind::Dag.name(),
            MAKESPAN_MAE_LOG,
            served,
            reason,
        ))
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
) -> Result<Result<ArtifactMeta, CannotTrain>, TrainError> {
    let trainer = trainers::dag(trees, Some(epochs));
    let predictor = match trainer.train(data) {
        Ok(p) => p,
        Err(e) => return Ok(Err(e.into())),
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
    registry.promote(ModelKind::Dag.name(), meta.version)?;
    Ok(Ok(meta))
}

impl KindModel for DagPredictor {
    const MODEL_KIND: ModelKind = ModelKind::Dag;
    const HAS_ONLINE: bool = false;

    fn online(_model: Arc<Self>, _version: u32) -> Option<Box<dyn KindOnline>> {
        None
    }

    fn restore(
        _model: Arc<Self>,
        _version: u32,
        _saved: &[u8],
    ) -> Result<Box<dyn KindOnline>, SavedError> {
        Err(SavedError::Presence {
            kind: ModelKind::Dag,
            saved: "has",
            served: "kept without an online state",
        })
    }
}

impl ServedModels {
    /// The served DAG model.
    pub fn dag(&self) -> Option<&Served<DagPredictor>> {
        self.typed()
    }
}
