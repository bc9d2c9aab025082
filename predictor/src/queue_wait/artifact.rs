//! The queue-wait predictor as a registry artifact (the runtime predictor, and so the
//! feature schema, inside it).

use augur_features::FEATURE_SCHEMA_VERSION;

use super::predictor::QueueWaitPredictor;
use crate::registry::{Artifact, ModelKind};

impl Artifact for QueueWaitPredictor {
    const KIND: &'static str = ModelKind::QueueWait.name();
    const CURRENT_FEATURE_SCHEMA_VERSION: u32 = FEATURE_SCHEMA_VERSION;
    fn feature_schema_version(&self) -> u32 {
        self.runtime.schema.version
    }
}
