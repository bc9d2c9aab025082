//! A fitted GRU sequence regressor and its plain-Rust forward pass (no burn at inference).

use serde::{Deserialize, Serialize};

use super::layer::{affine, GruLayer};
use crate::gbdt::Objective;
use crate::preprocess::Preprocessor;
use crate::ModelError;

/// One sequence: per-step features and tokens.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sequence {
    /// Step features, row-major `len × n_features`; NaN = missing.
    pub x: Vec<f32>,
    /// Token buckets of each step (one list per step, each id `< n_buckets`).
    pub tokens: Vec<Vec<u32>>,
}

impl Sequence {
    /// Number of steps.
    pub fn len(&self) -> usize {
        self.tokens.len()
    }
    /// No steps.
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }
}

/// A fitted GRU sequence regressor, independent of burn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GruModel {
    pub(super) objective: Objective,
    pub(super) preprocess: Preprocessor,
    pub(super) n_buckets: usize,
    pub(super) fwd: GruLayer,
    pub(super) bwd: Option<GruLayer>,
    /// Head: `[h_fwd, h_bwd, input] → head (ReLU) → 1`, weights row-major `[n_in][n_out]`.
    pub(super) head_w: Vec<f32>,
    pub(super) head_b: Vec<f32>,
    pub(super) out_w: Vec<f32>,
    pub(super) out_b: f32,
    /// Prediction = `y_center + y_scale · network output`.
    pub(super) y_center: f64,
    pub(super) y_scale: f64,
    /// Epochs trained (up to the kept one).
    pub(super) epochs: usize,
    /// Validation loss after each epoch (empty without validation).
    pub(super) valid_loss: Vec<f64>,
}

impl GruModel {
    /// Number of numeric features a step must have.
    pub fn n_features(&self) -> usize {
        self.preprocess.n_in()
    }
    /// Size of the token vocabulary.
    pub fn n_buckets(&self) -> usize {
        self.n_buckets
    }
    /// Epochs trained, up to the kept (best-validation) epoch; 0 when no epoch beat the
    /// untrained network (which predicts the target centre).
    pub fn epochs(&self) -> usize {
        self.epochs
    }
    /// Validation loss after each epoch.
    pub fn valid_loss(&self) -> &[f64] {
        &self.valid_loss
    }
    pub(super) fn n_input(&self) -> usize {
        self.preprocess.n_out() + self.n_buckets
    }

    /// Checks shapes (after deserialising).
    pub fn check(&self) -> Result<(), ModelError> {
        let n_in = self.n_input();
        let h = self.fwd.hidden;
        let dirs = 1 + usize::from(self.bwd.is_some());
        let head_in = dirs * h + n_in;
        let head = self.head_b.len();
        let ok = self.fwd.n_in == n_in
            && self.fwd.check()
            && self
                .bwd
                .as_ref()
                .is_none_or(|b| b.n_in == n_in && b.hidden == h && b.check())
            && head > 0
            && self.head_w.len() == head_in * head
            && self.out_w.len() == head;
        if ok {
            Ok(())
        } else {
            Err(ModelError::InvalidData(
                "GRU model has inconsistent shapes".into(),
            ))
        }
    }

    /// The network input of every step (preprocessed features ⊕ token bag).
    pub(super) fn inputs(&self, seq: &Sequence) -> Result<Vec<f32>, ModelError> {
        let (d, nz, n_in) = (self.n_features(), self.preprocess.n_out(), self.n_input());
        check_sequence(seq, d, self.n_buckets)?;
        let mut inputs = vec![0.0f32; seq.len() * n_in];
        for (t, (row, toks)) in seq.x.chunks_exact(d.max(1)).zip(&seq.tokens).enumerate() {
            let dst = &mut inputs[t * n_in..(t + 1) * n_in];
            self.preprocess.transform_row(row, &mut dst[..nz]);
            bag(toks, &mut dst[nz..]);
        }
        Ok(inputs)
    }

    /// Predictions for every step of `seq`.
    pub fn predict(&self, seq: &Sequence) -> Result<Vec<f64>, ModelError> {
        let n = seq.len();
        let inputs = self.inputs(seq)?;
        let n_in = self.n_input();
        let h = self.fwd.hidden;
        let mut hf = vec![0.0f32; n * h];
        self.fwd.run(&inputs, 0..n, &mut hf);
        let hb = match &self.bwd {
            Some(b) => {
                let mut hb = vec![0.0f32; n * h];
                b.run(&inputs, (0..n).rev(), &mut hb);
                Some(hb)
            }
            None => None,
        };
        let head = self.head_b.len();
        let mut feat = Vec::with_capacity(2 * h + n_in);
        let mut a = vec![0.0f32; head];
        let mut out = Vec::with_capacity(n);
        for t in 0..n {
            feat.clear();
            feat.extend_from_slice(&hf[t * h..(t + 1) * h]);
            if let Some(hb) = &hb {
                feat.extend_from_slice(&hb[t * h..(t + 1) * h]);
            }
            feat.extend_from_slice(&inputs[t * n_in..(t + 1) * n_in]);
            affine(&feat, &self.head_w, &self.head_b, &mut a);
            let o: f32 = self.out_b
                + a.iter()
                    .zip(&self.out_w)
                    .map(|(v, w)| v.max(0.0) * w)
                    .sum::<f32>();
            out.push(self.y_center + self.y_scale * f64::from(o));
        }
        Ok(out)
    }
}

/// `dst` = the token bag of `toks` (each bucket `1/count`).
fn bag(toks: &[u32], dst: &mut [f32]) {
    dst.fill(0.0);
    if toks.is_empty() {
        return;
    }
    let w = 1.0 / toks.len() as f32;
    for &t in toks {
        if let Some(v) = dst.get_mut(t as usize) {
            *v += w;
        }
    }
}

pub(super) fn check_sequence(seq: &Sequence, d: usize, n_buckets: usize) -> Result<(), ModelError> {
    if seq.x.len() != seq.len() * d {
        return Err(ModelError::FeatureCount {
            want: d,
            got: if seq.is_empty() {
                seq.x.len()
            } else {
                seq.x.len() / seq.len()
            },
        });
    }
    if let Some(t) = seq
        .tokens
        .iter()
        .flatten()
        .find(|&&t| t as usize >= n_buckets)
    {
        return Err(ModelError::InvalidData(format!(
            "token bucket {t} is outside the vocabulary of {n_buckets}"
        )));
    }
    Ok(())
}

impl GruModel {
    /// Mean loss (original target units) over the labelled steps of `seqs`.
    pub fn loss(&self, seqs: &[Sequence], y: &[Vec<f64>]) -> Result<f64, ModelError> {
        let (mut total, mut n) = (0.0, 0usize);
        for (s, ys) in seqs.iter().zip(y) {
            let p = self.predict(s)?;
            for (pv, yv) in p.iter().zip(ys) {
                if yv.is_finite() {
                    let r = pv - yv;
                    total += match self.objective {
                        Objective::L2 => r * r,
                        _ => r.abs(),
                    };
                    n += 1;
                }
            }
        }
        Ok(total / n.max(1) as f64)
    }
}
