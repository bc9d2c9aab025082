//! Failure features: what is known at submit time about how often jobs like this one ended
//! failed, on top of the runtime features of [`FeatureState`].
//!
//! A [`FailureFeatureState`] wraps a [`FeatureState`] (the runtime features: request, time of
//! day, per-key duration histories) and adds, per [`FailKey`], the failure history of the
//! jobs sharing the key that *finished* before the instant asked about:
//!
//! | feature | meaning |
//! |---|---|
//! | `n_labelled` | ln(1 + jobs with a known outcome), capped at 200 jobs |
//! | `fail_rate` | failed share, shrunk toward the cluster-wide share with a weight of 2 jobs |
//! | `last_failed` | 1 if the last finished job failed, 0 if not (NaN: none yet) |
//! | `fail_streak` | ln(1 + failures in a row at the end of the history) |
//! | `fail_ewm` | exponentially weighted failed share, weight 0.3 on the newest |
//! | `since_last_failure` | ln(1 + seconds since the last failed job finished), capped at 2 days |
//! | `submits_1h` | ln(1 + jobs of the key submitted in the last hour): resubmission storms after failures |
//!
//! Labels: [`failure_label`] — `failed` is a failure, `completed` and `killed` are not
//! (a job cancelled by its user or an administrator did not fail), `unknown` (censored: still
//! running or pending when the trace ended, or no status recorded) is neither and never
//! enters a history.
//!
//! The runtime features keep their own schema unchanged: the first [`FeatureSchema::len`]
//! slots of a failure feature row are exactly what [`crate::batch_features`] computes.
//! Batch features ([`failure_batch_features`]) are a replay through the same state the
//! online path uses.

use std::collections::{HashMap, VecDeque};

use augur_datasets::{JobRecord, JobStatus};
use serde::{Deserialize, Serialize};

use crate::state::{copy_columns, replay_batch, widen_rows, ReplayState};
use crate::{FeatureError, FeatureSchema, FeatureState, JobHandle, KeyKind};

/// The outcome a failure predictor learns: `Some(true)` failed, `Some(false)` did not fail
/// (completed, or killed by a user/administrator), `None` censored or not recorded.
pub fn failure_label(status: JobStatus) -> Option<bool> {
    match status {
        JobStatus::Failed => Some(true),
        JobStatus::Completed | JobStatus::Killed => Some(false),
        JobStatus::Unknown => None,
    }
}

/// What a failure history is keyed by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailKey {
    /// Every job (cluster-wide).
    All,
    User,
    Group,
    JobName,
    /// User × job name: the same job resubmitted.
    UserName,
    /// Queue / QoS class.
    Queue,
    GpuType,
    /// GPUs requested.
    Gpus,
    Cluster,
}

impl FailKey {
    /// The job fields this key is made of.
    pub fn fields(self) -> &'static [&'static str] {
        match self {
            FailKey::All => &[],
            FailKey::User => &["user"],
            FailKey::Group => &["group"],
            FailKey::JobName => &["job_name"],
            FailKey::UserName => &["user", "job_name"],
            FailKey::Queue => &["queue"],
            FailKey::GpuType => &["gpu_type"],
            FailKey::Gpus => &["num_gpus"],
            FailKey::Cluster => &["cluster"],
        }
    }

    /// Every key kind, in feature order.
    pub const ALL: [FailKey; 9] = [
        FailKey::All,
        FailKey::User,
        FailKey::Group,
        FailKey::JobName,
        FailKey::UserName,
        FailKey::Queue,
        FailKey::GpuType,
        FailKey::Gpus,
        FailKey::Cluster,
    ];

    /// Snake-case name used in feature names.
    pub fn name(self) -> &'static str {
        match self {
            FailKey::All => "all",
            FailKey::User => "user",
            FailKey::Group => "group",
            FailKey::JobName => "name",
            FailKey::UserName => "user_name",
            FailKey::Queue => "queue",
            FailKey::GpuType => "gpu_type",
            FailKey::Gpus => "gpus",
            FailKey::Cluster => "cluster",
        }
    }

    /// The key of `job`, or `None` when the job lacks the fields.
    pub fn key_of(self, job: &JobRecord) -> Option<u64> {
        let runtime_kind = match self {
            FailKey::All => KeyKind::All,
            FailKey::User => KeyKind::User,
            FailKey::Group => KeyKind::Group,
            FailKey::JobName => KeyKind::JobName,
            FailKey::UserName => KeyKind::UserName,
            FailKey::GpuType => KeyKind::GpuType,
            FailKey::Gpus => KeyKind::Gpus,
            FailKey::Cluster => KeyKind::Cluster,
            FailKey::Queue => {
                // FNV-1a of the queue name, seeded apart from the runtime key kinds
                let q = job.queue.as_deref()?;
                let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ 0x9e37_79b9;
                for b in q.bytes().chain([0xff]) {
                    h ^= u64::from(b);
                    h = h.wrapping_mul(0x0100_0000_01b3);
                }
                return Some(h);
            }
        };
        runtime_kind.key_of(job)
    }
}

