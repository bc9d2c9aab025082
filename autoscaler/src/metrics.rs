//! What a replay produced: per-job outcomes, a timeline, the decision log, and the summary row
//! `augur simulate` prints.

use augur_numeric::quantile_sorted;
use serde::Serialize;

use crate::decision::DecisionRecord;

/// One replayed job.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobOutcome {
    /// Row of the job table.
    pub row: usize,
    pub submit: f64,
    pub first_start: Option<f64>,
    /// `None` when the replay ended before it finished.
    pub finish: Option<f64>,
    /// Requested GPUs.
    pub gpus: u32,
    pub elastic: bool,
    /// Trace run time (at its requested size).
    pub duration: f64,
    /// Seconds spent queued, before the first start and after any suspension or failure.
    pub queued_s: f64,
    /// Seconds holding GPUs (including restart pauses).
    pub run_s: f64,
    /// GPU-seconds held (workers × seconds, including restart pauses).
    pub gpu_s: f64,
    pub rescales: u32,
    pub preemptions: u32,
    pub failures: u32,
    /// Work lost to node failures (seconds at the requested size).
    pub lost_work_s: f64,
    /// Its model class, when the replay has per-job GPU-type affinity.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
    /// GPU-seconds held on each GPU type (index into [`SimResult::gpu_types`]).
    pub gpu_s_by_type: Vec<f64>,
}

impl JobOutcome {
    /// Job completion time: finish − submit.
    pub fn jct(&self) -> Option<f64> {
        self.finish.map(|f| f - self.submit)
    }
}

/// The cluster at one instant of the replay.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TimelinePoint {
    /// Seconds since the first submit.
    pub t: f64,
    pub queued: u32,
    pub running: u32,
    pub busy_gpus: u32,
    pub healthy_gpus: u32,
}

/// Everything a replay produced.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SimResult {
    pub policy: String,
    pub total_gpus: u32,
    /// The cluster's GPU types.
    pub gpu_types: Vec<crate::cluster::GpuType>,
    /// First submit.
    pub start: f64,
    /// Time of the last event processed.
    pub end: f64,
    pub jobs: Vec<JobOutcome>,
    /// Jobs asking for more GPUs than the cluster has (not replayed).
    pub skipped_too_big: usize,
    /// GPU-seconds allocated to jobs.
    pub busy_gpu_s: f64,
    /// GPU-seconds of healthy nodes.
    pub healthy_gpu_s: f64,
    pub timeline: Vec<TimelinePoint>,
    /// The first decisions (up to the configured cap), with their outcome.
    pub decisions: Vec<DecisionRecord>,
    pub decisions_total: u64,
    /// Actions the backend refused.
    pub rejected_actions: u64,
    pub rescales: u64,
    pub suspensions: u64,
    pub node_failures: u64,
    pub events: u64,
    pub policy_calls: u64,
    /// Wall-clock seconds of the replay.
    pub wall_s: f64,
}

/// The row of `augur simulate`: times in seconds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    pub policy: String,
    pub jobs: usize,
    pub unfinished: usize,
    pub avg_jct: f64,
    pub p50_jct: f64,
    pub p99_jct: f64,
    /// Sum of JCTs (the "total run time" of the Elastic-KubeFlow comparison).
    pub total_jct: f64,
    pub avg_wait: f64,
    pub p99_wait: f64,
    pub total_wait: f64,
    /// Last finish − first submit.
    pub makespan: f64,
    /// Allocated share of healthy GPU-time over the replay.
    pub utilisation: f64,
    pub rescales: u64,
    pub suspensions: u64,
    pub node_failures: u64,
    pub rejected_actions: u64,
    pub wall_s: f64,
}

impl SimResult {
    /// JCTs of finished jobs, sorted.
    pub fn sorted_jcts(&self) -> Vec<f64> {
        let mut v: Vec<f64> = self.jobs.iter().filter_map(JobOutcome::jct).collect();
        v.sort_by(f64::total_cmp);
        v
    }

    /// The summary row.
    pub fn summary(&self) -> Summary {
        let jct = self.sorted_jcts();
        let mut wait: Vec<f64> = self.jobs.iter().map(|j| j.queued_s).collect();
        wait.sort_by(f64::total_cmp);
        let n = jct.len().max(1) as f64;
        let total_jct: f64 = jct.iter().sum();
        let total_wait: f64 = wait.iter().sum();
        let last_finish = self
            .jobs
            .iter()
            .filter_map(|j| j.finish)
            .fold(f64::NEG_INFINITY, f64::max);
        Summary {
            policy: self.policy.clone(),
            jobs: self.jobs.len(),
            unfinished: self.jobs.len() - jct.len(),
            avg_jct: total_jct / n,
            p50_jct: quantile_sorted(&jct, 0.5),
            p99_jct: quantile_sorted(&jct, 0.99),
            total_jct,
            avg_wait: total_wait / wait.len().max(1) as f64,
            p99_wait: quantile_sorted(&wait, 0.99),
            total_wait,
            makespan: (last_finish - self.start).max(0.0),
            utilisation: if self.healthy_gpu_s > 0.0 {
                self.busy_gpu_s / self.healthy_gpu_s
            } else {
                0.0
            },
            rescales: self.rescales,
            suspensions: self.suspensions,
            node_failures: self.node_failures,
            rejected_actions: self.rejected_actions,
            wall_s: self.wall_s,
        }
    }

    /// `points` points `(jct, share of jobs ≤ jct)` of the JCT distribution.
    pub fn jct_cdf(&self, points: usize) -> Vec<(f64, f64)> {
        let jct = self.sorted_jcts();
        if jct.is_empty() || points == 0 {
            return Vec::new();
        }
        (0..=points)
            .map(|k| {
                let q = k as f64 / points as f64;
                (quantile_sorted(&jct, q), q)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_interpolate() {
        let v = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(quantile_sorted(&v, 0.0), 1.0);
        assert_eq!(quantile_sorted(&v, 1.0), 4.0);
        assert!((quantile_sorted(&v, 0.5) - 2.5).abs() < 1e-12);
        assert!(quantile_sorted(&[], 0.5).is_nan());
    }
}
