//! Feature bucketing: at most 255 quantile bins per feature, bin 0 for missing values.

use rayon::prelude::*;

use crate::Matrix;

/// Per-feature bin edges: value `v` falls in bin `1 + #{edges < v}`; bin 0 is NaN.
pub(super) struct Binner {
    edges: Vec<Vec<f32>>,
}

/// A matrix binned: the bin edges, every value's bin column by column, and the bins of the
/// columns a split can tell apart ([`Binner::column_classes`]) row by row, with where each
/// column's bins sit in a row.
pub(super) struct Binned {
    pub binner: Binner,
    /// Row `i`'s bins of the first column of each class, in column order, at
    /// `i * width + slot` (read by the histogram passes; constant and copied columns left
    /// out, so a row is fewer bytes to read).
    pub rows: Vec<u8>,
    /// Bytes of one row of `rows`: the number of classes.
    pub width: usize,
    /// Per column: where its bins sit in a row of `rows` (its class's first column's
    /// slot), `None` when constant.
    pub slots: Vec<Option<usize>>,
    /// Column `j`'s bins at `j * rows` (read by a split, one column of a leaf's rows).
    pub columns: Vec<u8>,
}

/// Columns one task bins: their values are read from the row-major matrix together (a
/// row's 16 values of them share a cache line or two), not one strided column at a time.
const COLUMNS_PER_TASK: usize = 16;

/// Rows per block of the transpose from column-major to row-major bins (a block's rows
/// stay in the first-level cache while every column writes into them).
const TRANSPOSE_ROWS: usize = 64;

impl Binner {
    /// Bins every value of `x` (at most `max_bins` bins per feature, bin 0 for NaN): each
    /// feature's edges are quantiles of its distinct non-NaN values (of every row, or of
    /// every `rows / 100,000`-th on larger matrices), and value `v` falls in bin
    /// `1 + #{edges < v}`. Groups of columns are gathered, sorted and binned on every core,
    /// then the bins are laid out row by row as well.
    pub(super) fn bin_matrix(x: &Matrix, max_bins: usize) -> Binned {
        let max_bins = max_bins.clamp(2, 255);
        let (n, d) = (x.rows(), x.cols());
        let mut columns = vec![0u8; n * d];
        let edges: Vec<Vec<f32>> = if n == 0 {
            vec![Vec::new(); d]
        } else {
            columns
                .par_chunks_mut(n * COLUMNS_PER_TASK)
                .enumerate()
                .flat_map_iter(|(c, out)| {
                    let j0 = c * COLUMNS_PER_TASK;
                    Self::bin_columns(x, j0, out, max_bins)
                })
                .collect()
        };
        let binner = Binner { edges };
        let classes = Self::column_classes(&columns, n, d);
        let firsts: Vec<usize> = (0..d).filter(|&j| classes[j] == Some(j)).collect();
        let mut slots = vec![None; d];
        for (slot, &j) in firsts.iter().enumerate() {
            slots[j] = Some(slot);
        }
        for j in 0..d {
            if let Some(first) = classes[j] {
                slots[j] = slots[first];
            }
        }
        let rows = Self::rows_of(&columns, n, &firsts);
        Binned {
            binner,
            rows,
            width: firsts.len(),
            slots,
            columns,
        }
    }

    /// The edges of `x`'s columns `j0..` (as many as `out` holds, `x.rows()` bins each)
    /// and their bins, column by column, in `out`.
    fn bin_columns(x: &Matrix, j0: usize, out: &mut [u8], max_bins: usize) -> Vec<Vec<f32>> {
        let (n, d) = (x.rows(), x.cols());
        let w = out.len() / n;
        let mut values = vec![0f32; n * w];
        for (i, row) in x.data().chunks_exact(d).enumerate() {
            for (k, &v) in row[j0..j0 + w].iter().enumerate() {
                values[k * n + i] = v;
            }
        }
        let step = (n / 100_000).max(1);
        let mut sample = Vec::with_capacity(n);
        values
            .chunks_exact(n)
            .zip(out.chunks_exact_mut(n))
            .map(|(column, bins)| {
                sample.clear();
                sample.extend(column.iter().step_by(step).filter(|v| !v.is_nan()));
                let edges = edges_of(&mut sample, max_bins);
                let search = EdgeSearch::new(&edges);
                for (b, &v) in bins.iter_mut().zip(column) {
                    *b = search.bin(v);
                }
                edges
            })
            .collect()
    }

