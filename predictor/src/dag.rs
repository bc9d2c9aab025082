//! Stage run times and makespans of DAG-structured jobs, predicted before the job runs.
//!
//! - **Encoding** ([`DagEncoder`]): the stages in topological order (ties by file index;
//!   a cycle or an unknown parent is a [`DagError::Shape`] naming the job), each stage as a
//!   row of its own features ([`STAGE_FEATURES`]: task count, executors and task waves,
//!   scale factor, depth/height, fan-in/fan-out, input bytes and cores where the data has
//!   them, job size and depth, the training median of its kind) and a bag of hashed tokens
//!   (the words of its operator/task kind, the workflow system and workflow name).
//! - **Model** ([`DagPredictor`]): a bidirectional GRU ([`augur_models::gru`]) over that
//!   sequence predicts ln stage seconds; the makespan is the critical path of the predicted
//!   stage times times a learned correction `exp(L1 linear model)` on the job's
//!   critical-path features ([`CORRECTION_FEATURES`]), fitted on the training jobs.
//! - **Baselines** on the same split: per-stage gradient-boosted trees on the same stage rows
//!   (no sequence context, no tokens), and the critical path of per-stage-type medians
//!   ([`StageMedians`]); each also with the same makespan correction, to show what the
//!   correction alone buys.
//! - **Evaluation** ([`evaluate_dag`]): grouped k-fold cross-validation: whole groups (a
//!   TPC-H query over all its scales and executor counts, a WfCommons workflow instance)
//!   are assigned to folds by a seeded shuffle, and every job is predicted by the models
//!   trained on the other folds. Metrics: `mae_log` and `within2x` (shared definitions,
//!   durations clamped to ≥ 1 s) of the makespan and of the stage run times.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::time::Instant;

use augur_datasets::dag::{
    read_tpch_dags, read_wfcommons, topological_order, DagJob, DagShapeError,
};
use augur_datasets::split::clamp_duration;
use augur_datasets::{DatasetError, ReadOptions};
use augur_models::gbdt::{GbdtModel, GbdtParams, Objective};
use augur_models::gru::{GruModel, GruParams, Sequence};
use augur_models::linear::{LinearModel, LinearParams};
use augur_models::{Fit, Matrix, ModelError, Predict, TrainSet};
use serde::{Deserialize, Serialize};

use crate::metrics::{mae_log, within2x};
use crate::registry::Artifact;

/// Version of the stage encoding ([`STAGE_FEATURES`], tokens, correction features); a saved
/// [`DagPredictor`] with another version is refused by the registry.
pub const DAG_FEATURE_SCHEMA_VERSION: u32 = 1;

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

/// Names of the makespan-correction features, in order (all from predicted stage times and
/// the graph).
pub const CORRECTION_FEATURES: [&str; 6] = [
    "ln_critical_path",
    "ln_total_work",
    "ln_stages",
    "ln_job_depth",
    "ln_max_width",
    "ln_executors",
];

/// Floor of stage and makespan seconds in targets and metrics (as everywhere in Augur).
fn ln_s(seconds: f64) -> f64 {
    clamp_duration(seconds).ln()
}

