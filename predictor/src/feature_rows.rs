//! Feature rows of row-major matrices: gathering a subset of rows, and the per-thread row
//! buffer online predictions write their features into (no allocation per prediction, and
//! no shared scratch to lock).

use std::cell::RefCell;

use rayon::prelude::*;

/// Rows one task of [`gather`] copies at least (a small gather stays on one core).
const GATHER_ROWS_PER_TASK: usize = 1_024;

/// The rows `rows` of the row-major matrix `x` (`d` columns), in that order. The rows are
/// copied on every core (a training matrix is tens of megabytes, and writing a fresh
/// allocation faults its pages in on the core that writes them).
pub(crate) fn gather(x: &[f32], d: usize, rows: &[usize]) -> Vec<f32> {
    let mut out = vec![0.0; rows.len() * d];
    if d == 0 {
        return out;
    }
    out.par_chunks_exact_mut(d)
        .zip(rows.par_iter())
        .with_min_len(GATHER_ROWS_PER_TASK)
        .for_each(|(o, &r)| o.copy_from_slice(&x[r * d..(r + 1) * d]));
    out
}

thread_local! {
    static ROW: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// Calls `f` with this thread's feature-row buffer of `len` slots (a fresh one if the
/// thread's buffer is in use). Slots hold whatever the last user left: `f` writes every
/// slot before reading it.
pub(crate) fn with_row_buffer<T>(len: usize, f: impl FnOnce(&mut [f32]) -> T) -> T {
    ROW.with(|cell| match cell.try_borrow_mut() {
        Ok(mut buf) => {
            buf.resize(len, 0.0);
            f(&mut buf[..len])
        }
        Err(_) => f(&mut vec![0.0; len]),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gather_picks_rows_in_order() {
        let x = [0.0, 1.0, 10.0, 11.0, 20.0, 21.0];
        assert_eq!(gather(&x, 2, &[2, 0]), vec![20.0, 21.0, 0.0, 1.0]);
        assert_eq!(gather(&x, 0, &[2, 0]), Vec::<f32>::new());
        // more rows than one task copies, in a scrambled order
        let (n, d) = (5_000, 3);
        let big: Vec<f32> = (0..n * d).map(|i| i as f32).collect();
        let rows: Vec<usize> = (0..n).map(|i| (i * 7_919) % n).collect();
        let got = gather(&big, d, &rows);
        for (o, &r) in got.chunks_exact(d).zip(&rows) {
            assert_eq!(o, &big[r * d..(r + 1) * d]);
        }
    }

    #[test]
    fn row_buffer_has_the_asked_length_even_when_nested() {
        let n = with_row_buffer(3, |a| {
            a.fill(1.0);
            with_row_buffer(5, |b| a.len() + b.len())
        });
        assert_eq!(n, 8);
    }
}
