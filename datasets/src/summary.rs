//! Streaming summaries of a job trace, for `augur data inspect`: constant memory however
//! large the file (quantiles come from a log-bucketed histogram with ≤ 1% relative error).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::schema::{JobRecord, COLUMNS};

/// Log-bucketed histogram of non-negative values: bucket `k` holds values in
/// `[1.01^(k-1), 1.01^k)`, plus one bucket for values below 1 (and zero).
#[derive(Debug, Clone, Default)]
pub struct LogHistogram {
    below_one: Vec<f64>,
    below_one_count: u64,
    buckets: BTreeMap<i32, u64>,
    count: u64,
    min: Option<f64>,
    max: Option<f64>,
    sum: f64,
}

const GROWTH: f64 = 1.01;
/// Values below 1 are kept exactly up to this many (then only counted, at 0.5).
const EXACT_BELOW_ONE: usize = 10_000;

impl LogHistogram {
    /// Adds a value (negative values are ignored; callers report them).
    pub fn add(&mut self, v: f64) {
        if v.is_nan() || v < 0.0 || !v.is_finite() {
            return;
        }
        self.count += 1;
        self.sum += v;
        self.min = Some(self.min.map_or(v, |m| m.min(v)));
        self.max = Some(self.max.map_or(v, |m| m.max(v)));
        if v < 1.0 {
            self.below_one_count += 1;
            if self.below_one.len() < EXACT_BELOW_ONE {
                self.below_one.push(v);
            }
        } else {
            let k = (v.ln() / GROWTH.ln()).floor() as i32 + 1;
            *self.buckets.entry(k).or_insert(0) += 1;
        }
    }

    /// Number of values added.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Mean of the values added.
    pub fn mean(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum / self.count as f64)
    }

    /// The `q` quantile (0..=1), within 1% for values ≥ 1.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        if self.count == 0 {
            return None;
        }
        if q <= 0.0 {
            return self.min;
        }
        if q >= 1.0 {
            return self.max;
        }
        let rank =
            ((q.clamp(0.0, 1.0) * (self.count - 1) as f64).round() as u64).min(self.count - 1);
        if rank < self.below_one_count {
            let mut small = self.below_one.clone();
            small.sort_by(f64::total_cmp);
            let idx =
                ((rank as f64 / self.below_one_count.max(1) as f64) * small.len() as f64) as usize;
            return small
                .get(idx.min(small.len().saturating_sub(1)))
                .copied()
                .or(Some(0.5));
        }
        let mut seen = self.below_one_count;
        for (&k, &c) in &self.buckets {
            seen += c;
            if seen > rank {
                // geometric middle of the bucket, clamped to the observed range
                let hi = GROWTH.powi(k);
                let lo = GROWTH.powi(k - 1);
                let mid = (lo * hi).sqrt();
                return Some(mid.clamp(self.min.unwrap_or(mid), self.max.unwrap_or(mid)));
            }
        }
        self.max
    }
}

/// Quantiles of one quantity, in seconds.
#[derive(Debug, Clone, Serialize)]
pub struct Quantiles {
    pub count: u64,
    pub mean: Option<f64>,
    pub min: Option<f64>,
    pub p10: Option<f64>,
    pub p50: Option<f64>,
    pub p90: Option<f64>,
    pub p99: Option<f64>,
    pub max: Option<f64>,
}

impl Quantiles {
    fn of(h: &LogHistogram) -> Quantiles {
        Quantiles {
            count: h.count(),
            mean: h.mean(),
            min: h.min,
            p10: h.quantile(0.10),
            p50: h.quantile(0.50),
            p90: h.quantile(0.90),
            p99: h.quantile(0.99),
            max: h.max,
        }
    }
}

/// The summary `augur data inspect` prints for a job trace.
#[derive(Debug, Clone, Serialize)]
pub struct JobSummary {
    /// Jobs summarised.
    pub jobs: u64,
    /// Earliest and latest submit time.
    pub submit_span: Option<(f64, f64)>,
    /// Share of nulls per canonical column (0..=1).
    pub null_share: BTreeMap<String, f64>,
    /// Jobs by GPUs requested (`"0"`, `"1"`, `"2"`, `"3-4"`, `"5-8"`, ..., `"fractional"`).
    pub gpu_histogram: BTreeMap<String, u64>,
    /// Run time quantiles (s).
    pub runtime: Quantiles,
    /// Queue wait quantiles (s).
    pub queue_wait: Quantiles,
    /// Jobs by final status.
    pub status: BTreeMap<String, u64>,
    /// Distinct users, groups and GPU types seen (capped at 1,000,000 each).
    pub distinct: BTreeMap<String, usize>,
}

/// Accumulates a [`JobSummary`] one job at a time.
#[derive(Debug, Default)]
pub struct JobSummarizer {
    jobs: u64,
    submit_min: f64,
    submit_max: f64,
    nulls: [u64; COLUMNS.len()],
    gpus: BTreeMap<(u64, String), u64>,
    runtime: LogHistogram,
    wait: LogHistogram,
    status: BTreeMap<String, u64>,
    users: std::collections::HashSet<String>,
    groups: std::collections::HashSet<String>,
    gpu_types: std::collections::HashSet<String>,
}

const DISTINCT_CAP: usize = 1_000_000;

fn gpu_bucket(g: f64) -> (u64, String) {
    if g.fract() != 0.0 {
        return (u64::MAX, "fractional".into());
    }
    // Saturates: any count from 2^63 up lands in the last bucket.
    let g = g as u64;
    match g {
        0..=2 => (g, g.to_string()),
        _ => match g.checked_next_power_of_two() {
            Some(hi) => (hi, format!("{}-{hi}", hi / 2 + 1)),
            None => (u64::MAX - 1, format!("{}-", (1u64 << 63) + 1)),
        },
    }
}

