//! The runtime kind: a job's run time (seconds, 80% interval), trained on a job history,
//! judged on held-out `mae_log` and its interval's coverage; its answer at a submit is
//! capped by the job's requested time.

use std::sync::Arc;
use std::time::Instant;

use augur_datasets::JobRecord;
use augur_predictor::registry::Selector;
use augur_predictor::{
    score_runtime, JobEvent, ModelKind, ModelRegistry, OnlinePredictor, RegistryError,
    RuntimeOnline, RuntimePredictor, RuntimeSplit,
};

use super::answers::RuntimeAnswer;
use super::{
    decode_state, encode_state, load_as, mostly_missing, notes, AnswersAtSubmit, CannotTrain,
    HistoryRun, Judged, KindModel, KindOnline, ProfileUse, SavedError, Served, ServedKind,
    ServedModel, ServedModels, TrainError, TrainedOn,
};
use crate::model_store::runtime_metrics;
use crate::serve::tasks::model_gate::{runtime_mae_log_on_newest, Scores, MAE_LOG};
use crate::trainers;

/// See the module docs.
pub struct Runtime;

impl ServedKind for Runtime {
    fn kind(&self) -> ModelKind {
        ModelKind::Runtime
    }

    fn load(
        &self,
        registry: &ModelRegistry,
        at: Selector,
    ) -> Result<Arc<dyn ServedModel>, RegistryError> {
        load_as::<RuntimePredictor>(registry, at)
    }

    fn trained_on(&self) -> TrainedOn {
        TrainedOn::History
    }

    /// Publishes the trained model to the kinds training beside it (the queue-wait kind
    /// reuses it for its queue features).
    fn train(&self, run: &HistoryRun<'_>) -> Result<Result<Judged, CannotTrain>, TrainError> {
        let trainer = trainers::runtime(run.trees);
        let t0 = Instant::now();
        let split = RuntimeSplit::build(run.jobs).and_then(|split| {
            let p = trainer.train(&split.schema, &split.x, &split.y_log, &split.train_rows)?;
            let p = p.trained_on(run.jobs, &split.train_rows);
            Ok((split, p))
        });
        let (split, predictor) = match split {
            Ok(trained) => trained,
            Err(e) => return Ok(Err(e.into())),
        };
        run.shared
            .publish(ModelKind::Runtime, Arc::new(predictor.clone()));
        let eval = match score_runtime(run.jobs, &split, &predictor, t0.elapsed().as_secs_f64()) {
            Ok(eval) => eval,
            Err(e) => return Ok(Err(e.into())),
        };
        let metrics = runtime_metrics(&eval);
        let gated = run.gated();
        let jobs = run.jobs;
        let score =
            |m: &RuntimePredictor| gated.then(|| runtime_mae_log_on_newest(m, jobs)).flatten();
        let (new, served_now) = run.score_new_and_served(&predictor, score);
        let scores = Scores {
            metric: MAE_LOG,
            test_jobs: eval.n_test,
            new: new.or_else(|| metrics.get("mae_log").copied()),
            coverage: metrics.get("coverage80").map(|&c| (c, 0.8)),
            served: served_now,
        };
        let notes = notes(&trainer.params.n_trees.to_string(), eval.n_test);
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
            "run times (a duration, or start and end times)",
            |j| j.duration.is_some_and(f64::is_finite),
        )
    }
}

impl KindModel for RuntimePredictor {
    const MODEL_KIND: ModelKind = ModelKind::Runtime;
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
        Some((
            &self.training_ranges,
            self.training_ranges.fields_used(&self.schema),
        ))
    }
}

impl KindOnline for RuntimeOnline {
    fn observe(&mut self, event: &JobEvent<'_>, answers: &mut AnswersAtSubmit) {
        let requested_time = match event {
            JobEvent::Submitted { job } => job.requested_time,
            _ => None,
        };
        if let Some(Ok(a)) = OnlinePredictor::observe(self, event) {
            answers.runtime = Some(RuntimeAnswer::from(a).within_limit(requested_time));
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
    /// The served runtime model.
    pub fn runtime(&self) -> Option<&Served<RuntimePredictor>> {
        self.typed()
    }
}
