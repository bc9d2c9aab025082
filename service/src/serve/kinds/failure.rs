//! The failure kind: the calibrated probability that a job ends failed (no interval),
//! trained on a job history with statuses, judged on held-out PR-AUC (the Brier score is
//! in the metrics).

use std::sync::Arc;

use augur_datasets::JobRecord;
use augur_features::failure_label;
use augur_predictor::failure::FailureOnline;
use augur_predictor::registry::Selector;
use augur_predictor::{
    train_and_evaluate_failure, FailurePredictor, JobEvent, ModelKind, ModelRegistry,
    OnlinePredictor, RegistryError,
};

use super::answers::FailureAnswer;
use super::{
    decode_state, encode_state, load_as, mostly_missing, notes, AnswersAtSubmit, CannotTrain,
    HistoryRun, Judged, KindModel, KindOnline, ProfileUse, SavedError, Served, ServedKind,
    ServedModel, ServedModels, TrainError, TrainedOn,
};
use crate::model_store::failure_metrics;
use crate::serve::tasks::model_gate::{failure_scores_on_newest, Scores, PR_AUC};
use crate::trainers;

/// See the module docs.
pub struct Failure;

impl ServedKind for Failure {
    fn kind(&self) -> ModelKind {
        ModelKind::Failure
    }

    fn load(
        &self,
        registry: &ModelRegistry,
        at: Selector,
    ) -> Result<Arc<dyn ServedModel>, RegistryError> {
        load_as::<FailurePredictor>(registry, at)
    }

    fn trained_on(&self) -> TrainedOn {
        TrainedOn::History
    }

    fn train(&self, run: &HistoryRun<'_>) -> Result<Result<Judged, CannotTrain>, TrainError> {
        let trainer = trainers::failure(run.trees);
        let (predictor, eval) = match train_and_evaluate_failure(run.jobs, &trainer) {
            Ok(e) => e,
            Err(e) => return Ok(Err(e.into())),
        };
        let metrics = failure_metrics(&eval);
        let gated = run.gated();
        let jobs = run.jobs;
        let score = |m: &FailurePredictor| {
            gated
                .then(|| failure_scores_on_newest(m, jobs).map(|(pr_auc, _)| pr_auc))
                .flatten()
        };
        let (new, served_now) = run.score_new_and_served(&predictor, score);
        let scores = Scores {
            metric: PR_AUC,
            test_jobs: eval.n_test,
            new,
            coverage: None,
            served: served_now,
        };
        let mut notes = notes(&trainer.gbdt.n_trees.to_string(), eval.n_test);
        // which candidate answers (`GET /v1/models` shows it)
        notes.insert("served".to_string(), eval.served.name().to_string());
        Ok(Ok(run.save_and_judge(
            &predictor,
            eval.n_train,
            metrics,
            notes,
            &scores,
        )?))
    }

    fn missing_field(&self, jobs: &[JobRecord]) -> Option<String> {
        mostly_missing(jobs, "job statuses (completed / failed / killed)", |j| {
            failure_label(j.status).is_some()
        })
    }
}

impl KindModel for FailurePredictor {
    const MODEL_KIND: ModelKind = ModelKind::Failure;
    const HAS_ONLINE: bool = true;

    fn online(model: Arc<Self>, version: u32) -> Option<Box<dyn KindOnline>> {
        Some(Box::new(model.online(version)))
    }

    fn restore(
        model: Arc<Self>,
        version: u32,
        saved: &[u8],
    ) -> Result<Box<dyn KindOnline>, SavedError> {
        Ok(Box::new(model.online_from(version, decode_state(saved)?)?))
    }

    fn profile_use(&self) -> Option<ProfileUse<'_>> {
        let mut used = self.training_ranges.fields_used(&self.schema.base);
        for &f in self.schema.keys.iter().flat_map(|k| k.fields()) {
            if !used.contains(&f) {
                used.push(f);
            }
        }
        Some((&self.training_ranges, used))
    }
}

impl KindOnline for FailureOnline {
    fn observe(&mut self, event: &JobEvent<'_>, answers: &mut AnswersAtSubmit) {
        if let Some(Ok(a)) = OnlinePredictor::observe(self, event) {
            answers.failure = Some(FailureAnswer::from(a));
        }
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
    /// The served failure model.
    pub fn failure(&self) -> Option<&Served<FailurePredictor>> {
        self.typed()
    }
}
