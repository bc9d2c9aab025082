//! Plausible ranges of what jobs ask for and report: a value outside them is a unit mistake
//! or garbage (a 100-million-GPU job, a ten-year run), refused with a 422 naming the field
//! rather than fed to the predictors.

use super::profile::JobProfile;
use crate::serve::http::error::ApiError;

/// Most GPUs one job may ask for.
pub const MAX_GPUS: f64 = 100_000.0;
/// Most nodes one job may ask for.
pub const MAX_NODES: f64 = 1_000_000.0;
/// Most CPUs one job may ask for.
pub const MAX_CPUS: f64 = 100_000_000.0;
/// Longest run time or requested time: ten years, seconds.
pub const MAX_SECONDS: f64 = 10.0 * 365.25 * 86_400.0;
/// Earliest event time on a live backend's wall clock: 2000-01-01T00:00:00Z.
pub const EARLIEST_LIVE_TIME: f64 = 946_684_800.0;

fn check_max(field: String, v: Option<f64>, max: f64, what: &str) -> Result<(), ApiError> {
    match v {
        Some(x) if x > max => Err(ApiError::invalid(
            field,
            format!("{x} is more than {max} {what}, the most one job may have"),
        )),
        _ => Ok(()),
    }
}

/// The resource and time fields of `profile` within their ranges; a profile with no field
/// at all refused (the predictors would have nothing to go on). `prefix` is its path.
pub fn check_profile(profile: &JobProfile, prefix: &str) -> Result<(), ApiError> {
    if profile == &JobProfile::default() {
        return Err(ApiError::invalid(
            prefix,
            "is empty: give at least one field (num_gpus, num_nodes, user, requested_time, ...)",
        ));
    }
    let f = |name: &str| format!("{prefix}.{name}");
    check_max(f("num_gpus"), profile.num_gpus, MAX_GPUS, "GPUs")?;
    check_max(f("num_nodes"), profile.num_nodes, MAX_NODES, "nodes")?;
    check_max(f("cpus"), profile.cpus, MAX_CPUS, "CPUs")?;
    check_seconds(&f("requested_time"), profile.requested_time)
}

/// A run time or time limit: more than 0 and less than ten years.
pub fn check_seconds(field: &str, v: Option<f64>) -> Result<(), ApiError> {
    match v {
        Some(x) if !(x > 0.0 && x < MAX_SECONDS) => Err(ApiError::invalid(
            field,
            format!("{x} s is not a plausible duration: more than 0 and less than ten years ({MAX_SECONDS} s)"),
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn implausible_profiles_name_their_field() {
        let field = |p: &JobProfile| check_profile(p, "job.profile").unwrap_err().field;
        assert_eq!(
            field(&JobProfile::default()),
            Some("job.profile".to_string())
        );
        let huge = JobProfile {
            num_gpus: Some(1e8),
            ..JobProfile::default()
        };
        assert_eq!(field(&huge), Some("job.profile.num_gpus".to_string()));
        let forever = JobProfile {
            requested_time: Some(MAX_SECONDS * 2.0),
            ..JobProfile::default()
        };
        assert_eq!(
            field(&forever),
            Some("job.profile.requested_time".to_string())
        );
        let fine = JobProfile {
            num_gpus: Some(100_000.0),
            requested_time: Some(3600.0),
            ..JobProfile::default()
        };
        assert!(check_profile(&fine, "job.profile").is_ok());
        assert!(check_seconds("d", Some(0.0)).is_err());
        assert!(check_seconds("d", None).is_ok());
    }
}
