//! # augur-features
//!
//! **One job:** turn jobs (plus the history of jobs before them, plus cluster state) into
//! feature vectors, with one implementation that serves both offline training and online
//! prediction.
//!
//! [`FeatureState`] is an incremental state fed by events — a job was submitted
//! ([`FeatureState::observe_submit`]), a job finished ([`FeatureState::observe_finish`]) —
//! and asked for the features of a job about to be submitted ([`FeatureState::features_for`]).
//! Batch feature computation over a [`augur_datasets::JobTable`] ([`batch_features`]) is a
//! replay of the trace through the same state, so the two paths cannot disagree; a test
//! replays a real trace through the online event API and checks they are identical.
//!
//! [`failure`] adds the failure feature set ([`FailureFeatureState`], [`failure_batch_features`]):
//! per-key failure histories on top of the same state, for the failure predictor; the runtime
//! feature schema is unchanged.
//!
//! History features only see jobs that *finished* before the predicted job's submit time
//! (no leakage): a job's finish is known at its `end_time`, or, when the trace gives no end,
//! at `submit + wait + duration` (wait 0 when unknown). What is known about *unfinished*
//! jobs at submit time (how many, how long the oldest has been going) is used too: it is
//! observable then, and it bounds their durations from below.

pub mod failure;
mod history;
mod ranges;
mod schema;
mod state;

pub use failure::{
    failure_batch_features, failure_label, FailKey, FailureFeatureState, FailureSchema,
};
pub use ranges::{FieldRange, OutOfRange, TrainingRanges, REQUEST_FIELDS};
pub use schema::{FeatureSchema, KeyKind, FEATURE_SCHEMA_VERSION};
pub use state::{batch_features, finish_time, FeatureState, JobHandle, TraceEvent};

/// Errors of feature computation.
#[derive(Debug, thiserror::Error)]
pub enum FeatureError {
    /// A job handle that the state never issued or already finished.
    #[error("unknown job handle {0}: not submitted, or already finished")]
    UnknownJob(u64),
    /// A feature buffer of the wrong length.
    #[error("feature buffer has {got} slots, schema needs {want}")]
    BufferSize { got: usize, want: usize },
}
