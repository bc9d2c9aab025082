//! The runtime predictor's online state: the history [`FeatureState`] fed by submits and
//! finishes, and the [`ConformalWindow`] recalibrated from finished jobs with the interval
//! offsets each was issued at its submit.

use std::collections::HashMap;
use std::sync::Arc;

use augur_datasets::split::clamp_duration;
use augur_datasets::{JobRecord, JobStatus};
use augur_features::{FeatureState, JobHandle};
use serde::{Deserialize, Serialize};

use super::predictor::{answered_offsets, runtime_ceiling, RuntimePrediction, RuntimePredictor};
use crate::calibration::{ConformalWindow, ONLINE_WINDOW};
use crate::contract::{Interval, JobEvent, JobQuery, OnlinePredictor};
use crate::feature_rows::with_row_buffer;
use crate::PredictorError;

/// Which calibration produced a runtime interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IntervalSource {
    /// Recalibrated on the residuals of recently finished jobs.
    OnlineConformal,
    /// The offsets calibrated at training (no residual observed yet).
    StaticConformal,
}

/// A runtime prediction as served: point, interval and the model that made it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RuntimeOnlineAnswer {
    pub model_version: u32,
    pub seconds: f64,
    /// `[lower, upper]` seconds and its nominal coverage.
    #[serde(flatten)]
    pub interval: Interval,
    /// Which calibration made the interval (serialised as `interval`).
    #[serde(rename = "interval")]
    pub calibration: IntervalSource,
}

/// The model's point (ln seconds) behind an issued answer and the ln-space offsets of its
/// interval as answered ([`answered_offsets`]).
type IssuedPoint = (f64, (f64, f64));

/// What the state knows of one job.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct RuntimeJob {
    submitted: bool,
    started_at: Option<f64>,
    finished: bool,
    handle: Option<JobHandle>,
    /// The model's point (ln seconds, before any ceiling) and the ln-space offsets of the
    /// interval answered at its submit (cut at its ceiling: [`answered_offsets`]).
    issued: Option<(f64, (f64, f64))>,
    /// Submitted after the model's training history: its outcome joins the long memory.
    after_training: bool,
}

/// What a [`RuntimeOnline`] learned from the events, without its model: the part a
/// service's snapshot keeps (restored with [`RuntimePredictor::online_from`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RuntimeOnlineState {
    features: FeatureState,
    window: ConformalWindow,
    jobs: HashMap<String, RuntimeJob>,
}

/// See the [module docs](self).
#[derive(Debug, Clone)]
pub struct RuntimeOnline {
    model: Arc<RuntimePredictor>,
    model_version: u32,
    state: RuntimeOnlineState,
}

impl RuntimePredictor {
    /// The online state of this predictor (no history yet; the window seeded with its
    /// calibration residuals), answering as `model_version`.
    pub fn online(self: Arc<Self>, model_version: u32) -> RuntimeOnline {
        RuntimeOnline {
            state: RuntimeOnlineState {
                features: FeatureState::new(self.schema.clone()),
                window: self.conformal_window(ONLINE_WINDOW),
                jobs: HashMap::new(),
            },
            model: self,
            model_version,
        }
    }

    /// The online state `state` (saved from a state serving this model) serving this
    /// predictor as `model_version`, its window never narrower than this model's static
    /// interval; refused when its feature schema is not this model's.
    pub fn online_from(
        self: Arc<Self>,
        model_version: u32,
        mut state: RuntimeOnlineState,
    ) -> Result<RuntimeOnline, PredictorError> {
        if state.features.schema() != &self.schema {
            return Err(PredictorError::StateMismatch {
                kind: "runtime",
                what: "feature schema",
            });
        }
        state.window = state.window.with_floor(self.interval_log);
        // a state saved before the memory starts it from the calibration residuals
        if state.window.memory().is_none() {
            if let Some(memory) = self.residual_memory() {
                state.window = state.window.with_memory(memory);
            }
        }
        Ok(RuntimeOnline {
            model: self,
            model_version,
            state,
        })
    }
}

impl RuntimeOnline {
    /// What it learned from the events (to save; see [`RuntimePredictor::online_from`]).
    pub fn state(&self) -> &RuntimeOnlineState {
        &self.state
    }

    /// The predictor it serves.
    pub fn model(&self) -> &Arc<RuntimePredictor> {
        &self.model
    }