    /// The columns `which` of column-major `columns` (`n` rows each) row by row: row `i`'s
    /// at `i * which.len()`, in the order of `which`.
    fn rows_of(columns: &[u8], n: usize, which: &[usize]) -> Vec<u8> {
        let w = which.len();
        let mut rows = vec![0u8; n * w];
        if w == 0 {
            return rows;
        }
        rows.par_chunks_mut(TRANSPOSE_ROWS * w)
            .enumerate()
            .for_each(|(block, out)| {
                let r0 = block * TRANSPOSE_ROWS;
                let len = out.len() / w;
                for (slot, &j) in which.iter().enumerate() {
                    let column = &columns[j * n..(j + 1) * n];
                    for (t, &b) in column[r0..r0 + len].iter().enumerate() {
                        out[t * w + slot] = b;
                    }
                }
            });
        rows
    }

    /// For each of the `d` columns of column-major `columns` (`n` rows each): `None` when
    /// every row is in one bin (no split can leave rows on both sides), else the first
    /// column whose bins equal its own on every row (itself when none before does). A
    /// column equal to an earlier one gives every leaf the same histogram, so its splits
    /// never gain strictly more.
    pub(super) fn column_classes(columns: &[u8], n: usize, d: usize) -> Vec<Option<usize>> {
        if n == 0 {
            return vec![None; d];
        }
        // FNV-1a of each column, and whether it ever leaves its first row's bin
        let summary: Vec<(u64, bool)> = columns
            .par_chunks_exact(n)
            .map(|column| {
                let hash = column.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
                    (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
                });
                (hash, column.iter().any(|&b| b != column[0]))
            })
            .collect();
        let column = |j: usize| &columns[j * n..(j + 1) * n];
        let mut classes: Vec<Option<usize>> = Vec::with_capacity(d);
        for (j, &(hash, varies)) in summary.iter().enumerate() {
            if !varies {
                classes.push(None);
                continue;
            }
            let earlier = (0..j)
                .find(|&i| classes[i] == Some(i) && summary[i].0 == hash && column(i) == column(j));
            classes.push(Some(earlier.unwrap_or(j)));
        }
        classes
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

    /// The bin of column `j` a split's `threshold` ([`threshold`](Self::threshold) of bin
    /// `b`) was made from: `b`. A value goes left of the split (`v <= threshold` or NaN)
    /// exactly when its bin is at most `b`, unless it is at or below `f32::MIN` (left by
    /// the threshold of bin 0, in bin 1).
    pub(super) fn split_bin(&self, j: usize, threshold: f32) -> u8 {
        if threshold == f32::MIN {
            0
        } else {
            // the threshold is edge b - 1 (edges ascend): above exactly b - 1 edges
            1 + self.edges[j].partition_point(|&e| e < threshold) as u8
        }
    }

    /// Whether every value of `x` takes the side of each split its bin takes (see
    /// [`split_bin`](Self::split_bin)): no value at or below `f32::MIN`.
    pub(super) fn bins_route_as_values(x: &Matrix) -> bool {
        !x.data().iter().any(|&v| v <= f32::MIN)
    }

    /// Every value of `x` (the columns binned) binned by these edges, row by row: row `i`'s
    /// bin of column `j` at `i * cols + j`. Rows are binned on every core.
    pub(super) fn bin_rows(&self, x: &Matrix) -> Vec<u8> {
        let d = x.cols();
        let searches: Vec<EdgeSearch> = self.edges.iter().map(|e| EdgeSearch::new(e)).collect();
        let mut out = vec![0u8; x.rows() * d];
        if d == 0 {
            return out;
        }
        out.par_chunks_mut(d * TRANSPOSE_ROWS)
            .zip(x.data().par_chunks(d * TRANSPOSE_ROWS))
            .for_each(|(bins, values)| {
                for (b, (&v, search)) in bins
                    .iter_mut()
                    .zip(values.iter().zip(searches.iter().cycle()))
                {
                    *b = search.bin(v);
                }
            });
        out
    }
}

/// The bin edges of a feature from its non-NaN `values` (sorted and deduplicated in
/// place): every distinct value when there are fewer than `max_bins`, else `max_bins - 2`
/// evenly spaced ranks of them, deduplicated.
fn edges_of(values: &mut Vec<f32>, max_bins: usize) -> Vec<f32> {
    sort_total(values);
    values.dedup();
    if values.len() < max_bins {
        // one bin per distinct value: edges at the values themselves
        return values.clone();
    }
    let mut e: Vec<f32> = (1..max_bins - 1)
        .map(|k| values[k * values.len() / (max_bins - 1)])
        .collect();
    e.dedup();
    e
}

