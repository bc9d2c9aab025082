//! The queue state's forward view: expected remaining run times of running jobs, the
//! shadow time until a request fits, and a fast simulation of the queue (FCFS with EASY
//! backfilling) giving a job's simulated wait.

use super::state::{QueueJob, QueueState, Running, SimRuntime};

/// Upper limit on simulated events per forward simulation (bounds the worst case).
const MAX_SIM_STEPS: usize = 20_000;
/// Wait reported when the simulation cannot place the job (a week).
const SIM_NEVER: f64 = 7.0 * 86_400.0;

impl QueueState {
    /// Expected remaining run time at `now` of a running job under `mode`: the predicted
    /// run time minus the time elapsed, or half the elapsed time for a job that has
    /// outlived its prediction (heavy tails), never past its requested limit.
    pub(super) fn remaining(r: &Running, now: f64, mode: SimRuntime) -> f64 {
        let elapsed = (now - r.start).max(0.0);
        let rem = match (mode, r.job.requested) {
            (SimRuntime::Requested, Some(req)) => req - elapsed,
            _ => {
                let p = r.job.predicted_runtime;
                let rem = if p > elapsed {
                    p - elapsed
                } else {
                    0.5 * elapsed
                };
                match r.job.requested {
                    Some(req) => rem.min(req - elapsed),
                    None => rem,
                }
            }
        };
        rem.max(1.0)
    }

    /// Running jobs' (end time, resource) under `mode`, soonest first.
    fn planned_ends(&self, now: f64, mode: SimRuntime) -> Vec<(f64, f64)> {
        let mut ends: Vec<(f64, f64)> = self
            .running
            .values()
            .map(|r| (now + Self::remaining(r, now, mode), r.job.resource))
            .collect();
        // elements that compare equal are the same bits, so the unstable sort's order is
        // the stable one's
        ends.sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
        ends
    }

    /// Seconds from `now` until `need` resource is free if running jobs end as planned and
    /// nothing else starts.
    pub(super) fn shadow_wait(&self, need: f64, now: f64, mode: SimRuntime) -> f64 {
        let need = need.min(self.capacity);
        let mut free = self.capacity - self.busy;
        if need <= free {
            return 0.0;
        }
        for (t, res) in self.planned_ends(now, mode) {
            free += res;
            if need <= free {
                return t - now;
            }
        }
        SIM_NEVER
    }

    /// Simulated wait of `job`, submitted at `now` behind the queued jobs: first come first
    /// served with EASY backfilling (the head job gets a reservation at the earliest time
    /// enough resource frees; a later job may start early if it fits now and ends before
    /// that reservation or uses only resource the head will not need). Run times under
    /// `mode`. Requests larger than the capacity are clamped to it.
    pub fn simulate_wait(&self, job: &QueueJob, now: f64, mode: SimRuntime) -> f64 {
        let cap = self.capacity;
        let mut free = cap - self.busy;
        let mut ends = self.planned_ends(now, mode);
        // (resource, run time); the new job last
        let mut queue: Vec<(f64, f64)> = self
            .queued
            .values()
            .map(|(_, j)| (j.resource.min(cap), j.runtime(mode).max(1.0)))
            .collect();
        queue.push((job.resource.min(cap), job.runtime(mode).max(1.0)));
        let ours = queue.len() - 1;
        let mut started = vec![false; queue.len()];
        let mut head = 0usize;
        let mut t = now;
        let insert_end = |ends: &mut Vec<(f64, f64)>, e: (f64, f64)| {
            let pos = ends.partition_point(|x| x.0 <= e.0);
            ends.insert(pos, e);
        };
        for _ in 0..MAX_SIM_STEPS {
            // start jobs in order while the head fits
            while head < queue.len() {
                if started[head] {
                    head += 1;
                    continue;
                }
                let (res, rt) = queue[head];
                if res > free {
                    break;
                }
                if head == ours {
                    return t - now;
                }
                free -= res;
                started[head] = true;
                insert_end(&mut ends, (t + rt, res));
                head += 1;
            }
            if head >= queue.len() {
                return t - now;
            }
            // reservation for the head
            let need = queue[head].0;
            let mut f = free;
            let mut shadow = f64::INFINITY;
            for &(te, res) in &ends {
                if shadow.is_finite() && te > shadow {
                    break;
                }
                f += res;
                if shadow.is_infinite() && need <= f {
                    // everything ending at the same instant frees too
                    shadow = te;
                }
            }
            let mut extra = if shadow.is_finite() { f - need } else { 0.0 };
            // backfill
            for k in head + 1..queue.len() {
                if free <= 0.0 {
                    break;
                }
                if started[k] {
                    continue;
                }
                let (res, rt) = queue[k];
                if res > free {
                    continue;
                }
                let ends_in_time = t + rt <= shadow;
                if ends_in_time || res <= extra {
                    if k == ours {
                        return t - now;
                    }
                    if !ends_in_time {
                        extra -= res;
                    }
                    free -= res;
                    started[k] = true;
                    insert_end(&mut ends, (t + rt, res));
                }
            }
            // advance to the next end
            if ends.is_empty() {
                return SIM_NEVER;
            }
            let next = ends[0].0;
            t = t.max(next);
            let n_done = ends.partition_point(|x| x.0 <= t);
            for (_, res) in ends.drain(..n_done) {
                free += res;
            }
            if t - now > SIM_NEVER {
                return SIM_NEVER;
            }
        }
        SIM_NEVER
    }
}
