//! Feature preprocessing shared by the linear, MLP and GRU families (trees need none of
//! it).
//!
//! Runtime features are full of NaN (no history yet) and heavy tails (byte counts, queue
//! lengths, past runtimes in seconds). A [`Preprocessor`] is fitted on the training rows
//! only and stored inside the fitted model, so serving applies exactly the training
//! transform:
//!
//! 1. **Missing values** (NaN or ±∞) are imputed with the column's training median, and every
//!    column that had missing values in training gets a 0/1 *missing indicator*. Columns
//!    that are missing on exactly the same training rows share one indicator (it is 1 when
//!    any of them is missing), so a block of history features that are all absent for new
//!    users costs one column, not one per feature.
//! 2. **Heavy tails**: a column whose 0.1 % / 99.9 % quantiles lie more than
//!    [`PreprocessParams::heavy_tail_ratio`] robust scales from its median is replaced by
//!    `sign(x)·ln(1+|x|)` when that shortens its tails.
//! 3. **Robust standardisation**: `(x − median) / scale` with `scale` = IQR / 1.349
//!    (falling back to 1.2533 × mean absolute deviation when the IQR is 0, as for sparse
//!    columns), clipped to `±clip` and, by default, to the range seen in training: job
//!    traces drift (counters grow, new users arrive), and a ReLU network or a linear model
//!    extrapolates without bound where a tree stays flat. A column with one value in
//!    training is dropped (its indicator, if any, is kept).
//!
//! The imputed median standardises to exactly 0, so a missing value contributes nothing
//! but its indicator.

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::{Matrix, ModelError};

/// How to fit a [`Preprocessor`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PreprocessParams {
    /// Add missing indicators for columns with missing training values.
    pub missing_indicators: bool,
    /// Apply `sign(x)·ln(1+|x|)` to heavy-tailed columns.
    pub log_heavy_tails: bool,
    /// Tail length (in robust scales from the median) above which a column is heavy-tailed.
    pub heavy_tail_ratio: f64,
    /// Standardised values are clipped to `±clip`.
    pub clip: f32,
    /// Also clip every column to its training range.
    pub clip_to_train_range: bool,
}

impl Default for PreprocessParams {
    fn default() -> Self {
        PreprocessParams {
            missing_indicators: true,
            log_heavy_tails: true,
            heavy_tail_ratio: 8.0,
            clip: 10.0,
            clip_to_train_range: true,
        }
    }
}

/// How one input column maps to the output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Column {
    /// Input column index.
    src: u32,
    /// Apply signed log1p before standardising.
    log: bool,
    /// Median of the (transformed) training values.
    center: f32,
    /// 1 / robust scale.
    inv_scale: f32,
    /// Clipping range of the standardised value.
    lo: f32,
    hi: f32,
    /// Output slot of the standardised value (`None`: constant in training).
    value: Option<u32>,
    /// Output slot of the missing indicator (`None`: never missing in training).
    indicator: Option<u32>,
}

/// A fitted preprocessing transform (see the [module docs](self)).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Preprocessor {
    n_in: usize,
    n_out: usize,
    columns: Vec<Column>,
}

/// `sign(x)·ln(1+|x|)`.
#[inline]
pub fn signed_log1p(x: f32) -> f32 {
    x.signum() * x.abs().ln_1p()
}

/// Robust scale of sorted values: IQR / 1.349, else 1.2533 × mean absolute deviation from
/// the median; 0 for a constant column.
fn robust_scale(sorted: &[f32], median: f32) -> f32 {
    let n = sorted.len();
    if n == 0 {
        return 0.0;
    }
    let iqr = sorted[(3 * n) / 4] - sorted[n / 4];
    if iqr > 0.0 && iqr.is_finite() {
        return iqr / 1.349;
    }
    let mad = sorted
        .iter()
        .map(|&v| f64::from((v - median).abs()))
        .sum::<f64>()
        / n as f64;
    (1.2533 * mad) as f32
}

/// Longest tail (0.1 % or 99.9 % quantile) from the median, in robust scales.
fn tail_ratio(sorted: &[f32], median: f32, scale: f32) -> f64 {
    let n = sorted.len();
    if n == 0 || scale <= 0.0 {
        return 0.0;
    }
    let lo = sorted[n / 1000];
    let hi = sorted[(n - 1) - (n - 1) / 1000];
    f64::from((hi - median).max(median - lo)) / f64::from(scale)
}

struct ColumnStats {
    log: bool,
    center: f32,
    scale: f32,
    /// Smallest and largest (transformed) training values.
    min: f32,
    max: f32,
    /// Bitset of missing rows.
    missing: Vec<u64>,
    n_missing: usize,
}

