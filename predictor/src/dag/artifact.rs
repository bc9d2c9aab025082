//! The DAG predictor as a registry artifact.

use super::{DagPredictor, DAG_FEATURE_SCHEMA_VERSION};
use crate::registry::{Artifact, ModelKind};

impl Artifact for DagPredictor {
    const KIND: &'static str = ModelKind::Dag.name();
    const CURRENT_FEATURE_SCHEMA_VERSION: u32 = DAG_FEATURE_SCHEMA_VERSION;
    fn feature_schema_version(&self) -> u32 {
        self.schema_version
    }
}
