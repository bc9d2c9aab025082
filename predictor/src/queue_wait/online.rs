//! The queue-wait predictor's online state: the history [`FeatureState`], the
//! [`QueueState`] (submits, starts, ends), the risk-split bound's [`RiskSplitState`], and
//! the deadlines of the bounds issued at submit. A job's outcome is a hit or a miss of its
//! risk group, taken when its bound runs out and judged against its group's bound then
//! ([`crate::calibration::AdaptiveBound`]).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::Arc;

use augur_datasets::{JobRecord, JobStatus};
use augur_features::{FeatureState, JobHandle};
use serde::{Deserialize, Serialize};

use super::predictor::{QueueWaitPrediction, QueueWaitPredictor};
use super::state::QueueState;
use crate::calibration::{AdaptiveBound, Outcome, RiskGroup, RiskSplitState};
use crate::contract::{Interval, JobEvent, JobQuery, OnlinePredictor};
use crate::feature_rows::with_row_buffer;
use crate::PredictorError;

/// Which calibration produced a queue-wait bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BoundSource {
    /// The risk-split bound, each group's offset following its own outcomes.
    RiskSplitOnline,
    /// The single conformal offset of training (a model without a risk split).
    StaticConformal,
}

/// A queue-wait prediction as served.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct QueueWaitOnlineAnswer {
    pub model_version: u32,
    pub seconds: f64,
    /// `[0, upper]`: the wait stays under `upper` with probability `coverage`.
    #[serde(flatten)]
    pub interval: Interval,
    /// The job's risk group when the model's bound is risk-split (`coverage` is then that
    /// group's level; the two groups together hold the model's overall level).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub risk_group: Option<RiskGroup>,
    /// Which calibration made the bound.
    pub calibration: BoundSource,
}

/// What the state knows of one job.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct WaitJob {
    /// Its id in the queue state (in order of first mention).
    num: u64,
    submitted_at: Option<f64>,
    started_at: Option<f64>,
    finished: bool,
    handle: Option<JobHandle>,
    /// The bound issued at its submit.
    issued: Option<IssuedBound>,
    /// Its bound's outcome went to the risk-split state already.
    observed: bool,
    /// Seconds after its submit of its bound's next look (the issued bound, then the bound
    /// in force at the last look while it still waited inside it).
    #[serde(default)]
    look: f64,
}

/// What the state keeps of a bound issued at a submit: its outcome is a hit or a miss of
/// its risk group, judged when it is known by the bound the group's offset gives the
/// job's raw bound then.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
struct IssuedBound {
    upper: f64,
    risk_group: Option<RiskGroup>,
    /// The bound model's output for the job (ln(1 + s)).
    raw: f64,
}

/// See the [module docs](self).
#[derive(Debug, Clone)]
pub struct QueueWaitOnline {
    model: Arc<QueueWaitPredictor>,
    model_version: u32,
    state: QueueWaitOnlineState,
}

/// What a [`QueueWaitOnline`] learned from the events, without its model: the part a
/// service's snapshot keeps (restored with [`QueueWaitPredictor::online_from`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct QueueWaitOnlineState {
    history: FeatureState,
    queue: QueueState,
    risk: Option<RiskSplitState>,
    /// (millisecond time a queued job's bound runs out, job id).
    deadlines: BinaryHeap<Reverse<(i64, String)>>,
    jobs: HashMap<String, WaitJob>,
    /// The queue id the next job mentioned gets (ids are never reused, also after
    /// [`OnlinePredictor::forget`]).
    next_num: u64,
}

/// Milliseconds, for ordering times in a heap.
fn millis(t: f64) -> i64 {
    (t * 1000.0).round() as i64
}

impl QueueWaitPredictor {
    /// The online state of this predictor (empty history and queue; the risk split at its
    /// deployment state), answering as `model_version`.
    pub fn online(self: Arc<Self>, model_version: u32) -> QueueWaitOnline {
        QueueWaitOnline {
            state: QueueWaitOnlineState {
                history: FeatureState::new(self.runtime.schema.clone()),
                queue: self.new_state(),
                risk: self.new_risk_state(),
                deadlines: BinaryHeap::new(),
                jobs: HashMap::new(),
                next_num: 0,
            },
            model: self,
            model_version,
        }
    }

