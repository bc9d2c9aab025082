//! Moving the simulator's time ([`Simulator::advance`]): arrivals, completions, resumes after
//! a restart pause, node failures (jobs lose the work since their last checkpoint and go back
//! to the queue) and recoveries, and the wake-ups policies ask for.

use std::cmp::Reverse;

use super::engine::Simulator;
use super::event::{Ev, EvKind};
use super::job::State;

impl Simulator {
    /// Processes every event up to and including time `until` (arrivals, completions,
    /// resumes, node changes) without asking any policy. Returns true when something
    /// happened that a policy should look at.
    pub fn advance(&mut self, until: f64) -> bool {
        loop {
            let heap_t = self.heap.peek().map(|Reverse(e)| e.t);
            let arr_t = self
                .arrivals
                .get(self.next_arrival)
                .and_then(|&i| self.jobs.get(i as usize))
                .map(|j| j.src.submit);
            let (t, is_heap) = match (heap_t, arr_t) {
                (Some(h), Some(a)) if h <= a => (h, true),
                (_, Some(a)) => (a, false),
                (Some(h), None) => (h, true),
                (None, None) => break,
            };
            if t > until {
                break;
            }
            self.set_time(t);
            if is_heap {
                if let Some(Reverse(ev)) = self.heap.pop() {
                    self.handle(ev);
                }
            } else {
                let i = self.arrivals.get(self.next_arrival).copied().unwrap_or(0);
                self.next_arrival += 1;
                self.events += 1;
                self.advise_at_submit(i);
                self.enqueue(i);
                self.dirty = true;
            }
        }
        if until.is_finite() {
            self.set_time(until);
        }
        std::mem::take(&mut self.dirty)
    }

    fn handle(&mut self, ev: Ev) {
        self.events += 1;
        match ev.kind {
            EvKind::Complete(i, epoch) => self.complete(i, epoch),
            EvKind::Resume(i, epoch) => {
                let ok = self
                    .jobs
                    .get(i as usize)
                    .is_some_and(|j| j.epoch == epoch && j.state == State::Running);
                if ok {
                    self.sync(i);
                    self.start_progress(i);
                }
            }
            EvKind::NodeDown(n) => self.node_down(n),
            EvKind::NodeUp(n) => {
                self.cap.set_up(n);
                self.dirty = true;
            }
            EvKind::Wake => {
                self.dirty = true;
                if ev.t >= self.pending_wake {
                    self.pending_wake = f64::INFINITY;
                }
            }
        }
    }

    /// Job `i` finishes, unless the completion is stale (`epoch` moved on).
    fn complete(&mut self, i: u32, epoch: u32) {
        let ok = self
            .jobs
            .get(i as usize)
            .is_some_and(|j| j.epoch == epoch && j.state == State::Running);
        if !ok {
            return;
        }
        self.sync(i);
        let slots = self
            .jobs
            .get_mut(i as usize)
            .map(|j| std::mem::take(&mut j.slots))
            .unwrap_or_default();
        self.cap.release(&slots);
        self.remove_running(i);
        let now = self.now;
        if let Some(j) = self.jobs.get_mut(i as usize) {
            j.state = State::Done;
            j.done = j.work;
            j.finish = now;
            j.slots = slots;
        }
        self.finished += 1;
        self.dirty = true;
    }

    /// Node `n` fails: its GPUs are gone until it recovers, and every job on it loses the work
    /// since its last checkpoint and goes back to the queue.
    fn node_down(&mut self, n: u32) {
        if !self.cap.healthy(n) {
            return;
        }
        self.failures += 1;
        self.cap.set_down(n);
        let hit: Vec<u32> = self
            .running
            .iter()
            .copied()
            .filter(|&i| {
                self.jobs
                    .get(i as usize)
                    .is_some_and(|j| j.slots.iter().any(|s| s.node == n))
            })
            .collect();
        for i in hit {
            self.sync(i);
            let interval = self.cfg.checkpoint_interval_s;
            let now = self.now;
            let slots = if let Some(j) = self.jobs.get_mut(i as usize) {
                // last checkpoint: the later of the rescale/resume one and the last
                // periodic one of the current segment
                let mut ck = j.ckpt;
                if !j.restarting && j.rate > 0.0 {
                    let k = ((now - j.seg_start) / interval).floor();
                    ck = ck.max(j.seg_done0 + j.rate * k * interval);
                }
                let ck = ck.min(j.done);
                j.lost_work += j.done - ck;
                j.done = ck;
                j.ckpt = ck;
                j.failures += 1;
                std::mem::take(&mut j.slots)
            } else {
                Vec::new()
            };
            self.cap.release(&slots);
            self.remove_running(i);
            self.enqueue(i);
        }
        self.dirty = true;
    }
}