    /// The online conformal window.
    pub fn window(&self) -> &ConformalWindow {
        &self.state.window
    }

    /// The answer for `job` of point `log` (ln seconds) and ln-space interval `offsets`
    /// (the static ones when None), none of it past the job's time limit and grace
    /// ([`runtime_ceiling`]).
    fn answer(
        &self,
        job: &JobRecord,
        log: f64,
        offsets: Option<(f64, f64)>,
    ) -> RuntimeOnlineAnswer {
        let (offsets, calibration) = match offsets {
            Some(o) => (o, IntervalSource::OnlineConformal),
            None => (self.model.interval_log, IntervalSource::StaticConformal),
        };
        let p = RuntimePrediction::answered(
            log,
            offsets,
            self.model.coverage,
            runtime_ceiling(job.requested_time),
        );
        RuntimeOnlineAnswer {
            model_version: self.model_version,
            seconds: p.seconds,
            interval: Interval {
                lower: p.lower,
                upper: p.upper,
                coverage: p.coverage,
            },
            calibration,
        }
    }

    /// The answer issued to `job` at its submit (from the state before it joins), and the
    /// model's point (ln seconds) and the ln-space offsets behind it.
    fn issue(
        &mut self,
        job: &JobRecord,
    ) -> Result<(RuntimeOnlineAnswer, IssuedPoint), PredictorError> {
        let at = job.submit_time;
        let log = with_row_buffer(self.model.schema.len(), |row| {
            self.state.features.features_for(job, at, row)?;
            Ok::<_, PredictorError>(self.model.predict_log(row))
        })?;
        let offsets = self.state.window.offsets();
        let answer = self.answer(job, log, offsets);
        let answered = answered_offsets(
            log,
            offsets.unwrap_or(self.model.interval_log),
            runtime_ceiling(job.requested_time),
        );
        Ok((answer, (log, answered)))
    }

    fn on_submit(
        &mut self,
        job: &JobRecord,
    ) -> Option<Result<RuntimeOnlineAnswer, PredictorError>> {
        if self
            .state
            .jobs
            .get(&job.job_id)
            .is_some_and(|j| j.submitted)
        {
            // a second submit of the same job is ignored
            return None;
        }
        let issued = self.issue(job);
        let handle = self.state.features.observe_submit(job);
        let entry = self.state.jobs.entry(job.job_id.clone()).or_default();
        entry.submitted = true;
        entry.handle = Some(handle);
        entry.issued = issued.as_ref().ok().map(|(_, o)| *o);
        entry.after_training = self.model.is_after_training(job.submit_time);
        Some(issued.map(|(a, _)| a))
    }

    fn on_finish(&mut self, job_id: &str, at: f64, status: JobStatus, duration: Option<f64>) {
        let job = self.state.jobs.entry(job_id.to_string()).or_default();
        if job.finished {
            return;
        }
        job.finished = true;
        let dur = duration.or_else(|| job.started_at.map(|s| (at - s).max(0.0)));
        let (handle, issued, after_training) =
            (job.handle.take(), job.issued.take(), job.after_training);
        let Some(d) = dur else {
            return;
        };
        if let Some(h) = handle {
            // the handle was issued by this state and is finished once
            let _ = self.state.features.observe_finish(h, at, d, status);
        }
        if let Some((log, offsets)) = issued {
            let resid = clamp_duration(d).ln() - log;
            self.state.window.observe_outcome(resid, Some(offsets));
            if after_training {
                self.state.window.remember(resid);
            }
        }
    }
}

impl OnlinePredictor for RuntimeOnline {
    type Answer = RuntimeOnlineAnswer;

    /// Submits are answered and join the history; starts give the run time when a finish
    /// does not; finishes feed the history and, for jobs answered at submit, the window
    /// (their residual, and whether it fell inside the interval issued). A job's second
    /// submit, start or finish is ignored.
    fn observe(
        &mut self,
        event: &JobEvent<'_>,
    ) -> Option<Result<RuntimeOnlineAnswer, PredictorError>> {
        match *event {
            JobEvent::Submitted { job } => return self.on_submit(job),
            JobEvent::Started { job_id, at } => {
                let job = self.state.jobs.entry(job_id.to_string()).or_default();
                if job.started_at.is_none() {
                    job.started_at = Some(at);
                }
            }
            JobEvent::Finished {
                job_id,
                at,
                status,
                duration,
            } => self.on_finish(job_id, at, status, duration),
            JobEvent::MetricPoints { .. } | JobEvent::Clock { .. } => {}
        }
        None
    }

