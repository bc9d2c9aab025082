//! The service's online state: the served models and everything the ingested events taught
//! it — the feature state of each model (the same [`FeatureState`] code `augur evaluate`
//! trains on, fed event by event, so online features equal offline ones), the queue state,
//! what is known about every job, the online conformal window of the runtime interval, the
//! queue-wait bound's risk-split state (each risk group's offset follows its own jobs'
//! outcomes: a start reveals a hit or a miss, a job still queued past its bound is a miss),
//! and the latest cluster snapshot.
//!
//! Events are applied in the store's sequence order (the store's writer calls
//! [`Online::apply`] right after each commit); an event whose sequence number was already
//! applied is skipped. A model swap rebuilds the state for the new models by replaying the
//! store ([`crate::serve::AppState::swap_models`]); what was answered at each submit is a stored
//! record ([`super::store::PredictionRecord`]) that replays and swaps keep.

use std::collections::{BTreeMap, HashMap};

use augur_datasets::{JobRecord, JobStatus};
use augur_predictor::contract::StepMetrics;
use augur_predictor::convergence::ConvergenceOnline;
use augur_predictor::failure::FailureOnline;
use augur_predictor::{
    JobEvent, JobQuery, ModelKind, OnlinePredictor, PredictorError, QueueWaitOnline, RuntimeOnline,
};
use serde::{Deserialize, Serialize};

use super::event_time::wall_now;
use super::events::{ClusterSnapshot, Dag, Event, FinishStatus, JobProfile, MetricPoint};
use super::store::{PredictionRecord, StoredEvent};
use crate::serve::kinds::{AnswersAtSubmit, KindOnline};

mod fit;
pub mod retention;
pub mod saved;

pub use crate::serve::kinds::answers::{
    ConvergenceAnswer, FailureAnswer, Label, RuntimeAnswer, WaitAnswer,
};
pub use crate::serve::kinds::{Served, ServedModels};

/// Why a convergence prediction could not be made.
#[derive(Debug, Clone, PartialEq)]
pub enum ConvergenceFailure {
    Predict(PredictError),
    /// The job's data cannot give one (unknown job, no points, ...).
    Input(String),
}

/// What the service knows about one job.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct JobInfo {
    pub job_id: String,
    /// 1 for the first run of this id; a submit after the job finished starts run 2, ...
    /// (e.g. a Kubernetes job re-created with the same name).
    pub run: u32,
    pub profile: Option<JobProfile>,
    pub dag: Option<Dag>,
    pub submitted_at: Option<f64>,
    pub started_at: Option<f64>,
    pub finished_at: Option<f64>,
    pub status: Option<FinishStatus>,
    /// Seconds it ran (given, else finish − start).
    pub duration: Option<f64>,
    /// The runtime prediction issued when it was submitted, by the model served then: a
    /// stored record, never recomputed (a later model swap or restart keeps it).
    pub runtime_at_submit: Option<RuntimeAnswer>,
    /// The queue-wait prediction made when it was submitted.
    pub queue_wait_at_submit: Option<WaitAnswer>,
    /// The failure prediction made when it was submitted.
    pub failure_at_submit: Option<FailureAnswer>,
    /// The GPU type named after its submit (a `job_typed` event: steered by a controller, a
    /// flavor assigned): the type it will run on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_type: Option<String>,
    /// The runtime prediction for [`JobInfo::gpu_type`], issued when the type was named
    /// ([`crate::serve::advice::runtime_on_type`]): a stored record like the answers at
    /// submit. What every endpoint answers as the job's run time from then on
    /// ([`JobInfo::runtime`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runtime_on_type: Option<RuntimeAnswer>,
    /// Training-metric points received (the last [`KEEP_POINTS`]).
    pub metric_points: Vec<MetricPoint>,
    pub metric_points_total: u64,
    /// Events that did not fit the job's story (a second submit while it has not finished,
    /// a start after the finish).
    pub anomalies: Vec<String>,
    /// Sequence number of the first event of this run (what compaction must keep).
    #[serde(skip)]
    pub first_seq: i64,
}

