//! The service's background work: first-start training, retraining through the
//! model gate, compaction of the event store and the Kubernetes write-back.

pub mod first_start;
pub mod housekeeping;
pub mod model_gate;
pub mod retrain;
pub mod training;
pub mod writeback;
