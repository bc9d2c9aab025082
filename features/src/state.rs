//! The incremental feature state and the batch replay over a trace.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::ops::Range;

use augur_datasets::{JobRecord, JobStatus};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::history::{order_key, History, LeaveOut};
use crate::schema::{FeatureSchema, STATIC_FEATURES};
use crate::FeatureError;

/// Identifies a submitted, unfinished job inside a [`FeatureState`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct JobHandle(pub u64);

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Unfinished {
    submit: f64,
    /// ln(requested wall time), when the job has one.
    log_requested: Option<f32>,
    /// (key kind index, key) for each key kind the job has.
    keys: Vec<(usize, u64)>,
}

/// Everything the features of the next job depend on: per-key histories of finished jobs,
/// recent submissions and unfinished jobs. Fed by events in time order. Serialisable (a
/// service's snapshot of its online state), schema included.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FeatureState {
    schema: FeatureSchema,
    histories: Vec<HashMap<u64, History>>,
    unfinished: HashMap<u64, Unfinished>,
    next_handle: u64,
}

impl FeatureState {
    /// An empty state (no history) for a schema.
    pub fn new(schema: FeatureSchema) -> FeatureState {
        let histories = schema.keys.iter().map(|_| HashMap::new()).collect();
        FeatureState {
            schema,
            histories,
            unfinished: HashMap::new(),
            next_handle: 0,
        }
    }

    /// The schema features are laid out by.
    pub fn schema(&self) -> &FeatureSchema {
        &self.schema
    }

    /// Number of jobs submitted and not yet finished.
    pub fn unfinished_jobs(&self) -> usize {
        self.unfinished.len()
    }

    /// Writes the features of `job`, about to be submitted at `now`, into `out`
    /// ([`FeatureSchema::len`] slots). Only what is known at `now` is used. Drops what has
    /// aged out of the job's keys' hour windows (bounded memory); see
    /// [`FeatureState::features_at`] for the read-only path.
    pub fn features_for(
        &mut self,
        job: &JobRecord,
        now: f64,
        out: &mut [f32],
    ) -> Result<(), FeatureError> {
        for (ki, kind) in self.schema.keys.iter().enumerate() {
            if let Some(h) = kind
                .key_of(job)
                .and_then(|key| self.histories[ki].get_mut(&key))
            {
                h.prune(now);
            }
        }
        self.features_at(job, now, out)
    }

    /// [`FeatureState::features_for`] without changing the state (for predictions answered
    /// concurrently): the same numbers as long as `now` does not go back in time.
    pub fn features_at(
        &self,
        job: &JobRecord,
        now: f64,
        out: &mut [f32],
    ) -> Result<(), FeatureError> {
        self.write_features(job, now, LeaveOut::NONE, None, out)
    }

    /// The features of `job` submitted at `now` as the state stood before that submit:
    /// the submits at `now` or later are left out, and so is the submit of the unfinished
    /// job `own` (the job asked about, when the state holds it: its own submit is not its
    /// history). For a job just submitted, the features it was answered with at its submit
    /// ([`FeatureState::features_for`] before [`FeatureState::observe_submit`]).
    pub fn features_before(
        &self,
        job: &JobRecord,
        now: f64,
        own: Option<JobHandle>,
        out: &mut [f32],
    ) -> Result<(), FeatureError> {
        let own = own.and_then(|h| self.unfinished.get(&h.0));
        let leave = LeaveOut {
            cut: now,
            own: None,
        };
        self.write_features(job, now, leave, own, out)
    }

