//! Final-metric extrapolation on full-length curves without wall time (the bundled
//! Pollux/Sia validation profiles): each curve family and the ensemble against the last
//! observed value.

use augur_numeric::median;
use serde::{Deserialize, Serialize};

use super::curve::{fit_family, CurveFamily};
use super::ensemble::CurveEnsemble;
use super::evaluate::{prefix_len, PREFIXES};
use super::{validate_points, CurvePoint, Direction};
use crate::PredictorError;

/// A full training curve without wall time: (name, progress, metric).
pub type ProgressCurve = (String, Vec<f64>, Vec<f64>);

/// The bundled Pollux/Sia validation curves (`datasets/data/pollux-curves`) with at least
/// 8 points, as `model@batch` with (progress, metric).
pub fn load_bundled_pollux_curves() -> Result<Vec<ProgressCurve>, augur_datasets::DatasetError> {
    let dir = augur_datasets::bundled::bundled_file("pollux-curves")?;
    let (profiles, _) =
        augur_datasets::curves::read_pollux_dir(&dir, &augur_datasets::ReadOptions::default())?;
    Ok(profiles
        .validations
        .into_iter()
        .filter(|v| v.points.len() >= 8)
        .map(|v| {
            let name = format!("{}@{}", v.model, v.global_batch_size);
            let k = v.points.iter().map(|p| p.progress).collect();
            let y = v.points.iter().map(|p| p.metric).collect();
            (name, k, y)
        })
        .collect())
}

/// Median error of each method at one prefix of the full-length curves.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FinalMetricScores {
    pub prefix: f64,
    pub curves: usize,
    /// (method, median |predicted − actual final| / the curve's whole range).
    pub methods: Vec<(String, f64)>,
}

/// Given the first 25/50/75% of each curve's points, predict its last point's metric with
/// each family, the ensemble, and the last observed value (baseline). A family that cannot
/// be fitted to so few points answers with the last observed value. The metric's direction
/// is inferred from the prefix.
pub fn evaluate_final_metric(curves: &[ProgressCurve]) -> Vec<FinalMetricScores> {
    PREFIXES
        .iter()
        .map(|&share| {
            let mut names: Vec<String> = vec!["last observed value (baseline)".into()];
            names.extend(CurveFamily::ALL.iter().map(|f| f.name().to_string()));
            names.push("weighted ensemble".into());
            let mut errs: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
            let mut used = 0;
            for (_, k, y) in curves {
                let n = k.len().min(y.len());
                if n < 2 || validate_progress(k, y).is_err() {
                    continue;
                }
                used += 1;
                let m = prefix_len(n, share).min(n - 1);
                let (kp, yp) = (&k[..m], &y[..m]);
                let (k_end, y_end) = (k[n - 1], y[n - 1]);
                let (lo, hi) = y[..n]
                    .iter()
                    .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| {
                        (a.min(v), b.max(v))
                    });
                let range = (hi - lo).max(1e-12);
                let dir = Direction::infer(yp);
                let last = yp[m - 1];
                let mut preds = vec![last];
                for &f in &CurveFamily::ALL {
                    preds.push(
                        fit_family(f, kp, yp, dir)
                            .map(|fit| fit.value_at(k_end))
                            .unwrap_or(last),
                    );
                }
                preds.push(
                    CurveEnsemble::fit(kp, yp, dir)
                        .map(|e| e.value_at(k_end))
                        .unwrap_or(last),
                );
                for (e, p) in errs.iter_mut().zip(preds) {
                    e.push((p - y_end).abs() / range);
                }
            }
            FinalMetricScores {
                prefix: share,
                curves: used,
                methods: names
                    .into_iter()
                    .zip(errs)
                    .map(|(n, mut e)| (n, median(&mut e).unwrap_or(f64::NAN)))
                    .collect(),
            }
        })
        .collect()
}

/// Checks a progress curve: finite values, non-decreasing progress.
fn validate_progress(k: &[f64], y: &[f64]) -> Result<(), PredictorError> {
    let points: Vec<CurvePoint> = k
        .iter()
        .zip(y)
        .map(|(&k, &v)| CurvePoint {
            wall_time_s: k,
            epoch: None,
            samples: None,
            value: v,
        })
        .collect();
    validate_points(&points)
}
