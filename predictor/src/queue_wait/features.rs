//! The queue features of a job about to be submitted, read from the [`QueueState`] (the
//! job itself is not in it yet): queue and running totals (overall and in the job's
//! partition), the forward simulation, recent waits, the user's jobs and how jobs like it
//! submitted in the last day fared.

use super::simulate::SimCache;
use super::state::{
    req_class, size_class, QueueError, QueueJob, QueueState, SimRuntime, UserStat, DAY,
    QUEUE_FEATURES,
};
use crate::metrics::quantile;

/// Totals over the queued jobs, as seen by a job of a given size at an instant.
struct QueuedTotals {
    res: f64,
    res_s_req: f64,
    res_s_pred: f64,
    /// Queued jobs at least as large as the new one, and the oldest of them.
    ge: f64,
    age_ge_max: f64,
    age_max: f64,
    age_median: f64,
    /// GPUs and CPUs × requested seconds queued, over all partitions.
    gpus: f64,
    cpu_s_req: f64,
    /// The same in the job's partition: jobs, GPUs, CPU-seconds, the oldest age.
    part: [f64; 4],
    /// The oldest queued job of the job's user, seconds (0 without one).
    user_age_max: f64,
}

/// Totals over the running jobs: resource × remaining seconds (predicted, requested),
/// CPUs and GPUs, and the jobs, CPUs and GPUs running in the job's partition.
struct RunningTotals {
    res_s_pred: f64,
    res_s_req: f64,
    cpus: f64,
    gpus: f64,
    part: [f64; 3],
}

