//! Fitting the failure predictor: the GBDT and the SVM on the training period minus its
//! newest slice, both calibrated on that slice (with forward-chained out-of-fold scores
//! when the slice is too small for a slope), the past failure rate calibrated on the same
//! scores, the served model picked among the three on them ([`choose_served`]), and the
//! GBDT refitted on the whole training period.

use std::time::Instant;

use augur_datasets::JobRecord;
use augur_features::{failure_label, FailureSchema, TrainingRanges};
use augur_models::gbdt::{GbdtModel, GbdtParams, Objective, TreeCountLead, Validation};
use augur_models::{Matrix, Predict, TrainSet};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::past_rate::PastRate;
use super::predictor::{choose_served, CandidateScores};
use super::svm::{fit_svm, svm_columns, KernelSvm, SvmScratch, SvmSettings};
use super::{FailureData, FailurePredictor, CROSS_FIT_CUTS, MIN_CALIBRATION_CLASS};
use crate::calibration::platt::Calibrator;
use crate::feature_rows::gather;
use crate::metrics::classification::{average_precision, roc_auc};
use crate::threads::joined;
use crate::PredictorError;

/// Hyperparameters of the failure predictor.
#[derive(Debug, Clone)]
pub struct FailureTrainer {
    pub gbdt: GbdtParams,
    pub svm: SvmSettings,
    /// Share of the training jobs (the newest) that calibrate and pick the served model.
    pub calibration_fraction: f64,
    /// Refit the GBDT on the whole training period (the slice included) once the slice has
    /// early-stopped and calibrated it and the served model is chosen.
    pub refit_gbdt: bool,
}

impl Default for FailureTrainer {
    fn default() -> Self {
        FailureTrainer {
            gbdt: GbdtParams {
                objective: Objective::LogLoss,
                n_trees: 400,
                learning_rate: 0.03,
                num_leaves: 15,
                min_data_in_leaf: 10,
                lambda_l2: 1.0,
                subsample: 0.8,
                colsample: 0.8,
                early_stopping_rounds: 60,
                ..GbdtParams::default()
            },
            svm: SvmSettings::default(),
            calibration_fraction: 0.2,
            refit_gbdt: true,
        }
    }
}

/// What training measured on the way (for reports and registry notes).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TrainingInfo {
    pub fit_jobs: usize,
    /// Jobs the calibrators were fitted on (and the served model chosen by).
    pub calibration_jobs: usize,
    pub calibration_failed: usize,
    /// True when the slice had too few jobs of a class and the calibration used
    /// forward-chained out-of-fold scores too (see [`MIN_CALIBRATION_CLASS`]).
    pub cross_fitted: bool,
    pub svm_rows: usize,
    pub svm_train_s: f64,
    pub gbdt_train_s: f64,
}

impl FailureTrainer {
    /// Fits the predictor on `data`'s labelled training jobs.
    pub fn train(&self, data: &FailureData<'_>) -> Result<FailurePredictor, PredictorError> {
        self.train_rows(&data.schema, &data.x, data.jobs, &data.train_rows)
    }