    /// The answer for a job submitted at `query.at`, from the state as it stood before that
    /// submit ([`FeatureState::features_before`]): submits at `at` or later are left out, and
    /// so is the job's own submit when this state holds it unfinished. Asked at a job's
    /// submit time with nothing ingested since, that is the answer issued at its submit.
    fn predict(&self, query: &JobQuery<'_>) -> Result<RuntimeOnlineAnswer, PredictorError> {
        let own = self
            .state
            .jobs
            .get(&query.job.job_id)
            .and_then(|j| j.handle);
        let log = with_row_buffer(self.model.schema.len(), |row| {
            self.state
                .features
                .features_before(query.job, query.at, own, row)?;
            Ok::<_, PredictorError>(self.model.predict_log(row))
        })?;
        Ok(self.answer(query.job, log, self.state.window.current_offsets()))
    }

    fn forget(&mut self, job_id: &str) -> bool {
        if !self.state.jobs.get(job_id).is_some_and(|j| j.finished) {
            return false;
        }
        self.state.jobs.remove(job_id).is_some()
    }
}

#[cfg(test)]
mod tests {
    use augur_features::{batch_features, FeatureSchema};

    use super::*;
    use crate::calibration::ResidualMemory;
    use crate::runtime::LIMIT_GRACE_S;
    use crate::synthetic_trace::{events, job_event as event, trace, Kind};
    use crate::RuntimeTrainer;

    /// A small predictor trained on the first 300 jobs of a synthetic trace of 400, the
    /// trace and its batch feature rows.
    fn fixture() -> (Arc<RuntimePredictor>, Vec<JobRecord>, Vec<f32>) {
        let jobs = trace(400, 11);
        let schema = FeatureSchema::for_jobs(&jobs[..300]);
        let x = batch_features(&jobs, &schema);
        let y: Vec<f64> = jobs
            .iter()
            .map(|j| clamp_duration(j.duration.unwrap_or(1.0)).ln())
            .collect();
        let mut trainer = RuntimeTrainer::default();
        trainer.params.n_trees = 30;
        let rows: Vec<usize> = (0..300).collect();
        let p = trainer.train(&schema, &x, &y, &rows).unwrap();
        (Arc::new(p), jobs, x)
    }

    #[test]
    fn answers_at_submit_equal_predict_before_and_after_it_and_the_batch_features() {
        let (model, jobs, x) = fixture();
        let d = model.schema.len();
        let mut online = Arc::clone(&model).online(7);
        let mut answered = 0;
        for (at, i, kind) in events(&jobs) {
            if kind == Kind::Submitted {
                let query = JobQuery { job: &jobs[i], at };
                let before = online.predict(&query).unwrap();
                let issued = online.observe(&event(&jobs, i, kind, at)).unwrap().unwrap();
                assert_eq!(issued, before, "job {i}");
                // asked right after, the state leaves the job's own submit out: the same
                assert_eq!(online.predict(&query).unwrap(), issued, "job {i} after");
                // the online features are the batch replay's, bit for bit
                let want = model.predict_log(&x[i * d..(i + 1) * d]).exp();
                assert_eq!(issued.seconds.to_bits(), want.to_bits(), "job {i}");
                assert_eq!(issued.model_version, 7);
                assert_eq!(issued.calibration, IntervalSource::OnlineConformal);
                assert!(issued.interval.contains(issued.seconds), "{issued:?}");
                answered += 1;
            } else {
                assert!(online.observe(&event(&jobs, i, kind, at)).is_none());
            }
        }
        assert_eq!(answered, jobs.len());
    }