/// Failure features per key, in order (each prefixed with the key's name).
pub const FAILURE_KEY_FEATURES: [&str; 7] = [
    "n_labelled",
    "fail_rate",
    "last_failed",
    "fail_streak",
    "fail_ewm",
    "since_last_failure",
    "submits_1h",
];

/// Labelled-job counts above this are written as this (a count growing with the trace's age
/// would act as a clock).
const COUNT_CAP: u64 = 200;
/// Ages above this (seconds) are written as this.
const AGE_CAP_S: f64 = 2.0 * 86_400.0;
/// Weight of the newest outcome in `fail_ewm`.
const EWM_ALPHA: f32 = 0.3;
/// Pseudo-jobs of the cluster-wide rate added to a key's own outcomes in `fail_rate`.
const SHRINK_JOBS: f64 = 2.0;

/// The layout of failure features: the runtime features of `base`, then
/// [`FAILURE_KEY_FEATURES`] for each of `keys`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailureSchema {
    /// The runtime feature schema (its features come first, unchanged).
    pub base: FeatureSchema,
    /// Failure-history keys, in feature order.
    pub keys: Vec<FailKey>,
}

impl FailureSchema {
    /// The runtime schema of [`FeatureSchema::for_jobs`] plus every failure key that at
    /// least 1% of `jobs` have the fields for.
    pub fn for_jobs(jobs: &[JobRecord]) -> FailureSchema {
        let step = (jobs.len() / 5000).max(1);
        let sample: Vec<&JobRecord> = jobs.iter().step_by(step).collect();
        let keys = FailKey::ALL
            .into_iter()
            .filter(|k| {
                let n = sample.iter().filter(|j| k.key_of(j).is_some()).count();
                n * 100 >= sample.len().max(1)
            })
            .collect();
        FailureSchema {
            base: FeatureSchema::for_jobs(jobs),
            keys,
        }
    }

    /// Number of features.
    pub fn len(&self) -> usize {
        self.base.len() + self.keys.len() * FAILURE_KEY_FEATURES.len()
    }

    /// Always false: there are static features.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Index of the first failure-history feature (the runtime ones come before it).
    pub fn failure_offset(&self) -> usize {
        self.base.len()
    }

    /// Index of `feature` (one of [`FAILURE_KEY_FEATURES`]) of key `key`, if the schema has
    /// the key.
    pub fn index_of(&self, key: FailKey, feature: &str) -> Option<usize> {
        let k = self.keys.iter().position(|&x| x == key)?;
        let f = FAILURE_KEY_FEATURES.iter().position(|&x| x == feature)?;
        Some(self.base.len() + k * FAILURE_KEY_FEATURES.len() + f)
    }

    /// Feature names in order.
    pub fn names(&self) -> Vec<String> {
        let mut out = self.base.names();
        for k in &self.keys {
            for f in FAILURE_KEY_FEATURES {
                out.push(format!("fail:{}:{f}", k.name()));
            }
        }
        out
    }
}

/// The failure history of one key.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct FailHistory {
    n_labelled: u64,
    n_failed: u64,
    last_failed: Option<bool>,
    streak: u32,
    ewm: Option<f32>,
    last_failure: Option<f64>,
    /// Submit times within the last hour, oldest first.
    submits_1h: VecDeque<f64>,
}

impl FailHistory {
    fn on_submit(&mut self, t: f64) {
        self.submits_1h.push_back(t);
    }

    fn on_outcome(&mut self, end: f64, failed: bool) {
        self.n_labelled += 1;
        self.n_failed += u64::from(failed);
        self.last_failed = Some(failed);
        self.streak = if failed { self.streak + 1 } else { 0 };
        let x = f32::from(u8::from(failed));
        self.ewm = Some(self.ewm.map_or(x, |m| m + EWM_ALPHA * (x - m)));
        if failed {
            self.last_failure = Some(self.last_failure.map_or(end, |l| l.max(end)));
        }
    }