    /// The online state `state` (saved from a state serving this model) serving this
    /// predictor as `model_version`; refused when its feature schema, queue capacity or
    /// risk split is not this model's.
    pub fn online_from(
        self: Arc<Self>,
        model_version: u32,
        state: QueueWaitOnlineState,
    ) -> Result<QueueWaitOnline, PredictorError> {
        let what = if state.history.schema() != &self.runtime.schema {
            Some("feature schema")
        } else if state.queue.capacity.to_bits() != self.new_state().capacity.to_bits() {
            Some("queue capacity")
        } else if state.risk.is_some() != self.risk.is_some() {
            Some("risk split")
        } else {
            None
        };
        if let Some(what) = what {
            return Err(PredictorError::StateMismatch {
                kind: "queue_wait",
                what,
            });
        }
        Ok(QueueWaitOnline {
            model: self,
            model_version,
            state,
        })
    }
}

impl QueueWaitOnline {
    /// What it learned from the events (to save; see [`QueueWaitPredictor::online_from`]).
    pub fn state(&self) -> &QueueWaitOnlineState {
        &self.state
    }

    /// The predictor it serves.
    pub fn model(&self) -> &Arc<QueueWaitPredictor> {
        &self.model
    }

    /// The queue state.
    pub fn queue(&self) -> &QueueState {
        &self.state.queue
    }

    /// The risk-split bound's online state (None when the model has no risk split).
    pub fn risk_state(&self) -> Option<&RiskSplitState> {
        self.state.risk.as_ref()
    }

    fn answer(&self, p: QueueWaitPrediction, calibration: BoundSource) -> QueueWaitOnlineAnswer {
        QueueWaitOnlineAnswer {
            model_version: self.model_version,
            seconds: p.seconds,
            interval: Interval {
                lower: 0.0,
                upper: p.upper,
                coverage: p.coverage,
            },
            risk_group: p.risk_group,
            calibration,
        }
    }

    fn entry(&mut self, job_id: &str) -> &mut WaitJob {
        let next = &mut self.state.next_num;
        self.state
            .jobs
            .entry(job_id.to_string())
            .or_insert_with(|| {
                let num = *next;
                *next += 1;
                WaitJob {
                    num,
                    submitted_at: None,
                    started_at: None,
                    finished: false,
                    handle: None,
                    issued: None,
                    observed: false,
                    look: 0.0,
                }
            })
    }

    /// The answer issued to `job` (queue id `num`) at its submit, from the state before it
    /// joins; the job joins the queue (and the risk split's window) when it is answered.
    /// Returns the bound model's raw output for the job too (NaN without a risk split).
    fn issue(
        &mut self,
        job: &JobRecord,
        num: u64,
    ) -> Result<(QueueWaitOnlineAnswer, f64), PredictorError> {
        let at = job.submit_time;
        let m = Arc::clone(&self.model);
        let (p, calibration, raw, qj) = with_row_buffer(m.n_features(), |row| {
            let qj = m.features_for(&mut self.state.history, &self.state.queue, job, at, row)?;
            let p = match &mut self.state.risk {
                Some(r) => {
                    let (p, score, raw) = m.predict_row_online(row, r);
                    r.record_submit(score);
                    if let Some(g) = p.risk_group {
                        r.issue(g);
                    }
                    (p, BoundSource::RiskSplitOnline, raw)
                }
                None => (m.predict_row(row), BoundSource::StaticConformal, f64::NAN),
            };
            Ok::<_, PredictorError>((p.0, p.1, p.2, qj))
        })?;
        if self.state.risk.is_some() {
            self.state
                .deadlines
                .push(Reverse((millis(at + p.upper), job.job_id.clone())));
        }
        // a duplicate id cannot reach here (second submits are ignored before)
        let _ = self.state.queue.submit(num, qj);
        Ok((self.answer(p, calibration), raw))
    }

