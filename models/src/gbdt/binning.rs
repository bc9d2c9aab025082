//! Feature bucketing: at most 255 quantile bins per feature, bin 0 for missing values.

use rayon::prelude::*;

use crate::Matrix;

/// Per-feature bin edges: value `v` falls in bin `1 + #{edges < v}`; bin 0 is NaN.
pub(super) struct Binner {
    edges: Vec<Vec<f32>>,
}

impl Binner {
    pub(super) fn new(x: &Matrix, max_bins: usize) -> Binner {
        let max_bins = max_bins.clamp(2, 255);
        let step = (x.rows() / 100_000).max(1);
        let edges = (0..x.cols())
            .into_par_iter()
            .map(|j| {
                let mut v: Vec<f32> = (0..x.rows())
                    .step_by(step)
                    .map(|i| x.get(i, j))
                    .filter(|v| !v.is_nan())
                    .collect();
                v.sort_by(f32::total_cmp);
                v.dedup();
                if v.len() < max_bins {
                    // one bin per distinct value: edges at the values themselves
                    return v;
                }
                let mut e: Vec<f32> = (1..max_bins - 1)
                    .map(|k| v[k * v.len() / (max_bins - 1)])
                    .collect();
                e.dedup();
                e
            })
            .collect();
        Binner { edges }
    }

    /// Every value of `x` as its bin, row-major like `x` (row `i`'s bins at `i * cols`): a
    /// histogram pass reads each row's bins of every feature from one place.
    pub(super) fn bin_rows(&self, x: &Matrix) -> Vec<u8> {
        let d = x.cols();
        let mut bins = vec![0u8; x.rows() * d];
        if d == 0 {
            return bins;
        }
        bins.par_chunks_mut(d)
            .with_min_len(1024)
            .enumerate()
            .for_each(|(i, row)| {
                for (j, b) in row.iter_mut().enumerate() {
                    *b = self.bin(j, x.get(i, j));
                }
            });
        bins
    }

    #[inline]
    fn bin(&self, j: usize, v: f32) -> u8 {
        if v.is_nan() {
            0
        } else {
            1 + self.edges[j].partition_point(|&e| e < v) as u8
        }
    }

    /// Threshold for "bin <= b": the upper edge of bin `b` (bin 0 → only NaN goes left).
    pub(super) fn threshold(&self, j: usize, b: usize) -> f32 {
        // finite sentinels keep the model JSON-serialisable
        if b == 0 {
            f32::MIN
        } else {
            self.edges[j].get(b - 1).copied().unwrap_or(f32::MAX)
        }
    }

    pub(super) fn n_bins(&self, j: usize) -> usize {
        self.edges[j].len() + 2
    }
}
