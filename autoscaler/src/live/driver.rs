//! The controller loop over a live backend ([`LiveLoop`]): tick by tick, with a pause switch,
//! a dry-run switch and bounded histories of its decisions and of the cluster.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use super::backend::{JobLifecycleEvent, LiveBackend};
use super::record::{ClusterPoint, LiveConfig, LiveDecision, Outcome, StepReport};
use crate::controller::Controller;
use crate::decision::{Decision, DecisionRecord};
use crate::policies::policy::Policy;

/// The controller loop over a live backend.
#[derive(Debug)]
pub struct LiveLoop<B, P> {
    backend: B,
    controller: Controller<P>,
    cfg: LiveConfig,
    paused: bool,
    dry_run: bool,
    /// Ask the policy at this cluster time even if nothing changed.
    wake_at: Option<f64>,
    decisions: VecDeque<LiveDecision>,
    history: VecDeque<ClusterPoint>,
    last: ClusterPoint,
    seq: u64,
    by_reason: BTreeMap<(&'static str, &'static str, Outcome), u64>,
    ticks: u64,
    /// The backend reported a change since the policy was last asked.
    changed: bool,
    scratch: Vec<Decision>,
}

impl<B: LiveBackend, P: Policy> LiveLoop<B, P> {
    /// A loop driving `backend` with `policy`, acting (not paused, not dry-run).
    pub fn new(backend: B, policy: P, cfg: LiveConfig) -> LiveLoop<B, P> {
        LiveLoop {
            backend,
            controller: Controller::new(policy),
            cfg,
            paused: false,
            dry_run: false,
            wake_at: None,
            decisions: VecDeque::new(),
            history: VecDeque::new(),
            last: ClusterPoint::default(),
            seq: 0,
            by_reason: BTreeMap::new(),
            ticks: 0,
            changed: false,
            scratch: Vec::new(),
        }
    }

    pub fn backend(&self) -> &B {
        &self.backend
    }
    pub fn backend_mut(&mut self) -> &mut B {
        &mut self.backend
    }
    pub fn policy_name(&self) -> &str {
        self.controller.policy.name()
    }
    pub fn paused(&self) -> bool {
        self.paused
    }
    /// Paused: the controller neither decides nor acts (the cluster's own scheduler runs).
    pub fn set_paused(&mut self, paused: bool) {
        self.paused = paused;
        self.wake_at = None;
    }
    pub fn dry_run(&self) -> bool {
        self.dry_run
    }
    /// Dry-run: the controller decides and logs, and does not act.
    pub fn set_dry_run(&mut self, dry_run: bool) {
        self.dry_run = dry_run;
        self.wake_at = None;
    }
    /// Ticks so far.
    pub fn ticks(&self) -> u64 {
        self.ticks
    }
    /// Recent decisions, oldest first.
    pub fn decisions(&self) -> impl DoubleEndedIterator<Item = &LiveDecision> + ExactSizeIterator {
        self.decisions.iter()
    }
    /// Recent cluster points, oldest first.
    pub fn history(&self) -> impl DoubleEndedIterator<Item = &ClusterPoint> + ExactSizeIterator {
        self.history.iter()
    }
    /// The cluster after the last tick.
    pub fn cluster(&self) -> ClusterPoint {
        self.last
    }
    /// Decisions ever taken by (action, reason, outcome).
    pub fn decision_counts(&self) -> &BTreeMap<(&'static str, &'static str, Outcome), u64> {
        &self.by_reason
    }

    fn keep(&mut self, time: f64, decision: Decision, outcome: Outcome, error: Option<String>) {
        self.seq += 1;
        *self
            .by_reason
            .entry((decision.action.name(), decision.reason.name(), outcome))
            .or_insert(0) += 1;
        if self.cfg.decisions_kept == 0 {
            return;
        }
        while self.decisions.len() >= self.cfg.decisions_kept {
            self.decisions.pop_front();
        }
        self.decisions.push_back(LiveDecision {
            seq: self.seq,
            time,
            decision,
            outcome,
            error,
        });
    }

    fn keep_records(&mut self, records: Vec<DecisionRecord>) {
        for r in records {
            let outcome = if r.error.is_some() {
                Outcome::Failed
            } else {
                Outcome::Applied
            };
            self.keep(r.time, r.decision, outcome, r.error);
        }
    }

    /// First half of a tick: lets `wall` pass on the backend and returns the job events
    /// since the last call (arrivals, completions), so the caller can ingest them and give
    /// the new jobs predictions before the policy looks (see [`LiveLoop::control`]).
    pub fn advance(&mut self, wall: Duration) -> Vec<JobLifecycleEvent> {
        self.ticks += 1;
        self.changed |= self.backend.tick(wall);
        let mut events = Vec::new();
        self.backend.drain_events(&mut events);
        events
    }

    /// Second half of a tick: asks the policy when something changed (or the wake-up time it
    /// asked for has passed, seen one tick late at most), acts unless paused or dry-run (the
    /// cluster's own scheduler runs then), records the cluster, returns the job events of the
    /// actions (starts). While the backend may not act ([`LiveBackend::may_act`]) nothing is
    /// decided; the pending change is kept for when it may.
    pub async fn control(&mut self) -> StepReport {
        let mut report = StepReport::default();
        let now = self.last.time;
        let due = std::mem::take(&mut self.changed)
            || self.wake_at.is_some_and(|w| w <= now)
            || self.ticks <= 1;
        let may_act = self.backend.may_act();
        if due && !may_act {
            self.changed = true;
        }
        if !self.paused && due && may_act {
            report.decided = true;
            if self.dry_run {
                match self.backend.observe().await {
                    Ok(snap) => {
                        let mut out = std::mem::take(&mut self.scratch);
                        out.clear();
                        self.wake_at = self.controller.policy.decide(&snap, &mut out);
                        report.decisions = out.len();
                        for d in out.drain(..) {
                            self.keep(snap.time, d, Outcome::DryRun, None);
                        }
                        self.scratch = out;
                    }
                    Err(e) => report.error = Some(e.to_string()),
                }
            } else {
                match self.controller.reconcile(&mut self.backend).await {
                    Ok(r) => {
                        self.wake_at = r.wake_at;
                        let log = self.controller.take_log();
                        report.decisions = log.len();
                        self.keep_records(log);
                    }
                    Err(e) => report.error = Some(e.to_string()),
                }
            }
        }
        if self.paused || self.dry_run {
            report.unmanaged = self.backend.unmanaged_step();
        }
        self.backend.drain_events(&mut report.events);
        match self.backend.observe().await {
            Ok(snap) => {
                let p = ClusterPoint::of(&snap);
                self.last = p;
                let due_point = self
                    .history
                    .back()
                    .is_none_or(|b| p.time >= b.time + self.cfg.history_every_s);
                if due_point && self.cfg.history_kept > 0 {
                    while self.history.len() >= self.cfg.history_kept {
                        self.history.pop_front();
                    }
                    self.history.push_back(p);
                }
            }
            Err(e) => {
                report.error.get_or_insert_with(|| e.to_string());
            }
        }
        report.cluster = self.last;
        report
    }

    /// One whole tick ([`LiveLoop::advance`] then [`LiveLoop::control`]); the report holds
    /// the events of both halves.
    pub async fn step(&mut self, wall: Duration) -> StepReport {
        let mut events = self.advance(wall);
        let mut report = self.control().await;
        events.append(&mut report.events);
        report.events = events;
        report
    }
}
