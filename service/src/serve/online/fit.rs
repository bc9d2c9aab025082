//! What a profile means to the served models: whether the job can fit the largest cluster
//! seen, which profile fields each served model reads, and which of the profile's values
//! lie outside what that model was trained on.

use augur_features::{OutOfRange, TrainingRanges};
use augur_predictor::queue_wait::ResourceKind;

use super::{Online, PredictError};
use crate::serve::events::JobProfile;

/// A kind of profile answer (`runtime`, `queue_wait`, `failure`).
pub type Kind = &'static str;

impl Online {
    /// Refuses a job asking for more GPUs than the largest cluster snapshot reported: it
    /// cannot fit, so it has no wait, run time or outcome to predict.
    pub(super) fn check_fits(&self, profile: &JobProfile) -> Result<(), PredictError> {
        if let (Some(want), Some(total)) = (profile.num_gpus, self.largest_gpus) {
            if want > total {
                return Err(PredictError::CannotFit {
                    field: "num_gpus",
                    reason: format!(
                        "{want} GPUs is more than the cluster has ({total}, the largest cluster snapshot): the job cannot fit, it would never start"
                    ),
                });
            }
        }
        Ok(())
    }

    /// The served model of `kind`'s training ranges and the fields it reads.
    fn profile_use(&self, kind: Kind) -> Option<(&TrainingRanges, Vec<&'static str>)> {
        match kind {
            "runtime" => self.models.runtime.as_ref().map(|s| {
                let m = &s.model;
                (&m.training_ranges, m.training_ranges.fields_used(&m.schema))
            }),
            "queue_wait" => self.models.queue_wait.as_ref().map(|s| {
                let m = &s.model.runtime;
                let mut used = m.training_ranges.fields_used(&m.schema);
                // the queue state counts jobs in the model's resource
                let resource = match s.model.resource {
                    ResourceKind::Nodes => Some("num_nodes"),
                    ResourceKind::Gpus => Some("num_gpus"),
                    ResourceKind::Cpus => Some("cpus"),
                    ResourceKind::Jobs => None,
                };
                if let Some(r) = resource.filter(|r| !used.contains(r)) {
                    used.push(r);
                }
                (&m.training_ranges, used)
            }),
            "failure" => self.models.failure.as_ref().map(|s| {
                let m = &s.model;
                let mut used = m.training_ranges.fields_used(&m.schema.base);
                for &f in m.schema.keys.iter().flat_map(|k| k.fields()) {
                    if !used.contains(&f) {
                        used.push(f);
                    }
                }
                (&m.training_ranges, used)
            }),
            _ => None,
        }
    }

    /// The profile fields the served model of `kind` reads (empty when none is served).
    pub fn fields_used(&self, kind: Kind) -> Vec<&'static str> {
        self.profile_use(kind).map(|(_, f)| f).unwrap_or_default()
    }

    /// The fields of `profile` outside what the served model of `kind` was trained on.
    pub fn out_of_range(&self, kind: Kind, profile: &JobProfile) -> Vec<OutOfRange> {
        self.profile_use(kind)
            .map(|(r, _)| r.outside(&profile.to_record("", 0.0)))
            .unwrap_or_default()
    }
}
