//! Coverage per group of jobs: an interval's promise is checked where misses hide, not
//! only overall. Jobs are grouped along three dimensions known at submit: their partition
//! (queue; the [`MAX_PARTITIONS`] busiest of the training period by name, the rest
//! `other`), GPU or CPU job, and size (GPUs of a GPU job, else CPUs: 1, 2–8, 9–64, 65+).
//! The same labels serve `augur evaluate` and the service's `/metrics` (bounded
//! cardinality).

use std::collections::{BTreeMap, HashMap};

use augur_datasets::JobRecord;
use serde::{Deserialize, Serialize};

/// Partitions named in group labels; the rest are `other`.
pub const MAX_PARTITIONS: usize = 8;

/// The partitions a grouping names (the busiest of a set of jobs).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CoverageGroups {
    partitions: Vec<String>,
}

/// One group's coverage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupCoverage {
    /// `partition`, `resource` or `size`.
    pub dimension: String,
    pub group: String,
    pub jobs: usize,
    /// Share of the group's jobs inside the static interval / the online one.
    pub coverage_static: f64,
    pub coverage_online: f64,
}

impl CoverageGroups {
    /// Names the [`MAX_PARTITIONS`] partitions with the most jobs in `jobs` (ties by name).
    pub fn from_jobs<'a>(jobs: impl IntoIterator<Item = &'a JobRecord>) -> CoverageGroups {
        let mut counts: HashMap<&str, usize> = HashMap::new();
        for j in jobs {
            if let Some(q) = j.queue.as_deref() {
                *counts.entry(q).or_default() += 1;
            }
        }
        let mut v: Vec<(&str, usize)> = counts.into_iter().collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        CoverageGroups {
            partitions: v
                .into_iter()
                .take(MAX_PARTITIONS)
                .map(|(q, _)| q.to_string())
                .collect(),
        }
    }

    /// Names `partition` when fewer than [`MAX_PARTITIONS`] are named (a service names the
    /// first partitions it sees, keeping its label set bounded).
    pub fn admit(&mut self, partition: Option<&str>) {
        if let Some(q) = partition {
            if self.partitions.len() < MAX_PARTITIONS && !self.partitions.iter().any(|p| p == q) {
                self.partitions.push(q.to_string());
            }
        }
    }

    /// The job's partition label: its partition when named, `other` when not, `none`
    /// without one.
    pub fn partition(&self, job: &JobRecord) -> String {
        match job.queue.as_deref() {
            None => "none".into(),
            Some(q) if self.partitions.iter().any(|p| p == q) => q.to_string(),
            Some(_) => "other".into(),
        }
    }

    /// The job's `(dimension, group)` labels: partition, resource (`gpu` / `cpu`) and size.
    pub fn labels(&self, job: &JobRecord) -> [(&'static str, String); 3] {
        let gpus = job.num_gpus.unwrap_or(0.0);
        let (resource, units) = if gpus > 0.0 {
            ("gpu", gpus)
        } else {
            ("cpu", job.cpus.unwrap_or(1.0))
        };
        let size = match units {
            u if u <= 1.0 => "1",
            u if u <= 8.0 => "2-8",
            u if u <= 64.0 => "9-64",
            _ => "65+",
        };
        [
            ("partition", self.partition(job)),
            ("resource", resource.to_string()),
            ("size", format!("{resource} {size}")),
        ]
    }

    /// Coverage per group of `jobs`, whose static and online intervals held their actual
    /// value or not (`inside_static[k]`, `inside_online[k]` for `jobs[k]`). Sorted by
    /// dimension, then group.
    pub fn coverage(
        &self,
        jobs: &[&JobRecord],
        inside_static: &[bool],
        inside_online: &[bool],
    ) -> Vec<GroupCoverage> {
        let mut acc: BTreeMap<(&'static str, String), (usize, usize, usize)> = BTreeMap::new();
        for ((j, &s), &o) in jobs.iter().zip(inside_static).zip(inside_online) {
            for key in self.labels(j) {
                let e = acc.entry(key).or_default();
                e.0 += 1;
                e.1 += usize::from(s);
                e.2 += usize::from(o);
            }
        }
        acc.into_iter()
            .map(|((dimension, group), (n, s, o))| GroupCoverage {
                dimension: dimension.to_string(),
                group,
                jobs: n,
                coverage_static: s as f64 / n as f64,
                coverage_online: o as f64 / n as f64,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(queue: Option<&str>, gpus: Option<f64>, cpus: Option<f64>) -> JobRecord {
        JobRecord {
            queue: queue.map(str::to_string),
            num_gpus: gpus,
            cpus,
            ..Default::default()
        }
    }

    #[test]
    fn the_busiest_partitions_are_named_and_groups_counted() {
        let mut jobs = Vec::new();
        for k in 0..10 {
            // partition pk has 10 + k jobs: p0 and p1 are the two quietest
            for _ in 0..(10 + k) {
                jobs.push(job(Some(&format!("p{k}")), None, Some(4.0)));
            }
        }
        let g = CoverageGroups::from_jobs(&jobs);
        assert_eq!(g.partitions.len(), MAX_PARTITIONS);
        assert_eq!(g.partition(&jobs[0]), "other");
        assert_eq!(g.partition(jobs.last().unwrap()), "p9");
        assert_eq!(g.partition(&job(None, None, None)), "none");
        let test = [
            job(Some("p9"), Some(2.0), Some(16.0)),
            job(Some("p9"), None, Some(1.0)),
            job(Some("zz"), None, Some(100.0)),
        ];
        let refs: Vec<&JobRecord> = test.iter().collect();
        let cov = g.coverage(&refs, &[true, false, true], &[true, true, false]);
        let find = |d: &str, grp: &str| {
            cov.iter()
                .find(|c| c.dimension == d && c.group == grp)
                .cloned()
                .unwrap_or_else(|| panic!("{d}/{grp} in {cov:?}"))
        };
        let p9 = find("partition", "p9");
        assert_eq!(
            (p9.jobs, p9.coverage_static, p9.coverage_online),
            (2, 0.5, 1.0)
        );
        assert_eq!(find("partition", "other").jobs, 1);
        assert_eq!(find("resource", "gpu").jobs, 1);
        assert_eq!(find("resource", "cpu").coverage_online, 0.5);
        assert_eq!(find("size", "gpu 2-8").jobs, 1);
        assert_eq!(find("size", "cpu 1").jobs, 1);
        assert_eq!(find("size", "cpu 65+").coverage_static, 1.0);
        // every job counts once per dimension
        assert_eq!(cov.iter().map(|c| c.jobs).sum::<usize>(), 3 * test.len());
    }
}
