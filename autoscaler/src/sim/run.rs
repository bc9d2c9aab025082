//! Replaying a trace under a policy: ask the policy when something changed, apply its decisions
//! in order, keep the decision log and the timeline, and sum up the replay as a [`SimResult`].

use std::time::Instant;

use super::engine::Simulator;
use super::event::EvKind;
use super::job::State;
use crate::decision::{Decision, DecisionRecord};
use crate::error::BackendError;
use crate::metrics::{JobOutcome, SimResult, TimelinePoint};
use crate::policies::policy::Policy;

impl Simulator {
    fn record(&mut self, d: Decision, res: &Result<(), BackendError>) {
        self.decisions += 1;
        if res.is_err() {
            self.rejected += 1;
        }
        if self.log.len() < self.cfg.max_logged_decisions {
            self.log.push(DecisionRecord {
                time: self.now,
                decision: d,
                error: res.as_ref().err().map(|e| e.to_string()),
            });
        }
    }

    fn sample(&mut self, force: bool) {
        if !force && self.now < self.next_sample {
            return;
        }
        let healthy = self.cap_healthy();
        self.timeline.push(TimelinePoint {
            t: self.now - self.t0,
            queued: self.queue_len() as u32,
            running: self.running.len() as u32,
            busy_gpus: healthy - self.cap.total_free(),
            healthy_gpus: healthy,
        });
        self.next_sample = self.now + self.timeline_step;
    }

    fn queue_len(&self) -> usize {
        self.queue
            .iter()
            .filter(|&&i| {
                self.jobs
                    .get(i as usize)
                    .is_some_and(|j| j.state == State::Queued)
            })
            .count()
    }

    /// Asks the policy once and applies its decisions in order. Returns how many failed.
    pub fn decide_once(&mut self, policy: &mut dyn Policy) -> usize {
        self.fill_snapshot();
        self.policy_calls += 1;
        let mut out = Vec::new();
        let wake = policy.decide(&self.snap, &mut out);
        let mut failed = 0;
        for d in out {
            let res = self.apply_action(d.action);
            if res.is_err() {
                failed += 1;
            }
            self.record(d, &res);
        }
        if let Some(w) = wake {
            let w = w.max(self.now);
            if w < self.pending_wake && w.is_finite() && self.finished < self.jobs.len() {
                self.pending_wake = w;
                self.push(w, EvKind::Wake);
            }
        }
        failed
    }

    /// Replays every job under `policy` to the end.
    pub fn run(self, policy: &mut dyn Policy) -> SimResult {
        self.run_with_progress(policy, &mut |_, _| {})
    }

    /// As [`Simulator::run`], calling `progress(finished, total)` every 1000 finished jobs.
    pub fn run_with_progress(
        mut self,
        policy: &mut dyn Policy,
        progress: &mut dyn FnMut(usize, usize),
    ) -> SimResult {
        let wall = Instant::now();
        self.replay_all(policy, progress);
        self.finish(policy.name(), wall.elapsed().as_secs_f64())
    }

    /// As [`Simulator::run_with_progress`], also returning the advice given (with each
    /// advised job's actual start and finish) when the replay has an advisor.
    pub fn run_advised(
        mut self,
        policy: &mut dyn Policy,
        progress: &mut dyn FnMut(usize, usize),
    ) -> (SimResult, Vec<super::AdviceRecord>) {
        let wall = Instant::now();
        self.replay_all(policy, progress);
        let log = self.advice_log();
        (
            self.finish(policy.name(), wall.elapsed().as_secs_f64()),
            log,
        )
    }

    fn replay_all(&mut self, policy: &mut dyn Policy, progress: &mut dyn FnMut(usize, usize)) {
        let total = self.jobs.len();
        let mut last_report = 0;
        while self.finished < total {
            let Some(t) = self.next_event_time() else {
                break;
            };
            let changed = self.advance(t);
            self.sample(false);
            if changed {
                self.decide_once(policy);
            }
            if self.finished >= last_report + 1000 {
                last_report = self.finished;
                progress(self.finished, total);
            }
        }
        self.sample(true);
        progress(self.finished, total);
    }

    fn finish(mut self, policy: &str, wall_s: f64) -> SimResult {
        let now = self.now;
        for k in 0..self.jobs.len() {
            self.sync(k as u32);
        }
        let affinity = self.affinity.clone();
        let jobs: Vec<JobOutcome> = self
            .jobs
            .iter()
            .enumerate()
            .map(|(k, j)| JobOutcome {
                row: j.src.row,
                submit: j.src.submit,
                first_start: j.first_start,
                finish: (j.state == State::Done).then_some(j.finish),
                gpus: j.requested,
                elastic: j.min < j.max,
                duration: j.src.duration,
                queued_s: j.queued_total,
                run_s: j.held_s,
                gpu_s: j.attained,
                rescales: j.rescales,
                preemptions: j.preemptions,
                failures: j.failures,
                lost_work_s: j.lost_work,
                class: affinity
                    .as_ref()
                    .and_then(|a| a.class_of(super::job::job_id(k as u32)))
                    .map(|c| c.name.clone()),
                gpu_s_by_type: j.gpu_s_by_type.clone(),
            })
            .collect();
        SimResult {
            policy: policy.to_string(),
            total_gpus: self.cfg.cluster.total_gpus(),
            gpu_types: self.cfg.cluster.gpu_types.clone(),
            start: self.t0,
            end: now,
            jobs,
            skipped_too_big: self.skipped_too_big,
            busy_gpu_s: self.busy_gpu_s,
            healthy_gpu_s: self.healthy_gpu_s,
            timeline: std::mem::take(&mut self.timeline),
            decisions: std::mem::take(&mut self.log),
            decisions_total: self.decisions,
            rejected_actions: self.rejected,
            rescales: self.rescales,
            suspensions: self.suspensions,
            node_failures: self.failures,
            events: self.events,
            policy_calls: self.policy_calls,
            wall_s,
        }
    }

    /// Ends the replay where it is (for step-by-step use) and returns the results so far.
    pub fn into_result(self, policy: &str) -> SimResult {
        self.finish(policy, 0.0)
    }
}
