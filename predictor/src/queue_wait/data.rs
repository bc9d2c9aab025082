//! What the queue-wait model is trained on, built over a whole trace: the runtime
//! predictor of the training period, every job's history and queue features (the queue
//! replayed with predicted run times) and the ln(1 + wait) targets.

use augur_datasets::split::clamp_duration;
use augur_datasets::JobRecord;
use augur_features::{batch_features, FeatureSchema};
use augur_models::Matrix;

use super::replay::{infer_capacity, replay_queue_features};
use super::state::{QueueJob, ResourceKind, QUEUE_FEATURES};
use crate::runtime::{RuntimePredictor, RuntimeTrainer};
use crate::PredictorError;

/// The wait of a job, when known and sane.
pub fn known_wait(job: &JobRecord) -> Option<f64> {
    job.queue_wait
        .or_else(|| job.start_time.map(|s| s - job.submit_time))
        .filter(|w| w.is_finite() && *w >= 0.0)
}

/// Everything the training of the queue-wait model builds over a trace: the runtime
/// predictor, the feature matrix of every job and the labelled training rows.
pub struct QueueWaitData {
    pub runtime: RuntimePredictor,
    pub resource: ResourceKind,
    pub capacity: f64,
    /// Row-major, `jobs.len() × n_features`.
    pub x: Vec<f32>,
    pub n_features: usize,
    /// ln(1 + wait) per job (0 where unknown; only labelled rows are used).
    pub y_log: Vec<f64>,
    /// Submit time per job, seconds.
    pub submit: Vec<f64>,
}

/// The names of a queue-wait feature row: the run-time features of `schema`, then the
/// queue features (`queue:` before each).
pub(super) fn feature_names(schema: &FeatureSchema) -> Vec<String> {
    let mut v = schema.names();
    v.extend(QUEUE_FEATURES.iter().map(|s| format!("queue:{s}")));
    v
}

impl QueueWaitData {
    /// The names of a row's features, in order.
    pub fn feature_names(&self) -> Vec<String> {
        feature_names(&self.runtime.schema)
    }

    /// Builds features for every job; everything learned (run times with `runtime_trainer`,
    /// the capacity as the `capacity_quantile` of concurrent demand) comes from `train_rows`
    /// (all jobs of the training period, in submit order).
    pub fn build(
        jobs: &[JobRecord],
        train_rows: &[usize],
        runtime_trainer: &RuntimeTrainer,
        capacity_quantile: f64,
    ) -> Result<QueueWaitData, PredictorError> {
        Self::build_reusing(jobs, train_rows, runtime_trainer, capacity_quantile, None)
    }

    /// [`QueueWaitData::build`], taking `trained` as the run-time model when it has the
    /// feature schema these jobs give: the caller vouches that `runtime_trainer` trained it
    /// on the labelled jobs of `train_rows` (what [`crate::RuntimeSplit`] trains on), so it
    /// is the model this would train.
    pub fn build_reusing(
        jobs: &[JobRecord],
        train_rows: &[usize],
        runtime_trainer: &RuntimeTrainer,
        capacity_quantile: f64,
        trained: Option<&RuntimePredictor>,
    ) -> Result<QueueWaitData, PredictorError> {
        let train_jobs: Vec<JobRecord> = train_rows.iter().map(|&i| jobs[i].clone()).collect();
        let schema = FeatureSchema::for_jobs(&train_jobs);
        let hx = batch_features(jobs, &schema);
        let h = schema.len();
        let y_rt: Vec<f64> = jobs
            .iter()
            .map(|j| clamp_duration(j.duration.filter(|d| d.is_finite()).unwrap_or(1.0)).ln())
            .collect();
        let rt_rows: Vec<usize> = train_rows
            .iter()
            .copied()
            .filter(|&i| jobs[i].duration.is_some_and(f64::is_finite))
            .collect();
        let runtime = match trained.filter(|r| r.schema == schema) {
            Some(r) => r.clone(),
            None => runtime_trainer.train(&schema, &hx, &y_rt, &rt_rows)?,
        };
        let hm = Matrix::new(&hx, jobs.len(), h)?;
        let rt_point = runtime.ensemble_seconds_batch(&hm)?;
        let resource = ResourceKind::for_jobs(&train_jobs);
        let capacity = infer_capacity(jobs, train_rows, resource, capacity_quantile);
        let queue_jobs: Vec<QueueJob> = jobs
            .iter()
            .zip(&rt_point)
            .map(|(j, &p)| QueueJob::from_record(j, resource, p))
            .collect();
        let qx = replay_queue_features(jobs, &queue_jobs, capacity)?;
        let qd = QUEUE_FEATURES.len();
        let d = h + qd;
        let mut x = Vec::with_capacity(jobs.len() * d);
        for i in 0..jobs.len() {
            x.extend_from_slice(&hx[i * h..(i + 1) * h]);
            x.extend_from_slice(&qx[i * qd..(i + 1) * qd]);
        }
        let y_log = jobs
            .iter()
            .map(|j| known_wait(j).map_or(0.0, f64::ln_1p))
            .collect();
        Ok(QueueWaitData {
            runtime,
            resource,
            capacity,
            x,
            n_features: d,
            y_log,
            submit: jobs.iter().map(|j| j.submit_time).collect(),
        })
    }
}