    #[test]
    fn finished_jobs_move_the_window_and_repeats_are_ignored() {
        let (model, jobs, _) = fixture();
        let rows: Vec<usize> = (0..300).collect();
        let model = Arc::new((*model).clone().trained_on(&jobs, &rows));
        let mut online = Arc::clone(&model).online(1);
        let remembered = |o: &RuntimeOnline| o.window().memory().map(ResidualMemory::len);
        let seeded = online.window().len();
        assert_eq!(seeded, model.calibration_residuals.len());
        let j = &jobs[350];
        let issued = online
            .observe(&JobEvent::Submitted { job: j })
            .unwrap()
            .unwrap();
        assert!(online.observe(&JobEvent::Submitted { job: j }).is_none());
        let (alpha, offsets) = (online.window().alpha(), online.window().current_offsets());
        let (lo, hi) = offsets.expect("seeded");
        let memory = remembered(&online).expect("a memory");
        // a run 50 times longer than predicted: a miss of the interval issued at submit
        let finished = JobEvent::Finished {
            job_id: &j.job_id,
            at: j.submit_time + 1.0,
            status: JobStatus::Completed,
            duration: Some(issued.seconds * 50.0),
        };
        online.observe(&finished);
        assert_eq!(online.window().len(), seeded + 1);
        assert!(
            online.window().alpha() < alpha,
            "a miss lowers the working level"
        );
        // submitted after the training history: its outcome joins the long memory, and the
        // answer is no narrower
        assert_eq!(remembered(&online), Some(memory + 1));
        let (lo2, hi2) = online.window().current_offsets().expect("seeded");
        assert!(lo2 <= lo && hi2 >= hi, "{offsets:?} -> {lo2} {hi2}");
        // a second finish, and a finish of a job never submitted, change nothing
        let (len, alpha) = (online.window().len(), online.window().alpha());
        online.observe(&finished);
        online.observe(&JobEvent::Finished {
            job_id: "never-submitted",
            at: 0.0,
            status: JobStatus::Failed,
            duration: Some(10.0),
        });
        assert_eq!(
            (online.window().len(), online.window().alpha()),
            (len, alpha)
        );
        assert_eq!(remembered(&online), Some(memory + 1));
    }

    #[test]
    fn only_outcomes_of_jobs_submitted_after_training_join_the_long_memory() {
        let (model, jobs, _) = fixture();
        let rows: Vec<usize> = (0..300).collect();
        let seeded = model.calibration_residuals.len() as u64;
        let replay = |model: RuntimePredictor| {
            let mut online = Arc::new(model).online(1);
            for (at, i, kind) in events(&jobs) {
                online.observe(&event(&jobs, i, kind, at));
            }
            online.window().memory().map(ResidualMemory::len)
        };
        let trained = (*model).clone().trained_on(&jobs, &rows);
        let until = trained.trained_until.expect("training jobs");
        // before any outcome, the memory holds the calibration residuals
        assert_eq!(
            trained.residual_memory(),
            Some(ResidualMemory::new(
                &model.calibration_residuals,
                model.coverage
            ))
        );
        let later = jobs
            .iter()
            .filter(|j| j.submit_time > until && j.duration.is_some())
            .count() as u64;
        assert!(later > 50, "{later}");
        // the training history replayed (in sample) is left out; every later outcome is in
        assert_eq!(replay(trained), Some(seeded + later));
        // a model that does not know when its training history ends (saved before it was
        // recorded) has no memory: its floor is the static interval
        assert_eq!(replay((*model).clone()), None);
    }