    /// Drops the submits older than an hour before `now` (bounded memory).
    fn prune(&mut self, now: f64) {
        while let Some(&t) = self.submits_1h.front() {
            if now - t > 3600.0 {
                self.submits_1h.pop_front();
            } else {
                break;
            }
        }
    }

    /// Writes the [`FAILURE_KEY_FEATURES`] at `now`; `prior` is the cluster-wide failed share.
    /// The history is not changed: the submits [`FailHistory::prune`] at `now` would drop are
    /// skipped (the same numbers as pruning first).
    fn write_at(&self, now: f64, prior: f64, leave: Option<SubmitsLeftOut>, out: &mut [f32]) {
        let stale = self
            .submits_1h
            .iter()
            .take_while(|&&t| now - t > 3600.0)
            .count();
        let in_hour = |t: f64| now - t <= 3600.0;
        let left_out = leave.map_or(0, |l| {
            let later = self.submits_1h.iter().filter(|&&t| t >= l.cut).count();
            let own = l.own.is_some_and(|t| in_hour(t) && t < l.cut);
            later + usize::from(own)
        });
        let nan = f32::NAN;
        out[0] = (self.n_labelled.min(COUNT_CAP) as f32).ln_1p();
        out[1] = ((self.n_failed as f64 + SHRINK_JOBS * prior)
            / (self.n_labelled as f64 + SHRINK_JOBS)) as f32;
        out[2] = self.last_failed.map_or(nan, |f| f32::from(u8::from(f)));
        out[3] = if self.n_labelled > 0 {
            (self.streak as f32).ln_1p()
        } else {
            nan
        };
        out[4] = self.ewm.unwrap_or(nan);
        out[5] = self
            .last_failure
            .map_or(nan, |t| ((now - t).clamp(0.0, AGE_CAP_S) as f32).ln_1p());
        out[6] = (self.submits_1h.len().saturating_sub(stale + left_out) as f32).ln_1p();
    }
}

/// Submits a read leaves out of a key's hour count: those at `cut` or later, and the
/// asking job's own (`own`, its submit time, when it shares the key).
#[derive(Debug, Clone, Copy)]
struct SubmitsLeftOut {
    cut: f64,
    own: Option<f64>,
}

/// A submitted, unfinished job: its runtime-state handle and failure keys.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Pending {
    base: JobHandle,
    keys: Vec<(usize, u64)>,
    submit: f64,
}

/// The runtime [`FeatureState`] plus per-key failure histories, fed by the same events.
/// Serialisable like [`FeatureState`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FailureFeatureState {
    schema: FailureSchema,
    base: FeatureState,
    histories: Vec<HashMap<u64, FailHistory>>,
    /// Cluster-wide outcomes so far (the shrinkage prior), whatever the schema's keys.
    n_labelled: u64,
    n_failed: u64,
    pending: HashMap<u64, Pending>,
    next_handle: u64,
}

impl FailureFeatureState {
    /// An empty state (no history) for a schema.
    pub fn new(schema: FailureSchema) -> FailureFeatureState {
        FailureFeatureState {
            base: FeatureState::new(schema.base.clone()),
            histories: schema.keys.iter().map(|_| HashMap::new()).collect(),
            schema,
            n_labelled: 0,
            n_failed: 0,
            pending: HashMap::new(),
            next_handle: 0,
        }
    }

    /// The schema features are laid out by.
    pub fn schema(&self) -> &FailureSchema {
        &self.schema
    }

    /// Cluster-wide failed share of the jobs finished so far (0.5 before any).
    pub fn prior(&self) -> f64 {
        if self.n_labelled == 0 {
            0.5
        } else {
            self.n_failed as f64 / self.n_labelled as f64
        }
    }

    /// Writes the features of `job`, about to be submitted at `now`, into `out`
    /// ([`FailureSchema::len`] slots). Only what is known at `now` is used. Drops what has
    /// aged out of the job's keys' hour windows (bounded memory); see
    /// [`FailureFeatureState::features_at`] for the read-only path.
    pub fn features_for(
        &mut self,
        job: &JobRecord,
        now: f64,
        out: &mut [f32],
    ) -> Result<(), FeatureError> {
        self.check_len(out)?;
        let b = self.schema.base.len();
        self.base.features_for(job, now, &mut out[..b])?;
        for (ki, kind) in self.schema.keys.iter().enumerate() {
            if let Some(h) = kind
                .key_of(job)
                .and_then(|key| self.histories[ki].get_mut(&key))
            {
                h.prune(now);
            }
        }
        self.write_failure_features(job, now, None, &mut out[b..]);
        Ok(())
    }

