//! The controller loop as a long-running service: a [`Controller`](crate::Controller)
//! driving any [`LiveBackend`] tick by tick, with a pause switch, a dry-run switch (decide and
//! log, do not act), and bounded histories of its decisions (each with its reason) and of the
//! cluster.
//!
//! [`LiveSim`] is the simulator as a live backend: it replays a job table at an accelerated
//! wall clock (`speed` seconds of trace per wall second), reports the jobs' lifecycle
//! ([`JobLifecycleEvent`]s) so a service can ingest them, and starts the replay again when the trace
//! is exhausted (shifted to after the last lap, so time keeps moving forward). The Kubernetes
//! backend ([`crate::kubernetes::KubeBackend`]) implements [`LiveBackend`] too: its clock is
//! wall time, its [`LiveBackend::tick`] reports whether the watches saw a change (or a resync
//! period passed), its own scheduler runs while Augur is paused, and it may act only while it
//! holds the leader lease ([`LiveBackend::may_act`]).
//!
//! The loop is runtime-agnostic (one `async fn step` per tick); the service runs it on a tokio
//! interval. Everything is deterministic given the seed and the sequence of tick lengths.
//!
//! ```
//! use std::time::Duration;
//! use augur_autoscaler::live::{LiveConfig, LiveLoop, LiveSim};
//! use augur_autoscaler::sim::{ClusterSpec, SimConfig, SimJob};
//! use augur_autoscaler::Fifo;
//! let jobs = vec![
//!     SimJob { row: 0, submit: 0.0, duration: 100.0, gpus: 2, predicted: None },
//!     SimJob { row: 1, submit: 10.0, duration: 50.0, gpus: 2, predicted: None },
//! ];
//! let cfg = SimConfig::new(ClusterSpec::homogeneous(2, 2, 1)?);
//! let sim = LiveSim::new(jobs, cfg, 60.0)?; // one wall second = one trace minute
//! let mut live = LiveLoop::new(sim, Fifo::default(), LiveConfig::default());
//! for _ in 0..4 {
//!     let step = augur_autoscaler::live::block_on(live.step(Duration::from_secs(1)));
//!     assert!(step.error.is_none());
//! }
//! assert_eq!(live.backend().finished_total(), 2);
//! assert_eq!(live.decisions().count(), 2); // two admits, each with its reason
//! # Ok::<(), augur_autoscaler::SimError>(())
//! ```

mod backend;
mod blocking;
mod driver;
mod record;
mod replay;
#[cfg(test)]
mod tests;

pub use backend::{JobLifecycleEvent, JobLifecycleKind, LiveBackend};
pub use blocking::block_on;
pub use driver::LiveLoop;
pub use record::{ClusterPoint, LiveConfig, LiveDecision, Outcome, StepReport};
pub use replay::LiveSim;
