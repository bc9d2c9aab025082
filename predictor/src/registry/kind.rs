//! What the registry stores: the one list of model kinds ([`ModelKind`]) and the
//! [`Artifact`] trait a stored model implements (each predictor implements it in its own
//! folder).

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// The kinds of model the registry stores, and the folder name of each. Adding a predictor
/// kind is adding it here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ModelKind {
    Runtime,
    QueueWait,
    Failure,
    Convergence,
    Dag,
}

impl ModelKind {
    /// Every kind, in this order.
    pub const ALL: [ModelKind; 5] = [
        ModelKind::Runtime,
        ModelKind::QueueWait,
        ModelKind::Failure,
        ModelKind::Convergence,
        ModelKind::Dag,
    ];

    /// The registry folder name (and `Artifact::KIND`) of the kind.
    pub const fn name(self) -> &'static str {
        match self {
            ModelKind::Runtime => "runtime",
            ModelKind::QueueWait => "queue_wait",
            ModelKind::Failure => "failure",
            ModelKind::Convergence => "convergence",
            ModelKind::Dag => "dag",
        }
    }

    /// The kind named `name`, if any.
    pub fn from_name(name: &str) -> Option<ModelKind> {
        ModelKind::ALL.into_iter().find(|k| k.name() == name)
    }
}

impl std::fmt::Display for ModelKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A model that can be stored in the registry.
pub trait Artifact: Serialize + DeserializeOwned {
    /// The registry kind it is stored under, e.g. `runtime`.
    const KIND: &'static str;
    /// The feature schema version this build computes features with.
    const CURRENT_FEATURE_SCHEMA_VERSION: u32;
    /// The feature schema version the model was trained with.
    fn feature_schema_version(&self) -> u32;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_round_trip_through_their_names() {
        for k in ModelKind::ALL {
            assert_eq!(ModelKind::from_name(k.name()), Some(k));
            assert_eq!(serde_json::to_value(k).unwrap(), k.name());
        }
        assert_eq!(ModelKind::from_name("nope"), None);
    }

    #[test]
    fn every_artifact_kind_is_in_the_list() {
        let kinds = [
            crate::RuntimePredictor::KIND,
            crate::QueueWaitPredictor::KIND,
            crate::FailurePredictor::KIND,
            crate::ConvergencePredictor::KIND,
            crate::dag::DagPredictor::KIND,
        ];
        for k in kinds {
            assert!(ModelKind::from_name(k).is_some(), "{k}");
        }
    }
}