    /// [`FailureFeatureState::features_for`] without changing the state (for predictions
    /// answered concurrently): the same numbers as long as `now` does not go back in time.
    pub fn features_at(
        &self,
        job: &JobRecord,
        now: f64,
        out: &mut [f32],
    ) -> Result<(), FeatureError> {
        self.check_len(out)?;
        let b = self.schema.base.len();
        self.base.features_at(job, now, &mut out[..b])?;
        self.write_failure_features(job, now, None, &mut out[b..]);
        Ok(())
    }

    /// The features of `job` submitted at `now` as the state stood before that submit
    /// (see [`FeatureState::features_before`]): the submits at `now` or later are left
    /// out, and so is the submit of the unfinished job `own`. For a job just submitted,
    /// the features it was answered with at its submit.
    pub fn features_before(
        &self,
        job: &JobRecord,
        now: f64,
        own: Option<JobHandle>,
        out: &mut [f32],
    ) -> Result<(), FeatureError> {
        self.check_len(out)?;
        let b = self.schema.base.len();
        let own = own.and_then(|h| self.pending.get(&h.0));
        self.base
            .features_before(job, now, own.map(|p| p.base), &mut out[..b])?;
        self.write_failure_features(job, now, Some((now, own)), &mut out[b..]);
        Ok(())
    }

    fn check_len(&self, out: &[f32]) -> Result<(), FeatureError> {
        let want = self.schema.len();
        if out.len() != want {
            return Err(FeatureError::BufferSize {
                got: out.len(),
                want,
            });
        }
        Ok(())
    }

    /// The failure histories' block of a feature row (after the runtime features).
    /// `before`: the read is as of before a submit at that cut, leaving out the submits at
    /// or after it and those of the pending job given.
    fn write_failure_features(
        &self,
        job: &JobRecord,
        now: f64,
        before: Option<(f64, Option<&Pending>)>,
        out: &mut [f32],
    ) {
        let prior = self.prior();
        let per = FAILURE_KEY_FEATURES.len();
        for (ki, kind) in self.schema.keys.iter().enumerate() {
            let slot = &mut out[ki * per..(ki + 1) * per];
            match kind.key_of(job) {
                Some(key) => {
                    let leave = before.map(|(cut, own)| SubmitsLeftOut {
                        cut,
                        own: own
                            .filter(|p| p.keys.contains(&(ki, key)))
                            .map(|p| p.submit),
                    });
                    match self.histories[ki].get(&key) {
                        Some(h) => h.write_at(now, prior, leave, slot),
                        None => FailHistory::default().write_at(now, prior, leave, slot),
                    }
                }
                None => slot.fill(f32::NAN),
            }
        }
    }

    /// Records that `job` was submitted (at `job.submit_time`); returns its handle for
    /// [`FailureFeatureState::observe_finish`].
    pub fn observe_submit(&mut self, job: &JobRecord) -> JobHandle {
        let t = job.submit_time;
        let base = self.base.observe_submit(job);
        let mut keys = Vec::with_capacity(self.schema.keys.len());
        for (ki, kind) in self.schema.keys.iter().enumerate() {
            if let Some(key) = kind.key_of(job) {
                self.histories[ki].entry(key).or_default().on_submit(t);
                keys.push((ki, key));
            }
        }
        let handle = JobHandle(self.next_handle);
        self.next_handle += 1;
        self.pending.insert(
            handle.0,
            Pending {
                base,
                keys,
                submit: t,
            },
        );
        handle
    }

