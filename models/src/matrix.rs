//! Row-major feature matrices and training sets.

use crate::ModelError;

/// A borrowed row-major `rows × cols` matrix of `f32` features (NaN = missing).
#[derive(Debug, Clone, Copy)]
pub struct Matrix<'a> {
    data: &'a [f32],
    rows: usize,
    cols: usize,
}

impl<'a> Matrix<'a> {
    /// Wraps `data` (length must be `rows × cols`).
    pub fn new(data: &'a [f32], rows: usize, cols: usize) -> Result<Matrix<'a>, ModelError> {
        if data.len() != rows * cols {
            return Err(ModelError::InvalidData(format!(
                "matrix data has {} values, {rows}×{cols} needs {}",
                data.len(),
                rows * cols
            )));
        }
        Ok(Matrix { data, rows, cols })
    }
    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.rows
    }
    /// Number of columns (features).
    pub fn cols(&self) -> usize {
        self.cols
    }
    /// Row `i`.
    pub fn row(&self, i: usize) -> &'a [f32] {
        &self.data[i * self.cols..(i + 1) * self.cols]
    }
    /// Value at row `i`, column `j`.
    pub fn get(&self, i: usize, j: usize) -> f32 {
        self.data[i * self.cols + j]
    }
    /// The raw row-major data.
    pub fn data(&self) -> &'a [f32] {
        self.data
    }
}

/// Features, targets and optional weights, checked for consistency.
#[derive(Debug, Clone, Copy)]
pub struct TrainSet<'a> {
    pub x: Matrix<'a>,
    pub y: &'a [f64],
    pub weights: Option<&'a [f64]>,
}

impl<'a> TrainSet<'a> {
    /// Checks lengths and that every target and weight is finite.
    pub fn new(
        x: Matrix<'a>,
        y: &'a [f64],
        weights: Option<&'a [f64]>,
    ) -> Result<TrainSet<'a>, ModelError> {
        if y.len() != x.rows() {
            return Err(ModelError::InvalidData(format!(
                "{} targets for {} rows",
                y.len(),
                x.rows()
            )));
        }
        if x.rows() == 0 {
            return Err(ModelError::InvalidData("no rows".into()));
        }
        if let Some(i) = y.iter().position(|v| !v.is_finite()) {
            return Err(ModelError::InvalidData(format!(
                "target of row {i} is not finite"
            )));
        }
        if let Some(w) = weights {
            if w.len() != y.len() {
                return Err(ModelError::InvalidData(format!(
                    "{} weights for {} rows",
                    w.len(),
                    y.len()
                )));
            }
            if let Some(i) = w.iter().position(|v| !v.is_finite() || *v < 0.0) {
                return Err(ModelError::InvalidData(format!(
                    "weight of row {i} is negative or not finite"
                )));
            }
        }
        Ok(TrainSet { x, y, weights })
    }
}