    fn on_submit(
        &mut self,
        job: &JobRecord,
    ) -> Option<Result<QueueWaitOnlineAnswer, PredictorError>> {
        if self
            .state
            .jobs
            .get(&job.job_id)
            .is_some_and(|j| j.submitted_at.is_some())
        {
            // a second submit of the same job is ignored
            return None;
        }
        let num = self.entry(&job.job_id).num;
        let issued = self.issue(job, num);
        let handle = self.state.history.observe_submit(job);
        let entry = self.entry(&job.job_id);
        entry.submitted_at = Some(job.submit_time);
        entry.handle = Some(handle);
        entry.look = issued.as_ref().map_or(0.0, |(a, _)| a.interval.upper);
        entry.issued = issued.as_ref().ok().map(|&(a, raw)| IssuedBound {
            upper: a.interval.upper,
            risk_group: a.risk_group,
            raw,
        });
        Some(issued.map(|(a, _)| a))
    }

    fn on_start(&mut self, job_id: &str, at: f64) {
        let job = self.entry(job_id);
        if job.started_at.is_some() {
            return;
        }
        job.started_at = Some(at);
        let num = job.num;
        // the wait is known now, but taken as its bound's outcome only when the bound runs
        // out ([`crate::calibration::AdaptiveBound`]: counting quick starts at once would
        // count the hits before the misses)
        let _ = self.state.queue.start(num, at);
    }

    fn on_finish(&mut self, job_id: &str, at: f64, status: JobStatus, duration: Option<f64>) {
        let job = self.entry(job_id);
        if job.finished {
            return;
        }
        job.finished = true;
        let dur = duration.or_else(|| job.started_at.map(|s| (at - s).max(0.0)));
        let (num, handle) = (job.num, job.handle.take());
        if let (Some(d), Some(h)) = (dur, handle) {
            // the handle was issued by this state and is finished once
            let _ = self.state.history.observe_finish(h, at, d, status);
        }
        let _ = self.state.queue.end(num, at);
    }

    /// Jobs whose bound ran out by `now` give their group an outcome as the delayed-feedback
    /// replay takes it ([`crate::calibration::replay_delayed`]): judged at the instant their
    /// issued bound runs out against that bound, a hit when they had started within it, a
    /// miss when they still waited (a start after that instant is not seen). A job that left
    /// the queue without starting gives none (censored) and leaves its group's outcomes in
    /// flight.
    fn expire_bounds(&mut self, now: f64) {
        let Some(r) = &mut self.state.risk else {
            return;
        };
        while let Some(Reverse((t, _))) = self.state.deadlines.peek() {
            if *t > millis(now) {
                break;
            }
            let Some(Reverse((_, id))) = self.state.deadlines.pop() else {
                break;
            };
            let Some(job) = self.state.jobs.get_mut(&id) else {
                continue;
            };
            let (Some(w), Some(sub)) = (job.issued, job.submitted_at) else {
                continue;
            };
            let Some(g) = w.risk_group else {
                continue;
            };
            if job.observed {
                continue;
            }
            job.observed = true;
            if job.finished && job.started_at.is_none() {
                r.withdraw(g);
                continue;
            }
            // what was known at the look: a start after it is not (the replay's rule)
            let elapsed = job.look;
            let wait = job
                .started_at
                .map(|s| (s - sub).max(0.0))
                .filter(|w| *w <= elapsed);
            let outcome = AdaptiveBound::judge(job.look, elapsed, wait);
            r.observe(g, outcome == Outcome::Miss);
        }
    }

    /// Applies a start, finish or other non-submit event to the queue and history.
    fn apply(
        &mut self,
        event: &JobEvent<'_>,
    ) -> Option<Result<QueueWaitOnlineAnswer, PredictorError>> {
        match *event {
            JobEvent::Submitted { job } => return self.on_submit(job),
            JobEvent::Started { job_id, at } => self.on_start(job_id, at),
            JobEvent::Finished {
                job_id,
                at,
                status,
                duration,
            } => self.on_finish(job_id, at, status, duration),
            JobEvent::MetricPoints { job_id, .. } => {
                // the job is known from here on (its queue id follows first mention)
                self.entry(job_id);
            }
            JobEvent::Clock { .. } => {}
        }
        None
    }