/// Why a DAG job cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum DagError {
    /// The job's graph is not a DAG.
    #[error("job `{job}`: {source}")]
    Shape {
        job: String,
        #[source]
        source: DagShapeError,
    },
    /// A stage has no usable measured duration (training and evaluation need one).
    #[error("job `{job}`, stage `{stage}`: no usable duration")]
    MissingDuration { job: String, stage: String },
    #[error(transparent)]
    Model(#[from] ModelError),
    #[error(transparent)]
    Dataset(#[from] DatasetError),
    /// Not enough jobs or groups.
    #[error("not enough DAG jobs: {0}")]
    NotEnoughData(String),
}

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
            .map(|(k, v)| (k.to_string(), median(v)))
            .collect();
        DagEncoder {
            n_buckets,
            kind_median_ln,
        }
    }

    /// Encodes `job` (stages in topological order); a job whose graph is not a DAG is an
    /// error naming it.
    pub fn encode(&self, job: &DagJob) -> Result<EncodedDag, DagError> {
        let parents_orig = job.parents();
        let order = topological_order(&parents_orig).map_err(|source| DagError::Shape {
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
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => 0.5 * (v[n / 2 - 1] + v[n / 2]),
    }
}

/// Measured stage seconds of `job` in the order of `enc`; an error when one is missing.
fn stage_targets(job: &DagJob, enc: &EncodedDag) -> Result<Vec<f64>, DagError> {
    enc.order
        .iter()
        .map(|&i| {
            let s = &job.stages[i];
            s.duration_s
                .filter(|d| d.is_finite() && *d >= 0.0)
                .ok_or_else(|| DagError::MissingDuration {
                    job: job.id.clone(),
                    stage: s.id.clone(),
                })
        })
        .collect()
}

/// Critical path (longest path) in seconds of stage times given in topological order.
pub fn critical_path_ordered(parents: &[Vec<usize>], seconds: &[f64]) -> f64 {
    let mut finish = vec![0.0f64; seconds.len()];
    let mut best = 0.0f64;
    for t in 0..seconds.len() {
        let start = parents[t].iter().map(|&p| finish[p]).fold(0.0, f64::max);
        finish[t] = start + seconds[t].max(0.0);
        best = best.max(finish[t]);
    }
    best
}

/// The measured makespan of a job: the recorded one (WfCommons), else the critical path of
/// its stage durations (TPC-H: the dataset's per-stage estimate at that executor count; no
/// end-to-end makespan was recorded).
pub fn actual_makespan_s(job: &DagJob) -> Option<f64> {
    job.recorded_makespan_s
        .filter(|m| m.is_finite() && *m > 0.0)
        .or_else(|| job.critical_path_s())
}

/// Correction features of a job from predicted stage seconds (topological order).
fn correction_row(job: &DagJob, enc: &EncodedDag, seconds: &[f64]) -> [f32; 6] {
    let cp = critical_path_ordered(&enc.parents, seconds);
    let total: f64 = seconds.iter().sum();
    let job_depth = enc.depth.iter().max().map_or(0, |d| d + 1);
    let mut width: HashMap<usize, usize> = HashMap::new();
    for d in &enc.depth {
        *width.entry(*d).or_default() += 1;
    }
    let max_width = width.values().copied().max().unwrap_or(1);
    [
        ln_s(cp) as f32,
        ln_s(total) as f32,
        (enc.len().max(1) as f64).ln() as f32,
        (job_depth.max(1) as f64).ln() as f32,
        (max_width as f64).ln() as f32,
        job.executors.map_or(f32::NAN, |e| f64::from(e).ln() as f32),
    ]
}

/// Makespan = critical path × `exp(model(correction features))`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MakespanCorrection {
    model: LinearModel,
}

impl MakespanCorrection {
    /// Fits ln(actual makespan) − ln(critical path) on the given jobs (L1, ridge 1.0).
    fn fit(rows: &[[f32; 6]], ln_ratio: &[f64]) -> Result<MakespanCorrection, ModelError> {
        let flat: Vec<f32> = rows.iter().flatten().copied().collect();
        let x = Matrix::new(&flat, rows.len(), CORRECTION_FEATURES.len())?;
        let params = LinearParams {
            objective: Objective::L1,
            l2: 1.0,
            ..LinearParams::default()
        };
        Ok(MakespanCorrection {
            model: params.fit(&TrainSet::new(x, ln_ratio, None)?)?,
        })
    }
    /// Corrected makespan from a correction row (its first entry is ln critical path).
    fn apply(&self, row: &[f32; 6]) -> f64 {
        (f64::from(row[0]) + self.model.predict_row(row)).exp()
    }
}

/// A prediction for one job.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DagPrediction {
    /// Predicted seconds of each stage, in the job's stage (file) order.
    pub stage_seconds: Vec<f64>,
    /// Critical path of the predicted stage times.
    pub critical_path_s: f64,
    /// Makespan: the critical path with the learned correction.
    pub makespan_s: f64,
}