    /// Fits on the labelled jobs among `train_rows` (indices into `x`'s rows, in submit
    /// order), `x` being [`augur_features::failure_batch_features`] of the whole trace under
    /// `schema`.
    pub fn train_rows(
        &self,
        schema: &FailureSchema,
        x: &[f32],
        jobs: &[JobRecord],
        train_rows: &[usize],
    ) -> Result<FailurePredictor, PredictorError> {
        let d = schema.len();
        let labelled: Vec<usize> = train_rows
            .iter()
            .copied()
            .filter(|&i| failure_label(jobs[i].status).is_some())
            .collect();
        let n_cal = ((labelled.len() as f64) * self.calibration_fraction.clamp(0.05, 0.5)) as usize;
        if labelled.len() < 50 || n_cal < 10 {
            return Err(PredictorError::not_enough("jobs with a known outcome", format!(
                "{} training jobs with a known outcome (failed / not failed); the failure predictor needs at least 50",
                labelled.len()
            )));
        }
        let (fit, cal) = labelled.split_at(labelled.len() - n_cal);
        let label = |i: usize| failure_label(jobs[i].status).unwrap_or(false);
        let fit_y: Vec<bool> = fit.iter().map(|&i| label(i)).collect();
        let cal_y: Vec<bool> = cal.iter().map(|&i| label(i)).collect();
        let n_failed_fit = fit_y.iter().filter(|&&l| l).count();
        if n_failed_fit == 0 || n_failed_fit == fit_y.len() {
            return Err(PredictorError::not_enough(
                "jobs with a known outcome",
                format!(
                    "the training jobs before the calibration slice are all {}: nothing to learn",
                    if n_failed_fit == 0 {
                        "not failed"
                    } else {
                        "failed"
                    }
                ),
            ));
        }

        // GBDT, early-stopped on the calibration slice, with its refit on the whole training
        // period following it (the refit's tree count is the early-stopped count scaled to
        // the larger row count, so it grows each tree once the first fit's best implies
        // it), and the SVM beside them: independent or led fits, each deterministic, so
        // the models are the ones fitted one after the other
        let fx = gather(x, d, fit);
        let cx = gather(x, d, cal);
        let fy: Vec<f64> = fit_y.iter().map(|&l| f64::from(u8::from(l))).collect();
        let cy: Vec<f64> = cal_y.iter().map(|&l| f64::from(u8::from(l))).collect();
        let fm = Matrix::new(&fx, fit.len(), d)?;
        let cm = Matrix::new(&cx, cal.len(), d)?;
        let train = TrainSet::new(fm, &fy, None)?;
        // every labelled row, for the refit
        let (ax, ay) = if self.refit_gbdt {
            let ay: Vec<f64> = fy.iter().chain(&cy).copied().collect();
            (gather(x, d, &labelled), ay)
        } else {
            (Vec::new(), Vec::new())
        };
        let refit = if self.refit_gbdt {
            Some(TrainSet::new(
                Matrix::new(&ax, labelled.len(), d)?,
                &ay,
                None,
            )?)
        } else {
            None
        };
        let lead = TreeCountLead::new();
        let t0 = Instant::now();
        let ((gbdt, led_s), refit, (svm, mut svm_train_s)) = std::thread::scope(|scope| {
            let svm = scope.spawn(|| {
                let t1 = Instant::now();
                let svm = fit_svm(x, d, fit, &fit_y, svm_columns(schema), &self.svm);
                (svm, t1.elapsed().as_secs_f64())
            });
            let refit = refit.as_ref().map(|all| {
                scope.spawn(|| {
                    let r = self.refit_following(all, fit.len(), &lead);
                    (r, t0.elapsed().as_secs_f64())
                })
            });
            let settle = lead.settle_on_drop();
            let gbdt = self.gbdt.fit_binned_leading(
                &train,
                &self.gbdt.bin(fm),
                Some(Validation { x: cm, y: &cy }),
                &mut |_, _| {},
                &lead,
            );
            drop(settle);
            let led_s = t0.elapsed().as_secs_f64();
            ((gbdt, led_s), refit.map(joined), joined(svm))
        });
        // the GBDT's seconds: both fits, side by side
        let mut gbdt_train_s = refit.as_ref().map_or(led_s, |(_, s)| s.max(led_s));
        let refit = refit.map(|(r, _)| r);
        let (gbdt, svm) = (gbdt?, svm?);

        // calibration on the slice; when its rarer class is too small to fit a slope, on
        // forward-chained out-of-fold scores of the later training period plus the slice
        let (g_scores, s_scores, calib_y, calib_rows, cross_fitted, extra) =
            self.calibration_scores(schema, x, (fit, &fit_y), (cal, &cal_y, &cm), (&gbdt, &svm))?;
        // the extra fits are training time of both models
        gbdt_train_s += extra;
        svm_train_s += extra;
        let gbdt_calibration = Calibrator::fit(&g_scores, &calib_y);
        let svm_calibration = Calibrator::fit(&s_scores, &calib_y);
        let auc_g = roc_auc(&g_scores, &calib_y);
        let auc_s = roc_auc(&s_scores, &calib_y);
        let all_y = fit_y.iter().chain(&cal_y);
        let train_base_rate = all_y.clone().filter(|&&l| l).count() as f64 / labelled.len() as f64;
        // the past failure rate, read from the same rows' features: nothing to fit but
        // its calibration, so no out-of-fold refits
        let past = PastRate::fit(
            schema,
            train_base_rate,
            calib_rows.iter().map(|&i| &x[i * d..(i + 1) * d]),
            &calib_y,
        );
        let candidates = CandidateScores {
            svm: auc_s,
            gbdt: auc_g,
            past_rate: past.as_ref().map(|(_, scores)| roc_auc(scores, &calib_y)),
        };
        let pr_auc = CandidateScores {
            svm: average_precision(&s_scores, &calib_y),
            gbdt: average_precision(&g_scores, &calib_y),
            past_rate: past
                .as_ref()
                .map(|(_, scores)| average_precision(scores, &calib_y)),
        };
        // ROC-AUC leads: PR-AUC on the slice follows its base rate and its few top-ranked
        // jobs, and disagreed with the test period on Graham; PR-AUC decides only between
        // candidates within the ROC-AUC's noise (docs/failure.md)
        let n_failed = calib_y.iter().filter(|&&l| l).count();
        let served = choose_served(&candidates, &pr_auc, n_failed, calib_y.len());
        // refit on the whole training period: the slice is the newest history, the nearest
        // to what is predicted (docs/failure.md); the calibrator fitted on the first fit's
        // out-of-sample scores is kept (monotone, so the ranking is the refit's)
        let gbdt = match refit {
            Some(refit) => refit?,
            None => gbdt,
        };
        let info = TrainingInfo {
            fit_jobs: fit.len(),
            calibration_jobs: calib_y.len(),
            calibration_failed: calib_y.iter().filter(|&&l| l).count(),
            cross_fitted,
            svm_rows: self.svm.max_rows.max(20).min(fit.len()),
            svm_train_s,
            gbdt_train_s,
        };
        Ok(FailurePredictor {
            schema: schema.clone(),
            gbdt,
            gbdt_calibration,
            svm,
            svm_calibration,
            past_rate: past.map(|(p, _)| p),
            served,
            train_base_rate,
            validation_auc: (auc_s, auc_g),
            validation_roc_auc: Some(candidates),
            validation_pr_auc: Some(pr_auc),
            training: info,
            training_ranges: TrainingRanges::of_rows(x, schema.len(), &labelled),
        })
    }
}

