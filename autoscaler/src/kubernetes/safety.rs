//! The safety knobs of the Kubernetes backend and what enforces them: a per-job action budget,
//! backoff with full jitter for throttling and server errors, and the mapping of API errors to
//! retryable / permanent [`BackendError`]s.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use rand::Rng;

use crate::cluster::JobId;
use crate::error::{BackendError, ErrorKind};

/// Safety knobs.
#[derive(Debug, Clone, PartialEq)]
pub struct Safety {
    /// Decide and log, never patch.
    pub dry_run: bool,
    /// At most this many scale actions per job in any hour.
    pub max_actions_per_job_per_hour: usize,
    /// A running job is scaled down only when its last checkpoint time is known (annotation)
    /// or its current run is at least this old (seconds).
    pub scale_down_grace_s: f64,
    /// Actions planned on a snapshot older than this are refused (seconds).
    pub max_snapshot_age_s: f64,
    /// Attempts of one API call on 409 / 429 / 5xx / timeouts before giving up.
    pub attempts: u32,
    /// First backoff (doubles each attempt, full jitter).
    pub backoff_base: Duration,
    /// Largest backoff.
    pub backoff_max: Duration,
    /// Deadline of one API call.
    pub request_timeout: Duration,
}

impl Default for Safety {
    fn default() -> Self {
        Safety {
            dry_run: false,
            max_actions_per_job_per_hour: 4,
            scale_down_grace_s: 900.0,
            max_snapshot_age_s: 30.0,
            attempts: 5,
            backoff_base: Duration::from_millis(200),
            backoff_max: Duration::from_secs(10),
            request_timeout: Duration::from_secs(10),
        }
    }
}

impl Safety {
    /// The wait before attempt `attempt + 1` (attempt ≥ 1): uniform in `[0, min(max, base·2^(attempt-1))]`
    /// (full jitter), but at least the server's `Retry-After`.
    pub fn backoff(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        let cap = self
            .backoff_base
            .saturating_mul(1u32 << attempt.saturating_sub(1).min(20))
            .min(self.backoff_max);
        let jittered = cap.mul_f64(rand::rng().random::<f64>());
        retry_after.map_or(jittered, |r| r.max(jittered))
    }
}

/// Times of the actions taken per job (sliding hour).
#[derive(Debug, Default)]
pub struct ActionBudget {
    taken: HashMap<JobId, VecDeque<f64>>,
}

impl ActionBudget {
    /// Actions of `job` in the hour before `now`.
    pub fn used(&mut self, job: JobId, now: f64) -> usize {
        let q = self.taken.entry(job).or_default();
        while q.front().is_some_and(|&t| now - t >= 3600.0) {
            q.pop_front();
        }
        q.len()
    }

    /// Records an action.
    pub fn record(&mut self, job: JobId, now: f64) {
        self.taken.entry(job).or_default().push_back(now);
    }
}

/// How a failed API call is handled.
#[derive(Debug, Clone, PartialEq)]
pub enum Failure {
    /// 409: the object changed; re-read and retry.
    Conflict(String),
    /// 429, 5xx, timeouts, transport errors: back off and retry.
    Transient(String, Option<Duration>),
    /// Anything else: give up with this error kind.
    Permanent(ErrorKind, String),
}

/// Classifies a kube client error.
pub fn classify(e: &kube::Error) -> Failure {
    match e {
        kube::Error::Api(s) => {
            let retry_after = s
                .details
                .as_ref()
                .map(|d| d.retry_after_seconds)
                .filter(|&s| s > 0)
                .map(|s| Duration::from_secs(u64::from(s)));
            let msg = format!("{} {}: {}", s.code, s.reason, s.message);
            match s.code {
                409 => Failure::Conflict(msg),
                429 | 500..=599 => Failure::Transient(msg, retry_after),
                404 => Failure::Permanent(ErrorKind::NotFound, msg),
                _ => Failure::Permanent(ErrorKind::Invalid, msg),
            }
        }
        kube::Error::SerdeError(_) | kube::Error::BuildRequest(_) => {
            Failure::Permanent(ErrorKind::Invalid, e.to_string())
        }
        other => Failure::Transient(other.to_string(), None),
    }
}

/// A failure that ended the retries, as a backend error about `job`.
pub fn into_error(f: Failure, job: Option<JobId>) -> BackendError {
    match f {
        Failure::Conflict(m) => BackendError::new(ErrorKind::Conflict, job, m),
        Failure::Transient(m, _) => BackendError::new(ErrorKind::Unavailable, job, m),
        Failure::Permanent(k, m) => BackendError::new(k, job, m),
    }
}

/// Runs `call` under the request deadline; a timeout is transient.
pub async fn with_timeout<T, F>(safety: &Safety, call: F) -> Result<T, Failure>
where
    F: std::future::Future<Output = Result<T, kube::Error>>,
{
    match tokio::time::timeout(safety.request_timeout, call).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(classify(&e)),
        Err(_) => Err(Failure::Transient(
            format!("timed out after {:?}", safety.request_timeout),
            None,
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_is_jittered_capped_and_honours_retry_after() {
        let s = Safety {
            backoff_base: Duration::from_millis(100),
            backoff_max: Duration::from_millis(1000),
            ..Default::default()
        };
        let waits: Vec<Duration> = (0..200).map(|_| s.backoff(3, None)).collect();
        assert!(waits.iter().all(|w| *w <= Duration::from_millis(400)));
        // full jitter: not all equal
        assert!(waits.iter().any(|w| *w != waits[0]));
        assert!((0..50).all(|_| s.backoff(30, None) <= Duration::from_millis(1000)));
        let r = Duration::from_secs(2);
        assert!(s.backoff(1, Some(r)) >= r);
    }

    #[test]
    fn the_budget_slides_over_an_hour() {
        let mut b = ActionBudget::default();
        let j = JobId(1);
        b.record(j, 0.0);
        b.record(j, 1000.0);
        assert_eq!(b.used(j, 3599.0), 2);
        assert_eq!(b.used(j, 3600.0), 1);
        assert_eq!(b.used(JobId(2), 3600.0), 0);
    }
}