impl PreprocessParams {
    fn column_stats(&self, x: &Matrix, j: usize) -> ColumnStats {
        let n = x.rows();
        let mut missing = vec![0u64; n.div_ceil(64)];
        let mut values = Vec::with_capacity(n);
        let mut n_missing = 0;
        for i in 0..n {
            let v = x.get(i, j);
            if v.is_finite() {
                values.push(v);
            } else {
                missing[i / 64] |= 1 << (i % 64);
                n_missing += 1;
            }
        }
        values.sort_unstable_by(f32::total_cmp);
        let median = values.get(values.len() / 2).copied().unwrap_or(0.0);
        let scale = robust_scale(&values, median);
        let (mut log, mut center, mut scale) = (false, median, scale);
        if self.log_heavy_tails && !values.is_empty() {
            let ratio = tail_ratio(&values, median, scale);
            if ratio > self.heavy_tail_ratio {
                // signed log1p is monotone: the sorted order and the median carry over
                let logged: Vec<f32> = values.iter().map(|&v| signed_log1p(v)).collect();
                let lmed = logged[logged.len() / 2];
                let lscale = robust_scale(&logged, lmed);
                if lscale > 0.0 && tail_ratio(&logged, lmed, lscale) < ratio {
                    (log, center, scale) = (true, lmed, lscale);
                }
            }
        }
        let t = |v: f32| if log { signed_log1p(v) } else { v };
        ColumnStats {
            log,
            center,
            scale,
            min: values.first().map_or(0.0, |&v| t(v)),
            max: values.last().map_or(0.0, |&v| t(v)),
            missing,
            n_missing,
        }
    }

    /// Fits the transform on the training matrix `x`.
    pub fn fit(&self, x: &Matrix) -> Result<Preprocessor, ModelError> {
        if self.clip.is_nan() || self.clip <= 0.0 || !self.heavy_tail_ratio.is_finite() {
            return Err(ModelError::InvalidData(format!(
                "preprocessing needs clip > 0 and a finite heavy_tail_ratio, got {} and {}",
                self.clip, self.heavy_tail_ratio
            )));
        }
        if x.rows() == 0 {
            return Err(ModelError::InvalidData("no rows".into()));
        }
        let n = x.rows();
        let stats: Vec<ColumnStats> = (0..x.cols())
            .into_par_iter()
            .map(|j| self.column_stats(x, j))
            .collect();
        let mut columns = Vec::with_capacity(stats.len());
        let mut n_values = 0u32;
        for (j, s) in stats.iter().enumerate() {
            let keep_value = s.n_missing < n && s.scale > 0.0 && s.scale.is_finite();
            let value = keep_value.then(|| {
                n_values += 1;
                n_values - 1
            });
            let inv_scale = if keep_value { 1.0 / s.scale } else { 0.0 };
            let (lo, hi) = if self.clip_to_train_range && keep_value {
                (
                    ((s.min - s.center) * inv_scale).max(-self.clip),
                    ((s.max - s.center) * inv_scale).min(self.clip),
                )
            } else {
                (-self.clip, self.clip)
            };
            columns.push(Column {
                src: j as u32,
                log: s.log,
                center: s.center,
                inv_scale,
                lo: lo.min(0.0),
                hi: hi.max(0.0),
                value,
                indicator: None,
            });
        }
        // one indicator per distinct missing pattern (never-missing and always-missing
        // columns get none: their indicator would be constant)
        let mut patterns: Vec<usize> = Vec::new(); // column index owning each indicator
        if self.missing_indicators {
            for (j, s) in stats.iter().enumerate() {
                if s.n_missing == 0 || s.n_missing == n {
                    continue;
                }
                let slot = patterns.iter().position(|&k| {
                    stats[k].n_missing == s.n_missing && stats[k].missing == s.missing
                });
                let slot = slot.unwrap_or_else(|| {
                    patterns.push(j);
                    patterns.len() - 1
                });
                columns[j].indicator = Some(n_values + slot as u32);
            }
        }
        columns.retain(|c| c.value.is_some() || c.indicator.is_some());
        Ok(Preprocessor {
            n_in: x.cols(),
            n_out: n_values as usize + patterns.len(),
            columns,
        })
    }
}

impl Preprocessor {
    /// Number of input features.
    pub fn n_in(&self) -> usize {
        self.n_in
    }
    /// Number of output values (standardised columns, then indicators).
    pub fn n_out(&self) -> usize {
        self.n_out
    }
    /// Number of input columns that were log-transformed.
    pub fn n_logged(&self) -> usize {
        self.columns.iter().filter(|c| c.log).count()
    }
    /// Number of missing-indicator outputs.
    pub fn n_indicators(&self) -> usize {
        self.n_out - self.columns.iter().filter(|c| c.value.is_some()).count()
    }

    /// For input column `j`: its output slot and `d(output)/d(x_j)` at the median when the
    /// column is kept untransformed (so a linear model's raw-unit slope is `w · factor`).
    pub fn linear_map(&self, j: usize) -> Option<(usize, f32)> {
        self.columns
            .iter()
            .find(|c| c.src as usize == j && !c.log)
            .and_then(|c| c.value.map(|v| (v as usize, c.inv_scale)))
    }

