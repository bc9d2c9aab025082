//! A GBDT fit's inputs on disk: the training and validation matrices and the parameters, so
//! the same fit can be re-run and timed outside the service, and another library (the
//! LightGBM peer in `scripts/`) can fit the very same numbers. `fit.json` holds the shapes,
//! the column names and the parameters; the arrays beside it are raw little-endian (features
//! `f32` row-major, targets `f64`), which `numpy.fromfile` reads as they are.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::fit::Validation;
use super::model::GbdtModel;
use super::params::GbdtParams;
use crate::{Matrix, ModelError, Predict, TrainSet};

/// The header's name in a fit-inputs folder.
pub const FIT_HEADER: &str = "fit.json";

/// The format written; a folder of another is refused.
const FORMAT: u32 = 1;

/// The arrays' files, named in the header.
const FILES: [&str; 4] = ["fit_x.f32", "fit_y.f64", "valid_x.f32", "valid_y.f64"];

/// What one GBDT fit reads: its rows, the validation rows that stop it early, the
/// parameters, and each column's name.
#[derive(Debug, Clone)]
pub struct FitInputs {
    pub params: GbdtParams,
    pub columns: Vec<String>,
    /// Row-major, `columns.len()` per row.
    pub fit_x: Vec<f32>,
    pub fit_y: Vec<f64>,
    /// Row-major, `columns.len()` per row (empty: no early stopping).
    pub valid_x: Vec<f32>,
    pub valid_y: Vec<f64>,
}

/// `fit.json`.
#[derive(Debug, Serialize, Deserialize)]
struct Header {
    format: u32,
    params: GbdtParams,
    columns: Vec<String>,
    fit_rows: usize,
    valid_rows: usize,
    /// The arrays' files, relative to the header: fit x, fit y, validation x, validation y.
    files: [String; 4],
}

/// Why fit inputs could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum FitInputsError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: not a fit header: {source}")]
    Header {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("{path}: format {got}, this build reads format {FORMAT}")]
    Format { path: PathBuf, got: u32 },
    #[error("{path}: {got} bytes, the header's shape needs {want}")]
    Size {
        path: PathBuf,
        want: usize,
        got: usize,
    },
    #[error("fit inputs: {0}")]
    Shape(String),
    #[error(transparent)]
    Model(#[from] ModelError),
}

impl FitInputs {
    /// Rows to fit on.
    pub fn fit_rows(&self) -> usize {
        self.fit_y.len()
    }

    /// Validation rows.
    pub fn valid_rows(&self) -> usize {
        self.valid_y.len()
    }

    /// Refuses matrices whose lengths are not their rows × the columns (the check
    /// [`Matrix::new`] makes).
    fn check(&self) -> Result<(), FitInputsError> {
        let d = self.columns.len();
        for (x, rows) in [
            (&self.fit_x, self.fit_rows()),
            (&self.valid_x, self.valid_rows()),
        ] {
            Matrix::new(x, rows, d).map_err(|e| FitInputsError::Shape(e.to_string()))?;
        }
        Ok(())
    }

