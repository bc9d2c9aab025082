//! Scheduling policies, all behind one [`Policy`] trait: look at a
//! [`ClusterState`](crate::cluster::ClusterState), append
//! [`Decision`](crate::decision::Decision)s in the order they must be applied.
//!
//! Baselines: [`Fifo`] (static, strict submit order), [`SjfPredicted`] (shortest predicted
//! GPU-time first, Helios' QSSF), [`SrtfOracle`] (preemptive, shortest true remaining GPU-time:
//! the ceiling), [`Tiresias`] (2D-LAS over discretised attained service, preemptive),
//! [`Optimus`] (marginal-gain worker allocation), [`GavelMaxThroughput`] (each job on its
//! fastest GPU type with room, on mixed-type clusters), and Augur's own [`ElasticController`]
//! (`elastic`, type-blind, and `elastic-typed`, which picks each job's GPU type by its gain).
//!
//! Policies check every action against a copy of the snapshot's free GPUs with the backend's
//! own placement rules ([`Planner`]), so what they ask for fits when the backend applies it in
//! order.

pub mod elastic;
pub mod fifo;
pub mod gavel;
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
pub use gavel::GavelMaxThroughput;
pub use optimus::Optimus;
pub use planner::Planner;
pub use policy::Policy;
pub use sjf::SjfPredicted;
pub use srtf::SrtfOracle;
pub use tiresias::Tiresias;

use crate::scaling::ScalingModel;

/// Names accepted by [`by_name`].
pub const POLICY_NAMES: [&str; 8] = [
    "fifo",
    "sjf-pred",
    "srtf-oracle",
    "tiresias",
    "optimus",
    "elastic",
    "elastic-typed",
    "gavel",
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
        "elastic-typed" => Box::new(ElasticController::new(
            ElasticParams {
                type_aware: true,
                ..ElasticParams::default()
            },
            scaling,
        )),
        "gavel" => Box::new(GavelMaxThroughput::default()),
        _ => return None,
    })
}