    /// Records that a submitted job ended at `end` with `status`. `duration` is its run time
    /// when known (a job that never ran, such as a pod deleted before it was scheduled, has
    /// none: its outcome still counts, but it adds nothing to the duration histories).
    pub fn observe_finish(
        &mut self,
        handle: JobHandle,
        end: f64,
        duration: Option<f64>,
        status: JobStatus,
    ) -> Result<(), FeatureError> {
        let p = self
            .pending
            .remove(&handle.0)
            .ok_or(FeatureError::UnknownJob(handle.0))?;
        if let Some(d) = duration {
            self.base.observe_finish(p.base, end, d, status)?;
        }
        if let Some(failed) = failure_label(status) {
            self.n_labelled += 1;
            self.n_failed += u64::from(failed);
            for (ki, key) in p.keys {
                if let Some(h) = self.histories[ki].get_mut(&key) {
                    h.on_outcome(end, failed);
                }
            }
        }
        Ok(())
    }
}

/// Failure features of every job of a trace (row `i` = job `i`, row-major
/// `jobs.len() × schema.len()`), each computed at its submit time from what was known then.
/// A replay through [`FailureFeatureState`]: jobs in submit order, each job's end applied
/// once its [`finish_time`](crate::state::finish_time) has passed (finishes at the same instant as a submit come first).
///
/// The failure histories never read the runtime ones: the runtime columns are
/// [`crate::batch_features`] of the base schema, and the failure columns a replay through a
/// [`FailureFeatureState`] whose base has no key kinds, the two side by side.
pub fn failure_batch_features(jobs: &[JobRecord], schema: &FailureSchema) -> Vec<f32> {
    let fail_only = FailureSchema {
        base: FeatureSchema {
            keys: Vec::new(),
            ..schema.base.clone()
        },
        keys: schema.keys.clone(),
    };
    let (mut out, fail) = rayon::join(
        || crate::batch_features(jobs, &schema.base),
        || {
            replay_batch(
                jobs,
                fail_only.len(),
                FailureFeatureState::new(fail_only.clone()),
            )
        },
    );
    let b = schema.base.len();
    widen_rows(&mut out, b, schema.len());
    copy_columns(
        &mut out,
        schema.len(),
        b,
        &fail,
        fail_only.len(),
        fail_only.base.len(),
    );
    out
}

