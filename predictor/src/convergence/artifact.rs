//! The convergence predictor as a registry artifact.

use super::{ConvergencePredictor, CONVERGENCE_FEATURE_VERSION};
use crate::registry::{Artifact, ModelKind};

impl Artifact for ConvergencePredictor {
    const KIND: &'static str = ModelKind::Convergence.name();
    const CURRENT_FEATURE_SCHEMA_VERSION: u32 = CONVERGENCE_FEATURE_VERSION;
    fn feature_schema_version(&self) -> u32 {
        self.feature_version
    }
}