/// [`quantile`] of `v` (not empty) by selecting the one or two order statistics it
/// interpolates instead of sorting a copy: the same values, so the same bits.
fn quantile_by_selection(v: &mut [f64], q: f64) -> f64 {
    let pos = q.clamp(0.0, 1.0) * (v.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    let (_, a, rest) = v.select_nth_unstable_by(lo, f64::total_cmp);
    let a = *a;
    // the next order statistic is the smallest of those after it
    let b = if hi == lo {
        a
    } else {
        rest.iter().copied().min_by(f64::total_cmp).unwrap_or(a)
    };
    a + (b - a) * (pos - lo as f64)
}

impl QueueState {
    fn queued_totals(&self, job: &QueueJob, now: f64) -> QueuedTotals {
        let mut t = QueuedTotals {
            res: 0.0,
            res_s_req: 0.0,
            res_s_pred: 0.0,
            ge: 0.0,
            age_ge_max: 0.0,
            age_max: 0.0,
            age_median: 0.0,
            gpus: 0.0,
            cpu_s_req: 0.0,
            part: [0.0; 4],
            user_age_max: 0.0,
        };
        let mut ages: Vec<f64> = Vec::with_capacity(self.queued.len());
        for (_, j) in self.queued.values() {
            t.res += j.resource;
            t.res_s_req += j.resource * j.runtime(SimRuntime::Requested);
            t.res_s_pred += j.resource * j.runtime(SimRuntime::Predicted);
            let age = (now - j.submit).max(0.0);
            if j.resource >= job.resource {
                t.ge += 1.0;
                t.age_ge_max = t.age_ge_max.max(age);
            }
            let cpu_s = j.cpus * j.requested.unwrap_or(0.0);
            t.gpus += j.gpus;
            t.cpu_s_req += cpu_s;
            if job.partition.is_some() && j.partition == job.partition {
                t.part[0] += 1.0;
                t.part[1] += j.gpus;
                t.part[2] += cpu_s;
                t.part[3] = t.part[3].max(age);
            }
            // the user's oldest: `now - submit` not clamped at 0 (unlike `age`), folded from
            // 0 in queue order as the feature always was
            if job.user.is_some() && j.user == job.user {
                t.user_age_max = t.user_age_max.max(now - j.submit);
            }
            ages.push(age);
        }
        t.age_max = ages.iter().copied().fold(0.0, f64::max);
        if !ages.is_empty() {
            t.age_median = quantile_by_selection(&mut ages, 0.5);
        }
        t
    }

    fn running_totals(&self, job: &QueueJob, now: f64) -> RunningTotals {
        let mut t = RunningTotals {
            res_s_pred: 0.0,
            res_s_req: 0.0,
            cpus: 0.0,
            gpus: 0.0,
            part: [0.0; 3],
        };
        for r in self.running.values() {
            t.res_s_pred += r.job.resource * Self::remaining(r, now, SimRuntime::Predicted);
            t.res_s_req += r.job.resource * Self::remaining(r, now, SimRuntime::Requested);
            t.cpus += r.job.cpus;
            t.gpus += r.job.gpus;
            if job.partition.is_some() && r.job.partition == job.partition {
                t.part[0] += 1.0;
                t.part[1] += r.job.cpus;
                t.part[2] += r.job.gpus;
            }
        }
        t
    }

    /// Jobs like `job` submitted in the last day: how many have started, how long the others
    /// have been waiting (a survival view of current conditions, not lagged). Returns the
    /// started share, the number still queued and the oldest of them (same size and
    /// requested time), and the started share of the same size.
    fn similar_submits(&self, job: &QueueJob, now: f64) -> [f32; 4] {
        let (rc, qc) = (size_class(job.resource), req_class(job.requested));
        let (mut sim_n, mut sim_started, mut size_n, mut size_started) = (0u32, 0u32, 0u32, 0u32);
        let mut sim_age_max: f64 = 0.0;
        for r in self.submits.iter().rev() {
            if now - r.submit > DAY {
                break;
            }
            if r.submit > now || r.res_class != rc {
                continue;
            }
            let waiting = self.queued_seq.contains_key(&r.id);
            size_n += 1;
            size_started += u32::from(!waiting);
            if r.req_class == qc {
                sim_n += 1;
                sim_started += u32::from(!waiting);
                if waiting {
                    sim_age_max = sim_age_max.max(now - r.submit);
                }
            }
        }
        let share = |a: u32, n: u32| {
            if n == 0 {
                f32::NAN
            } else {
                a as f32 / n as f32
            }
        };
        [
            share(sim_started, sim_n),
            (sim_n - sim_started) as f32,
            sim_age_max as f32,
            share(size_started, size_n),
        ]
    }

    /// Writes the [`QUEUE_FEATURES`] of `job`, about to be submitted at `now`, into `out`.
    /// Only the state is read: `job` itself is not in it yet.
    pub fn features(&self, job: &QueueJob, now: f64, out: &mut [f32]) -> Result<(), QueueError> {
        self.features_with(job, now, out, &mut SimCache::default())
    }

    /// [`QueueState::features`], keeping the forward simulations in `sims` for the next
    /// job (a replay's jobs one after the other: see [`SimCache`]).
    pub(super) fn features_with(
        &self,
        job: &QueueJob,
        now: f64,
        out: &mut [f32],
        sims: &mut SimCache,
    ) -> Result<(), QueueError> {
        if out.len() != QUEUE_FEATURES.len() {
            return Err(QueueError::BufferSize {
                got: out.len(),
                want: QUEUE_FEATURES.len(),
            });
        }
        let cap = self.capacity;
        let q = self.queued_totals(job, now);
        let r = self.running_totals(job, now);
        let (r_pred, r_req) = (r.res_s_pred, r.res_s_req);
        let free = cap - self.busy;
        let recent =
            |n: usize| -> Vec<f64> { self.recent.iter().rev().take(n).map(|s| s.wait).collect() };
        let last10 = recent(10);
        let nan = f32::NAN;
        let med = |v: &[f64]| {
            if v.is_empty() {
                nan
            } else {
                quantile(v, 0.5) as f32
            }
        };
        let user: Option<UserStat> = job.user.and_then(|u| self.users.get(&u)).copied();
        let similar = self.similar_submits(job, now);
        // a job without a partition has no partition features
        let part = |v: f64| {
            if job.partition.is_some() {
                v as f32
            } else {
                nan
            }
        };
        let (shadow_pred, sim_pred) = sims.waits(self, job, now, SimRuntime::Predicted);
        let (shadow_req, sim_req) = sims.waits(self, job, now, SimRuntime::Requested);
        let part_waits: Vec<f64> = job
            .partition
            .and_then(|p| self.partition_waits.get(&p))
            .map_or_else(Vec::new, |w| w.iter().copied().collect());
        let vals: [f32; 50] = [
            job.predicted_runtime as f32,
            (job.resource / cap) as f32,
            self.queued.len() as f32,
            q.res as f32,
            q.res_s_req as f32,
            q.res_s_pred as f32,
            q.ge as f32,
            q.age_max as f32,
            q.age_median as f32,
            self.running.len() as f32,
            self.busy as f32,
            free as f32,
            f32::from(u8::from(job.resource <= free)),
            r_pred as f32,
            r_req as f32,
            ((q.res_s_pred + r_pred) / cap) as f32,
            ((q.res_s_req + r_req) / cap) as f32,
            shadow_pred as f32,
            shadow_req as f32,
            sim_pred as f32,
            sim_req as f32,
            self.recent.back().map_or(nan, |s| s.wait as f32),
            med(&last10),
            med(&recent(50)),
            last10.iter().copied().fold(f64::NAN, f64::max) as f32,
            self.last_by_size
                .get(&size_class(job.resource))
                .map_or(nan, |w| *w as f32),
            self.recent
                .back()
                .map_or(nan, |s| (now - s.at).max(0.0) as f32),
            self.recent.iter().filter(|s| now - s.at <= 3600.0).count() as f32,
            user.map_or(0.0, |u| u.queued as f32),
            user.map_or(0.0, |u| u.running as f32),
            user.and_then(|u| u.last_wait).map_or(nan, |w| w as f32),
            user.map_or(0.0, |u| u.queued_res as f32),
            q.age_ge_max as f32,
            similar[0],
            similar[1],
            similar[2],
            similar[3],
            q.user_age_max as f32,
            q.gpus as f32,
            q.cpu_s_req as f32,
            r.cpus as f32,
            r.gpus as f32,
            part(q.part[0]),
            part(q.part[1]),
            part(q.part[2]),
            part(q.part[3]),
            part(r.part[0]),
            part(r.part[1]),
            part(r.part[2]),
            med(&part_waits),
        ];
        out.copy_from_slice(&vals);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use augur_numeric::SplitMix64;

    use super::*;

    #[test]
    fn quantiles_by_selection_equal_the_sorted_ones_to_the_bit() {
        let mut rng = SplitMix64(3);
        for n in 1..200 {
            // ties, zeros and spread values
            let v: Vec<f64> = (0..n)
                .map(|_| match rng.below(3) {
                    0 => 0.0,
                    1 => rng.below(5) as f64,
                    _ => rng.below(1_000_000) as f64 * 0.37,
                })
                .collect();
            for q in [0.0, 0.1, 0.5, 0.9, 1.0] {
                let got = quantile_by_selection(&mut v.clone(), q);
                assert_eq!(
                    got.to_bits(),
                    quantile(&v, q).to_bits(),
                    "{n} values, q {q}"
                );
            }
        }
    }
}