    /// Writes `job`'s features at `now`, the submits `leave` names left out, and the submit
    /// of `own` too for the keys it shares with `job`.
    fn write_features(
        &self,
        job: &JobRecord,
        now: f64,
        leave: LeaveOut,
        own: Option<&Unfinished>,
        out: &mut [f32],
    ) -> Result<(), FeatureError> {
        let want = self.schema.len();
        if out.len() != want {
            return Err(FeatureError::BufferSize {
                got: out.len(),
                want,
            });
        }
        let ln1p = |v: Option<f64>| v.map_or(f32::NAN, |x| (x.max(0.0) as f32).ln_1p());
        out[0] = ln1p(job.num_gpus);
        out[1] = ln1p(job.num_nodes);
        out[2] = ln1p(job.cpus);
        out[3] = ln1p(job.memory_mib);
        out[4] = ln1p(job.requested_time);
        let day = 86_400.0;
        out[5] = ((now.rem_euclid(day)) / 3600.0) as f32;
        // 1970-01-01 was a Thursday (day 4 with Sunday = 0)
        out[6] = (((now / day).floor() + 4.0).rem_euclid(7.0)) as f32;
        out[7] = job
            .num_gpus
            .map_or(f32::NAN, |g| f32::from(u8::from(g.fract() != 0.0)));
        let per = self.schema.per_key_len();
        for (ki, kind) in self.schema.keys.iter().enumerate() {
            let start = STATIC_FEATURES.len() + ki * per;
            let slot = &mut out[start..start + per];
            match kind.key_of(job) {
                Some(key) => {
                    let shared = own.filter(|u| u.keys.contains(&(ki, key)));
                    let leave = LeaveOut {
                        own: shared.map(|u| u.submit),
                        ..leave
                    };
                    match self.histories[ki].get(&key) {
                        Some(h) => h.write_leaving_out(now, leave, slot),
                        None => History::default().write_at(now, slot),
                    }
                }
                None => slot.fill(f32::NAN),
            }
        }
        Ok(())
    }

    /// Records that `job` was submitted (at `job.submit_time`); returns its handle for
    /// [`FeatureState::observe_finish`].
    pub fn observe_submit(&mut self, job: &JobRecord) -> JobHandle {
        let t = job.submit_time;
        let mut keys = Vec::with_capacity(self.schema.keys.len());
        for (ki, kind) in self.schema.keys.iter().enumerate() {
            if let Some(key) = kind.key_of(job) {
                self.histories[ki].entry(key).or_default().on_submit(t);
                keys.push((ki, key));
            }
        }
        let handle = JobHandle(self.next_handle);
        self.next_handle += 1;
        let log_requested = job
            .requested_time
            .filter(|r| r.is_finite() && *r > 0.0)
            .map(|r| (r.max(augur_datasets::split::MIN_DURATION_S) as f32).ln());
        self.unfinished.insert(
            handle.0,
            Unfinished {
                submit: t,
                log_requested,
                keys,
            },
        );
        handle
    }

    /// Records that a submitted job finished at `end` after running `duration` seconds.
    pub fn observe_finish(
        &mut self,
        handle: JobHandle,
        end: f64,
        duration: f64,
        status: JobStatus,
    ) -> Result<(), FeatureError> {
        let job = self
            .unfinished
            .remove(&handle.0)
            .ok_or(FeatureError::UnknownJob(handle.0))?;
        let log_d = (duration.max(augur_datasets::split::MIN_DURATION_S) as f32).ln();
        let failed = match status {
            JobStatus::Unknown => None,
            JobStatus::Failed => Some(true),
            JobStatus::Completed | JobStatus::Killed => Some(false),
        };
        let log_ratio = job.log_requested.map(|r| log_d - r);
        for (ki, key) in job.keys {
            if let Some(h) = self.histories[ki].get_mut(&key) {
                h.on_finish(job.submit, end, log_d, log_ratio, failed);
            }
        }
        Ok(())
    }
}

/// When a job's finish becomes known: its `end_time`, else `submit + wait + duration`
/// (wait 0 when unknown). `None` for jobs that never finished in the trace.
pub fn finish_time(job: &JobRecord) -> Option<f64> {
    if let Some(e) = job.end_time {
        return Some(e);
    }
    let d = job.duration?;
    Some(job.submit_time + job.queue_wait.unwrap_or(0.0).max(0.0) + d.max(0.0))
}

/// One event of a trace replay, in time order.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TraceEvent {
    /// Job `index` is submitted.
    Submit { index: usize, at: f64 },
    /// Job `index` finishes.
    Finish { index: usize, at: f64 },
}

