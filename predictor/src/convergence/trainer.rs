//! Fitting the convergence predictor on finished runs: cross-fitted priors, training rows
//! from prefixes of every curve, three boosted-tree models early-stopped on the newest runs,
//! and their conformal margins.

use std::collections::BTreeMap;

use augur_models::gbdt::{GbdtModel, GbdtParams, Objective, Validation};
use augur_models::{Fit, Matrix, Predict, TrainSet};

use super::features::{CurvePriors, FEATURE_NAMES};
use super::predictor::base_margin;
use super::profile::{profile_benchmarks, BenchmarkProfile};
use super::{
    validate_points, ConvergencePredictor, ConvergenceRun, CONVERGENCE_COVERAGE,
    CONVERGENCE_FEATURE_VERSION,
};
use crate::calibration::binned_conformal::BinnedConformal;
use crate::PredictorError;

/// Training settings of [`ConvergencePredictor`].
#[derive(Debug, Clone)]
pub struct ConvergenceTrainer {
    /// Prefixes per training run (evenly spaced point counts).
    pub prefixes_per_run: usize,
    /// Folds for the cross-fitted priors of training rows.
    pub folds: usize,
    /// Share of training runs (the latest by start) that early-stop and calibrate.
    pub calibration_share: f64,
    pub trees: usize,
}

impl Default for ConvergenceTrainer {
    fn default() -> Self {
        ConvergenceTrainer {
            prefixes_per_run: 16,
            folds: 5,
            calibration_share: 0.15,
            trees: 400,
        }
    }
}

/// A training prefix: features, target, run weight, run position.
struct Rows {
    x: Vec<f32>,
    y: Vec<f64>,
    w: Vec<f64>,
    run: Vec<usize>,
}

fn prefix_counts(n: usize, per_run: usize) -> Vec<usize> {
    if n <= 1 {
        return vec![];
    }
    let max_k = n - 1;
    let m = per_run.min(max_k).max(1);
    let mut ks: Vec<usize> = (0..m)
        .map(|i| 1 + (i * (max_k - 1)) / (m.max(2) - 1).max(1))
        .map(|k| k.clamp(1, max_k))
        .collect();
    ks.dedup();
    ks
}

/// The three quantile objectives: the median, 10% and 90%.
const OBJECTIVES: [Objective; 3] = [
    Objective::L1,
    Objective::Quantile { alpha: 0.1 },
    Objective::Quantile { alpha: 0.9 },
];

impl ConvergenceTrainer {
    /// Trains on finished runs (any order; the latest [`ConvergenceTrainer::calibration_share`]
    /// by start time early-stop the trees and calibrate the interval).
    pub fn train(&self, runs: &[ConvergenceRun]) -> Result<ConvergencePredictor, PredictorError> {
        let timed: Vec<&ConvergenceRun> = runs
            .iter()
            .filter(|r| r.time_to_train_s.is_finite() && r.time_to_train_s > 0.0)
            .collect();
        let mut usable: Vec<&ConvergenceRun> = timed
            .iter()
            .copied()
            .filter(|r| r.points.len() >= 2 && validate_points(&r.points).is_ok())
            .collect();
        if usable.len() < 20 {
            return Err(PredictorError::not_enough(
                "training curves",
                format!(
                    "{} usable runs (need 20 with ≥ 2 valid points and a time-to-train)",
                    usable.len()
                ),
            ));
        }
        usable.sort_by_key(|r| r.start_ms);
        let profiles = profile_benchmarks(&usable);
        let rows = self.training_rows(&timed, &usable, &profiles);
        let all_priors = CurvePriors::fit(&timed, &profiles);
        let n_cal_runs = ((usable.len() as f64) * self.calibration_share).round() as usize;
        let cut_run = usable.len() - n_cal_runs.clamp(1, usable.len() / 2);
        let cut = rows
            .run
            .iter()
            .position(|&r| r >= cut_run)
            .unwrap_or(rows.y.len());
        let (sizes, interval) = self.early_stop_and_calibrate(&rows, cut)?;
        // refit on every training run with the early-stopped sizes
        let d = FEATURE_NAMES.len();
        let all_x = Matrix::new(&rows.x, rows.y.len(), d)?;
        let all_set = TrainSet::new(all_x, &rows.y, Some(&rows.w))?;
        let refit = |k: usize| -> Result<GbdtModel, PredictorError> {
            Ok(GbdtParams {
                n_trees: sizes[k],
                ..self.params(OBJECTIVES[k])
            }
            .fit(&all_set)?)
        };
        Ok(ConvergencePredictor {
            priors: all_priors,
            median: refit(0)?,
            lower: refit(1)?,
            upper: refit(2)?,
            interval,
            feature_version: CONVERGENCE_FEATURE_VERSION,
            n_train_runs: usable.len(),
        })
    }