impl JobInfo {
    /// The job's predicted run time, as every endpoint gives it (write-back annotations,
    /// `GET /v1/jobs/{id}`, `GET /v1/eta`, the controller's plans): for the GPU type it will
    /// get when one was named after its submit, else the answer at its submit.
    pub fn runtime(&self) -> Option<RuntimeAnswer> {
        self.runtime_on_type.or(self.runtime_at_submit)
    }
}

/// Metric points kept per job.
pub const KEEP_POINTS: usize = 1000;
/// Anomaly notes kept per job.
const KEEP_ANOMALIES: usize = 20;

/// A job that finished with predictions issued at its submit: for live accuracy.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Outcome {
    pub job_id: String,
    pub status: FinishStatus,
    pub actual_runtime: Option<f64>,
    pub runtime: Option<RuntimeAnswer>,
    pub actual_wait: Option<f64>,
    pub queue_wait: Option<WaitAnswer>,
    pub failure: Option<FailureAnswer>,
    /// What the job asked for (its coverage groups on `/metrics`).
    #[serde(skip)]
    pub profile: Option<JobProfile>,
}

/// Counts of applied events by type.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EventCounts {
    pub job_submitted: u64,
    pub job_started: u64,
    pub job_finished: u64,
    #[serde(default)]
    pub job_typed: u64,
    pub metric_points: u64,
    pub cluster_snapshot: u64,
}