impl TraceEvent {
    /// The events of a trace in time order: at equal times finishes come before submits
    /// (a job finishing at the instant another is submitted is known to it).
    pub fn of_trace(jobs: &[JobRecord]) -> Vec<TraceEvent> {
        let mut ev = Vec::with_capacity(jobs.len() * 2);
        for (index, j) in jobs.iter().enumerate() {
            ev.push(TraceEvent::Submit {
                index,
                at: j.submit_time,
            });
            if j.duration.is_some() {
                if let Some(at) = finish_time(j) {
                    ev.push(TraceEvent::Finish { index, at });
                }
            }
        }
        ev.sort_by(|a, b| {
            let key = |e: &TraceEvent| match *e {
                TraceEvent::Finish { index, at } => (at, 0u8, index),
                TraceEvent::Submit { index, at } => (at, 1u8, index),
            };
            let (ta, ka, ia) = key(a);
            let (tb, kb, ib) = key(b);
            ta.total_cmp(&tb).then(ka.cmp(&kb)).then(ia.cmp(&ib))
        });
        ev
    }
}

/// Features of every job of a trace (row `i` = job `i`, row-major `jobs.len() × schema.len()`),
/// each computed at its submit time from what was known then. A replay through
/// [`FeatureState`]: jobs in submit order, finishes applied as their time passes.
///
/// The key kinds' histories never read one another, so the kinds are replayed in groups on
/// every core, each group through its own [`FeatureState`] (a schema of its kinds alone),
/// and the groups' columns put together: the numbers of one replay of every kind.
pub fn batch_features(jobs: &[JobRecord], schema: &FeatureSchema) -> Vec<f32> {
    grouped_batch_features(jobs, schema, rayon::current_num_threads())
}

/// [`batch_features`] with the key kinds replayed in at most `ways` groups.
fn grouped_batch_features(jobs: &[JobRecord], schema: &FeatureSchema, ways: usize) -> Vec<f32> {
    let groups = kind_groups(schema.keys.len(), ways);
    let parts: Vec<Vec<f32>> = groups
        .par_iter()
        .map(|kinds| {
            let sub = FeatureSchema {
                keys: schema.keys[kinds.clone()].to_vec(),
                ..schema.clone()
            };
            replay_batch(jobs, sub.len(), FeatureState::new(sub))
        })
        .collect();
    let per = schema.per_key_len();
    let mut parts = parts.into_iter();
    // the first group holds the static features and the first kinds: its rows, widened in
    // place, are the output's with the later groups' columns still to fill
    let mut out = parts.next().unwrap_or_default();
    let first = groups.first().map_or(0, |g| g.len());
    widen_rows(&mut out, STATIC_FEATURES.len() + first * per, schema.len());
    for (kinds, part) in groups.iter().skip(1).zip(parts) {
        let src_w = STATIC_FEATURES.len() + kinds.len() * per;
        let at = STATIC_FEATURES.len() + kinds.start * per;
        copy_columns(
            &mut out,
            schema.len(),
            at,
            &part,
            src_w,
            STATIC_FEATURES.len(),
        );
    }
    out
}

/// The schema's key kinds cut into at most `ways` contiguous, near-equal ranges (at least
/// one range, possibly empty when there are no kinds).
fn kind_groups(kinds: usize, ways: usize) -> Vec<Range<usize>> {
    let ways = ways.clamp(1, kinds.max(1));
    (0..ways)
        .map(|g| g * kinds / ways..(g + 1) * kinds / ways)
        .collect()
}

/// Rows of width `from` laid out row-major in `buf`, widened to rows of width `to`
/// (≥ `from`); the new columns are zero. The rows are copied into a new buffer on every
/// core (one pass over the memory, where growing in place copied it twice on one core).
pub(crate) fn widen_rows(buf: &mut Vec<f32>, from: usize, to: usize) {
    if from == to {
        return;
    }
    let n = buf.len().checked_div(from).unwrap_or(0);
    let mut wide = vec![0.0; n * to];
    if from > 0 {
        wide.par_chunks_mut(to)
            .zip(buf.par_chunks(from))
            .with_min_len(1024)
            .for_each(|(row, old)| row[..from].copy_from_slice(old));
    }
    *buf = wide;
}

