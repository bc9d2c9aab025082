//! Stage run times and makespans of DAG-structured jobs, predicted before the job runs.
//!
//! - **Encoding** ([`DagEncoder`]): the stages in topological order (ties by file index;
//!   a cycle or an unknown parent is a [`crate::PredictorError::DagShape`] naming the job),
//!   each stage as a row of its own features ([`STAGE_FEATURES`]: task count, executors and task waves,
//!   scale factor, depth/height, fan-in/fan-out, input bytes and cores where the data has
//!   them, job size and depth, the training median of its kind) and a bag of hashed tokens
//!   (the words of its operator/task kind, the workflow system and workflow name).
//! - **Model** ([`DagPredictor`]): a bidirectional GRU ([`augur_models::gru`]) over that
//!   sequence predicts ln stage seconds; the makespan is the critical path of the predicted
//!   stage times times a learned correction `exp(L1 linear model)` on the job's
//!   critical-path features ([`CORRECTION_FEATURES`]), fitted on the training jobs.
//! - **Baselines** on the same split: per-stage gradient-boosted trees on the same stage rows
//!   (no sequence context, no tokens), and the critical path of per-stage-type medians
//!   ([`StageMedians`]); each also with the same makespan correction, to show what the
//!   correction alone buys.
//! - **Evaluation** ([`evaluate_dag`]): grouped k-fold cross-validation: whole groups (a
//!   TPC-H query over all its scales and executor counts, a WfCommons workflow instance)
//!   are assigned to folds by a seeded shuffle, and every job is predicted by the models
//!   trained on the other folds. Metrics: `mae_log` and `within2x` (shared definitions,
//!   durations clamped to ≥ 1 s) of the makespan and of the stage run times.
//! - **Serving** ([`DagOnline`]): nothing is learned from job events; a DAG's makespan is
//!   answered from its stages with the model version.

mod artifact;
mod baseline;
mod data;
mod encoder;
mod evaluate;
mod folds;
mod makespan;
mod online;
mod predictor;
mod trainer;

use augur_datasets::split::clamp_duration;

pub use baseline::StageMedians;
pub use data::{load_bundled_dag_sets, load_tpch, load_wfcommons, DagDataset};
pub use encoder::{name_words, token_bucket, DagEncoder, EncodedDag, STAGE_FEATURES};
pub use evaluate::{evaluate_dag, DagEvalRow, DagEvaluation, DagJobResult, DagMetrics};
pub use folds::group_folds;
pub use makespan::{
    actual_makespan_s, critical_path_ordered, MakespanCorrection, CORRECTION_FEATURES,
};
pub use online::{DagAnswer, DagOnline};
pub use predictor::{DagPrediction, DagPredictor};
pub use trainer::DagTrainer;

/// Version of the stage encoding ([`STAGE_FEATURES`], tokens, correction features); a saved
/// [`DagPredictor`] with another version is refused by the registry.
pub const DAG_FEATURE_SCHEMA_VERSION: u32 = 1;

/// Floor of stage and makespan seconds in targets and metrics (as everywhere in Augur).
pub(super) fn ln_s(seconds: f64) -> f64 {
    clamp_duration(seconds).ln()
}
