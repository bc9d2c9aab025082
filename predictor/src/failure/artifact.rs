//! The failure predictor as a registry artifact.

use augur_features::FEATURE_SCHEMA_VERSION;

use super::FailurePredictor;
use crate::registry::{Artifact, ModelKind};

impl Artifact for FailurePredictor {
    const KIND: &'static str = ModelKind::Failure.name();
    const CURRENT_FEATURE_SCHEMA_VERSION: u32 = FEATURE_SCHEMA_VERSION;
    fn feature_schema_version(&self) -> u32 {
        self.schema.base.version
    }
}
