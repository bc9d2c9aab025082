//! The discrete-event simulator backend: replays a job table on a configurable cluster.
//!
//! - Cluster: nodes × GPUs per node in racks ([`ClusterSpec`]), optionally heterogeneous GPU
//!   types with speeds relative to the GPUs the trace durations were measured on (e.g. from
//!   Gavel throughputs, [`ClusterSpec::heterogeneous`]). A job on mixed types runs at the
//!   slowest; a job spread over more nodes than it needs, or over racks, pays a penalty.
//!   With a per-job [`TypeAffinity`](crate::TypeAffinity) (e.g. [`affinity_from_gavel`]) each
//!   job runs on each type at its own model's measured speed instead of the type's one speed;
//!   an admission may name a GPU type, and the job then runs and grows on that type only.
//! - Gang scheduling: a job gets all its workers or none; placement follows the backend's
//!   [`PlacementRules`](crate::placement::PlacementRules) (PACK/SPREAD, locality relaxing with
//!   waiting time).
//! - Work: a job's trace duration is its work at its requested size on reference GPUs; on `w`
//!   workers it progresses at `speedup(w) / speedup(requested)` × GPU speed × placement
//!   penalty ([`ScalingModel`](crate::ScalingModel)), so work is conserved across rescales. A
//!   rescale or a resume checkpoints and then pauses the job for `rescale_pause_s` (it holds
//!   its GPUs, no progress).
//! - Elastic jobs: a seeded share of jobs gets `[min, max]` workers around their request
//!   ([`ElasticSpec`]); the others are rigid.
//! - Node failures ([`NodeFault`], e.g. from the StepFun fault trace): a failed node's jobs lose
//!   the work since their last checkpoint (periodic every `checkpoint_interval_s`, and at every
//!   rescale/suspend) and go back to the queue; the node's GPUs are gone until it recovers.
//! - Advice replay ([`Simulator::with_advice`]): a seeded share of users take the advisor's
//!   earliest-finish shape at submit (predicted from the queue and a run-time ratio model);
//!   the truth of the new shape stays the simulator's own.
//! - Deterministic: the event queue is ordered by (time, sequence number); the only randomness
//!   (which jobs are elastic) comes from the seed.
//!
//! Speed: a binary-heap event queue, arrivals read from a sorted cursor, per-job state updated
//! lazily (only when the job is touched), snapshot buffers reused between decisions.

mod actions;
mod advance;
mod advice;
mod affinity;
mod backend;
mod config;
mod engine;
mod event;
mod faults;
mod job;
mod run;
mod snapshot;
mod spec;
mod trace;

pub use advice::{
    select_takers, AdviceErrors, AdviceRecord, AdviceReport, AdviceSpec, JctPair, PredictedEnds,
    RatioModel, ScalingRatio, ShapeChange, ShapeRef, TakerSelection,
};
pub use affinity::{affinity_from_gavel, AffinityReport, ClassUse};
pub use config::{ElasticSpec, SimConfig};
pub use engine::Simulator;
pub use faults::{faults_from_episodes, NodeFault, FAULT_TRACE_SERVERS};
pub use spec::{ClusterSpec, NodeSpec};
pub use trace::{jobs_from_records, SimJob};
