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
                // values equal under `total_cmp` have equal bits: no need for a stable sort
                v.sort_unstable_by(f32::total_cmp);
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

    /// Row-major `bins` (`d` per row) column by column: column `j` at `j * rows`.
    pub(super) fn columns_of(bins: &[u8], d: usize) -> Vec<u8> {
        if d == 0 {
            return Vec::new();
        }
        let rows = bins.len() / d;
        let mut columns = vec![0u8; bins.len()];
        columns
            .par_chunks_mut(rows.max(1))
            .enumerate()
            .for_each(|(j, column)| {
                for (i, b) in column.iter_mut().enumerate() {
                    *b = bins[i * d + j];
                }
            });
        columns
    }

    /// For each column of row-major `bins` (`d` per row): `None` when every row is in one bin
    /// (no split can leave rows on both sides), else the first column whose bins equal its
    /// own on every row (itself when none before does). A column equal to an earlier one
    /// gives every leaf the same histogram, so its splits never gain strictly more.
    pub(super) fn column_classes(bins: &[u8], d: usize) -> Vec<Option<usize>> {
        let Some(first) = bins.get(..d) else {
            return vec![None; d];
        };
        // FNV-1a of each column, and whether it ever leaves its first row's bin
        let mut hash = vec![0xcbf2_9ce4_8422_2325u64; d];
        let mut varies = vec![false; d];
        for row in bins.chunks_exact(d) {
            for j in 0..d {
                hash[j] = (hash[j] ^ u64::from(row[j])).wrapping_mul(0x0000_0100_0000_01b3);
                varies[j] |= row[j] != first[j];
            }
        }
        let same = |a: usize, b: usize| bins.chunks_exact(d).all(|row| row[a] == row[b]);
        let mut classes: Vec<Option<usize>> = Vec::with_capacity(d);
        for j in 0..d {
            if !varies[j] {
                classes.push(None);
                continue;
            }
            let earlier =
                (0..j).find(|&i| classes[i] == Some(i) && hash[i] == hash[j] && same(i, j));
            classes.push(Some(earlier.unwrap_or(j)));
        }
        classes
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn column_classes_name_constant_and_copied_columns() {
        // columns: varying, constant, copy of 0, varying, copy of 3, copy of 0
        let rows: [[u8; 6]; 4] = [
            [1, 7, 1, 0, 0, 1],
            [2, 7, 2, 3, 3, 2],
            [1, 7, 1, 3, 3, 1],
            [5, 7, 5, 2, 2, 5],
        ];
        let bins: Vec<u8> = rows.concat();
        assert_eq!(
            Binner::column_classes(&bins, 6),
            vec![Some(0), None, Some(0), Some(3), Some(3), Some(0)]
        );
        // one differing row makes a column its own
        let mut other = bins.clone();
        other[3 * 6 + 5] = 6;
        assert_eq!(Binner::column_classes(&other, 6)[5], Some(5));
        assert_eq!(Binner::column_classes(&[], 3), vec![None; 3]);
    }
}
