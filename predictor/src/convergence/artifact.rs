//! The convergence predictor as a registry artifact.

use super::{ConvergencePredictor, CONVERGENCE_FEATURE_VERSION};
use crate::registry::Artifact;

impl Artifact for ConvergencePredictor {
    const KIND: &'static str = "convergence";
    const CURRENT_FEATURE_SCHEMA_VERSION: u32 = CONVERGENCE_FEATURE_VERSION;
    fn feature_schema_version(&self) -> u32 {
        self.feature_version
    }
}
