//! The queue-wait kind: how long a job waits to start (seconds, 95% upper bound, risk-split
//! when the model's bound is), trained on a job history with start times, judged on
//! held-out `mae_s` and its bound's coverage.

use std::sync::Arc;

use augur_datasets::JobRecord;
use augur_predictor::queue_wait::{known_wait, ResourceKind};
use augur_predictor::registry::Selector;
use augur_predictor::{
    train_and_evaluate_queue_wait_with, JobEvent, ModelKind, ModelRegistry, OnlinePredictor,
    QueueWaitOnline, QueueWaitPredictor, QueueWaitRun, RegistryError, RuntimePredictor,
};

use super::answers::WaitAnswer;
use super::{
    decode_state, encode_state, load_as, mostly_missing, notes, AnswersAtSubmit, CannotTrain,
    HistoryRun, Judged, KindModel, KindOnline, ProfileUse, SavedError, Served, ServedKind,
    ServedModel, ServedModels, TrainError, TrainedOn,
};
use crate::model_store::queue_wait_metrics;
use crate::serve::tasks::model_gate::{queue_wait_mae_s_on_newest, Scores, MAE_S};
use crate::trainers;

/// See the module docs.
pub struct QueueWait;

impl ServedKind for QueueWait {
    fn kind(&self) -> ModelKind {
        ModelKind::QueueWait
    }

    fn load(
        &self,
        registry: &ModelRegistry,
        at: Selector,
    ) -> Result<Arc<dyn ServedModel>, RegistryError> {
        load_as::<QueueWaitPredictor>(registry, at)
    }

    fn trained_on(&self) -> TrainedOn {
        TrainedOn::History
    }

    /// Reuses the run-time model the runtime kind trains on the same jobs when it trains
    /// one (it waits for it), else trains its own.
    fn train(&self, run: &HistoryRun<'_>) -> Result<Result<Judged, CannotTrain>, TrainError> {
        let shared = run.shared.wait(ModelKind::Runtime);
        let runtime = shared
            .as_ref()
            .and_then(|m| m.downcast_ref::<RuntimePredictor>());
        let qtrainer = trainers::queue_wait_all_capped(run.trees);
        // the runtime kind's model was trained by `qtrainer.runtime` (both are
        // `trainers::runtime(trees)`) on these jobs; the stored metrics are the model's own rows
        let qrun = QueueWaitRun {
            runtime,
            model_only: true,
            hindsight: false,
        };
        let (predictor, eval) = match train_and_evaluate_queue_wait_with(run.jobs, &qtrainer, qrun)
        {
            Ok(trained) => trained,
            Err(e) => return Ok(Err(e.into())),
        };
        let metrics = queue_wait_metrics(&eval);
        let gated = run.gated();
        let jobs = run.jobs;
        let score = |m: &QueueWaitPredictor| {
            gated
                .then(|| queue_wait_mae_s_on_newest(m, jobs).ok().flatten())
                .flatten()
        };
        let (new, served_now) = run.score_new_and_served(&predictor, score);
        let scores = Scores {
            metric: MAE_S,
            test_jobs: eval.n_test,
            new: new.or_else(|| metrics.get("mae_s").copied()),
            coverage: metrics.get("coverage95").map(|&c| (c, 0.95)),
            served: served_now,
        };
        let notes = notes(&qtrainer.point.n_trees.to_string(), eval.n_test);
        Ok(Ok(run.save_and_judge(
            &predictor,
            eval.n_train,
            metrics,
            notes,
            &scores,
        )?))
    }

    fn missing_field(&self, jobs: &[JobRecord]) -> Option<String> {
        mostly_missing(
            jobs,
            "start times (a queue wait is start − submit)",
            |j| known_wait(j).is_some(),
        )
    }
}

impl KindModel for QueueWaitPredictor {
    const MODEL_KIND: ModelKind = ModelKind::QueueWait;
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
        let m = &self.runtime;
        let mut used = m.training_ranges.fields_used(&m.schema);
        // the queue state counts jobs in the model's resource
        let resource = match self.resource {
            ResourceKind::Nodes => Some("num_nodes"),
            ResourceKind::Gpus => Some("num_gpus"),
            ResourceKind::Cpus => Some("cpus"),
            ResourceKind::Jobs => None,
        };
        if let Some(r) = resource.filter(|r| !used.contains(r)) {
            used.push(r);
        }
        Some((&m.training_ranges, used))
    }
}

impl KindOnline for QueueWaitOnline {
    fn observe(&mut self, event: &JobEvent<'_>, answers: &mut AnswersAtSubmit) {
        if let Some(Ok(a)) = OnlinePredictor::observe(self, event) {
            answers.queue_wait = Some(WaitAnswer::from(a));
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
    /// The served queue-wait model.
    pub fn queue_wait(&self) -> Option<&Served<QueueWaitPredictor>> {
        self.typed()
    }
}