/// Copies columns `skip..src_w` of every row of `src` (row width `src_w`) to columns
/// `at..` of the same rows of `out` (row width `out_w`), rows side by side.
pub(crate) fn copy_columns(
    out: &mut [f32],
    out_w: usize,
    at: usize,
    src: &[f32],
    src_w: usize,
    skip: usize,
) {
    let cols = src_w - skip;
    out.par_chunks_mut(out_w)
        .zip(src.par_chunks(src_w))
        .with_min_len(1024)
        .for_each(|(row, s)| row[at..at + cols].copy_from_slice(&s[skip..]));
}

/// An online feature state the batch replay ([`replay_batch`]) drives: the runtime
/// [`FeatureState`] and the failure one share the replay, not their features.
pub(crate) trait ReplayState {
    /// Writes `job`'s features at `now` into `row` (the schema's length).
    fn write_features(&mut self, job: &JobRecord, now: f64, row: &mut [f32]);
    fn submit(&mut self, job: &JobRecord) -> JobHandle;
    /// Whether the replay applies `job`'s end (and when: [`finish_time`]).
    fn tracks_end(&self, job: &JobRecord) -> bool;
    fn finish(&mut self, handle: JobHandle, job: &JobRecord, end: f64);
}

impl ReplayState for FeatureState {
    fn write_features(&mut self, job: &JobRecord, now: f64, row: &mut [f32]) {
        // the buffer has the schema's length by construction
        let _ = self.features_for(job, now, row);
    }
    fn submit(&mut self, job: &JobRecord) -> JobHandle {
        self.observe_submit(job)
    }
    fn tracks_end(&self, job: &JobRecord) -> bool {
        job.duration.is_some()
    }
    fn finish(&mut self, handle: JobHandle, job: &JobRecord, end: f64) {
        // the handle was issued by this state and is finished once
        let _ = self.observe_finish(handle, end, job.duration.unwrap_or(0.0), job.status);
    }
}