    /// Writes the inputs into `dir` (created if missing): the header and four arrays.
    pub fn write(&self, dir: &Path) -> Result<(), FitInputsError> {
        self.check()?;
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| FitInputsError::Io { path, source }
        };
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        let bytes: [Vec<u8>; 4] = [
            self.fit_x.iter().flat_map(|v| v.to_le_bytes()).collect(),
            self.fit_y.iter().flat_map(|v| v.to_le_bytes()).collect(),
            self.valid_x.iter().flat_map(|v| v.to_le_bytes()).collect(),
            self.valid_y.iter().flat_map(|v| v.to_le_bytes()).collect(),
        ];
        for (name, b) in FILES.iter().zip(&bytes) {
            let path = dir.join(name);
            std::fs::write(&path, b).map_err(io(&path))?;
        }
        let header = Header {
            format: FORMAT,
            params: self.params.clone(),
            columns: self.columns.clone(),
            fit_rows: self.fit_rows(),
            valid_rows: self.valid_rows(),
            files: FILES.map(String::from),
        };
        let path = dir.join(FIT_HEADER);
        let text = serde_json::to_vec_pretty(&header).map_err(|source| FitInputsError::Header {
            path: path.clone(),
            source,
        })?;
        // the header last: a folder with a header has every array
        std::fs::write(&path, text).map_err(io(&path))
    }

    /// Reads the inputs [`write`](Self::write) wrote into `dir`, refusing an array whose
    /// size is not the header's shape.
    pub fn read(dir: &Path) -> Result<FitInputs, FitInputsError> {
        let path = dir.join(FIT_HEADER);
        let text = std::fs::read(&path).map_err(|source| FitInputsError::Io {
            path: path.clone(),
            source,
        })?;
        let h: Header = serde_json::from_slice(&text).map_err(|source| FitInputsError::Header {
            path: path.clone(),
            source,
        })?;
        if h.format != FORMAT {
            return Err(FitInputsError::Format {
                path,
                got: h.format,
            });
        }
        let d = h.columns.len();
        let read = |name: &str, values: usize, width: usize| -> Result<Vec<u8>, FitInputsError> {
            // the arrays lie beside the header: a name that leads elsewhere is refused
            let plain = Path::new(name).file_name().is_some_and(|f| f == name);
            if !plain {
                return Err(FitInputsError::Shape(format!(
                    "{}: array file {name:?} is not a file name in the folder",
                    path.display()
                )));
            }
            let path = dir.join(name);
            let b = std::fs::read(&path).map_err(|source| FitInputsError::Io {
                path: path.clone(),
                source,
            })?;
            let want = values * width;
            if b.len() != want {
                return Err(FitInputsError::Size {
                    path,
                    want,
                    got: b.len(),
                });
            }
            Ok(b)
        };
        let f32s = |b: Vec<u8>| -> Vec<f32> {
            b.chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect()
        };
        let f64s = |b: Vec<u8>| -> Vec<f64> {
            b.chunks_exact(8)
                .map(|c| f64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
                .collect()
        };
        let [fx, fy, vx, vy] = &h.files;
        Ok(FitInputs {
            fit_x: f32s(read(fx, h.fit_rows * d, 4)?),
            fit_y: f64s(read(fy, h.fit_rows, 8)?),
            valid_x: f32s(read(vx, h.valid_rows * d, 4)?),
            valid_y: f64s(read(vy, h.valid_rows, 8)?),
            params: h.params,
            columns: h.columns,
        })
    }

    /// Fits with the saved parameters (early stopping on the validation rows, when there
    /// are any), calling `progress(trees_done, n_trees)` after each tree.
    pub fn fit(&self, progress: &mut dyn FnMut(usize, usize)) -> Result<GbdtModel, FitInputsError> {
        let d = self.columns.len();
        let x = Matrix::new(&self.fit_x, self.fit_rows(), d)?;
        let train = TrainSet::new(x, &self.fit_y, None)?;
        let valid = if self.valid_y.is_empty() {
            None
        } else {
            Some(Validation {
                x: Matrix::new(&self.valid_x, self.valid_rows(), d)?,
                y: &self.valid_y,
            })
        };
        Ok(self.params.fit_with_progress(&train, valid, progress)?)
    }

    /// The mean loss of `model` on the validation rows, by the parameters' objective (NaN
    /// without validation rows).
    pub fn valid_loss(&self, model: &GbdtModel) -> Result<f64, FitInputsError> {
        let x = Matrix::new(&self.valid_x, self.valid_rows(), self.columns.len())?;
        let n = self.valid_rows();
        let sum: f64 = (0..n)
            .map(|i| {
                self.params
                    .objective
                    .loss(model.predict_row(x.row(i)), self.valid_y[i])
            })
            .sum();
        Ok(sum / n as f64)
    }
}

#[cfg(test)]
mod tests {
    use augur_numeric::SplitMix64;

    use super::*;
    use crate::gbdt::Objective;

