//! The placement rules a backend follows ([`PlacementRules`]): the [`Strategy`] that picks a
//! node and the [`Locality`] a queued job accepts after its wait.

use serde::Serialize;

/// Which node a gang prefers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Strategy {
    /// Fullest node that fits (best fit): keeps whole nodes free for multi-GPU jobs.
    #[default]
    Pack,
    /// Emptiest node (worst fit): spreads load and interference.
    Spread,
}

/// How strict the placement is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Locality {
    /// One node, or the fewest possible nodes of one rack.
    Consolidated,
    /// Any nodes of one rack.
    Rack,
    /// Any nodes.
    Any,
}

/// Placement rules of a backend.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PlacementRules {
    pub strategy: Strategy,
    /// A queued job accepts only consolidated placements for this long (seconds)...
    pub consolidated_for_s: f64,
    /// ...then any nodes of one rack until it has waited this long, then anywhere.
    pub rack_for_s: f64,
}

impl Default for PlacementRules {
    fn default() -> Self {
        PlacementRules {
            strategy: Strategy::Pack,
            consolidated_for_s: 600.0,
            rack_for_s: 3600.0,
        }
    }
}

impl PlacementRules {
    /// The locality a job that has waited `waited_s` accepts.
    pub fn level_for(&self, waited_s: f64) -> Locality {
        if waited_s < self.consolidated_for_s {
            Locality::Consolidated
        } else if waited_s < self.rack_for_s {
            Locality::Rack
        } else {
            Locality::Any
        }
    }
}
