//! What a profile means to the served models: whether the job can fit the largest cluster
//! seen, which profile fields each served model reads, and which of the profile's values
//! lie outside what that model was trained on.

use augur_features::OutOfRange;
use augur_predictor::ModelKind;

use super::{Online, PredictError};
use crate::serve::kinds::ProfileUse;
use crate::serve::state::events::JobProfile;

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
    fn profile_use(&self, kind: ModelKind) -> Option<ProfileUse<'_>> {
        self.models.get(kind)?.profile_use()
    }

    /// The profile fields the served model of `kind` reads (empty when none is served).
    pub fn fields_used(&self, kind: ModelKind) -> Vec<&'static str> {
        self.profile_use(kind).map(|(_, f)| f).unwrap_or_default()
    }

    /// The fields of `profile` outside what the served model of `kind` was trained on.
    pub fn out_of_range(&self, kind: ModelKind, profile: &JobProfile) -> Vec<OutOfRange> {
        self.profile_use(kind)
            .map(|(r, _)| r.outside(&profile.to_record("", 0.0)))
            .unwrap_or_default()
    }
}