impl JobSummarizer {
    /// Adds one job.
    pub fn observe(&mut self, r: &JobRecord) {
        if self.jobs == 0 {
            self.submit_min = r.submit_time;
            self.submit_max = r.submit_time;
        }
        self.jobs += 1;
        self.submit_min = self.submit_min.min(r.submit_time);
        self.submit_max = self.submit_max.max(r.submit_time);
        let nulls = [
            false,
            false,
            r.start_time.is_none(),
            r.queue_wait.is_none(),
            r.end_time.is_none(),
            r.duration.is_none(),
            r.num_gpus.is_none(),
            r.num_nodes.is_none(),
            r.gpu_type.is_none(),
            r.cpus.is_none(),
            r.memory_mib.is_none(),
            r.requested_time.is_none(),
            r.user.is_none(),
            r.group.is_none(),
            r.job_name.is_none(),
            r.cluster.is_none(),
            r.queue.is_none(),
            r.qos.is_none(),
            r.priority.is_none(),
            false,
            false,
        ];
        for (n, is_null) in self.nulls.iter_mut().zip(nulls) {
            *n += u64::from(is_null);
        }
        if let Some(g) = r.num_gpus {
            *self.gpus.entry(gpu_bucket(g)).or_insert(0) += 1;
        }
        if let Some(d) = r.duration {
            self.runtime.add(d);
        }
        if let Some(w) = r.queue_wait {
            self.wait.add(w);
        }
        *self
            .status
            .entry(r.status.as_str().to_string())
            .or_insert(0) += 1;
        for (set, v) in [
            (&mut self.users, &r.user),
            (&mut self.groups, &r.group),
            (&mut self.gpu_types, &r.gpu_type),
        ] {
            if let Some(v) = v {
                if set.len() < DISTINCT_CAP && !set.contains(v) {
                    set.insert(v.clone());
                }
            }
        }
    }

    /// The summary so far.
    pub fn finish(&self) -> JobSummary {
        let jobs = self.jobs.max(1) as f64;
        JobSummary {
            jobs: self.jobs,
            submit_span: (self.jobs > 0).then_some((self.submit_min, self.submit_max)),
            null_share: COLUMNS
                .iter()
                .zip(self.nulls)
                .map(|(c, n)| (c.to_string(), n as f64 / jobs))
                .collect(),
            gpu_histogram: self
                .gpus
                .iter()
                .map(|((_, label), c)| (label.clone(), *c))
                .collect(),
            runtime: Quantiles::of(&self.runtime),
            queue_wait: Quantiles::of(&self.wait),
            status: self.status.clone(),
            distinct: [
                ("users".to_string(), self.users.len()),
                ("groups".to_string(), self.groups.len()),
                ("gpu_types".to_string(), self.gpu_types.len()),
            ]
            .into_iter()
            .collect(),
        }
    }

    /// GPU histogram rows in numeric order (label, count), for display.
    pub fn gpu_rows(&self) -> Vec<(String, u64)> {
        self.gpus
            .iter()
            .map(|((_, label), c)| (label.clone(), *c))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_quantiles_are_within_one_percent() {
        let mut h = LogHistogram::default();
        for v in 1..=10_000 {
            h.add(v as f64);
        }
        let p50 = h.quantile(0.5).unwrap();
        assert!((p50 - 5000.0).abs() / 5000.0 < 0.011, "{p50}");
        let p99 = h.quantile(0.99).unwrap();
        assert!((p99 - 9900.0).abs() / 9900.0 < 0.011, "{p99}");
        assert_eq!(h.quantile(0.0), Some(1.0));
        assert_eq!(h.quantile(1.0), Some(10_000.0));
    }

    #[test]
    fn summary_counts_nulls_and_gpus() {
        let mut s = JobSummarizer::default();
        for g in [0.0, 1.0, 1.0, 4.0, 8.0, 0.5] {
            s.observe(&JobRecord {
                submit_time: g,
                num_gpus: Some(g),
                duration: Some(100.0),
                ..Default::default()
            });
        }
        let sum = s.finish();
        assert_eq!(sum.jobs, 6);
        assert_eq!(sum.null_share["user"], 1.0);
        assert_eq!(sum.null_share["duration"], 0.0);
        let rows = s.gpu_rows();
        assert_eq!(
            rows,
            vec![
                ("0".to_string(), 1),
                ("1".to_string(), 2),
                ("3-4".to_string(), 1),
                ("5-8".to_string(), 1),
                ("fractional".to_string(), 1)
            ]
        );
        assert_eq!(sum.submit_span, Some((0.0, 8.0)));
    }

    /// Found by `tests/fuzz_readers/`: a GPU count of 2^63 or more (`1e30` in a Philly
    /// `num_gpus`) overflowed `next_power_of_two` (a panic in debug builds, a `1-0` bucket in
    /// release), and counts above 2^32 sorted as small ones.
    #[test]
    fn huge_gpu_counts_get_their_own_buckets() {
        let mut s = JobSummarizer::default();
        for g in [1e30, 5e9, 3.0, f64::MAX] {
            s.observe(&JobRecord {
                num_gpus: Some(g),
                ..Default::default()
            });
        }
        assert_eq!(
            s.gpu_rows(),
            vec![
                ("3-4".to_string(), 1),
                ("4294967297-8589934592".to_string(), 1),
                ("9223372036854775809-".to_string(), 2),
            ]
        );
    }
}