impl FailureTrainer {
    /// The GBDT fitted on every labelled training row (`all`), grown beside the early-stopped
    /// fit on the first `n_fit` of them that leads `lead`: its tree count is the leader's
    /// scaled to the larger row count.
    fn refit_following(
        &self,
        all: &TrainSet,
        n_fit: usize,
        lead: &TreeCountLead,
    ) -> Result<GbdtModel, PredictorError> {
        let rows = all.x.rows() as f64;
        let trees_for =
            |n: usize| (((n as f64) * rows / (n_fit.max(1) as f64)).round() as usize).max(1);
        let params = GbdtParams {
            n_trees: trees_for(self.gbdt.n_trees),
            ..self.gbdt.clone()
        };
        let bins = params.bin(all.x);
        Ok(params.fit_binned_following(all, &bins, &mut |_, _| {}, lead, &trees_for)?)
    }
}

/// Calibration scores (GBDT, SVM), their labels and rows (indices into the feature rows),
/// whether they were cross-fitted, and the seconds of the extra fits split between the two
/// models.
type CalibrationScores = (Vec<f64>, Vec<f64>, Vec<bool>, Vec<usize>, bool, f64);

impl FailureTrainer {
    /// Both models' scores on the calibration slice (`cal`, its labels and feature
    /// matrix); with fewer than [`MIN_CALIBRATION_CLASS`] jobs of a class on it, preceded
    /// by the out-of-fold scores of the later fit part (`fit` and its labels).
    fn calibration_scores(
        &self,
        schema: &FailureSchema,
        x: &[f32],
        (fit, fit_y): (&[usize], &[bool]),
        (cal, cal_y, cm): (&[usize], &[bool], &Matrix<'_>),
        (gbdt, svm): (&GbdtModel, &KernelSvm),
    ) -> Result<CalibrationScores, PredictorError> {
        let d = schema.len();
        let mut g_scores = vec![0.0; cal.len()];
        gbdt.predict_into(cm, &mut g_scores)?;
        // each row's decision is its own: on every core, in order
        let mut s_scores: Vec<f64> = cal
            .par_iter()
            .map_init(SvmScratch::default, |scratch, &i| {
                svm.decision(&x[i * d..(i + 1) * d], scratch)
            })
            .collect();
        let mut calib_y = cal_y.to_vec();
        let mut calib_rows = cal.to_vec();
        let cal_pos = cal_y.iter().filter(|&&l| l).count();
        let cross_fitted = cal_pos.min(cal_y.len() - cal_pos) < MIN_CALIBRATION_CLASS;
        let mut extra = 0.0;
        if cross_fitted {
            let t2 = Instant::now();
            let (fg, fs, fy, rows) = self.out_of_fold(schema, x, fit, fit_y, gbdt.n_trees())?;
            g_scores.splice(0..0, fg);
            s_scores.splice(0..0, fs);
            calib_y.splice(0..0, fy);
            calib_rows.splice(0..0, rows);
            extra = t2.elapsed().as_secs_f64() / 2.0;
        }
        Ok((g_scores, s_scores, calib_y, calib_rows, cross_fitted, extra))
    }
}

/// Out-of-fold (GBDT score, SVM score, label, row) columns.
type OutOfFold = (Vec<f64>, Vec<f64>, Vec<bool>, Vec<usize>);

impl FailureTrainer {
    /// Out-of-fold scores of the later part of `fit` (labelled rows in submit order):
    /// for each block between [`CROSS_FIT_CUTS`], both models are fitted on every row before
    /// the block (the GBDT with `n_trees` trees, no early stopping) and score the block.
    /// Blocks whose history lacks a class are left out. Returns (GBDT, SVM, label, row) per
    /// row.
    fn out_of_fold(
        &self,
        schema: &FailureSchema,
        x: &[f32],
        fit: &[usize],
        fit_y: &[bool],
        n_trees: usize,
    ) -> Result<OutOfFold, PredictorError> {
        let d = schema.len();
        let params = GbdtParams {
            n_trees: n_trees.max(1),
            ..self.gbdt.clone()
        };
        let (mut g, mut s, mut y, mut rows) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let at = |f: f64| ((fit.len() as f64) * f) as usize;
        for w in CROSS_FIT_CUTS.windows(2) {
            let (a, b) = (at(w[0]), at(w[1]));
            let head_pos = fit_y[..a].iter().filter(|&&l| l).count();
            if a == 0 || b <= a || head_pos == 0 || head_pos == a {
                continue;
            }
            let hx = gather(x, d, &fit[..a]);
            let hy: Vec<f64> = fit_y[..a].iter().map(|&l| f64::from(u8::from(l))).collect();
            let hm = Matrix::new(&hx, a, d)?;
            let model = params.fit_with_validation(&TrainSet::new(hm, &hy, None)?, None)?;
            let svm = fit_svm(x, d, &fit[..a], &fit_y[..a], svm_columns(schema), &self.svm)?;
            let mut scratch = SvmScratch::default();
            for (k, &i) in fit[a..b].iter().enumerate() {
                let row = &x[i * d..(i + 1) * d];
                g.push(model.predict_row(row));
                s.push(svm.decision(row, &mut scratch));
                y.push(fit_y[a + k]);
                rows.push(i);
            }
        }
        Ok((g, s, y, rows))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use augur_datasets::{JobRecord, JobStatus};

    use super::*;
    use crate::contract::{JobEvent, OnlinePredictor};
    use crate::failure::{auc_standard_error, FailureModel};
    use crate::synthetic_trace::{trace_with_failures, user_index, USERS};

    fn train(jobs: &[JobRecord]) -> FailurePredictor {
        let data = FailureData::new(jobs).unwrap();
        FailureTrainer::default().train(&data).unwrap()
    }

    #[test]
    fn serves_the_past_rate_when_the_user_is_the_signal() {
        // each of 40 users fails at its own steady rate (0 to 1, not in the order of the
        // users' run times); what a job asks for says nothing more
        let rate = |k: usize| (k * 17 % 40) as f64 / 39.0;
        let jobs = trace_with_failures(2000, 7, 40, |j| rate(user_index(j)));
        let p = train(&jobs);
        let c = p.validation_roc_auc.unwrap();
        let past = c.past_rate.unwrap();
        assert_eq!(p.served, FailureModel::PastRate, "{c:?}");
        assert!(past > c.gbdt && past > c.svm, "{c:?}");
        assert_eq!(p.past_rate.as_ref().unwrap().key_label(), "user");

        // online, the served rate moves as the user's outcomes arrive
        let p = Arc::new(p);
        let mut online = Arc::clone(&p).online(1);
        let at = 1.8e9;
        let job = |id: String, t: f64| JobRecord {
            job_id: id,
            submit_time: t,
            duration: Some(60.0),
            user: Some("fresh".into()),
            ..jobs[0].clone()
        };
        let first = job("f0".into(), at);
        let before = online
            .observe(&JobEvent::Submitted { job: &first })
            .unwrap()
            .unwrap();
        assert_eq!(before.model, "past_rate");
        for k in 1..=8 {
            let id = format!("f{k}");
            let t = at + 100.0 * f64::from(k);
            online.observe(&JobEvent::Submitted {
                job: &job(id.clone(), t),
            });
            online.observe(&JobEvent::Finished {
                job_id: &id,
                at: t + 60.0,
                status: JobStatus::Failed,
                duration: Some(60.0),
            });
        }
        let after = online
            .observe(&JobEvent::Submitted {
                job: &job("f9".into(), at + 2000.0),
            })
            .unwrap()
            .unwrap();
        assert!(
            after.probability > before.probability,
            "{before:?} -> {after:?}"
        );
    }

    #[test]
    fn serves_a_trained_model_when_the_request_is_the_signal() {
        // 8-node jobs fail, whoever submits them: the GBDT and the SVM both see the request
        // (which of the two leads is noise), the users' past rates do not
        let jobs = trace_with_failures(2000, 11, USERS, |j| {
            if j.num_nodes >= Some(8.0) {
                0.9
            } else {
                0.05
            }
        });
        let p = train(&jobs);
        let c = p.validation_roc_auc.unwrap();
        assert_ne!(p.served, FailureModel::PastRate, "{c:?}");
        let past = c.past_rate.unwrap();
        assert!(c.of(p.served) > past + 0.2, "{c:?}");
        assert!(c.gbdt > past + 0.2 && c.gbdt > 0.8, "{c:?}");
    }

    #[test]
    fn the_past_rate_is_served_only_when_it_beats_both() {
        let c = |svm, gbdt, past| CandidateScores {
            svm,
            gbdt,
            past_rate: Some(past),
        };
        assert_eq!(c(0.5, 0.6, 0.6).best(), FailureModel::Gbdt);
        assert_eq!(c(0.7, 0.6, 0.65).best(), FailureModel::Svm);
        assert_eq!(c(0.5, 0.6, 0.61).best(), FailureModel::PastRate);
        assert_eq!(c(f64::NAN, f64::NAN, 0.1).best(), FailureModel::PastRate);
        assert_eq!(c(0.5, 0.6, f64::NAN).best(), FailureModel::Gbdt);
    }

    #[test]
    fn pr_auc_decides_only_within_the_roc_auc_noise() {
        let c = |svm, gbdt, past| CandidateScores {
            svm,
            gbdt,
            past_rate: Some(past),
        };
        // 13 failed of 674 (MLPerf's slice): the standard error of a 0.63 ROC-AUC is ~0.08
        let noise = auc_standard_error(0.63, 13, 661);
        assert!((0.07..0.10).contains(&noise), "{noise}");
        // 1,164 failed of 21,284 (Graham's): ~0.009
        let noise = auc_standard_error(0.61, 1164, 20120);
        assert!((0.007..0.011).contains(&noise), "{noise}");

        let (roc, pr) = (c(0.60, 0.28, 0.63), c(0.10, 0.09, 0.03));
        // few failures: a 0.03 ROC-AUC lead is noise, the SVM's PR-AUC decides
        assert_eq!(choose_served(&roc, &pr, 13, 674), FailureModel::Svm);
        // many failures: the same lead is real, the past rate is served
        assert_eq!(
            choose_served(&roc, &pr, 1164, 21284),
            FailureModel::PastRate
        );
        // the past rate ahead in both metrics is served however few the failures
        let pr_past = c(0.02, 0.09, 0.10);
        assert_eq!(
            choose_served(&roc, &pr_past, 13, 674),
            FailureModel::PastRate
        );
        // a model the past rate beats in both is never served
        for n_failed in [3, 13, 300, 5000] {
            let served = choose_served(&roc, &pr_past, n_failed, 20000);
            assert_eq!(served, FailureModel::PastRate, "{n_failed}");
        }
        // a GBDT ahead in ROC-AUC beyond the noise stays served whatever the PR-AUC
        let roc_g = c(0.55, 0.61, 0.59);
        let pr_g = c(0.13, 0.07, 0.15);
        assert_eq!(
            choose_served(&roc_g, &pr_g, 1164, 21284),
            FailureModel::Gbdt
        );
        // NaN (a class missing) never wins
        assert_eq!(
            choose_served(&c(f64::NAN, 0.6, f64::NAN), &c(f64::NAN, 0.1, 0.9), 10, 100),
            FailureModel::Gbdt
        );
    }
}