/// Features of every job (row `i` = job `i`, row-major, `d` per row) from a replay through
/// `state`: jobs in submit order, each tracked job's end applied once its [`finish_time`] has
/// passed (finishes at the same instant as a submit come first).
pub(crate) fn replay_batch<S: ReplayState>(jobs: &[JobRecord], d: usize, mut state: S) -> Vec<f32> {
    let mut out = vec![0f32; jobs.len() * d];
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    order.sort_by(|&a, &b| {
        jobs[a]
            .submit_time
            .total_cmp(&jobs[b].submit_time)
            .then(a.cmp(&b))
    });
    // min-heap of (finish time, job index, handle)
    let mut pending: BinaryHeap<Reverse<(i64, usize, u64)>> = BinaryHeap::new();
    for &i in &order {
        let job = &jobs[i];
        let now = job.submit_time;
        while let Some(Reverse((t, j, h))) = pending.peek().copied() {
            if t > order_key(now) {
                break;
            }
            pending.pop();
            let fj = &jobs[j];
            state.finish(JobHandle(h), fj, finish_time(fj).unwrap_or(now));
        }
        state.write_features(job, now, &mut out[i * d..(i + 1) * d]);
        let handle = state.submit(job);
        if state.tracks_end(job) {
            if let Some(end) = finish_time(job) {
                pending.push(Reverse((order_key(end), i, handle.0)));
            }
        }
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::schema::KeyKind;

    fn job(user: &str, submit: f64, dur: f64) -> JobRecord {
        JobRecord {
            job_id: format!("{user}-{submit}"),
            submit_time: submit,
            duration: Some(dur),
            num_gpus: Some(1.0),
            user: Some(user.into()),
            ..Default::default()
        }
    }

    /// Bit for bit (NaN for NaN), rows of width `d`, with `what` and the first differing
    /// place named.
    pub(crate) fn assert_same_bits(a: &[f32], b: &[f32], d: usize, what: &str) {
        assert_eq!(a.len(), b.len(), "{what}");
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            assert!(
                x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()),
                "{what} row {} column {}: {x} vs {y}",
                i / d,
                i % d
            );
        }
    }

    #[test]
    fn grouped_replays_equal_one_replay() {
        use augur_datasets::bundled::Dataset;
        use augur_datasets::ReadOptions;
        for (dataset, take) in [(Dataset::Philly, 20_000), (Dataset::Mira, usize::MAX)] {
            let (table, _) = dataset.load(&ReadOptions::default()).unwrap();
            let jobs: Vec<JobRecord> = table.to_records().unwrap().into_iter().take(take).collect();
            let schema = FeatureSchema::for_jobs(&jobs);
            assert!(schema.keys.len() >= 3, "{dataset:?}: {schema:?}");
            let d = schema.len();
            let one = replay_batch(&jobs, d, FeatureState::new(schema.clone()));
            // every kind's columns carry history somewhere (a misplaced group shows)
            let per = schema.per_key_len();
            for k in 0..schema.keys.len() {
                let n_done = STATIC_FEATURES.len() + k * per;
                assert!(
                    (0..jobs.len()).any(|i| one[i * d + n_done] > 0.0),
                    "{dataset:?} kind {k}"
                );
            }
            for ways in [1, 2, 3, schema.keys.len(), schema.keys.len() + 4] {
                let grouped = grouped_batch_features(&jobs, &schema, ways);
                assert_same_bits(&grouped, &one, d, &format!("{dataset:?} in {ways}"));
            }
            assert_same_bits(
                &batch_features(&jobs, &schema),
                &one,
                d,
                &format!("{dataset:?}"),
            );
        }
    }

    #[test]
    fn kind_groups_cover_every_kind_once() {
        assert_eq!(kind_groups(0, 2), vec![0..0]);
        assert_eq!(kind_groups(5, 2), vec![0..2, 2..5]);
        assert_eq!(kind_groups(2, 8), vec![0..1, 1..2]);
        assert_eq!(kind_groups(3, 0), vec![0..3]);
    }

    #[test]
    fn widened_rows_keep_their_values() {
        let mut buf: Vec<f32> = (0..6).map(|v| v as f32).collect();
        widen_rows(&mut buf, 2, 4);
        assert_eq!(
            buf,
            [0.0, 1.0, 0.0, 0.0, 2.0, 3.0, 0.0, 0.0, 4.0, 5.0, 0.0, 0.0]
        );
        let src = [9.0, 7.0, 8.0, 9.0, 5.0, 6.0, 9.0, 3.0, 4.0];
        copy_columns(&mut buf, 4, 2, &src, 3, 1);
        assert_eq!(
            buf,
            [0.0, 1.0, 7.0, 8.0, 2.0, 3.0, 5.0, 6.0, 4.0, 5.0, 3.0, 4.0]
        );
    }

    #[test]
    fn history_only_sees_finished_jobs() {
        let jobs = vec![
            job("a", 0.0, 100.0),
            job("a", 50.0, 10.0),
            job("a", 200.0, 5.0),
        ];
        let schema = FeatureSchema {
            version: 1,
            keys: vec![KeyKind::User],
            ratio: false,
        };
        let x = batch_features(&jobs, &schema);
        let d = schema.len();
        let last1 = STATIC_FEATURES.len() + 1;
        // job 1 at t=50: job 0 still running (finishes at 100) → no history
        assert!(x[d + last1].is_nan());
        // but one unfinished job of the user, 50 s old
        let unfinished = STATIC_FEATURES.len() + 10;
        assert_eq!(x[d + unfinished], 1f32.ln_1p());
        // job 2 at t=200: both finished; the last to finish was job 0 (at 100), after job 1 (at 60)
        assert!((x[2 * d + last1] - 100f32.ln()).abs() < 1e-6);
    }
}
