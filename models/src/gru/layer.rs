//! A GRU layer in plain Rust: the gates' weights and the recurrence that serves predictions.

use augur_numeric::sigmoid_f32;
use serde::{Deserialize, Serialize};

/// One gate of a GRU: `W_x·x + b_x` and `W_h·h + b_h`, weights row-major `[n_in][hidden]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateWeights {
    pub wx: Vec<f32>,
    pub bx: Vec<f32>,
    pub wh: Vec<f32>,
    pub bh: Vec<f32>,
}

/// A GRU layer in plain Rust (update, reset and new gates, `reset_after` convention).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GruLayer {
    pub n_in: usize,
    pub hidden: usize,
    pub update: GateWeights,
    pub reset: GateWeights,
    pub new: GateWeights,
}

/// `out = b + xᵀ·W` with `w` row-major `[x.len()][out.len()]`.
pub(super) fn affine(x: &[f32], w: &[f32], b: &[f32], out: &mut [f32]) {
    out.copy_from_slice(b);
    let n_out = out.len();
    for (&xk, row) in x.iter().zip(w.chunks_exact(n_out)) {
        if xk != 0.0 {
            for (o, &wv) in out.iter_mut().zip(row) {
                *o += xk * wv;
            }
        }
    }
}

impl GruLayer {
    pub(super) fn check(&self) -> bool {
        let (i, h) = (self.n_in, self.hidden);
        [&self.update, &self.reset, &self.new].iter().all(|g| {
            g.wx.len() == i * h && g.bx.len() == h && g.wh.len() == h * h && g.bh.len() == h
        }) && h > 0
    }

    /// One step: updates `h` from input `x`. `buf` holds `6·hidden` scratch values.
    pub fn step(&self, x: &[f32], h: &mut [f32], buf: &mut [f32]) {
        let hd = self.hidden;
        let (xz, rest) = buf.split_at_mut(hd);
        let (hz, rest) = rest.split_at_mut(hd);
        let (xr, rest) = rest.split_at_mut(hd);
        let (hr, rest) = rest.split_at_mut(hd);
        let (xn, rest) = rest.split_at_mut(hd);
        let hn = &mut rest[..hd];
        affine(x, &self.update.wx, &self.update.bx, xz);
        affine(h, &self.update.wh, &self.update.bh, hz);
        affine(x, &self.reset.wx, &self.reset.bx, xr);
        affine(h, &self.reset.wh, &self.reset.bh, hr);
        affine(x, &self.new.wx, &self.new.bx, xn);
        affine(h, &self.new.wh, &self.new.bh, hn);
        for k in 0..hd {
            let z = sigmoid_f32(xz[k] + hz[k]);
            let r = sigmoid_f32(xr[k] + hr[k]);
            let n = (xn[k] + r * hn[k]).tanh();
            h[k] = (1.0 - z) * n + z * h[k];
        }
    }

    /// Hidden states after each step of `inputs` (row-major `len × n_in`), in `order`.
    pub(super) fn run(&self, inputs: &[f32], order: impl Iterator<Item = usize>, out: &mut [f32]) {
        let hd = self.hidden;
        let mut h = vec![0.0f32; hd];
        let mut buf = vec![0.0f32; 6 * hd];
        for t in order {
            self.step(
                &inputs[t * self.n_in..(t + 1) * self.n_in],
                &mut h,
                &mut buf,
            );
            out[t * hd..(t + 1) * hd].copy_from_slice(&h);
        }
    }
}