    /// Transforms one row into `out` (`out.len() == n_out()`). Features absent from a short
    /// `row` count as missing; extra ones are ignored.
    #[inline]
    pub fn transform_row(&self, row: &[f32], out: &mut [f32]) {
        out.fill(0.0);
        for c in &self.columns {
            let x = row.get(c.src as usize).copied().unwrap_or(f32::NAN);
            if x.is_finite() {
                if let Some(slot) = c.value {
                    let t = if c.log { signed_log1p(x) } else { x };
                    // max/min rather than clamp: never panics, even on a corrupt stored model
                    let z = ((t - c.center) * c.inv_scale).max(c.lo).min(c.hi);
                    if let Some(o) = out.get_mut(slot as usize) {
                        *o = z;
                    }
                }
            } else if let Some(o) = c.indicator.and_then(|slot| out.get_mut(slot as usize)) {
                *o = 1.0;
            }
        }
    }

    /// Transforms every row of `x` into a row-major `x.rows() × n_out()` matrix.
    pub fn transform(&self, x: &Matrix) -> Result<Vec<f32>, ModelError> {
        if x.cols() != self.n_in {
            return Err(ModelError::FeatureCount {
                want: self.n_in,
                got: x.cols(),
            });
        }
        let mut out = vec![0.0f32; x.rows() * self.n_out];
        if self.n_out > 0 {
            out.par_chunks_mut(self.n_out)
                .enumerate()
                .with_min_len(256)
                .for_each(|(i, o)| self.transform_row(x.row(i), o));
        }
        Ok(out)
    }
}

/// Runs `f` on a zeroed scratch buffer of `len` floats (on the stack when small), so
/// single-row prediction does not allocate.
#[inline]
pub(crate) fn with_scratch<R>(len: usize, f: impl FnOnce(&mut [f32]) -> R) -> R {
    const STACK: usize = 1024;
    if len <= STACK {
        let mut buf = [0.0f32; STACK];
        f(&mut buf[..len])
    } else {
        let mut buf = vec![0.0f32; len];
        f(&mut buf)
    }
}

/// `Σ a_i·b_i` of f32 data and f64 coefficients, accumulated in f64.
#[inline]
pub(crate) fn dot_f32_f64(a: &[f32], b: &[f64]) -> f64 {
    let mut acc = [0.0f64; 4];
    let (ac, bc) = (a.chunks_exact(4), b.chunks_exact(4));
    let tail: f64 = ac
        .remainder()
        .iter()
        .zip(bc.remainder())
        .map(|(x, y)| f64::from(*x) * y)
        .sum();
    for (x, y) in ac.zip(bc) {
        for ((s, &p), &q) in acc.iter_mut().zip(x).zip(y) {
            *s += f64::from(p) * q;
        }
    }
    acc.iter().sum::<f64>() + tail
}

/// Median and robust scale of targets (for fitting in standardised target units).
pub(crate) fn target_center_scale(y: &[f64]) -> (f64, f64) {
    let mut v: Vec<f64> = y.to_vec();
    v.sort_unstable_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return (0.0, 1.0);
    }
    let med = v[n / 2];
    let iqr = v[(3 * n) / 4] - v[n / 4];
    let scale = if iqr > 0.0 {
        iqr / 1.349
    } else {
        1.2533 * v.iter().map(|x| (x - med).abs()).sum::<f64>() / n as f64
    };
    (med, if scale > 1e-12 { scale } else { 1.0 })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn imputes_indicates_logs_and_standardises() {
        // col 0: normal-ish with NaN; col 1: heavy tail; col 2: constant; col 3: NaN like col 0
        let n = 1000;
        let mut x = Vec::new();
        for i in 0..n {
            let a = if i % 5 == 0 { f32::NAN } else { i as f32 };
            let b = if i % 100 == 0 { 1e7 } else { (i % 10) as f32 };
            let d = if i % 5 == 0 { f32::NAN } else { 1.0 };
            x.extend([a, b, 3.0, d]);
        }
        let m = Matrix::new(&x, n, 4).unwrap();
        let p = PreprocessParams::default().fit(&m).unwrap();
        // values: a, b (c constant, d constant when present); one shared indicator
        assert_eq!(p.n_out(), 3);
        assert_eq!(p.n_indicators(), 1);
        assert_eq!(p.n_logged(), 1);
        let mut out = vec![9.0; 3];
        p.transform_row(&[f32::NAN, 5.0, 3.0, 1.0], &mut out);
        assert_eq!(out[0], 0.0); // imputed median
        assert_eq!(out[2], 1.0); // indicator (col 0 missing)
                                 // beyond the training range: clipped to the largest training value (999)
        let mut top = vec![0.0; 3];
        p.transform_row(&[999.0, 1e7, 3.0, 1.0], &mut top);
        p.transform_row(&[1e30, 1e30, 3.0, 1.0], &mut out);
        assert_eq!(out, top);
        assert!(out[0] > 1.0 && out[1] > 1.0 && out[2] == 0.0);
        // without range clipping only ±clip applies
        let wide = PreprocessParams {
            clip_to_train_range: false,
            ..Default::default()
        }
        .fit(&m)
        .unwrap();
        wide.transform_row(&[1e30, 1e30, 3.0, 1.0], &mut out);
        assert_eq!(out[0], 10.0);
        // short rows are all-missing, not a panic
        p.transform_row(&[], &mut out);
        assert_eq!(out, vec![0.0, 0.0, 1.0]);
    }
}