/// The served DAG model: encoder + GRU over stages + makespan correction.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DagPredictor {
    /// [`DAG_FEATURE_SCHEMA_VERSION`] at training.
    pub schema_version: u32,
    /// What it was trained on (`tpch`, `wfcommons`, ...).
    pub dataset: String,
    pub encoder: DagEncoder,
    /// Per-stage GBDT on the stage rows: its ln seconds are the GRU's base (input column and
    /// offset); the GRU predicts the residual from the sequence context.
    pub base: GbdtModel,
    pub stage_model: GruModel,
    pub correction: MakespanCorrection,
    /// Jobs it was trained on.
    pub training_jobs: usize,
}

impl Artifact for DagPredictor {
    const KIND: &'static str = "dag";
    const CURRENT_FEATURE_SCHEMA_VERSION: u32 = DAG_FEATURE_SCHEMA_VERSION;
    fn feature_schema_version(&self) -> u32 {
        self.schema_version
    }
}

impl DagPredictor {
    /// Predicts the stage times and makespan of `job` before it runs (only its graph, task
    /// counts, kinds and declared inputs are read, never its measured durations).
    pub fn predict(&self, job: &DagJob) -> Result<DagPrediction, DagError> {
        let enc = self.encoder.encode(job)?;
        let base: Vec<f64> = (0..enc.len())
            .map(|t| self.base.predict_row(enc.row(t)))
            .collect();
        let resid = self.stage_model.predict(&with_base(&enc.sequence, &base))?;
        let secs: Vec<f64> = base
            .iter()
            .zip(&resid)
            .map(|(b, r)| (b + r).exp())
            .collect();
        let row = correction_row(job, &enc, &secs);
        let mut stage_seconds = vec![0.0; secs.len()];
        for (t, &i) in enc.order.iter().enumerate() {
            stage_seconds[i] = secs[t];
        }
        Ok(DagPrediction {
            stage_seconds,
            critical_path_s: f64::from(row[0]).exp(),
            makespan_s: self.correction.apply(&row),
        })
    }
}

/// Training recipe of the DAG predictor and its baselines.
#[derive(Debug, Clone)]
pub struct DagTrainer {
    pub gru: GruParams,
    pub gbdt: GbdtParams,
    /// Folds of the grouped cross-validation in [`evaluate_dag`].
    pub folds: usize,
    /// Seed of the fold assignment.
    pub split_seed: u64,
    /// Inner grouped folds for the out-of-fold GBDT base predictions.
    pub inner_folds: usize,
    /// Raise the GRU's epochs until it takes at least this many optimiser steps (small
    /// datasets have few mini-batches per epoch); 0 = exactly `gru.epochs`.
    pub min_steps: usize,
}

impl Default for DagTrainer {
    fn default() -> Self {
        DagTrainer {
            gru: GruParams {
                hidden: 32,
                head: 32,
                n_buckets: 128,
                batch_size: 16,
                crop: 32,
                epochs: 40,
                ..GruParams::default()
            },
            min_steps: 600,
            gbdt: GbdtParams {
                objective: Objective::L1,
                n_trees: 300,
                num_leaves: 15,
                min_data_in_leaf: 5,
                ..GbdtParams::default()
            },
            folds: 5,
            split_seed: 2026,
            inner_folds: 3,
        }
    }
}

/// Encoded training data of a set of jobs.
struct Prepared {
    enc: Vec<EncodedDag>,
    /// ln stage seconds (topological order).
    y: Vec<Vec<f64>>,
    /// ln actual makespan.
    makespan_ln: Vec<f64>,
}

