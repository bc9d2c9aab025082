//! Gang placement: which nodes a job's workers go to.
//!
//! A job gets all its workers or none. Where they go follows a [`Strategy`] (PACK fills the
//! fullest node that fits, leaving whole nodes free for big jobs; SPREAD uses the emptiest) and
//! a [`Locality`] level that relaxes with the time the job has waited, as Philly's scheduler
//! does: first only a consolidated placement (one node, or the fewest nodes of one rack), then
//! any nodes of one rack, then anywhere. The simulator places with [`Capacity`]; policies use
//! the same code on a copy of the snapshot's free GPUs to check what fits before they ask.

mod capacity;
pub(crate) mod rules;

pub use capacity::{shrink_plan, subtract, Capacity, NodeMeta};
pub use rules::{Locality, PlacementRules, Strategy};
