//! The [`Policy`] trait every scheduler implements.

use crate::cluster::ClusterState;
use crate::decision::Decision;

/// A scheduling policy.
///
/// `decide` appends decisions to `out` in the order they must be applied and returns the
/// latest time it wants to be asked again even if nothing happens (`None`: on the next event).
/// Policies are deterministic: the same snapshots give the same decisions.
pub trait Policy {
    /// Short name (`fifo`, `elastic`, ...).
    fn name(&self) -> &str;
    /// Decides on a snapshot.
    fn decide(&mut self, snap: &ClusterState, out: &mut Vec<Decision>) -> Option<f64>;
}

impl<P: Policy + ?Sized> Policy for Box<P> {
    fn name(&self) -> &str {
        (**self).name()
    }
    fn decide(&mut self, snap: &ClusterState, out: &mut Vec<Decision>) -> Option<f64> {
        (**self).decide(snap, out)
    }
}