fn prepare(encoder: &DagEncoder, jobs: &[DagJob]) -> Result<Prepared, DagError> {
    let mut p = Prepared {
        enc: Vec::with_capacity(jobs.len()),
        y: Vec::with_capacity(jobs.len()),
        makespan_ln: Vec::with_capacity(jobs.len()),
    };
    for job in jobs {
        let enc = encoder.encode(job)?;
        let secs = stage_targets(job, &enc)?;
        let m = actual_makespan_s(job).ok_or_else(|| DagError::MissingDuration {
            job: job.id.clone(),
            stage: "(makespan)".into(),
        })?;
        p.y.push(secs.iter().map(|&s| ln_s(s)).collect());
        p.makespan_ln.push(ln_s(m));
        p.enc.push(enc);
    }
    Ok(p)
}

fn fit_correction(
    jobs: &[DagJob],
    prep: &Prepared,
    pred_ln: &[Vec<f64>],
) -> Result<MakespanCorrection, DagError> {
    let mut rows = Vec::with_capacity(jobs.len());
    let mut ratio = Vec::with_capacity(jobs.len());
    for ((job, enc), (p, m)) in jobs
        .iter()
        .zip(&prep.enc)
        .zip(pred_ln.iter().zip(&prep.makespan_ln))
    {
        let secs: Vec<f64> = p.iter().map(|v| v.exp()).collect();
        let row = correction_row(job, enc, &secs);
        ratio.push(m - f64::from(row[0]));
        rows.push(row);
    }
    Ok(MakespanCorrection::fit(&rows, &ratio)?)
}

impl DagTrainer {
    /// Caps the GRU's epochs (a quick, weaker run).
    pub fn with_epochs(mut self, epochs: usize) -> DagTrainer {
        self.gru.epochs = epochs.max(1);
        self.min_steps = 0;
        self
    }

    /// Trains the served model on `jobs` (every stage must have a measured duration);
    /// `groups[i]` is the group of `jobs[i]` (the inner folds of the GBDT base keep groups
    /// whole).
    pub fn fit(
        &self,
        dataset: &str,
        jobs: &[DagJob],
        groups: &[String],
    ) -> Result<DagPredictor, DagError> {
        if jobs.is_empty() || jobs.len() != groups.len() {
            return Err(DagError::NotEnoughData(format!(
                "{} training jobs, {} group labels",
                jobs.len(),
                groups.len()
            )));
        }
        let encoder = DagEncoder::fit(jobs, self.gru.n_buckets);
        let prep = prepare(&encoder, jobs)?;
        Ok(self.fit_prepared(dataset, jobs, groups, encoder, &prep)?.0)
    }
}

