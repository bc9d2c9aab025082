//! The convergence kind: when an ingested running job's metric curve converges, trained on
//! the bundled MLPerf v1.0 runs at first start (the ingested history has no curves to
//! learn from, so a retrain keeps it).

use std::collections::BTreeMap;
use std::sync::Arc;

use augur_predictor::convergence::{load_bundled_mlperf, ConvergenceOnline};
use augur_predictor::registry::Selector;
use augur_predictor::{
    train_and_evaluate_convergence, ArtifactMeta, ConvergencePredictor, JobEvent, ModelKind,
    ModelRegistry, OnlinePredictor, RegistryError,
};

use super::{
    decode_state, encode_state, load_as, notes, AnswersAtSubmit, CannotTrain, KindModel,
    KindOnline, SavedError, Served, ServedKind, ServedModel, ServedModels, TrainError, TrainedOn,
};
use crate::model_store::{convergence_metrics, save_artifact};
use crate::trainers;

/// See the module docs.
pub struct Convergence;

impl ServedKind for Convergence {
    fn kind(&self) -> ModelKind {
        ModelKind::Convergence
    }

    fn load(
        &self,
        registry: &ModelRegistry,
        at: Selector,
    ) -> Result<Arc<dyn ServedModel>, RegistryError> {
        load_as::<ConvergencePredictor>(registry, at)
    }

    fn trained_on(&self) -> TrainedOn {
        TrainedOn::Bundled {
            what: "the bundled MLPerf runs",
        }
    }

    /// Trains on the bundled MLPerf v1.0 runs (first 80% by run start; metrics on the last
    /// 20%, as `augur evaluate --task convergence`), saves and promotes it.
    fn train_bundled(
        &self,
        registry: &ModelRegistry,
        trees: Option<usize>,
    ) -> Result<Result<ArtifactMeta, CannotTrain>, TrainError> {
        let runs = match load_bundled_mlperf() {
            Ok(r) => r,
            Err(e) => return Ok(Err(e.into())),
        };
        let trainer = trainers::convergence(trees);
        let (predictor, eval) = match train_and_evaluate_convergence(&runs, &trainer) {
            Ok(e) => e,
            Err(e) => return Ok(Err(e.into())),
        };
        let metrics = convergence_metrics(&eval);
        let notes: BTreeMap<String, String> = notes(&trainer.trees.to_string(), eval.n_test_runs);
        let meta = save_artifact(
            registry,
            &predictor,
            "mlperf",
            eval.n_train_runs,
            metrics,
            notes,
        )?;
        registry.promote(ModelKind::Convergence.name(), meta.version)?;
        Ok(Ok(meta))
    }
}

impl KindModel for ConvergencePredictor {
    const MODEL_KIND: ModelKind = ModelKind::Convergence;
    const HAS_ONLINE: bool = true;

    fn online(model: Arc<Self>, version: u32) -> Option<Box<dyn KindOnline>> {
        Some(Box::new(model.online(version)))
    }

    fn restore(
        model: Arc<Self>,
        version: u32,
        saved: &[u8],
    ) -> Result<Box<dyn KindOnline>, SavedError> {
        Ok(Box::new(model.online_from(version, decode_state(saved)?)))
    }
}

impl KindOnline for ConvergenceOnline {
    /// Records curves; answers nothing at a submit.
    fn observe(&mut self, event: &JobEvent<'_>, _answers: &mut AnswersAtSubmit) {
        let _ = OnlinePredictor::observe(self, event);
    }

    fn forget(&mut self, job_id: &str) {
        OnlinePredictor::forget(self, job_id);
    }

    fn save(&self) -> Result<Vec<u8>, SavedError> {
        encode_state(self.state())
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

impl ServedModels {
    /// The served convergence model.
    pub fn convergence(&self) -> Option<&Served<ConvergencePredictor>> {
        self.typed()
    }
}
