//! The per-stage-type median baseline of stage times.

use std::collections::BTreeMap;

use augur_datasets::dag::DagJob;
use augur_numeric::median;
use serde::{Deserialize, Serialize};

use super::encoder::EncodedDag;
use super::trainer::Prepared;

/// Median ln seconds per stage type, the per-stage-type baseline. The type is the stage's
/// kind where the data names one (WfCommons); TPC-H names no operators, so there it is the
/// (scale, executors, ⌊log2 tasks⌋) cell, falling back to ⌊log2 tasks⌋ and then to the
/// global median.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StageMedians {
    by_key: BTreeMap<String, f64>,
    global: f64,
}

fn stage_keys(job: &DagJob, kind: &str, tasks: u32) -> [String; 2] {
    let bucket = 32 - tasks.max(1).leading_zeros();
    if kind.is_empty() {
        [
            format!(
                "cell:{}:{}:{bucket}",
                job.scale.as_deref().unwrap_or("-"),
                job.executors.unwrap_or(0)
            ),
            format!("tasks:{bucket}"),
        ]
    } else {
        [format!("kind:{kind}"), format!("kind:{kind}")]
    }
}

impl StageMedians {
    pub(super) fn fit(jobs: &[DagJob], prep: &Prepared) -> StageMedians {
        let mut by: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        let mut all = Vec::new();
        for ((job, enc), y) in jobs.iter().zip(&prep.enc).zip(&prep.y) {
            for (t, &i) in enc.order.iter().enumerate() {
                let keys = stage_keys(job, &enc.kinds[t], job.stages[i].num_tasks);
                for k in keys.iter().take(if keys[0] == keys[1] { 1 } else { 2 }) {
                    by.entry(k.clone()).or_default().push(y[t]);
                }
                all.push(y[t]);
            }
        }
        StageMedians {
            by_key: by
                .into_iter()
                .map(|(k, mut v)| (k, median(&mut v).unwrap_or(f64::NAN)))
                .collect(),
            global: median(&mut all).unwrap_or(f64::NAN),
        }
    }
    pub(super) fn predict(&self, job: &DagJob, enc: &EncodedDag) -> Vec<f64> {
        enc.order
            .iter()
            .enumerate()
            .map(|(t, &i)| {
                stage_keys(job, &enc.kinds[t], job.stages[i].num_tasks)
                    .iter()
                    .find_map(|k| self.by_key.get(k).copied())
                    .unwrap_or(self.global)
            })
            .collect()
    }
}