/// Why a prediction could not be made.
#[derive(Debug, Clone, PartialEq)]
pub enum PredictError {
    /// The model is not loaded (still training at first start, or training failed).
    NotAvailable(&'static str),
    /// The history it was to be trained on cannot train it (`reason` names what it lacks).
    NotTrained { kind: &'static str, reason: String },
    /// The job cannot fit the cluster (the profile `field` asks for more than it has).
    CannotFit { field: &'static str, reason: String },
    /// The features could not be computed (an internal inconsistency).
    Internal(String),
}

impl From<PredictorError> for PredictError {
    fn from(e: PredictorError) -> PredictError {
        PredictError::Internal(e.to_string())
    }
}

/// See the module docs.
pub struct Online {
    pub models: ServedModels,
    /// The online state of each served model that keeps one, by kind.
    states: BTreeMap<ModelKind, Box<dyn KindOnline>>,
    /// The latest run of every job id.
    pub jobs: HashMap<String, JobInfo>,
    /// Earlier runs of job ids submitted again after they finished, oldest first.
    pub earlier_runs: HashMap<String, Vec<JobInfo>>,
    /// Latest event time seen (the events' clock).
    pub clock: Option<f64>,
    /// "Now" is the wall clock (live backends), not the events' clock (the simulator).
    wall_clock: bool,
    /// Why a kind has no served model when its training was skipped, by kind (e.g. the
    /// history has no start times, so no queue waits).
    pub not_trained: BTreeMap<ModelKind, String>,
    pub last_seq: i64,
    pub last_snapshot: Option<ClusterSnapshot>,
    /// The most GPUs any cluster snapshot reported: a job asking for more cannot fit.
    pub largest_gpus: Option<f64>,
    pub counts: EventCounts,
    /// Stored answers at submit, by submit sequence number, still to be replayed: a
    /// replayed submit takes its answers from here instead of issuing new ones.
    recorded: HashMap<i64, AnswersAtSubmit>,
    /// Answers issued at submits since the last [`Online::take_issued`], to be stored.
    issued: Vec<PredictionRecord>,
    /// Which finished runs leave the job table, and when.
    pub retention: retention::Retention,
    /// Submits up to this sequence number are replayed without their answers at submit:
    /// neither read from the records nor recorded (a rebuild for new models takes them
    /// from the state it replaces).
    answers_skipped_upto: i64,
}

impl Online {
    /// An empty state serving `models`.
    pub fn new(models: ServedModels) -> Online {
        let states = models
            .iter()
            .filter_map(|m| Some((m.kind(), m.online()?)))
            .collect();
        Online {
            models,
            states,
            jobs: HashMap::new(),
            earlier_runs: HashMap::new(),
            clock: None,
            wall_clock: false,
            not_trained: BTreeMap::new(),
            last_seq: 0,
            last_snapshot: None,
            largest_gpus: None,
            counts: EventCounts::default(),
            recorded: HashMap::new(),
            issued: Vec::new(),
            retention: retention::Retention::default(),
            answers_skipped_upto: 0,
        }
    }

    /// This state holding finished runs for `window` seconds of job time after their finish
    /// (`None`: forever); see [`retention`].
    pub fn with_retention(mut self, window: Option<f64>) -> Online {
        self.retention = retention::Retention::new(window);
        self
    }

    /// This state with "now" on the wall clock (`true`: live backends) or on the events'
    /// clock (`false`: the simulator's accelerated time).
    pub fn with_wall_clock(mut self, on: bool) -> Online {
        self.wall_clock = on;
        self
    }

    /// Uses the stored answers at submit when their submits are replayed (records that do
    /// not parse are skipped with a warning: those submits are answered again).
    pub fn use_records(&mut self, records: &[PredictionRecord]) {
        // a submit already applied took its answers then (another replica's events a
        // follower reads again after its replay, for one)
        for r in records.iter().filter(|r| r.submit_seq > self.last_seq) {
            match serde_json::from_str::<AnswersAtSubmit>(&r.body) {
                Ok(a) => {
                    self.recorded.insert(r.submit_seq, a);
                }
                Err(e) => tracing::warn!(submit_seq = r.submit_seq, job_id = %r.job_id, error = %e,
                    "a stored prediction record cannot be read; the submit is answered again"),
            }
        }
    }

    /// Replays submits up to `seq` without their answers at submit (for a state that
    /// takes them from the one it replaces, [`Online::keep_answers_of`]).
    pub fn skip_answers_upto(&mut self, seq: i64) {
        self.answers_skipped_upto = seq;
    }

    /// The first submit whose answers a replay reads from the records.
    pub fn answers_wanted_from(&self) -> i64 {
        self.answers_skipped_upto + 1
    }

    /// Drops the answers issued at submits up to `seq` not taken yet (a replay's: not
    /// records of what was said then).
    pub fn drop_issued_upto(&mut self, seq: i64) {
        self.issued.retain(|r| r.submit_seq > seq);
    }

    /// The answers issued at submits since the last call, as records to store.
    pub fn take_issued(&mut self) -> Vec<PredictionRecord> {
        std::mem::take(&mut self.issued)
    }

    /// Keeps the answers at submit `old` holds for the jobs it knows (what was answered
    /// then, not what this state's models answer now); only answers issued for submits
    /// `old` has not seen stay to be stored.
    pub fn keep_answers_of(&mut self, old: &Online) {
        let keep = |job: &mut JobInfo, prev: &JobInfo| {
            if prev.run == job.run && prev.submitted_at == job.submitted_at {
                job.runtime_at_submit = prev.runtime_at_submit;
                job.queue_wait_at_submit = prev.queue_wait_at_submit;
                job.failure_at_submit = prev.failure_at_submit;
                if job.gpu_type == prev.gpu_type {
                    job.runtime_on_type = prev.runtime_on_type;
                }
            }
        };
        for (id, job) in &mut self.jobs {
            if let Some(prev) = old.jobs.get(id) {
                keep(job, prev);
            }
        }
        for (id, runs) in &mut self.earlier_runs {
            if let Some(prev) = old.earlier_runs.get(id) {
                for (job, prev) in runs.iter_mut().zip(prev) {
                    keep(job, prev);
                }
            }
        }
        self.issued.retain(|r| r.submit_seq > old.last_seq);
        self.not_trained = old.not_trained.clone();
        self.recorded.clear();
        self.answers_skipped_upto = 0;
    }

    /// The jobs known (every run), as trace records with what the events told (for
    /// retraining); a later run's id is `id#run`.
    pub fn history_records(&self) -> Vec<JobRecord> {
        self.history().into_iter().map(|(r, _)| r).collect()
    }

    /// [`Online::history_records`], each with the sequence number of its run's first event.
    pub fn history(&self) -> Vec<(JobRecord, i64)> {
        let mut out: Vec<(JobRecord, i64)> = self
            .jobs
            .values()
            .chain(self.earlier_runs.values().flatten())
            .filter_map(|j| {
                let submit = j.submitted_at?;
                let mut r = j
                    .profile
                    .clone()
                    .unwrap_or_default()
                    .to_record(&run_id(&j.job_id, j.run), submit);
                r.start_time = j.started_at;
                r.end_time = j.finished_at;
                r.duration = j.duration;
                r.status = j.status.map_or(JobStatus::Unknown, JobStatus::from);
                r.derive_times();
                Some((r, j.first_seq))
            })
            .collect();
        out.sort_by(|(a, _), (b, _)| {
            a.submit_time
                .total_cmp(&b.submit_time)
                .then_with(|| a.job_id.cmp(&b.job_id))
        });
        out
    }

    fn job_entry(&mut self, job_id: &str) -> &mut JobInfo {
        self.jobs
            .entry(job_id.to_string())
            .or_insert_with(|| JobInfo {
                job_id: job_id.to_string(),
                run: 1,
                profile: None,
                dag: None,
                submitted_at: None,
                started_at: None,
                finished_at: None,
                status: None,
                duration: None,
                runtime_at_submit: None,
                queue_wait_at_submit: None,
                failure_at_submit: None,
                gpu_type: None,
                runtime_on_type: None,
                metric_points: Vec::new(),
                metric_points_total: 0,
                anomalies: Vec::new(),
                first_seq: self.last_seq,
            })
    }

    /// Applies one stored event; returns the outcome when it finished a job.
    pub fn apply(&mut self, stored: &StoredEvent) -> Option<Outcome> {
        if stored.seq <= self.last_seq {
            // already applied (a rebuild caught up with the store before the writer did)
            return None;
        }
        self.last_seq = stored.seq;
        if let Some(t) = stored.event.at() {
            self.clock = Some(self.clock.map_or(t, |c| c.max(t)));
        }
        self.start_new_run(&stored.event);
        let predictor_id = stored
            .event
            .job_id()
            .and_then(|id| self.jobs.get(id))
            .map(|j| run_id(&j.job_id, j.run));
        let issued = self.route(stored.seq, &stored.event, predictor_id.as_deref());
        match &stored.event {
            Event::JobSubmitted {
                job_id,
                at,
                profile,
                dag,
            } => {
                self.counts.job_submitted += 1;
                let answers = match self.recorded.remove(&stored.seq) {
                    Some(recorded) => recorded,
                    None => {
                        if stored.seq > self.answers_skipped_upto {
                            self.record_issued(stored.seq, job_id, &issued);
                        }
                        issued
                    }
                };
                self.on_submit(job_id, *at, profile, dag.as_ref(), answers);
                None
            }
            Event::JobStarted { job_id, at } => {
                self.counts.job_started += 1;
                let job = self.job_entry(job_id);
                if job.started_at.is_some() {
                    note(job, format!("second start at {at} ignored"));
                } else {
                    job.started_at = Some(*at);
                }
                None
            }
            Event::JobFinished {
                job_id,
                at,
                status,
                duration,
            } => {
                self.counts.job_finished += 1;
                let outcome = self.on_finish(job_id, *at, *status, *duration);
                if outcome.is_some() {
                    let run = self.jobs.get(job_id).map_or(1, |j| j.run);
                    self.retention.finished(job_id, run, *at);
                }
                self.evict_expired();
                outcome
            }
            Event::JobTyped {
                job_id,
                at,
                gpu_type,
            } => {
                self.counts.job_typed += 1;
                self.on_typed(stored.seq, job_id, *at, gpu_type);
                None
            }
            Event::MetricPoints { job_id, points } => {
                self.counts.metric_points += 1;
                let job = self.job_entry(job_id);
                job.metric_points_total += points.len() as u64;
                job.metric_points.extend(points.iter().cloned());
                if job.metric_points.len() > KEEP_POINTS {
                    let cut = job.metric_points.len() - KEEP_POINTS;
                    job.metric_points.drain(..cut);
                }
                None
            }
            Event::ClusterSnapshot(s) => {
                self.counts.cluster_snapshot += 1;
                self.last_snapshot = Some(s.clone());
                self.largest_gpus = Some(
                    self.largest_gpus
                        .map_or(s.total_gpus, |g| g.max(s.total_gpus)),
                );
                None
            }
        }
    }

    /// A submit of a job id whose latest run finished starts a new run: the finished one
    /// moves to [`Online::earlier_runs`].
    fn start_new_run(&mut self, event: &Event) {
        let Event::JobSubmitted { job_id, .. } = event else {
            return;
        };
        let Some(done) = self.jobs.get(job_id).filter(|j| j.finished_at.is_some()) else {
            return;
        };
        let run = done.run + 1;
        if let Some(done) = self.jobs.remove(job_id) {
            self.earlier_runs
                .entry(job_id.clone())
                .or_default()
                .push(done);
        }
        self.job_entry(job_id).run = run;
    }

    /// Hands `event` (number `seq`) to every served predictor's online state that starts
    /// at or before it (a cluster snapshot as the clock reaching its time) under the id of
    /// the job's current run (`predictor_id`); returns the answers they issued when it is a
    /// submit.
    fn route(&mut self, seq: i64, event: &Event, predictor_id: Option<&str>) -> AnswersAtSubmit {
        let record;
        let points: Vec<StepMetrics>;
        let id = |job_id: &'_ str| -> String { predictor_id.unwrap_or(job_id).to_string() };
        let owned_id;
        let job_event = match event {
            Event::JobSubmitted {
                job_id,
                at,
                profile,
                ..
            } => {
                record = profile.to_record(&id(job_id), *at);
                JobEvent::Submitted { job: &record }
            }
            Event::JobStarted { job_id, at } => {
                owned_id = id(job_id);
                JobEvent::Started {
                    job_id: &owned_id,
                    at: *at,
                }
            }
            Event::JobFinished {
                job_id,
                at,
                status,
                duration,
            } => {
                owned_id = id(job_id);
                JobEvent::Finished {
                    job_id: &owned_id,
                    at: *at,
                    status: (*status).into(),
                    duration: *duration,
                }
            }
            Event::MetricPoints { job_id, points: p } => {
                points = p.iter().map(event_point).collect();
                owned_id = id(job_id);
                JobEvent::MetricPoints {
                    job_id: &owned_id,
                    points: &points,
                }
            }
            Event::ClusterSnapshot(s) => JobEvent::Clock { at: s.at },
            // a fact about the job, not something the predictors' states follow
            Event::JobTyped { .. } => return AnswersAtSubmit::default(),
        };
        let mut answers = AnswersAtSubmit::default();
        for (kind, state) in &mut self.states {
            if self.models.get(*kind).is_some_and(|m| m.feeds(seq)) {
                state.observe(&job_event, &mut answers);
            }
        }
        answers
    }

    /// Keeps what was answered at a submit to be stored, also when nothing was (no model
    /// served then): a replay must not answer that submit with a model served later.
    fn record_issued(&mut self, submit_seq: i64, job_id: &str, answers: &AnswersAtSubmit) {
        match serde_json::to_string(answers) {
            Ok(body) => self.issued.push(PredictionRecord {
                submit_seq,
                job_id: job_id.to_string(),
                body,
            }),
            Err(e) => {
                tracing::error!(submit_seq, job_id, error = %e, "an answer at submit cannot be recorded")
            }
        }
    }

    fn on_submit(
        &mut self,
        job_id: &str,
        at: f64,
        profile: &JobProfile,
        dag: Option<&Dag>,
        issued: AnswersAtSubmit,
    ) {
        if self
            .jobs
            .get(job_id)
            .is_some_and(|j| j.submitted_at.is_some())
        {
            let job = self.job_entry(job_id);
            note(job, format!("second submit at {at} ignored"));
            return;
        }
        let job = self.job_entry(job_id);
        job.failure_at_submit = issued.failure;
        job.profile = Some(profile.clone());
        job.dag = dag.cloned();
        job.submitted_at = Some(at);
        job.runtime_at_submit = issued.runtime;
        job.queue_wait_at_submit = issued.queue_wait;
    }

    /// Job `job_id` will run on `gpu_type` (event number `seq`, at `at`): its run time for
    /// that type is answered now (or read from the record of when it was) and kept.
    fn on_typed(&mut self, seq: i64, job_id: &str, at: f64, gpu_type: &str) {
        let done = self
            .jobs
            .get(job_id)
            .is_some_and(|j| j.finished_at.is_some());
        if done {
            let job = self.job_entry(job_id);
            note(
                job,
                format!("GPU type {gpu_type} at {at} after its finish ignored"),
            );
            return;
        }
        let answers = match self.recorded.remove(&seq) {
            Some(recorded) => recorded,
            None => {
                let scaling = crate::serve::advice::Scaling::bundled();
                let answers = AnswersAtSubmit {
                    runtime: crate::serve::advice::runtime_on_type(
                        self,
                        scaling.reshaper(),
                        job_id,
                        gpu_type,
                        at,
                    ),
                    ..AnswersAtSubmit::default()
                };
                if seq > self.answers_skipped_upto {
                    self.record_issued(seq, job_id, &answers);
                }
                answers
            }
        };
        let job = self.job_entry(job_id);
        job.gpu_type = Some(gpu_type.to_string());
        job.runtime_on_type = answers.runtime;
    }

    fn on_finish(
        &mut self,
        job_id: &str,
        at: f64,
        status: FinishStatus,
        duration: Option<f64>,
    ) -> Option<Outcome> {
        let job = self.job_entry(job_id);
        if job.finished_at.is_some() {
            note(job, format!("second finish at {at} ignored"));
            return None;
        }
        job.finished_at = Some(at);
        job.status = Some(status);
        let dur = duration.or_else(|| job.started_at.map(|s| (at - s).max(0.0)));
        job.duration = dur;
        let actual_wait = job
            .started_at
            .zip(job.submitted_at)
            .map(|(s, b)| (s - b).max(0.0));
        let outcome = Outcome {
            failure: job.failure_at_submit,
            job_id: job_id.to_string(),
            status,
            actual_runtime: dur,
            runtime: job.runtime_at_submit,
            actual_wait,
            queue_wait: job.queue_wait_at_submit,
            profile: job.profile.clone(),
        };
        Some(outcome)
    }

    /// "Now": the wall clock on live backends; on the simulator the latest event time
    /// (its accelerated clock), else the wall clock.
    pub fn now(&self) -> f64 {
        if self.wall_clock {
            return wall_now();
        }
        self.clock.unwrap_or_else(wall_now)
    }

    /// Why `kind` cannot answer: the reason its training was skipped, when known.
    fn not_available(&self, kind: ModelKind) -> PredictError {
        match self.not_trained.get(&kind) {
            Some(reason) => PredictError::NotTrained {
                kind: kind.name(),
                reason: reason.clone(),
            },
            None => PredictError::NotAvailable(kind.name()),
        }
    }

    /// The online state of `kind`, typed.
    fn state<S: 'static>(&self, kind: ModelKind) -> Option<&S> {
        self.states.get(&kind)?.as_any().downcast_ref()
    }

    /// The id the predictors know `job_id`'s latest run by (`job_id` itself when unknown).
    fn predictor_id(&self, job_id: &str) -> String {
        self.jobs
            .get(job_id)
            .map_or_else(|| job_id.to_string(), |j| run_id(&j.job_id, j.run))
    }

    /// `kind`'s online predictor asked about a job with `profile` submitted at `at`, after
    /// the profile's fields are checked against what the served model was trained on.
    fn predict_profile<O: OnlinePredictor + 'static>(
        &self,
        kind: ModelKind,
        job_id: &str,
        profile: &JobProfile,
        at: f64,
    ) -> Result<O::Answer, PredictError> {
        let online = self
            .state::<O>(kind)
            .ok_or_else(|| self.not_available(kind))?;
        self.check_fits(profile)?;
        let record = profile.to_record(&self.predictor_id(job_id), at);
        Ok(online.predict(&JobQuery { job: &record, at })?)
    }

    /// Runtime prediction for a job with `profile`, submitted at `at`: for an ingested job
    /// (`job_id`) its own submit is left out of its history, and jobs submitted at `at` or
    /// later are not seen, so asked at its submit time it is the answer at its submit.
    pub fn predict_runtime(
        &self,
        job_id: &str,
        profile: &JobProfile,
        at: f64,
    ) -> Result<RuntimeAnswer, PredictError> {
        let answer =
            self.predict_profile::<RuntimeOnline>(ModelKind::Runtime, job_id, profile, at)?;
        Ok(RuntimeAnswer::from(answer).within_limit(profile.requested_time))
    }

    /// Failure probability for a job with `profile`, submitted at `at` (an ingested job's
    /// own submit left out, as for the runtime).
    pub fn predict_failure(
        &self,
        job_id: &str,
        profile: &JobProfile,
        at: f64,
    ) -> Result<FailureAnswer, PredictError> {
        let answer =
            self.predict_profile::<FailureOnline>(ModelKind::Failure, job_id, profile, at)?;
        Ok(answer.into())
    }

    /// Convergence of an ingested running job from its metric points (accuracy when it
    /// reported any, else loss; wall time from its start) and its profile (`job_name` as the
    /// benchmark, `num_gpus` as accelerators, `gpu_type` as the accelerator model).
    pub fn predict_convergence(
        &self,
        job_id: &str,
    ) -> Result<ConvergenceAnswer, ConvergenceFailure> {
        let online = self
            .state::<ConvergenceOnline>(ModelKind::Convergence)
            .ok_or(ConvergenceFailure::Predict(PredictError::NotAvailable(
                ModelKind::Convergence.name(),
            )))?;
        online
            .predict_job(job_id)
            .map(ConvergenceAnswer::from)
            .map_err(|e| ConvergenceFailure::Input(e.to_string()))
    }

    /// Queue-wait prediction for a job with `profile`, submitted at `at`, behind the
    /// current queue as it stood for that submit: queued jobs submitted at `at` or later
    /// are not ahead of it, an ingested job is not ahead of itself, and its own submit is
    /// left out of its history (as for the runtime).
    pub fn predict_wait(
        &self,
        job_id: &str,
        profile: &JobProfile,
        at: f64,
    ) -> Result<WaitAnswer, PredictError> {
        let answer =
            self.predict_profile::<QueueWaitOnline>(ModelKind::QueueWait, job_id, profile, at)?;
        Ok(answer.into())
    }

    /// The queue-wait risk-split bound's online state (None when the served model has none).
    #[cfg(test)]
    pub fn wait_risk_state(&self) -> Option<&augur_predictor::RiskSplitState> {
        self.state::<QueueWaitOnline>(ModelKind::QueueWait)
            .and_then(QueueWaitOnline::risk_state)
    }
}

/// A service metric point as the predictors' contract carries it.
fn event_point(p: &MetricPoint) -> StepMetrics {
    StepMetrics {
        step: p.step,
        loss: p.loss,
        accuracy: p.accuracy,
        at: p.at,
    }
}

/// The id the predictors know a job's run by: the job id for the first run, `id#run` after.
fn run_id(job_id: &str, run: u32) -> String {
    if run <= 1 {
        job_id.to_string()
    } else {
        format!("{job_id}#{run}")
    }
}

fn note(job: &mut JobInfo, msg: String) {
    if job.anomalies.len() < KEEP_ANOMALIES {
        job.anomalies.push(msg);
    }
}
