//! The search for the queue-wait bound's risk split on the tail of the training period:
//! with the jobs ranked by the bound model's output, what share goes to the low-risk group
//! and at what level.

use augur_models::{AnyModel, Matrix, Predict};

use super::data::QueueWaitData;
use super::trainer::{QueueWaitTrainer, RISK_LOW_LEVELS, RISK_SHARES, RISK_WINDOW};
use crate::calibration::{RiskGroup, RiskScore, RiskSplitBound, RiskSplitSummary};
use crate::feature_rows::gather;
use crate::PredictorError;

/// The training rows the search reads: the bound model's raw output and a score on them.
struct ScoredRows<'a> {
    data: &'a QueueWaitData,
    upper: &'a AnyModel,
}

/// The wait (seconds) of labelled row `r`.
fn wait_of(data: &QueueWaitData, r: usize) -> f64 {
    data.y_log[r].exp_m1().max(0.0)
}

impl ScoredRows<'_> {
    /// The raw bound and `score` of each of `rows`.
    fn raw_and_scores(
        &self,
        rows: &[usize],
        score: &RiskScore,
    ) -> Result<(Vec<f64>, Vec<f64>), PredictorError> {
        let d = self.data.n_features;
        let x = gather(&self.data.x, d, rows);
        let m = Matrix::new(&x, rows.len(), d)?;
        let mut raw = vec![0.0; rows.len()];
        self.upper.predict_into(&m, &mut raw)?;
        let sc = match score {
            RiskScore::UpperModel => raw.clone(),
            RiskScore::Classifier { model, .. } => {
                let mut s = vec![0.0; rows.len()];
                model.predict_into(&m, &mut s)?;
                s
            }
        };
        Ok((raw, sc))
    }
}

impl QueueWaitTrainer {
    /// Fits the risk-split bound, its jobs ranked by the bound model's own output
    /// ([`RiskScore::UpperModel`]). Candidates: the low group's share ([`RISK_SHARES`])
    /// and level ([`RISK_LOW_LEVELS`]; the high group's level keeps the overall one). Each
    /// candidate is calibrated on the validation rows and run online over the calibration
    /// rows; among those whose overall coverage and both groups' coverages reach their
    /// levels there, the narrowest median bound wins, and is recalibrated on the
    /// calibration rows. None when no candidate holds its levels.
    pub(super) fn fit_risk(
        &self,
        data: &QueueWaitData,
        fit_rows: &[usize],
        val_rows: &[usize],
        cal_rows: &[usize],
        upper: &AnyModel,
    ) -> Result<Option<RiskSplitBound>, PredictorError> {
        let rows = ScoredRows { data, upper };
        let seed_fit = &fit_rows[fit_rows.len().saturating_sub(RISK_WINDOW)..];
        let mut best: Option<(f64, RiskSplitBound)> = None;
        let score = RiskScore::UpperModel;
        let (_, seed_sc) = rows.raw_and_scores(seed_fit, &score)?;
        let val = rows.raw_and_scores(val_rows, &score)?;
        let cal = rows.raw_and_scores(cal_rows, &score)?;
        let cal_jobs: Vec<(f64, f64, f64, f64)> = cal_rows
            .iter()
            .zip(&cal.0)
            .zip(&cal.1)
            .map(|((&r, &u), &s)| (data.submit[r], wait_of(data, r), u, s))
            .collect();
        let cal_w: Vec<f64> = cal_rows.iter().map(|&r| wait_of(data, r)).collect();
        let val_y: Vec<f64> = val_rows.iter().map(|&r| data.y_log[r]).collect();
        for share in RISK_SHARES {
            for level_low in RISK_LOW_LEVELS {
                let Some(mut cand) = RiskSplitBound::calibrated(
                    score.clone(),
                    share,
                    level_low,
                    self.coverage,
                    self.adaptive_step,
                    RISK_WINDOW,
                    &val.0,
                    &val.1,
                    &val_y,
                ) else {
                    continue;
                };
                // the online threshold starts from the scores before the replayed rows
                cand.seed_scores.clone_from(&seed_sc);
                let width = self.holding_width(&cand, &cal_jobs, &cal_w);
                if let Some(w) = width {
                    if best.as_ref().is_none_or(|(b, _)| w < *b) {
                        best = Some((w, cand));
                    }
                }
            }
        }
        let Some((_, chosen)) = best else {
            return Ok(None);
        };
        // recalibrate the chosen split on the calibration rows
        let (cal_raw, cal_sc) = rows.raw_and_scores(cal_rows, &chosen.score)?;
        let cal_y: Vec<f64> = cal_rows.iter().map(|&r| data.y_log[r]).collect();
        Ok(RiskSplitBound::calibrated(
            chosen.score,
            chosen.share_low,
            chosen.level_low,
            self.coverage,
            self.adaptive_step,
            RISK_WINDOW,
            &cal_raw,
            &cal_sc,
            &cal_y,
        ))
    }

    /// Runs `cand` online over the calibration jobs (`(submit, wait, raw, score)`, waits
    /// `cal_w`): its median bound (seconds) when its overall and both groups' coverages
    /// reach their levels, else None.
    fn holding_width(
        &self,
        cand: &RiskSplitBound,
        cal_jobs: &[(f64, f64, f64, f64)],
        cal_w: &[f64],
    ) -> Option<f64> {
        let out = cand.new_state().replay(cal_jobs);
        let u: Vec<f64> = out.iter().map(|(b, _)| b.exp_m1().max(0.0)).collect();
        let g: Vec<RiskGroup> = out.iter().map(|(_, g)| *g).collect();
        let m = RiskSplitSummary::measure(cand, &u, &g, cal_w);
        let holds = m.coverage >= self.coverage
            && m.coverage_low >= cand.level_low
            && m.coverage_high >= cand.level_high;
        holds.then_some(m.median_bound_s)
    }
}
