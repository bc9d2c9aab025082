//! A small synthetic trace for the crate's unit tests (SYNTHETIC: generated here from a
//! seed, not a real trace): jobs of six users with user-specific log-normal run times,
//! requests of 1 to 8 nodes, half of them starting at once and the rest after a log-normal
//! wait, one submit every 30 to 90 s.

use augur_datasets::{JobRecord, JobStatus};
use augur_numeric::SplitMix64;

use crate::contract::JobEvent;

/// `n` synthetic jobs in submit order (ids `j0`, `j1`, ...), every time field filled in.
pub(crate) fn trace(n: usize, seed: u64) -> Vec<JobRecord> {
    let mut rng = SplitMix64(seed);
    let mut t = 1.7e9;
    (0..n)
        .map(|i| {
            t += 30.0 + 60.0 * rng.unit();
            let user = rng.below(6);
            let duration = (4.0 + 0.8 * user as f64 + 0.5 * rng.normal()).exp();
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