/// `seq` with `base[t]` appended to every step's features.
fn with_base(seq: &Sequence, base: &[f64]) -> Sequence {
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

/// What [`DagTrainer::fit_prepared`] measured besides the model.
struct FitExtras {
    /// Out-of-fold GBDT ln seconds of every training stage (inner grouped folds).
    oof_base: Vec<Vec<f64>>,
    /// Seconds spent on the GBDTs (full + inner folds) and on the GRU + correction.
    gbdt_s: f64,
    gru_s: f64,
}

impl DagTrainer {
    fn fit_prepared(
        &self,
        dataset: &str,
        jobs: &[DagJob],
        groups: &[String],
        encoder: DagEncoder,
        prep: &Prepared,
    ) -> Result<(DagPredictor, FitExtras), DagError> {
        let t = Instant::now();
        let fit_gbdt = |idx: &[usize]| -> Result<GbdtModel, DagError> {
            let xs: Vec<f32> = idx
                .iter()
                .flat_map(|&j| prep.enc[j].sequence.x.iter().copied())
                .collect();
            let ys: Vec<f64> = idx
                .iter()
                .flat_map(|&j| prep.y[j].iter().copied())
                .collect();
            let x = Matrix::new(&xs, ys.len(), STAGE_FEATURES.len())?;
            Ok(self.gbdt.fit(&TrainSet::new(x, &ys, None)?)?)
        };
        let predict_gbdt = |m: &GbdtModel, j: usize| -> Vec<f64> {
            let e = &prep.enc[j];
            (0..e.len()).map(|t| m.predict_row(e.row(t))).collect()
        };
        let all: Vec<usize> = (0..jobs.len()).collect();
        let base = fit_gbdt(&all)?;
        // out-of-fold base predictions, so the GRU and the corrections learn from base
        // errors as they are on unseen jobs
        let inner = group_folds(groups, self.inner_folds, self.split_seed ^ 0x5eed);
        let n_inner = self.inner_folds.min(inner.len());
        let mut oof_base: Vec<Vec<f64>> = vec![Vec::new(); jobs.len()];
        if n_inner >= 2 {
            for f in 0..n_inner {
                let (held, rest): (Vec<usize>, Vec<usize>) = all
                    .iter()
                    .partition(|&&j| inner.get(&groups[j]) == Some(&f));
                if held.is_empty() || rest.is_empty() {
                    continue;
                }
                let m = fit_gbdt(&rest)?;
                for &j in &held {
                    oof_base[j] = predict_gbdt(&m, j);
                }
            }
        }
        for (j, o) in oof_base.iter_mut().enumerate() {
            if o.is_empty() {
                *o = predict_gbdt(&base, j);
            }
        }
        let gbdt_s = t.elapsed().as_secs_f64();

        let t = Instant::now();
        let seqs: Vec<Sequence> = prep
            .enc
            .iter()
            .zip(&oof_base)
            .map(|(e, b)| with_base(&e.sequence, b))
            .collect();
        let resid: Vec<Vec<f64>> = prep
            .y
            .iter()
            .zip(&oof_base)
            .map(|(y, b)| y.iter().zip(b).map(|(y, b)| y - b).collect())
            .collect();
        let mut gru = self.gru.clone();
        if self.min_steps > 0 {
            let windows: usize = seqs.iter().map(|s| s.len().div_ceil(gru.crop.max(1))).sum();
            let per_epoch = windows.div_ceil(gru.batch_size.max(1)).max(1);
            gru.epochs = gru.epochs.max(self.min_steps.div_ceil(per_epoch)).min(400);
        }
        // early stopping on the jobs of one inner fold (whole groups the GRU does not train
        // on): sequence context that does not carry over to unseen groups is not kept
        let (fit_idx, valid_idx): (Vec<usize>, Vec<usize>) = if n_inner >= 2 {
            all.iter()
                .partition(|&&j| inner.get(&groups[j]) != Some(&0))
        } else {
            (all.clone(), Vec::new())
        };
        let pick = |idx: &[usize]| -> (Vec<Sequence>, Vec<Vec<f64>>) {
            (
                idx.iter().map(|&j| seqs[j].clone()).collect(),
                idx.iter().map(|&j| resid[j].clone()).collect(),
            )
        };
        let (fs, fy) = pick(&fit_idx);
        let (vs, vy) = pick(&valid_idx);
        let valid = (!vs.is_empty() && !fs.is_empty()).then_some((vs.as_slice(), vy.as_slice()));
        let stage_model = if valid.is_some() {
            gru.fit_with_progress(&fs, &fy, valid, &mut |_, _| {})?
        } else {
            gru.fit(&seqs, &resid)?
        };
        let pred: Vec<Vec<f64>> = seqs
            .iter()
            .zip(&oof_base)
            .map(|(s, b)| {
                stage_model
                    .predict(s)
                    .map(|r| r.iter().zip(b).map(|(r, b)| r + b).collect())
            })
            .collect::<Result<_, _>>()?;
        let correction = fit_correction(jobs, prep, &pred)?;
        let gru_s = t.elapsed().as_secs_f64();
        Ok((
            DagPredictor {
                schema_version: DAG_FEATURE_SCHEMA_VERSION,
                dataset: dataset.to_string(),
                encoder,
                base,
                stage_model,
                correction,
                training_jobs: jobs.len(),
            },
            FitExtras {
                oof_base,
                gbdt_s,
                gru_s,
            },
        ))
    }
}

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
    fn fit(jobs: &[DagJob], prep: &Prepared) -> StageMedians {
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
            by_key: by.into_iter().map(|(k, v)| (k, median(v))).collect(),
            global: median(all),
        }
    }
    fn predict(&self, job: &DagJob, enc: &EncodedDag) -> Vec<f64> {
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

/// One method's row of the evaluation table.
#[derive(Debug, Clone, Serialize)]
pub struct DagEvalRow {
    pub method: String,
    pub makespan_mae_log: f64,
    pub makespan_within2x: f64,
    /// `None` for rows that share another row's stage predictions.
    pub stage_mae_log: Option<f64>,
    pub stage_within2x: Option<f64>,
    /// Mean training seconds per fold.
    pub train_s: Option<f64>,
    /// Prediction time per job (encoding + model + critical path), µs.
    pub predict_us: Option<f64>,
}

/// Makespans of one test job.
#[derive(Debug, Clone, Serialize)]
pub struct DagJobResult {
    pub job: String,
    pub group: String,
    pub fold: usize,
    pub stages: usize,
    pub actual_makespan_s: f64,
    /// Predicted makespan per method, in the order of [`DagEvaluation::rows`].
    pub predicted_makespan_s: Vec<f64>,
}

/// Result of [`evaluate_dag`].
#[derive(Debug, Clone, Serialize)]
pub struct DagEvaluation {
    pub dataset: String,
    /// How jobs were split (for the report).
    pub split: String,
    pub folds: usize,
    pub jobs: usize,
    pub groups: usize,
    pub stages: usize,
    pub rows: Vec<DagEvalRow>,
    /// Per test job, with the fold it was tested in.
    pub results: Vec<DagJobResult>,
    /// Index in `rows` of Augur's model (GRU + correction).
    pub model_row: usize,
    /// GRU epochs trained per fold.
    pub gru_epochs: usize,
}

/// Assigns each distinct group to one of `folds` folds: groups sorted, shuffled with
/// `seed` (splitmix64 Fisher–Yates), then dealt round-robin.
pub fn group_folds(groups: &[String], folds: usize, seed: u64) -> BTreeMap<String, usize> {
    let mut distinct: Vec<&String> = groups.iter().collect();
    distinct.sort();
    distinct.dedup();
    let mut state = seed;
    let mut next = || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    for i in (1..distinct.len()).rev() {
        let j = (next() % (i as u64 + 1)) as usize;
        distinct.swap(i, j);
    }
    distinct
        .into_iter()
        .enumerate()
        .map(|(k, g)| (g.clone(), k % folds.max(1)))
        .collect()
}

const METHODS: [&str; 6] = [
    "critical path of per-stage-type medians",
    "per-stage GBDT, critical path",
    "per-stage medians + makespan correction",
    "per-stage GBDT + makespan correction",
    "augur GRU, critical path only",
    "augur GRU + makespan correction",
];

/// Grouped k-fold evaluation of the GRU model and the baselines on `jobs`; `groups[i]` is
/// the group of `jobs[i]` (held out together). `progress(fold, folds)` after each fold.
pub fn evaluate_dag(
    dataset: &str,
    jobs: &[DagJob],
    groups: &[String],
    trainer: &DagTrainer,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<DagEvaluation, DagError> {
    if jobs.len() != groups.len() {
        return Err(DagError::NotEnoughData(format!(
            "{} jobs but {} group labels",
            jobs.len(),
            groups.len()
        )));
    }
    let fold_of = group_folds(groups, trainer.folds, trainer.split_seed);
    let folds = trainer.folds.min(fold_of.len());
    if folds < 2 {
        return Err(DagError::NotEnoughData(format!(
            "{dataset}: {} group(s); grouped cross-validation needs at least 2",
            fold_of.len()
        )));
    }
    let n_methods = METHODS.len();
    let mut results: Vec<DagJobResult> = Vec::with_capacity(jobs.len());
    // stage predictions (ln) and actuals (s) per stage-level method: medians, gbdt, gru
    let mut stage_pred: [Vec<f64>; 3] = [Vec::new(), Vec::new(), Vec::new()];
    let mut stage_actual: Vec<f64> = Vec::new();
    let mut train_s = vec![0.0f64; n_methods];
    let mut predict_s = vec![0.0f64; n_methods];
    let mut gru_epochs = 0;
    for fold in 0..folds {
        let (train_idx, test_idx): (Vec<usize>, Vec<usize>) =
            (0..jobs.len()).partition(|&i| fold_of.get(&groups[i]).copied() != Some(fold));
        if test_idx.is_empty() || train_idx.is_empty() {
            continue;
        }
        let train: Vec<DagJob> = train_idx.iter().map(|&i| jobs[i].clone()).collect();

        // shared encoding of the training jobs
        let t0 = Instant::now();
        let encoder = DagEncoder::fit(&train, trainer.gru.n_buckets);
        let prep = prepare(&encoder, &train)?;
        let encode_s = t0.elapsed().as_secs_f64();

        // medians
        let t = Instant::now();
        let medians = StageMedians::fit(&train, &prep);
        let med_train: Vec<Vec<f64>> = train
            .iter()
            .zip(&prep.enc)
            .map(|(j, e)| medians.predict(j, e))
            .collect();
        let med_corr = fit_correction(&train, &prep, &med_train)?;
        let med_s = t.elapsed().as_secs_f64() + encode_s;
        train_s[0] += med_s;
        train_s[2] += med_s;

        // GRU on the OOF GBDT base; the GBDT baseline is the same full-data GBDT, its
        // correction fitted on the same out-of-fold predictions
        let train_groups: Vec<String> = train_idx.iter().map(|&i| groups[i].clone()).collect();
        let (predictor, extras) =
            trainer.fit_prepared(dataset, &train, &train_groups, encoder.clone(), &prep)?;
        let gbdt = predictor.base.clone();
        let t = Instant::now();
        let gb_corr = fit_correction(&train, &prep, &extras.oof_base)?;
        let gb_s = extras.gbdt_s + t.elapsed().as_secs_f64() + encode_s;
        train_s[1] += gb_s;
        train_s[3] += gb_s;
        gru_epochs = predictor.stage_model.epochs();
        let gru_s = extras.gbdt_s + extras.gru_s + encode_s;
        train_s[4] += gru_s;
        train_s[5] += gru_s;

        for &i in &test_idx {
            let job = &jobs[i];
            let actual = actual_makespan_s(job).ok_or_else(|| DagError::MissingDuration {
                job: job.id.clone(),
                stage: "(makespan)".into(),
            })?;
            let mut made = vec![0.0f64; n_methods];
            // medians
            let t = Instant::now();
            let enc = encoder.encode(job)?;
            let truth = stage_targets(job, &enc)?;
            let med = medians.predict(job, &enc);
            let med_secs: Vec<f64> = med.iter().map(|v| v.exp()).collect();
            let med_row = correction_row(job, &enc, &med_secs);
            made[0] = f64::from(med_row[0]).exp();
            made[2] = med_corr.apply(&med_row);
            let dt = t.elapsed().as_secs_f64();
            predict_s[0] += dt;
            predict_s[2] += dt;
            // gbdt
            let t = Instant::now();
            let enc_g = encoder.encode(job)?;
            let gb: Vec<f64> = (0..enc_g.len())
                .map(|t| gbdt.predict_row(enc_g.row(t)))
                .collect();
            let gb_secs: Vec<f64> = gb.iter().map(|v| v.exp()).collect();
            let gb_row = correction_row(job, &enc_g, &gb_secs);
            made[1] = f64::from(gb_row[0]).exp();
            made[3] = gb_corr.apply(&gb_row);
            let dt = t.elapsed().as_secs_f64();
            predict_s[1] += dt;
            predict_s[3] += dt;
            // gru
            let t = Instant::now();
            let p = predictor.predict(job)?;
            let dt = t.elapsed().as_secs_f64();
            predict_s[4] += dt;
            predict_s[5] += dt;
            made[4] = p.critical_path_s;
            made[5] = p.makespan_s;
            let gru_ln: Vec<f64> = enc.order.iter().map(|&i| p.stage_seconds[i].ln()).collect();

            for (k, preds) in [&med, &gb, &gru_ln].into_iter().enumerate() {
                stage_pred[k].extend(preds.iter().map(|v| v.exp()));
            }
            stage_actual.extend_from_slice(&truth);
            results.push(DagJobResult {
                job: job.id.clone(),
                group: groups[i].clone(),
                fold,
                stages: job.stages.len(),
                actual_makespan_s: actual,
                predicted_makespan_s: made,
            });
        }
        progress(fold + 1, folds);
    }
    let actual: Vec<f64> = results.iter().map(|r| r.actual_makespan_s).collect();
    let n_jobs = results.len().max(1) as f64;
    let rows = (0..n_methods)
        .map(|k| {
            let pred: Vec<f64> = results.iter().map(|r| r.predicted_makespan_s[k]).collect();
            let stage = match k {
                0 => Some(0),
                1 => Some(1),
                4 => Some(2),
                _ => None,
            };
            DagEvalRow {
                method: METHODS[k].to_string(),
                makespan_mae_log: mae_log(&pred, &actual),
                makespan_within2x: within2x(&pred, &actual),
                stage_mae_log: stage.map(|s| mae_log(&stage_pred[s], &stage_actual)),
                stage_within2x: stage.map(|s| within2x(&stage_pred[s], &stage_actual)),
                train_s: Some(train_s[k] / folds as f64),
                predict_us: Some(1e6 * predict_s[k] / n_jobs),
            }
        })
        .collect();
    let mut distinct: Vec<&String> = groups.iter().collect();
    distinct.sort();
    distinct.dedup();
    Ok(DagEvaluation {
        dataset: dataset.to_string(),
        split: format!(
            "grouped {folds}-fold cross-validation: {} groups dealt to folds after a shuffle with seed {}; every job predicted by models trained on the other folds",
            distinct.len(),
            trainer.split_seed
        ),
        folds,
        jobs: results.len(),
        groups: distinct.len(),
        stages: stage_actual.len(),
        rows,
        results,
        model_row: 5,
        gru_epochs,
    })
}

/// A bundled or given DAG dataset: jobs and the group each is held out with.
#[derive(Debug, Clone)]
pub struct DagDataset {
    pub name: String,
    pub jobs: Vec<DagJob>,
    /// Group of each job: the TPC-H query, or the WfCommons instance.
    pub groups: Vec<String>,
}

/// TPC-H DAGs at every executor count each was measured with (one job per (scale, query,
/// executors)); group = query.
pub fn load_tpch(path: &Path) -> Result<DagDataset, DagError> {
    let (dags, _) = read_tpch_dags(path, &ReadOptions::default())?;
    let mut jobs = Vec::new();
    for dag in &dags {
        for e in dag.executor_counts() {
            if let Some(mut j) = dag.at_executors(e) {
                // keep only this executor count's facts (the waves of every count are
                // in `dags`; a copy per job would multiply them)
                for s in &mut j.stages {
                    s.waves.clear();
                    s.task_durations_s.clear();
                }
                jobs.push(j);
            }
        }
    }
    let groups = jobs.iter().map(|j| j.name.clone()).collect();
    Ok(DagDataset {
        name: "dag-tpch".into(),
        jobs,
        groups,
    })
}

/// Every WfCommons instance (`.json` / `.json.gz`) in `dir`, sorted by file name; group =
/// the instance.
pub fn load_wfcommons(dir: &Path) -> Result<DagDataset, DagError> {
    let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(dir)
        .map_err(|source| DatasetError::Io {
            path: dir.to_path_buf(),
            source,
        })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let n = p
                .file_name()
                .map(|n| n.to_string_lossy().to_string())
                .unwrap_or_default();
            n.ends_with(".json") || n.ends_with(".json.gz")
        })
        .collect();
    files.sort();
    let mut jobs = Vec::with_capacity(files.len());
    for f in &files {
        let (job, _) = read_wfcommons(f, &ReadOptions::default())?;
        jobs.push(job);
    }
    let groups = jobs.iter().map(|j| j.id.clone()).collect();
    Ok(DagDataset {
        name: "dag-wfcommons".into(),
        jobs,
        groups,
    })
}
