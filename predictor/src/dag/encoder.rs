//! The stage encoding of a DAG job: its stages in topological order, each a row of its own
//! features and a bag of hashed tokens (operator kind, workflow system and name).

use std::collections::{BTreeMap, HashMap};

use augur_datasets::dag::{topological_order, DagJob};
use augur_models::gru::Sequence;
use augur_numeric::median;
use serde::{Deserialize, Serialize};

use super::ln_s;
use crate::PredictorError;

/// Names of the stage feature columns, in order.
pub const STAGE_FEATURES: [&str; 17] = [
    "ln1p_tasks",
    "ln_executors",
    "ln1p_task_waves",
    "ln_scale_gb",
    "depth",
    "height",
    "fan_in",
    "fan_out",
    "ln1p_input_bytes",
    "cores",
    "ln_job_stages",
    "job_depth",
    "rel_depth",
    "ln1p_parent_tasks",
    "ln1p_job_tasks",
    "ln1p_same_kind_in_job",
    "kind_median_ln_s",
];

/// A job's stages in topological order with their features and tokens.
#[derive(Debug, Clone)]
pub struct EncodedDag {
    /// Stage indices (into `job.stages`) in topological order.
    pub order: Vec<usize>,
    /// Parents of each position, as positions in `order`.
    pub parents: Vec<Vec<usize>>,
    /// Kind of each position (`""` when the data names none).
    pub kinds: Vec<String>,
    /// The GRU input (features row-major `len × STAGE_FEATURES.len()`, tokens per stage).
    pub sequence: Sequence,
    /// Longest path from a source (levels), per position.
    pub depth: Vec<usize>,
}

impl EncodedDag {
    /// Stage feature row of position `t`.
    pub fn row(&self, t: usize) -> &[f32] {
        let d = STAGE_FEATURES.len();
        &self.sequence.x[t * d..(t + 1) * d]
    }
    /// Number of stages.
    pub fn len(&self) -> usize {
        self.order.len()
    }
    /// No stages.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }
}

/// TPC-H scale `"100g"` in GB.
fn scale_gb(scale: &str) -> Option<f64> {
    let digits: String = scale.chars().take_while(|c| c.is_ascii_digit()).collect();
    digits.parse::<f64>().ok().filter(|v| *v > 0.0)
}

/// The words of a name: split at non-alphanumerics, digits and lower→upper case changes,
/// lower-cased (`mProjectPP_ID01` → `m`, `project`, `pp`, `id`).
pub fn name_words(name: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut prev_lower = false;
    for c in name.chars() {
        if !c.is_ascii_alphabetic() {
            if !cur.is_empty() {
                words.push(std::mem::take(&mut cur));
            }
            prev_lower = false;
            continue;
        }
        if c.is_ascii_uppercase() && prev_lower && !cur.is_empty() {
            words.push(std::mem::take(&mut cur));
        }
        prev_lower = c.is_ascii_lowercase();
        cur.push(c.to_ascii_lowercase());
    }
    if !cur.is_empty() {
        words.push(cur);
    }
    words
}

/// FNV-1a hash of `text` into `n` buckets.
pub fn token_bucket(text: &str, n: usize) -> u32 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    (h % n.max(1) as u64) as u32
}

/// Turns a [`DagJob`] into the stage sequence the models read; holds what it learned from
/// the training jobs (the median ln seconds of each stage kind).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DagEncoder {
    /// Token vocabulary size (hash buckets).
    pub n_buckets: usize,
    /// Median ln seconds of each stage kind in the training jobs.
    pub kind_median_ln: BTreeMap<String, f64>,
}

impl DagEncoder {
    /// An encoder with `n_buckets` token buckets and the kind medians of `train`.
    pub fn fit(train: &[DagJob], n_buckets: usize) -> DagEncoder {
        let mut by_kind: HashMap<&str, Vec<f64>> = HashMap::new();
        for job in train {
            for s in &job.stages {
                if let (Some(k), Some(d)) = (&s.kind, s.duration_s) {
                    if d.is_finite() && d >= 0.0 {
                        by_kind.entry(k.as_str()).or_default().push(ln_s(d));
                    }
                }
            }
        }
        let kind_median_ln = by_kind
            .into_iter()
            .map(|(k, mut v)| (k.to_string(), median(&mut v).unwrap_or(f64::NAN)))
            .collect();
        DagEncoder {
            n_buckets,
            kind_median_ln,
        }
    }

