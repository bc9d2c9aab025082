//! The search for the queue-wait bound's risk split on the tail of the training period:
//! with the jobs ranked by the bound model's output, what share goes to the low-risk group
//! and at what level.

use augur_models::{AnyModel, Matrix, Predict};

use super::data::QueueWaitData;
use super::trainer::{Parts, QueueWaitTrainer, RISK_LOW_LEVELS, RISK_SHARES, RISK_WINDOW};
use crate::calibration::{RiskGroup, RiskScore, RiskSplitBound, RiskSplitSummary};
use crate::feature_rows::gather;
use crate::PredictorError;

/// The wait (seconds) of labelled row `r`.
fn wait_of(data: &QueueWaitData, r: usize) -> f64 {
    data.y_log[r].exp_m1().max(0.0)
}

/// The bound model's raw output (ln(1 + s)) on each of `rows`: the risk score too.
pub(super) fn bound_of(
    data: &QueueWaitData,
    upper: &AnyModel,
    rows: &[usize],
) -> Result<Vec<f64>, PredictorError> {
    let d = data.n_features;
    let x = gather(&data.x, d, rows);
    let mut raw = vec![0.0; rows.len()];
    upper.predict_into(&Matrix::new(&x, rows.len(), d)?, &mut raw)?;
    Ok(raw)
}

impl QueueWaitTrainer {
    /// Fits the risk-split bound, its jobs ranked by the bound model's own output
    /// ([`RiskScore::UpperModel`]). Candidates: the low group's share ([`RISK_SHARES`])
    /// and level ([`RISK_LOW_LEVELS`]; the high group's level keeps the overall one). Each
    /// candidate is calibrated on the validation rows and run online over the calibration
    /// rows; among those whose overall coverage and both groups' coverages reach their
    /// levels there, the narrowest median bound wins, and is recalibrated on the
    /// calibration rows. None when no candidate holds its levels. `cal` is the bound
    /// model's output on the calibration rows ([`bound_of`]).
    pub(super) fn fit_risk(
        &self,
        data: &QueueWaitData,
        parts: &Parts,
        upper: &AnyModel,
        cal: &[f64],
    ) -> Result<Option<RiskSplitBound>, PredictorError> {
        let (fit_rows, val_rows, cal_rows) = (parts.fit, parts.valid, parts.calib);
        let seed_fit = &fit_rows[fit_rows.len().saturating_sub(RISK_WINDOW)..];
        let mut best: Option<(f64, RiskSplitBound)> = None;
        let seed = bound_of(data, upper, seed_fit)?;
        let val = bound_of(data, upper, val_rows)?;
        let cal_jobs: Vec<(f64, f64, f64, f64)> = cal_rows
            .iter()
            .zip(cal)
            .map(|(&r, &u)| (data.submit[r], wait_of(data, r), u, u))
            .collect();
        let cal_w: Vec<f64> = cal_rows.iter().map(|&r| wait_of(data, r)).collect();
        let val_y: Vec<f64> = val_rows.iter().map(|&r| data.y_log[r]).collect();
        for share in RISK_SHARES {
            for level_low in RISK_LOW_LEVELS {
                let Some(mut cand) = RiskSplitBound::calibrated(
                    RiskScore::UpperModel,
                    share,
                    level_low,
                    self.coverage,
                    self.adaptive_step,
                    RISK_WINDOW,
                    &val,
                    &val,
                    &val_y,
                ) else {
                    continue;
                };
                // the online threshold starts from the scores before the replayed rows
                cand.seed_scores.clone_from(&seed);
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
        let cal_y: Vec<f64> = cal_rows.iter().map(|&r| data.y_log[r]).collect();
        Ok(RiskSplitBound::calibrated(
            chosen.score,
            chosen.share_low,
            chosen.level_low,
            self.coverage,
            self.adaptive_step,
            RISK_WINDOW,
            cal,
            cal,
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
