//! Replaying a trace through the [`QueueState`]: the trace's queue events in time order,
//! every job's queue features at its submit, and the capacity the trace's jobs imply.

use augur_datasets::JobRecord;
use rayon::prelude::*;

use super::simulate::SimCache;
use super::state::{QueueEvent, QueueJob, QueueState, ResourceKind, QUEUE_FEATURES};
use crate::metrics::quantile;
use crate::PredictorError;

impl QueueEvent {
    /// The events of a trace (job `i` has id `i`) in time order: at equal times, ends, then
    /// submits, then starts; a job's own events stay in order (a zero-length run ends after
    /// it starts). A job's start is `start_time` (else submit + `queue_wait`), never before
    /// its submit; its end is `end_time` (else start + `duration`). Jobs with an end but no
    /// start leave the queue unstarted (withdrawn).
    pub fn of_trace(jobs: &[JobRecord], queue_jobs: &[QueueJob]) -> Vec<QueueEvent> {
        let mut ev: Vec<(f64, u8, usize, QueueEvent)> = Vec::with_capacity(jobs.len() * 3);
        for (i, (j, qj)) in jobs.iter().zip(queue_jobs).enumerate() {
            if !j.submit_time.is_finite() {
                continue;
            }
            let id = i as u64;
            let submit = j.submit_time;
            ev.push((submit, 1, i, QueueEvent::Submit { id, job: *qj }));
            let start = j
                .start_time
                .or_else(|| j.queue_wait.map(|w| submit + w))
                .filter(|s| s.is_finite())
                .map(|s| s.max(submit));
            let end = j
                .end_time
                .or_else(|| start.zip(j.duration).map(|(s, d)| s + d))
                .filter(|e| e.is_finite());
            if let Some(s) = start {
                ev.push((s, 2, i, QueueEvent::Start { id, at: s }));
            }
            if let Some(e) = end {
                let floor = start.unwrap_or(submit);
                let e = e.max(floor);
                // an end at the instant of the job's own start/submit goes after it
                let rank = if e > floor { 0 } else { 3 };
                ev.push((e, rank, i, QueueEvent::End { id, at: e }));
            }
        }
        ev.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
        ev.into_iter().map(|e| e.3).collect()
    }
}

/// Queue features of every job of a trace (row `i` = job `i`, `QUEUE_FEATURES.len()`
/// columns), each taken at its submit from the state the events before it built. Jobs
/// with a non-finite submit time get NaN rows.
///
/// The events are cut into stretches of about equal submits; one pass applies the events
/// alone (cheap) and keeps a copy of the state where each stretch begins, then the
/// stretches' features (the costly part: a forward simulation at every submit) are taken
/// on every core, each from its copy: every job sees the state the one pass would show it.
pub fn replay_queue_features(
    jobs: &[JobRecord],
    queue_jobs: &[QueueJob],
    capacity: f64,
) -> Result<Vec<f32>, PredictorError> {
    let d = QUEUE_FEATURES.len();
    let mut out = vec![f32::NAN; jobs.len() * d];
    let events = QueueEvent::of_trace(jobs, queue_jobs);
    let submits = events
        .iter()
        .filter(|e| matches!(e, QueueEvent::Submit { .. }))
        .count();
    let per_stretch = submits.div_ceil(REPLAY_STRETCHES).max(1);
    // (first event, the state before it) of each stretch
    let mut stretches: Vec<(usize, QueueState)> = Vec::with_capacity(REPLAY_STRETCHES + 1);
    let mut state = QueueState::new(capacity);
    let mut seen = 0usize;
    for (k, e) in events.iter().enumerate() {
        if let QueueEvent::Submit { .. } = e {
            if seen.is_multiple_of(per_stretch) {
                stretches.push((k, state.clone()));
            }
            seen += 1;
        }
        state.apply(e)?;
    }
    let bounds: Vec<usize> = stretches
        .iter()
        .skip(1)
        .map(|(k, _)| *k)
        .chain([events.len()])
        .collect();
    let rows = stretches
        .into_par_iter()
        .zip(bounds)
        .map(|((from, mut state), to)| -> Result<_, PredictorError> {
            // the stretch's jobs and their rows, one after the other
            let (mut ids, mut x) = (Vec::new(), Vec::new());
            let mut sims = SimCache::default();
            for e in &events[from..to] {
                if let QueueEvent::Submit { id, job } = e {
                    let at = x.len();
                    x.resize(at + d, 0.0);
                    state.features_with(job, job.submit, &mut x[at..], &mut sims)?;
                    ids.push(*id as usize);
                }
                state.apply(e)?;
            }
            Ok((ids, x))
        })
        .collect::<Result<Vec<_>, _>>()?;
    for (ids, x) in rows {
        for (i, row) in ids.into_iter().zip(x.chunks_exact(d)) {
            out[i * d..(i + 1) * d].copy_from_slice(row);
        }
    }
    Ok(out)
}

/// Stretches [`replay_queue_features`] cuts a trace into (more than cores, so that a
/// stretch of long queues does not hold the others up).
const REPLAY_STRETCHES: usize = 64;

/// The capacity of the cluster seen by the jobs `rows` of a trace: the `q`-quantile of the
/// resource in use at their submit times (run intervals of the same jobs), and at least the
/// largest single request. See the [module docs](super) for why not the maximum.
pub fn infer_capacity(jobs: &[JobRecord], rows: &[usize], resource: ResourceKind, q: f64) -> f64 {
    // (time, rank, delta): ends before samples before starts at equal times
    let mut ev: Vec<(f64, u8, f64)> = Vec::with_capacity(rows.len() * 3);
    let mut largest: f64 = 0.0;
    for &i in rows {
        let j = &jobs[i];
        let res = resource.amount(j);
        largest = largest.max(res);
        if j.submit_time.is_finite() {
            ev.push((j.submit_time, 1, 0.0));
        }
        let start = j
            .start_time
            .or_else(|| j.queue_wait.map(|w| j.submit_time + w));
        let end = j
            .end_time
            .or_else(|| start.zip(j.duration).map(|(s, d)| s + d));
        if let (Some(s), Some(e)) = (start, end) {
            if s.is_finite() && e.is_finite() && e > s {
                ev.push((s, 2, res));
                ev.push((e, 0, -res));
            }
        }
    }
    ev.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let mut busy = 0.0;
    let mut samples = Vec::new();
    for (_, rank, delta) in ev {
        if rank == 1 {
            samples.push(busy);
        } else {
            busy += delta;
        }
    }
    let cap = if samples.is_empty() {
        0.0
    } else {
        quantile(&samples, q)
    };
    cap.max(largest).max(1.0)
}