    /// The training rows: prefixes of every usable run's curve, each run's rows analysed with
    /// cross-fitted priors (fold f's rows use priors fitted without fold f; runs without a
    /// curve only ever inform priors).
    fn training_rows(
        &self,
        timed: &[&ConvergenceRun],
        usable: &[&ConvergenceRun],
        profiles: &BTreeMap<String, BenchmarkProfile>,
    ) -> Rows {
        let folds = self.folds.max(2);
        let fold_of = |r: &ConvergenceRun| -> usize {
            r.run_id
                .bytes()
                .fold(0usize, |h, b| h.wrapping_mul(31).wrapping_add(b as usize))
                % folds
        };
        let fold_priors: Vec<CurvePriors> = (0..folds)
            .map(|f| {
                let others: Vec<&ConvergenceRun> =
                    timed.iter().copied().filter(|r| fold_of(r) != f).collect();
                CurvePriors::fit(&others, profiles)
            })
            .collect();
        let mut rows = Rows {
            x: Vec::new(),
            y: Vec::new(),
            w: Vec::new(),
            run: Vec::new(),
        };
        for (i, r) in usable.iter().enumerate() {
            let priors = &fold_priors[fold_of(r)];
            let ks = prefix_counts(r.points.len(), self.prefixes_per_run);
            let wk = 1.0 / ks.len().max(1) as f64;
            for k in ks {
                let a = priors.analyse(&r.context, &r.points[..k]);
                let remaining =
                    (r.time_to_train_s - a.elapsed.max(r.points[k - 1].wall_time_s)).max(1.0);
                rows.x.extend_from_slice(&a.features);
                rows.y
                    .push((remaining / a.elapsed).ln() - base_margin(&a.features));
                rows.w.push(wk);
                rows.run.push(i);
            }
        }
        rows
    }

    /// The boosted-tree settings of one objective.
    fn params(&self, objective: Objective) -> GbdtParams {
        GbdtParams {
            objective,
            n_trees: self.trees,
            learning_rate: 0.05,
            num_leaves: 15,
            min_data_in_leaf: 20,
            early_stopping_rounds: 40,
            ..GbdtParams::default()
        }
    }

    /// Fits the three models on the rows before `cut`, early-stopped on the rest (the
    /// calibration runs), and conformalises their band on the calibration runs per tercile
    /// of the predicted ln(remaining / elapsed) (CQR). Returns the early-stopped tree counts
    /// (at least 10) and the margins.
    fn early_stop_and_calibrate(
        &self,
        rows: &Rows,
        cut: usize,
    ) -> Result<([usize; 3], BinnedConformal), PredictorError> {
        let d = FEATURE_NAMES.len();
        let fit_x = Matrix::new(&rows.x[..cut * d], cut, d)?;
        let cal_x = Matrix::new(&rows.x[cut * d..], rows.y.len() - cut, d)?;
        let fit_set = TrainSet::new(fit_x, &rows.y[..cut], Some(&rows.w[..cut]))?;
        let mut models = Vec::with_capacity(OBJECTIVES.len());
        let mut sizes = [0usize; 3];
        for (k, objective) in OBJECTIVES.into_iter().enumerate() {
            let m = self.params(objective).fit_with_validation(
                &fit_set,
                Some(Validation {
                    x: cal_x,
                    y: &rows.y[cut..],
                }),
            )?;
            sizes[k] = m.n_trees().max(10);
            models.push(m);
        }
        let (med_early, lo_early, hi_early) = (&models[0], &models[1], &models[2]);
        let scored: Vec<(f64, f64)> = (cut..rows.y.len())
            .map(|i| {
                let row = &rows.x[i * d..(i + 1) * d];
                let (lo, hi) = (lo_early.predict_row(row), hi_early.predict_row(row));
                let mid = base_margin(row) + med_early.predict_row(row);
                (mid, (lo - rows.y[i]).max(rows.y[i] - hi))
            })
            .collect();
        Ok((sizes, BinnedConformal::fit(&scored, CONVERGENCE_COVERAGE)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convergence::prefix_len;

    #[test]
    fn prefix_counts_are_proper_prefixes() {
        assert_eq!(prefix_counts(1, 16), Vec::<usize>::new());
        assert_eq!(prefix_counts(2, 16), vec![1]);
        let ks = prefix_counts(100, 16);
        assert_eq!(ks.first(), Some(&1));
        assert_eq!(ks.last(), Some(&99));
        assert!(ks.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(prefix_len(9, 0.25), 3);
        assert_eq!(prefix_len(1, 0.25), 1);
    }
}