    fn inputs() -> FitInputs {
        let mut rng = SplitMix64(3);
        let (n, nv, d) = (600, 150, 3);
        let mut x = |rows: usize| -> Vec<f32> {
            (0..rows * d)
                .map(|k| {
                    // missing values in the first column only (the targets read the second;
                    // a missing first value takes the lower step)
                    if k % d == 0 && k % 7 == 0 {
                        f32::NAN
                    } else {
                        rng.unit() as f32
                    }
                })
                .collect()
        };
        let (fit_x, valid_x) = (x(n), x(nv));
        let y = |x: &[f32]| -> Vec<f64> {
            x.chunks(d)
                .map(|r| if r[0] > 0.5 { 2.0 } else { 0.0 } + f64::from(r[1]))
                .collect()
        };
        FitInputs {
            params: GbdtParams {
                objective: Objective::L1,
                n_trees: 40,
                learning_rate: 0.2,
                num_leaves: 7,
                early_stopping_rounds: 5,
                ..Default::default()
            },
            columns: vec!["a".into(), "b".into(), "noise".into()],
            fit_y: y(&fit_x),
            valid_y: y(&valid_x),
            fit_x,
            valid_x,
        }
    }

    #[test]
    fn inputs_written_read_back_fit_the_same_model() {
        let dir = std::env::temp_dir().join(format!("augur-fit-inputs-{}", std::process::id()));
        let a = inputs();
        a.write(&dir).unwrap();
        let b = FitInputs::read(&dir).unwrap();
        // NaN features survive bit for bit (PartialEq would call them unequal)
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&a.fit_x), bits(&b.fit_x));
        assert_eq!(bits(&a.valid_x), bits(&b.valid_x));
        assert_eq!(
            (&a.fit_y, &a.valid_y, &a.columns),
            (&b.fit_y, &b.valid_y, &b.columns)
        );
        let mut grown = 0;
        let ma = a.fit(&mut |_, _| {}).unwrap();
        let mb = b.fit(&mut |t, _| grown = t).unwrap();
        assert_eq!(
            serde_json::to_string(&ma).unwrap(),
            serde_json::to_string(&mb).unwrap()
        );
        assert!(grown >= mb.n_trees() && mb.n_trees() > 0);
        // a fit that learnt the step beats the median alone on the validation rows
        let median_loss = {
            let mut v = b.valid_y.clone();
            v.sort_by(f64::total_cmp);
            let m = v[v.len() / 2];
            v.iter().map(|y| (y - m).abs()).sum::<f64>() / v.len() as f64
        };
        assert!(b.valid_loss(&mb).unwrap() < 0.5 * median_loss);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_truncated_array_or_another_format_is_refused_by_name() {
        let dir = std::env::temp_dir().join(format!("augur-fit-bad-{}", std::process::id()));
        inputs().write(&dir).unwrap();
        let y = dir.join("valid_y.f64");
        let b = std::fs::read(&y).unwrap();
        std::fs::write(&y, &b[..b.len() - 8]).unwrap();
        let err = FitInputs::read(&dir).unwrap_err().to_string();
        assert!(
            err.contains("valid_y.f64") && err.contains("1192 bytes"),
            "{err}"
        );
        let header = dir.join(FIT_HEADER);
        let text = std::fs::read_to_string(&header).unwrap();
        std::fs::write(&header, text.replace("\"format\": 1", "\"format\": 9")).unwrap();
        let err = FitInputs::read(&dir).unwrap_err().to_string();
        assert!(err.contains("format 9"), "{err}");
        // an array named outside the folder is refused
        std::fs::write(&header, text.replace("\"fit_y.f64\"", "\"../fit_y.f64\"")).unwrap();
        let err = FitInputs::read(&dir).unwrap_err().to_string();
        assert!(err.contains("not a file name"), "{err}");
        // a matrix that does not match its columns is refused before anything is written
        let mut bad = inputs();
        bad.columns.pop();
        assert!(matches!(bad.write(&dir), Err(FitInputsError::Shape(_))));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
