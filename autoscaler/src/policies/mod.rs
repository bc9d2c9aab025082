//! Scheduling policies, all behind one [`Policy`] trait: look at a
//! [`ClusterSnapshot`](crate::cluster::ClusterSnapshot), append
//! [`Decision`](crate::decision::Decision)s in the order they must be applied.
//!
//! Baselines: [`Fifo`] (static, strict submit order), [`SjfPredicted`] (shortest predicted
//! GPU-time first, Helios' QSSF), [`SrtfOracle`] (preemptive, shortest true remaining GPU-time:
//! the ceiling), [`Tiresias`] (2D-LAS over discretised attained service, preemptive),
//! [`Optimus`] (marginal-gain worker allocation), and Augur's own [`ElasticController`].
//!
//! Policies check every action against a copy of the snapshot's free GPUs with the backend's
//! own placement rules ([`Planner`]), so what they ask for fits when the backend applies it in
//! order.

pub mod elastic;
pub mod fifo;
pub mod in_order;
pub mod marginal;
pub mod optimus;
pub mod planner;
pub mod policy;
pub mod preemptive;
pub mod sjf;
pub mod srtf;
pub mod tiresias;

pub use elastic::{ElasticController, ElasticParams};
pub use fifo::Fifo;
pub use optimus::Optimus;
pub use planner::Planner;
pub use policy::Policy;
pub use sjf::SjfPredicted;
pub use srtf::SrtfOracle;
pub use tiresias::Tiresias;

use crate::scaling::ScalingModel;

/// Names accepted by [`by_name`].
pub const POLICY_NAMES: [&str; 6] = [
    "fifo",
    "sjf-pred",
    "srtf-oracle",
    "tiresias",
    "optimus",
    "elastic",
];

/// A policy by name with default parameters; `scaling` is the speedup curve the elastic
/// policies plan with.
pub fn by_name(name: &str, scaling: ScalingModel) -> Option<Box<dyn Policy>> {
    Some(match name {
        "fifo" => Box::new(Fifo::default()),
        "sjf-pred" => Box::new(SjfPredicted::default()),
        "srtf-oracle" => Box::new(SrtfOracle::default()),
        "tiresias" => Box::new(Tiresias::default()),
        "optimus" => Box::new(Optimus::new(scaling)),
        "elastic" => Box::new(ElasticController::new(ElasticParams::default(), scaling)),
        _ => return None,
    })
}
