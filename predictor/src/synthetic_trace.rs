//! A small synthetic trace for the crate's unit tests (SYNTHETIC: generated here from a
//! seed, not a real trace): jobs of six users (or as many as a test asks) with
//! user-specific log-normal run times, requests of 1 to 8 nodes, half of them starting at
//! once and the rest after a log-normal wait, one submit every 30 to 90 s, a tenth of them
//! failed (or as often as a test's function of the job says: [`trace_with_failures`]).

use augur_datasets::{JobRecord, JobStatus};
use augur_numeric::SplitMix64;

use crate::contract::JobEvent;

/// The users of [`trace`]: `u0` to `u5`.
pub(crate) const USERS: usize = 6;

/// `n` synthetic jobs in submit order (ids `j0`, `j1`, ...), every time field filled in.
pub(crate) fn trace(n: usize, seed: u64) -> Vec<JobRecord> {
    trace_of(n, seed, USERS)
}

/// [`trace`] with `users` users instead of [`USERS`] (`trace_of(n, seed, USERS)` is
/// `trace(n, seed)`): user `k`'s median run time is `e^(4 + 4 k / (users - 1))`, the same
/// spread whatever the count.
fn trace_of(n: usize, seed: u64, users: usize) -> Vec<JobRecord> {
    let mut rng = SplitMix64(seed);
    let mut t = 1.7e9;
    // 4 / 5 rounds to the same double as 0.8, the step of the six users' medians
    let step = 4.0 / users.saturating_sub(1).max(1) as f64;
    (0..n)
        .map(|i| {
            t += 30.0 + 60.0 * rng.unit();
            let user = rng.below(users);
            let duration = (4.0 + step * user as f64 + 0.5 * rng.normal()).exp();
            let wait = if rng.unit() < 0.5 {
                0.0
            } else {
                (5.0 + 2.0 * rng.normal()).exp().min(86_400.0)
            };
            let mut j = JobRecord {
                job_id: format!("j{i}"),
                submit_time: t,
                queue_wait: Some(wait),
                duration: Some(duration),
                num_nodes: Some(f64::from(1u32 << rng.below(4))),
                requested_time: Some(duration * (1.5 + rng.unit())),
                user: Some(format!("u{user}")),
                status: if rng.unit() < 0.1 {
                    JobStatus::Failed
                } else {
                    JobStatus::Completed
                },
                ..Default::default()
            };
            j.derive_times();
            j
        })
        .collect()
}

/// The jobs of [`trace`]`(n, seed)`, but of `users` users ([`USERS`] for the same jobs),
/// with their outcomes redrawn: job `j` failed with probability `fails(&j)` (clamped to
/// `[0, 1]`), completed otherwise. The draws come from their own stream, so the jobs'
/// other fields are exactly those [`trace`] gives for `users` users.
pub(crate) fn trace_with_failures(
    n: usize,
    seed: u64,
    users: usize,
    fails: impl Fn(&JobRecord) -> f64,
) -> Vec<JobRecord> {
    let mut outcome = SplitMix64(seed ^ OUTCOME_STREAM);
    let mut jobs = trace_of(n, seed, users);
    for j in &mut jobs {
        j.status = if outcome.unit() < fails(j).clamp(0.0, 1.0) {
            JobStatus::Failed
        } else {
            JobStatus::Completed
        };
    }
    jobs
}

/// Mixed into the seed for [`trace_with_failures`]' outcome stream (any constant that
/// sets it apart from the jobs' stream).
const OUTCOME_STREAM: u64 = 0x6a09_e667_f3bc_c909;

/// The index `k` of a synthetic job's user `uk` (0 when it has none).
pub(crate) fn user_index(j: &JobRecord) -> usize {
    j.user
        .as_deref()
        .and_then(|u| u.strip_prefix('u'))
        .and_then(|k| k.parse().ok())
        .unwrap_or(0)
}

/// What happened to a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Finished,
    Submitted,
    Started,
}

/// The events of `jobs` as a service would store them, `(time, job index, kind)`: by time,
/// then finishes before submits before starts, then by job (the trace replays' order).
pub(crate) fn events(jobs: &[JobRecord]) -> Vec<(f64, usize, Kind)> {
    let mut ev = Vec::new();
    for (i, j) in jobs.iter().enumerate() {
        ev.push((j.submit_time, i, Kind::Submitted));
        if let Some(s) = j.start_time {
            ev.push((s, i, Kind::Started));
        }
        if let Some(e) = j.end_time {
            ev.push((e, i, Kind::Finished));
        }
    }
    let rank = |k: Kind| match k {
        Kind::Finished => 0,
        Kind::Submitted => 1,
        Kind::Started => 2,
    };
    ev.sort_by(|a, b| {
        a.0.total_cmp(&b.0)
            .then(rank(a.2).cmp(&rank(b.2)))
            .then(a.1.cmp(&b.1))
    });
    ev
}

/// The [`JobEvent`] of `kind` for job `i` of `jobs` at `at` (finishes with the job's status
/// and duration).
pub(crate) fn job_event(jobs: &[JobRecord], i: usize, kind: Kind, at: f64) -> JobEvent<'_> {
    let j = &jobs[i];
    match kind {
        Kind::Submitted => JobEvent::Submitted { job: j },
        Kind::Started => JobEvent::Started {
            job_id: &j.job_id,
            at,
        },
        Kind::Finished => JobEvent::Finished {
            job_id: &j.job_id,
            at,
            status: j.status,
            duration: j.duration,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_redrawn_from_the_job_leave_the_jobs_as_they_were() {
        let plain = trace(3000, 5);
        let jobs = trace_with_failures(3000, 5, USERS, |j| {
            if j.num_nodes >= Some(8.0) {
                0.9
            } else {
                0.05
            }
        });
        for (a, b) in plain.iter().zip(&jobs) {
            let b = JobRecord {
                status: a.status,
                ..b.clone()
            };
            assert_eq!(*a, b);
        }
        // the outcomes follow the function, not the plain trace's tenth
        let share = |big: bool| {
            let group: Vec<_> = jobs
                .iter()
                .filter(|j| (j.num_nodes >= Some(8.0)) == big)
                .collect();
            let failed = group
                .iter()
                .filter(|j| j.status == JobStatus::Failed)
                .count();
            failed as f64 / group.len() as f64
        };
        assert!((0.85..0.95).contains(&share(true)), "{}", share(true));
        assert!((0.03..0.07).contains(&share(false)), "{}", share(false));

        // more users: each has its own index, and the run times keep their spread
        let many = trace_with_failures(3000, 5, 40, |_| 0.0);
        let users: std::collections::BTreeSet<usize> = many.iter().map(user_index).collect();
        assert_eq!(users, (0..40).collect());
        assert!(many.iter().all(|j| j.status == JobStatus::Completed));
        let log_median = |k: usize| {
            let mut d: Vec<f64> = many
                .iter()
                .filter(|j| user_index(j) == k)
                .filter_map(|j| j.duration)
                .map(f64::ln)
                .collect();
            d.sort_by(f64::total_cmp);
            d[d.len() / 2]
        };
        assert!((log_median(0) - 4.0).abs() < 0.5, "{}", log_median(0));
        assert!((log_median(39) - 8.0).abs() < 0.5, "{}", log_median(39));
    }
}