    #[test]
    fn a_saved_state_is_restored_onto_its_model_only() {
        let (model, jobs, _) = fixture();
        let rows: Vec<usize> = (0..250).collect();
        let model = Arc::new((*model).clone().trained_on(&jobs, &rows));
        let mut online = Arc::clone(&model).online(3);
        for (at, i, kind) in events(&jobs[..350]) {
            online.observe(&event(&jobs, i, kind, at));
        }
        let q = JobQuery {
            job: &jobs[380],
            at: jobs[380].submit_time,
        };
        // saved as text and read back: the window's long memory comes back whole
        let saved = serde_json::to_string(online.state()).unwrap();
        let restored = Arc::clone(&model)
            .online_from(3, serde_json::from_str(&saved).unwrap())
            .unwrap();
        let memory = online.window().memory().expect("a memory");
        assert!(memory.len() > model.calibration_residuals.len() as u64);
        assert_eq!(restored.window().memory(), Some(memory));
        assert_eq!(restored.predict(&q).unwrap(), online.predict(&q).unwrap());
        let mut other = (*model).clone();
        other.schema.version += 1;
        let err = Arc::new(other)
            .online_from(3, online.state().clone())
            .unwrap_err();
        assert!(
            matches!(
                err,
                PredictorError::StateMismatch {
                    what: "feature schema",
                    ..
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn no_answer_runs_past_the_time_limit_and_its_grace() {
        let (model, jobs, _) = fixture();
        let mut online = Arc::clone(&model).online(1);
        let mut capped = 0;
        for (at, i, kind) in events(&jobs) {
            // every other job asks for a minute: far below what the model predicts
            let mut job = jobs[i].clone();
            if i % 2 == 0 {
                job.requested_time = Some(60.0);
            }
            let ev = match kind {
                Kind::Submitted => JobEvent::Submitted { job: &job },
                _ => event(&jobs, i, kind, at),
            };
            let Some(a) = online.observe(&ev) else {
                continue;
            };
            let a = a.unwrap();
            let ceiling = runtime_ceiling(job.requested_time).unwrap();
            assert_eq!(ceiling, job.requested_time.unwrap() + LIMIT_GRACE_S);
            assert!(
                a.seconds <= ceiling && a.interval.upper <= ceiling,
                "job {i}: {a:?} past {ceiling}"
            );
            assert!(a.interval.lower <= a.seconds && a.seconds <= a.interval.upper);
            capped += usize::from(a.interval.upper == ceiling);
        }
        assert!(capped > jobs.len() / 4, "{capped} answers at the ceiling");
        // without a known limit there is no ceiling
        assert_eq!(runtime_ceiling(None), None);
        assert_eq!(runtime_ceiling(Some(f64::NAN)), None);
    }

    #[test]
    fn an_outcome_is_judged_by_the_interval_answered_cut_at_the_limit() {
        let (model, mut jobs, _) = fixture();
        // a third of the jobs killed at their limit (the run they wanted was longer: the
        // duration is a lower bound of it), a third whose limit was raised after submit
        // (it ran a minute past the ceiling it was answered under)
        for (i, j) in jobs.iter_mut().enumerate() {
            let (Some(d), Some(start)) = (j.duration, j.start_time) else {
                continue;
            };
            match i % 3 {
                0 => {
                    let limit = (d * 0.6).max(60.0);
                    j.requested_time = Some(limit);
                    j.duration = Some(limit + 30.0);
                    j.end_time = Some(start + limit + 30.0);
                    j.status = JobStatus::Killed;
                }
                1 => {
                    if let Some(c) = runtime_ceiling(j.requested_time) {
                        j.duration = Some(c + 60.0);
                        j.end_time = Some(start + c + 60.0);
                    }
                }
                _ => {}
            }
        }
        let mut online = Arc::clone(&model).online(1);
        let mut answers = HashMap::new();
        let (mut killed_covered, mut past_ceiling) = (0, 0);
        for (at, i, kind) in events(&jobs) {
            let before = online.window().alpha();
            let answer = online.observe(&event(&jobs, i, kind, at));
            if let Some(a) = answer {
                answers.insert(i, a.unwrap());
                continue;
            }
            if kind != Kind::Finished {
                continue;
            }
            let (a, d) = (answers[&i], clamp_duration(jobs[i].duration.unwrap()));
            let after = online.window().alpha();
            // the level rises on a hit and falls on a miss (it stays at 0 on a miss there)
            let judged_miss = after < before || (after == 0.0 && before == 0.0);
            assert_eq!(
                judged_miss,
                !a.interval.contains(d),
                "job {i}: ran {d} s, answered {a:?}, level {before} -> {after}"
            );
            if i % 3 == 0 {
                killed_covered += usize::from(a.interval.contains(d));
            }
            if i % 3 == 1 && runtime_ceiling(jobs[i].requested_time).is_some_and(|c| d > c) {
                // past the ceiling its answer stopped at: a miss, whatever the offsets say
                assert!(judged_miss, "job {i}: ran {d} s past {a:?}");
                past_ceiling += 1;
            }
        }
        assert!(killed_covered > 20, "{killed_covered} killed jobs covered");
        assert!(past_ceiling > 10, "{past_ceiling} jobs past the ceiling");
    }

    #[test]
    fn without_calibration_residuals_the_static_interval_is_served() {
        let (model, jobs, _) = fixture();
        let mut bare = (*model).clone();
        bare.calibration_residuals.clear();
        let online = Arc::new(bare).online(2);
        let a = online
            .predict(&JobQuery {
                job: &jobs[0],
                at: jobs[0].submit_time,
            })
            .unwrap();
        assert_eq!(a.calibration, IntervalSource::StaticConformal);
        assert_eq!(a.interval.coverage, model.coverage);
        let json = serde_json::to_value(a).unwrap();
        assert_eq!(json["interval"], "static_conformal");
        assert!(json["lower"].is_number() && json["upper"].is_number());
    }
}