    /// A started job about to be forgotten before its bound ran out gives its outcome now.
    fn settle(&mut self, job_id: &str) {
        let (Some(r), Some(job)) = (&mut self.state.risk, self.state.jobs.get_mut(job_id)) else {
            return;
        };
        if let (Some(w), Some(sub), Some(st), false) =
            (job.issued, job.submitted_at, job.started_at, job.observed)
        {
            if let Some(g) = w.risk_group {
                job.observed = true;
                let wait = st - sub;
                let miss = AdaptiveBound::judge(job.look, wait, Some(wait)) == Outcome::Miss;
                r.observe(g, miss);
            }
        }
    }
}

impl OnlinePredictor for QueueWaitOnline {
    type Answer = QueueWaitOnlineAnswer;

    /// Every event with a time expires the bounds that ran out by then: a submit first (it
    /// is answered with the offset those outcomes leave), any other event after it is
    /// applied (a start at the instant a bound runs out is within it). Submits are answered
    /// and join the history and the queue; starts move the job to running; finishes feed
    /// the history and leave the queue. A job's second submit, start or finish is ignored.
    fn observe(
        &mut self,
        event: &JobEvent<'_>,
    ) -> Option<Result<QueueWaitOnlineAnswer, PredictorError>> {
        let at = event.at();
        if let JobEvent::Submitted { job } = *event {
            if let Some(t) = at {
                self.expire_bounds(t);
            }
            return self.on_submit(job);
        }
        let answer = self.apply(event);
        if let Some(t) = at {
            self.expire_bounds(t);
        }
        answer
    }

    fn predict(&self, query: &JobQuery<'_>) -> Result<QueueWaitOnlineAnswer, PredictorError> {
        let m = &self.model;
        // the queue and history as a job submitted at `at` saw them: a job asking about
        // itself is not in its own history nor ahead of itself in the queue, and jobs
        // submitted at `at` or later are not seen (asked at its submit, the answer then)
        let own = self.state.jobs.get(&query.job.job_id);
        let earlier = self.state.queue.before(query.at, own.map(|j| j.num));
        let queue = earlier.as_ref().unwrap_or(&self.state.queue);
        let handle = own.and_then(|j| j.handle);
        let (p, calibration) = with_row_buffer(m.n_features(), |row| {
            m.features_before(&self.state.history, queue, query.job, query.at, handle, row)?;
            Ok::<_, PredictorError>(match &self.state.risk {
                Some(r) => (m.predict_row_online(row, r).0, BoundSource::RiskSplitOnline),
                None => (m.predict_row(row), BoundSource::StaticConformal),
            })
        })?;
        Ok(self.answer(p, calibration))
    }

