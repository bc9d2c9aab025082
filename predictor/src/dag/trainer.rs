//! Fitting the DAG predictor: the per-stage GBDT base (with grouped out-of-fold
//! predictions), the GRU on its residuals over the stage sequence, and the makespan
//! correction.

use std::collections::BTreeMap;
use std::time::Instant;

use augur_datasets::dag::DagJob;
use augur_models::gbdt::{GbdtModel, GbdtParams, Objective};
use augur_models::gru::{GruModel, GruParams, Sequence};
use augur_models::{Fit, Matrix, Predict, TrainSet};

use super::encoder::{with_base, DagEncoder, EncodedDag, STAGE_FEATURES};
use super::folds::group_folds;
use super::makespan::{actual_makespan_s, correction_row, stage_targets, MakespanCorrection};
use super::{ln_s, DagDataset, DagPredictor, DAG_FEATURE_SCHEMA_VERSION};
use crate::PredictorError;

/// Training recipe of the DAG predictor and its baselines.
#[derive(Debug, Clone)]
pub struct DagTrainer {
    pub gru: GruParams,
    pub gbdt: GbdtParams,
    /// Folds of the grouped cross-validation in [`super::evaluate_dag`].
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
pub(super) struct Prepared {
    pub(super) enc: Vec<EncodedDag>,
    /// ln stage seconds (topological order).
    pub(super) y: Vec<Vec<f64>>,
    /// ln actual makespan.
    pub(super) makespan_ln: Vec<f64>,
}

pub(super) fn prepare(encoder: &DagEncoder, jobs: &[DagJob]) -> Result<Prepared, PredictorError> {
    let mut p = Prepared {
        enc: Vec::with_capacity(jobs.len()),
        y: Vec::with_capacity(jobs.len()),
        makespan_ln: Vec::with_capacity(jobs.len()),
    };
    for job in jobs {
        let enc = encoder.encode(job)?;
        let secs = stage_targets(job, &enc)?;
        let m = actual_makespan_s(job).ok_or_else(|| PredictorError::MissingStageDuration {
            job: job.id.clone(),
            stage: "(makespan)".into(),
        })?;
        p.y.push(secs.iter().map(|&s| ln_s(s)).collect());
        p.makespan_ln.push(ln_s(m));
        p.enc.push(enc);
    }
    Ok(p)
}

pub(super) fn fit_correction(
    jobs: &[DagJob],
    prep: &Prepared,
    pred_ln: &[Vec<f64>],
) -> Result<MakespanCorrection, PredictorError> {
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

    /// Trains the served model on every job of `data` (see [`DagTrainer::fit`]).
    pub fn train(&self, data: &DagDataset) -> Result<DagPredictor, PredictorError> {
        self.fit(&data.name, &data.jobs, &data.groups)
    }

    /// Trains the served model on `jobs` (every stage must have a measured duration);
    /// `groups[i]` is the group of `jobs[i]` (the inner folds of the GBDT base keep groups
    /// whole).
    pub fn fit(
        &self,
        dataset: &str,
        jobs: &[DagJob],
        groups: &[String],
    ) -> Result<DagPredictor, PredictorError> {
        if jobs.is_empty() || jobs.len() != groups.len() {
            return Err(PredictorError::not_enough(
                "DAG jobs",
                format!(
                    "{} training jobs, {} group labels",
                    jobs.len(),
                    groups.len()
                ),
            ));
        }
        let encoder = DagEncoder::fit(jobs, self.gru.n_buckets);
        let prep = prepare(&encoder, jobs)?;
        Ok(self.fit_prepared(dataset, jobs, groups, encoder, &prep)?.0)
    }
}

/// What [`DagTrainer::fit_prepared`] measured besides the model.
pub(super) struct FitExtras {
    /// Out-of-fold GBDT ln seconds of every training stage (inner grouped folds).
    pub(super) oof_base: Vec<Vec<f64>>,
    /// Seconds spent on the GBDTs (full + inner folds) and on the GRU + correction.
    pub(super) gbdt_s: f64,
    pub(super) gru_s: f64,
}

/// Inner grouped folds of the training jobs: each group's fold, and how many folds there are.
struct InnerFolds {
    fold_of: BTreeMap<String, usize>,
    n: usize,
}

impl DagTrainer {
    pub(super) fn fit_prepared(
        &self,
        dataset: &str,
        jobs: &[DagJob],
        groups: &[String],
        encoder: DagEncoder,
        prep: &Prepared,
    ) -> Result<(DagPredictor, FitExtras), PredictorError> {
        let t = Instant::now();
        let inner_folds = group_folds(groups, self.inner_folds, self.split_seed ^ 0x5eed);
        let inner = InnerFolds {
            n: self.inner_folds.min(inner_folds.len()),
            fold_of: inner_folds,
        };
        let (base, oof_base) = self.fit_base(groups, prep, &inner)?;
        let gbdt_s = t.elapsed().as_secs_f64();

        let t = Instant::now();
        let (stage_model, seqs) = self.fit_gru(groups, prep, &inner, &oof_base)?;
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

    /// The per-stage GBDT on every training job, and out-of-fold base predictions of every
    /// training stage (inner grouped folds; the full model where a job's fold cannot be
    /// held out), so the GRU and the corrections learn from base errors as they are on
    /// unseen jobs.
    fn fit_base(
        &self,
        groups: &[String],
        prep: &Prepared,
        inner: &InnerFolds,
    ) -> Result<(GbdtModel, Vec<Vec<f64>>), PredictorError> {
        let fit_gbdt = |idx: &[usize]| -> Result<GbdtModel, PredictorError> {
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
        let all: Vec<usize> = (0..prep.enc.len()).collect();
        let base = fit_gbdt(&all)?;
        let mut oof_base: Vec<Vec<f64>> = vec![Vec::new(); prep.enc.len()];
        if inner.n >= 2 {
            for f in 0..inner.n {
                let (held, rest): (Vec<usize>, Vec<usize>) = all
                    .iter()
                    .partition(|&&j| inner.fold_of.get(&groups[j]) == Some(&f));
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
        Ok((base, oof_base))
    }

    /// The GRU on the residuals of the base over each job's stage sequence (the base as an
    /// input column), early-stopped on the jobs of inner fold 0 (whole groups it does not
    /// train on: sequence context that does not carry over to unseen groups is not kept).
    /// Returns the model and the training sequences.
    fn fit_gru(
        &self,
        groups: &[String],
        prep: &Prepared,
        inner: &InnerFolds,
        oof_base: &[Vec<f64>],
    ) -> Result<(GruModel, Vec<Sequence>), PredictorError> {
        let seqs: Vec<Sequence> = prep
            .enc
            .iter()
            .zip(oof_base)
            .map(|(e, b)| with_base(&e.sequence, b))
            .collect();
        let resid: Vec<Vec<f64>> = prep
            .y
            .iter()
            .zip(oof_base)
            .map(|(y, b)| y.iter().zip(b).map(|(y, b)| y - b).collect())
            .collect();
        let mut gru = self.gru.clone();
        if self.min_steps > 0 {
            let windows: usize = seqs.iter().map(|s| s.len().div_ceil(gru.crop.max(1))).sum();
            let per_epoch = windows.div_ceil(gru.batch_size.max(1)).max(1);
            gru.epochs = gru.epochs.max(self.min_steps.div_ceil(per_epoch)).min(400);
        }
        let all: Vec<usize> = (0..seqs.len()).collect();
        let (fit_idx, valid_idx): (Vec<usize>, Vec<usize>) = if inner.n >= 2 {
            all.iter()
                .partition(|&&j| inner.fold_of.get(&groups[j]) != Some(&0))
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
        Ok((stage_model, seqs))
    }
}