/// Sorts `values` as `sort_unstable_by(f32::total_cmp)` does: values equal under
/// `total_cmp` have equal bits, so any correct sort gives the same slice. Longer slices
/// are radix-sorted on keys whose unsigned order is `total_cmp`'s (three passes of 11,
/// 11 and 10 bits).
fn sort_total(values: &mut [f32]) {
    const RADIX_FROM: usize = 512;
    if values.len() < RADIX_FROM {
        values.sort_unstable_by(f32::total_cmp);
        return;
    }
    // negative: every bit flipped (larger magnitudes first); positive: the sign bit set
    let key = |v: f32| {
        let b = v.to_bits();
        if b >> 31 == 1 {
            !b
        } else {
            b | 0x8000_0000
        }
    };
    let unkey = |k: u32| f32::from_bits(if k >> 31 == 1 { k & 0x7fff_ffff } else { !k });
    let mut keys: Vec<u32> = values.iter().map(|&v| key(v)).collect();
    let mut spare = vec![0u32; keys.len()];
    let mut counts = [[0usize; 2048]; 3];
    for &k in &keys {
        counts[0][(k & 0x7ff) as usize] += 1;
        counts[1][((k >> 11) & 0x7ff) as usize] += 1;
        counts[2][(k >> 22) as usize] += 1;
    }
    for (count, shift) in counts.iter_mut().zip([0u32, 11, 22]) {
        if count.contains(&keys.len()) {
            continue; // one digit throughout: the pass would not move anything
        }
        let mut at = 0;
        for c in count.iter_mut() {
            let here = *c;
            *c = at;
            at += here;
        }
        for &k in &keys {
            let digit = ((k >> shift) & 0x7ff) as usize;
            spare[count[digit]] = k;
            count[digit] += 1;
        }
        std::mem::swap(&mut keys, &mut spare);
    }
    for (v, &k) in values.iter_mut().zip(&keys) {
        *v = unkey(k);
    }
}

/// A feature's edges padded with +inf to 255 slots, searched without branches: eight
/// halvings give `#{edges < v}` (no value is below the +inf padding, nor is +inf below
/// itself), the count [`slice::partition_point`] finds.
struct EdgeSearch {
    padded: [f32; 255],
}

impl EdgeSearch {
    /// At most 254 `edges` (fewer than 255 bins).
    fn new(edges: &[f32]) -> EdgeSearch {
        let mut padded = [f32::INFINITY; 255];
        for (p, &e) in padded.iter_mut().zip(edges) {
            *p = e;
        }
        EdgeSearch { padded }
    }

    #[inline]
    fn bin(&self, v: f32) -> u8 {
        if v.is_nan() {
            return 0;
        }
        let mut below = 0usize;
        for step in [128, 64, 32, 16, 8, 4, 2, 1] {
            // a multiply, not a branch: which way a value goes is not predictable
            below += step * usize::from(self.padded[below + step - 1] < v);
        }
        1 + below as u8
    }
}

#[cfg(test)]
mod tests {
    use augur_numeric::SplitMix64;

    use super::*;

    /// The plain binning: edges, bins row by row (every column), bins column by column,
    /// classes.
    type Plain = (Vec<Vec<f32>>, Vec<u8>, Vec<u8>, Vec<Option<usize>>);

    /// The binning as first written, one plain step at a time: each column's sampled values
    /// collected, sorted by `total_cmp` and deduplicated, each value's bin by
    /// `partition_point`, the columns read off the rows, and the classes by one pass over
    /// the rows. [`Binner::bin_matrix`] must give exactly this.
    fn plain(x: &Matrix, max_bins: usize) -> Plain {
        let max_bins = max_bins.clamp(2, 255);
        let (n, d) = (x.rows(), x.cols());
        let step = (n / 100_000).max(1);
        let edges: Vec<Vec<f32>> = (0..d)
            .map(|j| {
                let mut v: Vec<f32> = (0..n)
                    .step_by(step)
                    .map(|i| x.get(i, j))
                    .filter(|v| !v.is_nan())
                    .collect();
                v.sort_unstable_by(f32::total_cmp);
                v.dedup();
                if v.len() < max_bins {
                    return v;
                }
                let mut e: Vec<f32> = (1..max_bins - 1)
                    .map(|k| v[k * v.len() / (max_bins - 1)])
                    .collect();
                e.dedup();
                e
            })
            .collect();
        let mut rows = vec![0u8; n * d];
        for i in 0..n {
            for j in 0..d {
                let v = x.get(i, j);
                rows[i * d + j] = if v.is_nan() {
                    0
                } else {
                    1 + edges[j].partition_point(|&e| e < v) as u8
                };
            }
        }
        let mut columns = vec![0u8; n * d];
        for j in 0..d {
            for i in 0..n {
                columns[j * n + i] = rows[i * d + j];
            }
        }
        let mut hash = vec![0xcbf2_9ce4_8422_2325u64; d];
        let mut varies = vec![false; d];
        for row in rows.chunks_exact(d.max(1)) {
            for j in 0..d {
                hash[j] = (hash[j] ^ u64::from(row[j])).wrapping_mul(0x0000_0100_0000_01b3);
                varies[j] |= row[j] != rows[j];
            }
        }
        let same = |a: usize, b: usize| rows.chunks_exact(d).all(|row| row[a] == row[b]);
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
        (edges, rows, columns, classes)
    }