    fn forget(&mut self, job_id: &str) -> bool {
        if !self.state.jobs.get(job_id).is_some_and(|j| j.finished) {
            return false;
        }
        self.settle(job_id);
        self.state.jobs.remove(job_id).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calibration::{high_level, RiskGroup, RiskScore, RiskSplitBound};
    use crate::queue_wait::{known_wait, wait_ceiling, QueueWaitData, QueueWaitTrainer};
    use crate::runtime::{BaseMargin, ChoiceInputs, PointChoice};
    use crate::synthetic_trace::{events, job_event as event, trace, Kind};
    use augur_models::linear::LinearParams;
    use augur_models::{AnyModel, Fit, Matrix, Predict, TrainSet};

    /// A small predictor trained on the first 500 jobs of a synthetic trace of 700, the
    /// trace and the training data (with every job's feature row).
    fn fixture() -> (QueueWaitPredictor, Vec<JobRecord>, QueueWaitData) {
        let jobs = trace(700, 5);
        let mut trainer = QueueWaitTrainer::default().with_trees(20);
        trainer.runtime.params.n_trees = 20;
        let train: Vec<usize> = (0..500).collect();
        let data = QueueWaitData::build(&jobs, &train, &trainer.runtime, trainer.capacity_quantile)
            .unwrap();
        let rows: Vec<usize> = train
            .iter()
            .copied()
            .filter(|&i| known_wait(&jobs[i]).is_some())
            .collect();
        let p = trainer.train(&data, &rows).unwrap();
        (p, jobs, data)
    }

    /// A risk split over the model's bound (every job in the low group until the window
    /// fills), so the online plumbing is exercised whatever the search chose.
    fn with_risk_split(mut p: QueueWaitPredictor) -> QueueWaitPredictor {
        p.risk = Some(RiskSplitBound {
            score: RiskScore::UpperModel,
            share_low: 0.6,
            level_low: 0.93,
            level_high: high_level(0.95, 0.6, 0.93),
            offset_low: p.upper_offset - 1.0,
            offset_high: p.upper_offset + 1.0,
            step: 0.05,
            window: 100,
            threshold: f64::INFINITY,
            seed_scores: Vec::new(),
        });
        p
    }

    #[test]
    fn a_model_saved_with_a_risk_classifier_still_loads_and_splits_by_it() {
        // training no longer fits the classifier score; a model saved with one answers by it
        let (p, jobs, data) = fixture();
        let d = data.n_features;
        let rows: Vec<usize> = (0..jobs.len())
            .filter(|&i| known_wait(&jobs[i]).is_some())
            .collect();
        let x: Vec<f32> = rows
            .iter()
            .flat_map(|&i| data.x[i * d..(i + 1) * d].iter().copied())
            .collect();
        let m = Matrix::new(&x, rows.len(), d).unwrap();
        let long: Vec<f64> = rows
            .iter()
            .map(|&i| f64::from(u8::from(data.y_log[i] > 3.0)))
            .collect();
        let model = AnyModel::Linear(
            LinearParams::default()
                .fit(&TrainSet::new(m, &long, None).unwrap())
                .unwrap(),
        );
        let scores: Vec<f64> = (0..rows.len())
            .map(|r| model.predict_row(m.row(r)))
            .collect();
        let threshold = crate::metrics::quantile(&scores, 0.5);
        let mut p = with_risk_split(p);
        if let Some(r) = p.risk.as_mut() {
            r.score = RiskScore::Classifier {
                model,
                threshold_s: 20.0,
            };
            r.threshold = threshold;
        }
        let saved = serde_json::to_string(&p).unwrap();
        let loaded: QueueWaitPredictor = serde_json::from_str(&saved).unwrap();
        let (want, got) = (
            p.predict_batch(&m).unwrap(),
            loaded.predict_batch(&m).unwrap(),
        );
        let mut high = 0;
        for (r, (w, g)) in want.iter().zip(&got).enumerate() {
            assert_eq!((w.seconds, w.upper), (g.seconds, g.upper), "row {r}");
            let group = RiskGroup::of(scores[r], threshold);
            assert_eq!(g.risk_group, Some(group), "row {r}");
            high += usize::from(group == RiskGroup::High);
        }
        assert!(
            high > 0 && high < rows.len(),
            "{high} of {} high",
            rows.len()
        );
    }

    #[test]
    fn answers_at_submit_equal_predict_before_it_and_the_replayed_rows() {
        let (mut p, jobs, data) = fixture();
        p.risk = None;
        let p = Arc::new(p);
        let d = data.n_features;
        let mut online = Arc::clone(&p).online(3);
        for (at, i, kind) in events(&jobs) {
            let ev = event(&jobs, i, kind, at);
            if kind != Kind::Submitted {
                assert!(online.observe(&ev).is_none());
                continue;
            }
            let before = online.predict(&JobQuery { job: &jobs[i], at }).unwrap();
            let issued = online.observe(&ev).unwrap().unwrap();
            assert_eq!(issued, before, "job {i}");
            // the online history and queue give the trace replay's feature row
            let want = p.predict_row(&data.x[i * d..(i + 1) * d]);
            assert_eq!(
                (
                    issued.seconds,
                    issued.interval.upper,
                    issued.interval.coverage
                ),
                (want.seconds, want.upper, want.coverage),
                "job {i}"
            );
            assert_eq!(issued.calibration, BoundSource::StaticConformal);
            assert_eq!((issued.interval.lower, issued.model_version), (0.0, 3));
        }
        assert_eq!(
            online.queue().queued_jobs() + online.queue().running_jobs(),
            0
        );
    }

    /// A runtime point choice that always takes its base (a constant 1 s): the served run
    /// time of every job.
    fn always_base() -> PointChoice {
        let gap = [0.0f32, 1.0, 2.0, 3.0];
        let take = [5.0; 4];
        let x = Matrix::new(&gap, 4, 1).unwrap();
        let model = LinearParams::default()
            .fit(&TrainSet::new(x, &take, None).unwrap())
            .unwrap();
        PointChoice {
            margin: BaseMargin {
                columns: Vec::new(),
                default: 0.0,
            },
            model: AnyModel::Linear(model),
            inputs: ChoiceInputs::Gap,
        }
    }

    #[test]
    fn queue_features_read_the_runtime_ensemble_not_the_served_point() {
        let (mut p, jobs, data) = fixture();
        p.risk = None;
        let d = data.n_features;
        let h = p.runtime.schema.len();
        let served_before: Vec<f64> = (0..jobs.len())
            .map(|i| p.runtime.predict_log(&data.x[i * d..i * d + h]))
            .collect();
        p.runtime.choice = Some(always_base());
        // the choice moves the served point (to ln 1 s) ...
        let moved = (0..jobs.len())
            .filter(|&i| {
                let served = p.runtime.predict_log(&data.x[i * d..i * d + h]);
                served == 0.0 && served != served_before[i]
            })
            .count();
        assert_eq!(moved, jobs.len());
        // ... but the online answers still equal the replayed rows built without it
        let p = Arc::new(p);
        let mut online = Arc::clone(&p).online(1);
        for (at, i, kind) in events(&jobs) {
            let ev = event(&jobs, i, kind, at);
            let Some(issued) = online.observe(&ev) else {
                continue;
            };
            let issued = issued.unwrap();
            let want = p.predict_row(&data.x[i * d..(i + 1) * d]);
            assert_eq!(
                (issued.seconds, issued.interval.upper),
                (want.seconds, want.upper),
                "job {i}"
            );
        }
    }

    #[test]
    fn issued_bounds_follow_the_replay_of_each_groups_late_outcomes() {
        let (p, jobs, data) = fixture();
        let split = with_risk_split(p);
        let d = data.n_features;
        let m = augur_models::Matrix::new(&data.x, jobs.len(), d).unwrap();
        let raw = split.upper_raw(&m).unwrap();
        let scores = split.risk_scores(&m).unwrap().unwrap();
        // the trace replayed as the evaluation does: outcomes taken when bounds run out
        let mut order: Vec<usize> = (0..jobs.len()).collect();
        order.sort_by(|&a, &b| jobs[a].submit_time.total_cmp(&jobs[b].submit_time));
        let timed: Vec<(f64, f64, f64, f64)> = order
            .iter()
            .map(|&i| {
                let w = known_wait(&jobs[i]).unwrap_or(f64::INFINITY);
                (jobs[i].submit_time, w, raw[i], scores[i])
            })
            .collect();
        let mut replay_state = split.new_risk_state().unwrap();
        let replayed = replay_state.replay(&timed);
        let split = Arc::new(split);
        let mut online = Arc::clone(&split).online(1);
        let mut issued = vec![None; jobs.len()];
        for (at, i, kind) in events(&jobs) {
            if let Some(a) = online.observe(&event(&jobs, i, kind, at)) {
                issued[i] = Some(a.unwrap());
            }
        }
        let mut moved = [false; 2];
        for (k, &i) in order.iter().enumerate() {
            let a = issued[i].expect("answered at submit");
            let (b, g) = replayed[k];
            assert_eq!(a.risk_group, Some(g), "job {i}");
            let want = split.cap_bound(b.exp_m1(), a.seconds);
            assert!(
                (a.interval.upper - want).abs() <= 1e-6 * want.max(1.0),
                "job {i}: online {} replay {want}",
                a.interval.upper
            );
            let start = match g {
                RiskGroup::Low => split.risk.as_ref().unwrap().offset_low,
                RiskGroup::High => split.risk.as_ref().unwrap().offset_high,
            };
            moved[usize::from(g == RiskGroup::High)] |= (b - raw[i] - start).abs() > 1e-9;
        }
        assert_eq!(moved, [true, true], "both groups' offsets moved");
    }

    #[test]
    fn no_wait_answer_passes_the_ceiling_the_history_allows() {
        let (p, jobs, data) = fixture();
        // the rule: twice the 99.9% quantile of the training waits, at least an hour
        let train_waits: Vec<f64> = (0..500).filter_map(|i| known_wait(&jobs[i])).collect();
        let want = (2.0 * crate::metrics::quantile(&train_waits, 0.999)).max(3600.0);
        // (the trainer sums the same waits in another order: equal to the last bits)
        let close = |c: Option<f64>| c.is_some_and(|c| (c - want).abs() <= 1e-9 * want);
        assert!(close(p.wait_ceiling_s), "{:?} vs {want}", p.wait_ceiling_s);
        assert!(close(wait_ceiling(&train_waits)), "{want}");
        assert_eq!(wait_ceiling(&[]), None);
        assert_eq!(wait_ceiling(&[10.0]), Some(3600.0));
        // a ceiling far below the model's bounds: every answer, online and from rows, stops there
        let mut p = with_risk_split(p);
        let ceiling = 30.0;
        p.wait_ceiling_s = Some(ceiling);
        let p = Arc::new(p);
        let mut online = Arc::clone(&p).online(1);
        let mut at_ceiling = 0;
        for (at, i, kind) in events(&jobs) {
            if let Some(a) = online.observe(&event(&jobs, i, kind, at)) {
                let a = a.unwrap();
                assert!(a.seconds <= ceiling && a.interval.upper <= ceiling, "{a:?}");
                at_ceiling += usize::from(a.interval.upper == ceiling);
            }
        }
        assert!(at_ceiling > 100, "{at_ceiling}");
        let d = data.n_features;
        for i in 0..jobs.len() {
            let r = p.predict_row(&data.x[i * d..(i + 1) * d]);
            assert!(r.seconds <= ceiling && r.upper <= ceiling && r.upper >= r.seconds);
        }
        assert_eq!(p.cap_bound(f64::NAN, 1.0), ceiling);
        assert_eq!(p.cap_bound(f64::INFINITY, 1.0), ceiling);
    }

    #[test]
    fn a_job_still_queued_past_its_bound_is_a_miss_once() {
        let (p, jobs, _) = fixture();
        let mut online = Arc::new(with_risk_split(p)).online(1);
        let j = &jobs[600];
        let a = online
            .observe(&JobEvent::Submitted { job: j })
            .unwrap()
            .unwrap();
        assert_eq!(a.risk_group, Some(RiskGroup::Low));
        assert_eq!(a.calibration, BoundSource::RiskSplitOnline);
        let low = online.risk_state().unwrap().low.offset;
        // the bound runs out: a miss before the job ever starts
        let late = j.submit_time + a.interval.upper + 10.0;
        online.observe(&JobEvent::Clock { at: late });
        let after = online.risk_state().unwrap().low.offset;
        assert!(
            (after - (low + 0.05 * 0.93)).abs() < 1e-12,
            "{low} → {after}"
        );
        // its late start is not counted again, nor is a second submit answered
        online.observe(&JobEvent::Started {
            job_id: &j.job_id,
            at: late + 5.0,
        });
        assert!(online.observe(&JobEvent::Submitted { job: j }).is_none());
        assert_eq!(online.risk_state().unwrap().low.offset, after);
        assert_eq!(online.queue().running_jobs(), 1);
        let json = serde_json::to_value(a).unwrap();
        assert_eq!(json["risk_group"], "low");
        assert_eq!(json["calibration"], "risk_split_online");
    }
}