    /// Encodes `job` (stages in topological order); a job whose graph is not a DAG is an
    /// error naming it.
    pub fn encode(&self, job: &DagJob) -> Result<EncodedDag, PredictorError> {
        let Topology {
            order,
            parents,
            children,
            depth,
            height,
        } = Topology::of(job)?;
        let n = order.len();
        let job_depth = depth.iter().max().map_or(0, |d| d + 1);
        let stages: Vec<&augur_datasets::dag::DagStage> =
            order.iter().map(|&i| &job.stages[i]).collect();
        let job_tasks: f64 = stages.iter().map(|s| f64::from(s.num_tasks)).sum();
        let kinds: Vec<String> = stages
            .iter()
            .map(|s| s.kind.clone().unwrap_or_default())
            .collect();
        let mut kind_count: HashMap<&str, usize> = HashMap::new();
        for k in &kinds {
            *kind_count.entry(k.as_str()).or_default() += 1;
        }
        let executors = job.executors.map(f64::from);
        let scale = job.scale.as_deref().and_then(scale_gb);
        let nan = f32::NAN;
        let opt = |v: Option<f64>| v.map_or(nan, |v| v as f32);
        let job_tokens = self.job_tokens(job);
        let mut x = Vec::with_capacity(n * STAGE_FEATURES.len());
        let mut tokens = Vec::with_capacity(n);
        for (t, s) in stages.iter().enumerate() {
            let tasks = f64::from(s.num_tasks);
            let res = s.resources.as_ref();
            let parent_tasks: f64 = parents[t]
                .iter()
                .map(|&p| f64::from(stages[p].num_tasks))
                .sum();
            let kind = kinds[t].as_str();
            x.extend_from_slice(&[
                tasks.ln_1p() as f32,
                opt(executors.map(f64::ln)),
                opt(executors.map(|e| (tasks / e).ln_1p())),
                opt(scale.map(f64::ln)),
                depth[t] as f32,
                height[t] as f32,
                parents[t].len() as f32,
                children[t] as f32,
                opt(res.and_then(|r| r.input_bytes).map(f64::ln_1p)),
                opt(res.and_then(|r| r.cores)),
                (n as f64).ln() as f32,
                job_depth as f32,
                depth[t] as f32 / job_depth.max(1) as f32,
                parent_tasks.ln_1p() as f32,
                job_tasks.ln_1p() as f32,
                if kind.is_empty() {
                    nan
                } else {
                    (kind_count.get(kind).copied().unwrap_or(1) as f64).ln_1p() as f32
                },
                opt(self.kind_median_ln.get(kind).copied()),
            ]);
            let mut toks: Vec<u32> = name_words(kind)
                .iter()
                .map(|w| token_bucket(&format!("kind:{w}"), self.n_buckets))
                .collect();
            toks.extend_from_slice(&job_tokens);
            tokens.push(toks);
        }
        Ok(EncodedDag {
            order,
            parents,
            kinds,
            sequence: Sequence { x, tokens },
            depth,
        })
    }

    /// The tokens every stage of `job` carries: its workflow system and the words of a
    /// WfCommons workflow's name.
    fn job_tokens(&self, job: &DagJob) -> Vec<u32> {
        let mut job_tokens: Vec<u32> = Vec::new();
        if let Some(sys) = job.meta.get("runtime_system") {
            job_tokens.push(token_bucket(
                &format!("sys:{}", sys.to_ascii_lowercase()),
                self.n_buckets,
            ));
        }
        if job.family == "wfcommons" {
            for w in name_words(&job.name) {
                job_tokens.push(token_bucket(&format!("wf:{w}"), self.n_buckets));
            }
        }
        job_tokens
    }
}

/// The graph of a job in topological order: per position its parents (as positions), its
/// number of children, its depth (longest path from a source) and height (to a sink).
struct Topology {
    order: Vec<usize>,
    parents: Vec<Vec<usize>>,
    children: Vec<usize>,
    depth: Vec<usize>,
    height: Vec<usize>,
}

impl Topology {
    /// A job whose graph is not a DAG is an error naming it.
    fn of(job: &DagJob) -> Result<Topology, PredictorError> {
        let parents_orig = job.parents();
        let order =
            topological_order(&parents_orig).map_err(|source| PredictorError::DagShape {
                job: job.id.clone(),
                source,
            })?;
        let n = order.len();
        let mut pos = vec![0usize; n];
        for (t, &i) in order.iter().enumerate() {
            pos[i] = t;
        }
        let parents: Vec<Vec<usize>> = order
            .iter()
            .map(|&i| parents_orig[i].iter().map(|&p| pos[p]).collect())
            .collect();
        let mut children = vec![0usize; n];
        for ps in &parents {
            for &p in ps {
                children[p] += 1;
            }
        }
        let mut depth = vec![0usize; n];
        for t in 0..n {
            depth[t] = parents[t].iter().map(|&p| depth[p] + 1).max().unwrap_or(0);
        }
        let mut height = vec![0usize; n];
        for t in (0..n).rev() {
            for &p in &parents[t] {
                height[p] = height[p].max(height[t] + 1);
            }
        }
        Ok(Topology {
            order,
            parents,
            children,
            depth,
            height,
        })
    }
}

/// `seq` with `base[t]` appended to every step's features.
pub(super) fn with_base(seq: &Sequence, base: &[f64]) -> Sequence {
    let d = STAGE_FEATURES.len();
    let mut x = Vec::with_capacity(seq.x.len() + base.len());
    for (row, b) in seq.x.chunks_exact(d).zip(base) {
        x.extend_from_slice(row);
        x.push(*b as f32);
    }
    Sequence {
        x,
        tokens: seq.tokens.clone(),
    }
}
