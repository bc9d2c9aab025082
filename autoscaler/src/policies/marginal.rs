//! Marginal-gain worker allocation, shared by Optimus and the elastic controller: a job's
//! predicted remaining work, its time at a given size on the speedup curve, and the hand-out of
//! free GPUs one at a time to the job whose predicted remaining time drops most
//! ([`fill_by_marginal_gain`]).

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use crate::cluster::RunningJob;
use crate::scaling::ScalingModel;

/// Predicted remaining work of a job (seconds at its requested size): the prediction minus
/// the work done; a job past its prediction is assumed half done.
pub fn predicted_remaining(predicted: Option<f64>, progress: Option<f64>, fallback_s: f64) -> f64 {
    let p = predicted.unwrap_or(fallback_s);
    let done = progress.unwrap_or(0.0);
    if done < p {
        p - done
    } else {
        done.max(1.0) * 0.5
    }
}

/// Seconds `w` workers take for `work` seconds of work measured at `requested` workers.
pub fn time_at(scaling: &ScalingModel, work: f64, requested: u32, w: u32) -> f64 {
    if w == 0 {
        return f64::INFINITY;
    }
    work * scaling.speedup(requested) / scaling.speedup(w)
}

/// A job that may get more workers: its requested size (the reference of its work), its
/// workers now (the fill's starting point), its maximum, and its predicted remaining work
/// (seconds at the requested size).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GrowCandidate {
    pub requested: u32,
    pub workers: u32,
    pub max_workers: u32,
    pub remaining: f64,
}

impl GrowCandidate {
    /// A running job with `remaining` predicted work.
    pub fn of(r: &RunningJob, remaining: f64) -> GrowCandidate {
        GrowCandidate {
            requested: r.requested,
            workers: r.workers,
            max_workers: r.max_workers,
            remaining,
        }
    }
}

/// Hands `free` GPUs out one at a time, each to the candidate whose predicted remaining time
/// drops most from one more worker, up to each one's maximum; returns each candidate's new
/// size (in the order given). Speedup curves are concave, so this maximises the total
/// predicted time saved.
pub fn fill_by_marginal_gain(
    scaling: &ScalingModel,
    cands: &[GrowCandidate],
    free: u32,
) -> Vec<u32> {
    let gain = |c: &GrowCandidate, w: u32| {
        time_at(scaling, c.remaining, c.requested, w)
            - time_at(scaling, c.remaining, c.requested, w + 1)
    };
    let mut target: Vec<u32> = cands.iter().map(|c| c.workers).collect();
    let mut heap = BinaryHeap::new();
    for (k, c) in cands.iter().enumerate() {
        if c.workers < c.max_workers {
            heap.push(Gain(gain(c, c.workers), k));
        }
    }
    let mut free = free;
    while free > 0 {
        let Some(Gain(g, k)) = heap.pop() else {
            break;
        };
        let (Some(c), Some(t)) = (cands.get(k), target.get_mut(k)) else {
            continue;
        };
        if g <= 0.0 {
            break;
        }
        *t += 1;
        free -= 1;
        if *t < c.max_workers {
            heap.push(Gain(gain(c, *t), k));
        }
    }
    target
}

#[derive(Debug, PartialEq)]
struct Gain(f64, usize);
impl Eq for Gain {}
impl PartialOrd for Gain {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Gain {
    fn cmp(&self, o: &Self) -> Ordering {
        self.0.total_cmp(&o.0).then(o.1.cmp(&self.1))
    }
}