impl ReplayState for FailureFeatureState {
    fn write_features(&mut self, job: &JobRecord, now: f64, row: &mut [f32]) {
        // the buffer has the schema's length by construction
        let _ = self.features_for(job, now, row);
    }
    fn submit(&mut self, job: &JobRecord) -> JobHandle {
        self.observe_submit(job)
    }
    fn tracks_end(&self, _job: &JobRecord) -> bool {
        true
    }
    fn finish(&mut self, handle: JobHandle, job: &JobRecord, end: f64) {
        // the handle was issued by this state and is finished once
        let _ = self.observe_finish(handle, end, job.duration, job.status);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(user: &str, submit: f64, end: f64, status: JobStatus) -> JobRecord {
        JobRecord {
            job_id: format!("{user}-{submit}"),
            submit_time: submit,
            start_time: Some(submit),
            end_time: Some(end),
            duration: Some(end - submit),
            num_gpus: Some(1.0),
            user: Some(user.into()),
            status,
            ..Default::default()
        }
    }

    #[test]
    fn labels() {
        assert_eq!(failure_label(JobStatus::Failed), Some(true));
        assert_eq!(failure_label(JobStatus::Completed), Some(false));
        assert_eq!(failure_label(JobStatus::Killed), Some(false));
        assert_eq!(failure_label(JobStatus::Unknown), None);
    }

    #[test]
    fn failure_history_sees_only_finished_outcomes() {
        let jobs = vec![
            job("a", 0.0, 10.0, JobStatus::Failed),
            job("a", 20.0, 30.0, JobStatus::Failed),
            // censored: never counts
            job("a", 40.0, 45.0, JobStatus::Unknown),
            // submitted while job 4 runs: job 4's failure is not known yet
            job("a", 50.0, 100.0, JobStatus::Failed),
            job("a", 60.0, 70.0, JobStatus::Completed),
            job("a", 200.0, 210.0, JobStatus::Completed),
        ];
        let schema = FailureSchema {
            base: FeatureSchema {
                version: crate::FEATURE_SCHEMA_VERSION,
                keys: vec![],
                ratio: false,
            },
            keys: vec![FailKey::User],
        };
        let x = failure_batch_features(&jobs, &schema);
        let d = schema.len();
        let at = |row: usize, f: &str| x[row * d + schema.index_of(FailKey::User, f).unwrap()];
        // job 0: nothing known; the rate is the 0.5 prior
        assert_eq!(at(0, "n_labelled"), 0.0);
        assert_eq!(at(0, "fail_rate"), 0.5);
        assert!(at(0, "last_failed").is_nan());
        // job 3 at t=50: jobs 0 and 1 failed (job 2 is censored)
        assert_eq!(at(3, "n_labelled"), 2f32.ln_1p());
        assert_eq!(at(3, "fail_rate"), 1.0);
        assert_eq!(at(3, "last_failed"), 1.0);
        assert_eq!(at(3, "fail_streak"), 2f32.ln_1p());
        assert!((at(3, "since_last_failure") - 20f32.ln_1p()).abs() < 1e-6);
        // job 4 at t=60: same history (job 3 still running)
        assert_eq!(at(4, "n_labelled"), 2f32.ln_1p());
        // job 5 at t=200: 0, 1, 3 failed, 4 completed (at 70) before 3 failed (at 100)
        assert_eq!(at(5, "n_labelled"), 4f32.ln_1p());
        assert_eq!(at(5, "last_failed"), 1.0);
        assert_eq!(at(5, "fail_streak"), 1f32.ln_1p());
        // shrunk toward the cluster-wide 3/4 with weight 2: (3 + 1.5) / (4 + 2)
        assert!((at(5, "fail_rate") - 0.75).abs() < 1e-6);
        assert!((at(5, "fail_ewm") - 0.79).abs() < 1e-6);
        // the five earlier submits are all within the hour before t=200 (job 5 not yet)
        assert_eq!(at(5, "submits_1h"), 5f32.ln_1p());
    }

    #[test]
    fn split_replay_equals_one_replay_on_real_traces() {
        use augur_datasets::bundled::Dataset;
        use augur_datasets::ReadOptions;
        for (dataset, take) in [(Dataset::Openb, usize::MAX), (Dataset::Mlperf, usize::MAX)] {
            let (table, _) = dataset.load(&ReadOptions::default()).unwrap();
            let jobs: Vec<JobRecord> = table.to_records().unwrap().into_iter().take(take).collect();
            let schema = FailureSchema::for_jobs(&jobs);
            assert!(
                !schema.base.keys.is_empty() && schema.keys.len() >= 2,
                "{dataset:?}: {schema:?}"
            );
            let d = schema.len();
            let one = replay_batch(&jobs, d, FailureFeatureState::new(schema.clone()));
            // both halves carry history: some job has a finished runtime history and some
            // a failure one (a misplaced or missing half shows)
            let runtime_n_done = crate::schema::STATIC_FEATURES.len();
            let fail_n = schema.index_of(schema.keys[0], "n_labelled").unwrap();
            assert!(
                (0..jobs.len()).any(|i| one[i * d + runtime_n_done] > 0.0),
                "{dataset:?}"
            );
            assert!(
                (0..jobs.len()).any(|i| one[i * d + fail_n] > 0.0),
                "{dataset:?}"
            );
            let split = failure_batch_features(&jobs, &schema);
            crate::state::tests::assert_same_bits(&split, &one, d, &format!("{dataset:?}"));
        }
    }

    #[test]
    fn read_only_features_equal_the_pruning_path() {
        let schema = FailureSchema {
            base: FeatureSchema {
                version: crate::FEATURE_SCHEMA_VERSION,
                keys: vec![],
                ratio: false,
            },
            keys: vec![FailKey::User],
        };
        let mut state = FailureFeatureState::new(schema.clone());
        for t in [0.0, 100.0, 3000.0, 5000.0] {
            let h = state.observe_submit(&job("a", t, t + 10.0, JobStatus::Failed));
            state
                .observe_finish(h, t + 10.0, Some(10.0), JobStatus::Failed)
                .unwrap();
        }
        let probe = job("a", 6000.0, 6010.0, JobStatus::Unknown);
        let d = schema.len();
        let (mut read, mut pruned) = (vec![0f32; d], vec![0f32; d]);
        state.features_at(&probe, 6000.0, &mut read).unwrap();
        state.features_for(&probe, 6000.0, &mut pruned).unwrap();
        // two submits are more than an hour old at t=6000: skipped, then dropped
        let col = schema.index_of(FailKey::User, "submits_1h").unwrap();
        assert_eq!(read[col], 2f32.ln_1p());
        for (a, b) in read.iter().zip(&pruned) {
            assert!((a.is_nan() && b.is_nan()) || a == b);
        }
        assert!(state.features_at(&probe, 6000.0, &mut [0.0; 3]).is_err());
    }
}