    /// Values of every kind a feature holds: NaN, both zeros, infinities, subnormals, a few
    /// distinct values, many, and values equal but for their sign.
    fn awkward(rng: &mut SplitMix64, kind: usize) -> f32 {
        let u = rng.unit();
        match kind % 9 {
            0 => {
                if u < 0.2 {
                    f32::NAN
                } else {
                    (u * 1e6) as f32
                }
            }
            1 => (u * 5.0).floor() as f32,
            2 => [0.0, -0.0, 1.0, -1.0][(u * 4.0) as usize % 4],
            3 => {
                [f32::INFINITY, f32::NEG_INFINITY, f32::MIN, f32::MAX, 2.5][(u * 5.0) as usize % 5]
            }
            4 => f32::from_bits((u * 1000.0) as u32) * if u < 0.5 { -1.0 } else { 1.0 },
            5 => 7.0,
            6 => ((u - 0.5) * 2e4).round() as f32 / 8.0,
            7 => f32::from_bits(rng.next_u64() as u32),
            _ => (u * 300.0).floor() as f32 - 150.0,
        }
    }

    /// Edges, bins row by row and column by column, and classes, equal to the plain
    /// binning's on awkward columns (copies and constants included), on matrices small,
    /// past a task's columns, and long enough to be sampled.
    #[test]
    fn the_binned_matrix_is_the_plain_binning() {
        let mut rng = SplitMix64(17);
        for (n, d, max_bins) in [
            (1, 3, 255),
            (700, 20, 255),
            (5_000, 37, 64),
            (3_000, 9, 2),
            (230_001, 4, 255),
            (0, 5, 255),
        ] {
            let mut x: Vec<f32> = (0..n * d).map(|i| awkward(&mut rng, i % d)).collect();
            if d >= 12 {
                // column 11 copies column 2, column 10 is constant
                for i in 0..n {
                    x[i * d + 11] = x[i * d + 2];
                    x[i * d + 10] = -3.0;
                }
            }
            let m = Matrix::new(&x, n, d).unwrap();
            let (edges, rows, columns, classes) = plain(&m, max_bins);
            let got = Binner::bin_matrix(&m, max_bins);
            assert_eq!(got.binner.edges.len(), d);
            for (a, b) in got.binner.edges.iter().zip(&edges) {
                let bits = |e: &[f32]| e.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(a), bits(b), "{n}x{d}");
            }
            // the row-major bins hold each class's first column, in order; every other
            // column's slot is its class's
            let firsts: Vec<usize> = (0..d).filter(|&j| classes[j] == Some(j)).collect();
            assert_eq!(got.width, firsts.len(), "{n}x{d}");
            let kept: Vec<u8> = (0..n)
                .flat_map(|i| firsts.iter().map(move |&j| (i, j)))
                .map(|(i, j)| rows[i * d + j])
                .collect();
            assert!(got.rows == kept, "{n}x{d}: rows");
            for j in 0..d {
                let slot = got.slots[j];
                assert_eq!(slot.is_some(), classes[j].is_some(), "{n}x{d}: column {j}");
                if let Some(slot) = slot {
                    assert!(
                        (0..n).all(|i| got.rows[i * got.width + slot] == rows[i * d + j]),
                        "{n}x{d}: column {j}'s slot"
                    );
                }
            }
            assert!(got.columns == columns, "{n}x{d}: columns");
            assert_eq!(
                Binner::column_classes(&got.columns, n, d),
                classes,
                "{n}x{d}"
            );
            if d >= 12 && n > 1 {
                assert_eq!(classes[10], None);
                assert_eq!(classes[11], Some(2));
            }
        }
    }

    /// The radix sort orders as `total_cmp` does, bit for bit, on every kind of value.
    #[test]
    fn the_radix_sort_is_total_cmp_order() {
        let mut rng = SplitMix64(5);
        for n in [0, 1, 511, 512, 4_097, 50_000] {
            for kind in 0..9 {
                let mut a: Vec<f32> = (0..n)
                    .map(|_| awkward(&mut rng, kind))
                    .filter(|v| !v.is_nan())
                    .collect();
                let mut b = a.clone();
                sort_total(&mut a);
                b.sort_unstable_by(f32::total_cmp);
                let bits = |e: &[f32]| e.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&a), bits(&b), "n {n} kind {kind}");
            }
        }
    }
}
