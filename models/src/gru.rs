//! Sequence regressor: a bidirectional GRU trained with burn, served in plain Rust.
//!
//! One target per step of a sequence (e.g. the ln run time of each stage of a job DAG in
//! topological order), predicted from the step's own features, hashed tokens and what the
//! recurrent state carries from the steps before and (backward direction) after it.
//!
//! - **Input** of a step: its numeric features through the shared
//!   [`preprocess`](crate::preprocess)ing (fitted on every training step), followed by a bag
//!   of token buckets (`tokens`, each `< n_buckets`, weighted `1/count`): the token bag is a
//!   hashed vocabulary whose embedding is the GRU's input weights.
//! - **Network**: `burn::nn::Gru` over the steps (forward) and, with
//!   [`GruParams::bidirectional`], a second `Gru` over the reversed steps; per step
//!   `[h_fwd, h_bwd, input] → Linear → ReLU → Linear → 1`, the last layer starting at zero.
//!   Weights are drawn from our own seeded generator (burn's backend RNG is process-global), sequences are cropped to
//!   [`GruParams::crop`] steps and shuffled with the same generator, so a fit is a
//!   deterministic function of the data and [`GruParams::seed`].
//! - **Training**: `Autodiff<NdArray<f32>>` on the CPU, AdamW with a cosine decay to 5 %,
//!   loss L1 (or L2) on the labelled steps in standardised target units; with a validation
//!   set the best epoch is kept and training stops after
//!   [`GruParams::early_stopping_epochs`] epochs without improvement.
//! - **Serving**: the weights are copied into plain `Vec<f32>` gates ([`GruLayer`]) and
//!   [`GruModel::predict`] runs the same recurrence by hand (PyTorch/burn `reset_after`
//!   convention: `n = tanh(W_xn·x + b_xn + r ⊙ (W_hn·h + b_hn))`), no burn at inference. A
//!   test checks it against burn's forward pass.

use burn::backend::ndarray::NdArrayDevice;
use burn::backend::{Autodiff, NdArray};
use burn::module::{Module, Param};
use burn::nn::{GateController, Gru, GruConfig, Linear};
use burn::optim::{AdamWConfig, GradientsParams, Optimizer};
use burn::tensor::activation::relu;
use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor, TensorData};
use serde::{Deserialize, Serialize};

use crate::gbdt::Objective;
use crate::preprocess::{target_center_scale, PreprocessParams, Preprocessor, SplitMix};
use crate::{Matrix, ModelError};

type TrainBackend = Autodiff<NdArray<f32>>;

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

/// GRU sequence-regressor hyperparameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GruParams {
    /// Hidden state width of each direction.
    pub hidden: usize,
    /// Width of the per-step ReLU layer of the head.
    pub head: usize,
    /// Size of the hashed token vocabulary.
    pub n_buckets: usize,
    /// Also run a GRU over the reversed sequence.
    pub bidirectional: bool,
    /// `L1` (default) or `L2`.
    pub objective: Objective,
    /// Maximum passes over the training sequences.
    pub epochs: usize,
    /// Sequences (crops) per mini-batch.
    pub batch_size: usize,
    /// Training sequences longer than this are cut into random windows of this many steps.
    pub crop: usize,
    /// Peak AdamW learning rate (cosine-decayed to 5 % over `epochs`).
    pub learning_rate: f64,
    /// AdamW decoupled weight decay.
    pub weight_decay: f64,
    /// Stop after this many epochs without validation improvement.
    pub early_stopping_epochs: usize,
    /// Step-feature preprocessing, fitted on the training steps.
    pub preprocess: PreprocessParams,
    pub seed: u64,
}

impl Default for GruParams {
    fn default() -> Self {
        GruParams {
            hidden: 32,
            head: 32,
            n_buckets: 64,
            bidirectional: true,
            objective: Objective::L1,
            epochs: 60,
            batch_size: 32,
            crop: 48,
            learning_rate: 3e-3,
            weight_decay: 1e-4,
            early_stopping_epochs: 10,
            preprocess: PreprocessParams::default(),
            seed: 7,
        }
    }
}

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
fn affine(x: &[f32], w: &[f32], b: &[f32], out: &mut [f32]) {
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

fn sigmoid(v: f32) -> f32 {
    1.0 / (1.0 + (-v).exp())
}

impl GruLayer {
    fn check(&self) -> bool {
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
            let z = sigmoid(xz[k] + hz[k]);
            let r = sigmoid(xr[k] + hr[k]);
            let n = (xn[k] + r * hn[k]).tanh();
            h[k] = (1.0 - z) * n + z * h[k];
        }
    }

    /// Hidden states after each step of `inputs` (row-major `len × n_in`), in `order`.
    fn run(&self, inputs: &[f32], order: impl Iterator<Item = usize>, out: &mut [f32]) {
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

/// A fitted GRU sequence regressor, independent of burn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GruModel {
    objective: Objective,
    preprocess: Preprocessor,
    n_buckets: usize,
    fwd: GruLayer,
    bwd: Option<GruLayer>,
    /// Head: `[h_fwd, h_bwd, input] → head (ReLU) → 1`, weights row-major `[n_in][n_out]`.
    head_w: Vec<f32>,
    head_b: Vec<f32>,
    out_w: Vec<f32>,
    out_b: f32,
    /// Prediction = `y_center + y_scale · network output`.
    y_center: f64,
    y_scale: f64,
    /// Epochs trained (up to the kept one).
    epochs: usize,
    /// Validation loss after each epoch (empty without validation).
    valid_loss: Vec<f64>,
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
    fn n_input(&self) -> usize {
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
    fn inputs(&self, seq: &Sequence) -> Result<Vec<f32>, ModelError> {
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

fn check_sequence(seq: &Sequence, d: usize, n_buckets: usize) -> Result<(), ModelError> {
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

#[derive(Module, Debug)]
struct SeqNet<B: Backend> {
    grus: Vec<Gru<B>>,
    head: Linear<B>,
    out: Linear<B>,
}

fn backend_err(what: &str, e: impl std::fmt::Debug) -> ModelError {
    ModelError::Numerical(format!("{what}: {e:?}"))
}

fn uniform_linear<B: Backend>(
    n_in: usize,
    n_out: usize,
    bound: f64,
    rng: &mut SplitMix,
    device: &B::Device,
) -> Linear<B> {
    let w: Vec<f32> = (0..n_in * n_out)
        .map(|_| ((2.0 * rng.unit() - 1.0) * bound) as f32)
        .collect();
    Linear {
        weight: Param::from_tensor(Tensor::from_data(TensorData::new(w, [n_in, n_out]), device)),
        bias: Some(Param::from_tensor(Tensor::from_data(
            TensorData::new(vec![0.0f32; n_out], [n_out]),
            device,
        ))),
    }
}

/// A burn `Gru` with our own seeded Glorot-uniform weights and zero biases.
fn seeded_gru<B: Backend>(
    n_in: usize,
    hidden: usize,
    rng: &mut SplitMix,
    device: &B::Device,
) -> Gru<B> {
    let mut gru = GruConfig::new(n_in, hidden, true).init::<B>(device);
    let bx = (6.0 / (n_in + hidden) as f64).sqrt();
    let bh = (3.0 / hidden as f64).sqrt();
    for gate in [&mut gru.update_gate, &mut gru.reset_gate, &mut gru.new_gate] {
        *gate = GateController {
            input_transform: uniform_linear(n_in, hidden, bx, rng, device),
            hidden_transform: uniform_linear(hidden, hidden, bh, rng, device),
        };
    }
    gru
}

fn linear_weights<B: Backend>(l: &Linear<B>) -> Result<(Vec<f32>, Vec<f32>), ModelError> {
    let w = l
        .weight
        .val()
        .into_data()
        .to_vec::<f32>()
        .map_err(|e| backend_err("reading weights", e))?;
    let n_out = l.weight.val().dims()[1];
    let b = match &l.bias {
        Some(b) => b
            .val()
            .into_data()
            .to_vec::<f32>()
            .map_err(|e| backend_err("reading biases", e))?,
        None => vec![0.0; n_out],
    };
    Ok((w, b))
}

fn export_gru<B: Backend>(g: &Gru<B>, n_in: usize) -> Result<GruLayer, ModelError> {
    let gate = |c: &GateController<B>| -> Result<GateWeights, ModelError> {
        let (wx, bx) = linear_weights(&c.input_transform)?;
        let (wh, bh) = linear_weights(&c.hidden_transform)?;
        Ok(GateWeights { wx, bx, wh, bh })
    };
    Ok(GruLayer {
        n_in,
        hidden: g.d_hidden,
        update: gate(&g.update_gate)?,
        reset: gate(&g.reset_gate)?,
        new: gate(&g.new_gate)?,
    })
}

/// A padded mini-batch of crops.
struct Batch<B: Backend> {
    x: Tensor<B, 3>,
    rev_x: Tensor<B, 3>,
    /// For each `(b, t)` of the reversed output, the row of `(b, t)` in the aligned output.
    rev_index: Tensor<B, 1, Int>,
    y: Tensor<B, 2>,
    mask: Tensor<B, 2>,
    n_labelled: f32,
}

impl<B: Backend> SeqNet<B> {
    fn forward(
        &self,
        x: Tensor<B, 3>,
        rev_x: Tensor<B, 3>,
        rev_index: Tensor<B, 1, Int>,
    ) -> Tensor<B, 2> {
        let [b, t, d] = x.dims();
        let mut parts = Vec::with_capacity(3);
        if let Some(f) = self.grus.first() {
            let h = f.d_hidden;
            parts.push(f.forward(x.clone(), None).reshape([b * t, h]));
        }
        if let Some(r) = self.grus.get(1) {
            let h = r.d_hidden;
            parts.push(
                r.forward(rev_x, None)
                    .reshape([b * t, h])
                    .select(0, rev_index),
            );
        }
        parts.push(x.reshape([b * t, d]));
        let feat = Tensor::cat(parts, 1);
        self.out.forward(relu(self.head.forward(feat)))
    }
}

impl GruParams {
    fn check(&self) -> Result<(), ModelError> {
        let bad = |what: &str| Err(ModelError::InvalidData(format!("GRU: {what}")));
        if self.hidden == 0 || self.head == 0 {
            return bad("hidden and head widths must be > 0");
        }
        if self.epochs == 0 || self.batch_size == 0 || self.crop == 0 {
            return bad("epochs, batch_size and crop must be > 0");
        }
        if !(self.learning_rate.is_finite() && self.learning_rate > 0.0) {
            return bad("learning_rate must be > 0");
        }
        if !(self.weight_decay.is_finite() && self.weight_decay >= 0.0) {
            return bad("weight_decay must be >= 0");
        }
        if !matches!(self.objective, Objective::L1 | Objective::L2) {
            return bad("objective must be L1 or L2");
        }
        Ok(())
    }

    /// Fits on `seqs` with per-step targets `y` (NaN = unlabelled step).
    pub fn fit(&self, seqs: &[Sequence], y: &[Vec<f64>]) -> Result<GruModel, ModelError> {
        self.fit_with_progress(seqs, y, None, &mut |_, _| {})
    }

    /// Fits, keeping the epoch with the best loss on `valid` (and stopping early) when given;
    /// calls `progress(epochs_done, epochs)` after each epoch.
    pub fn fit_with_progress(
        &self,
        seqs: &[Sequence],
        y: &[Vec<f64>],
        valid: Option<(&[Sequence], &[Vec<f64>])>,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<GruModel, ModelError> {
        self.check()?;
        if seqs.len() != y.len() {
            return Err(ModelError::InvalidData(format!(
                "{} sequences but {} target lists",
                seqs.len(),
                y.len()
            )));
        }
        let d = match seqs.iter().find(|s| !s.is_empty()) {
            Some(s) => s.x.len() / s.len(),
            None => return Err(ModelError::InvalidData("GRU: no training steps".into())),
        };
        for (i, (s, ys)) in seqs.iter().zip(y).enumerate() {
            check_sequence(s, d, self.n_buckets)?;
            if ys.len() != s.len() {
                return Err(ModelError::InvalidData(format!(
                    "sequence {i}: {} steps but {} targets",
                    s.len(),
                    ys.len()
                )));
            }
            if ys.iter().any(|v| v.is_infinite()) {
                return Err(ModelError::InvalidData(format!(
                    "sequence {i}: infinite target"
                )));
            }
        }
        let labelled: Vec<f64> = y
            .iter()
            .flatten()
            .copied()
            .filter(|v| v.is_finite())
            .collect();
        if labelled.is_empty() {
            return Err(ModelError::InvalidData("GRU: no labelled steps".into()));
        }
        let all_x: Vec<f32> = seqs.iter().flat_map(|s| s.x.iter().copied()).collect();
        let n_steps = all_x.len() / d.max(1);
        let pre = self.preprocess.fit(&Matrix::new(&all_x, n_steps, d)?)?;
        let (y_center, y_scale) = target_center_scale(&labelled);
        let mut model = GruModel {
            objective: self.objective,
            preprocess: pre,
            n_buckets: self.n_buckets,
            fwd: GruLayer {
                n_in: 0,
                hidden: 0,
                update: empty_gate(),
                reset: empty_gate(),
                new: empty_gate(),
            },
            bwd: None,
            head_w: Vec::new(),
            head_b: Vec::new(),
            out_w: Vec::new(),
            out_b: 0.0,
            y_center,
            y_scale,
            epochs: 0,
            valid_loss: Vec::new(),
        };
        let n_in = model.n_input();
        // Network inputs and standardised targets of every training sequence.
        let inputs: Vec<Vec<f32>> = seqs
            .iter()
            .map(|s| model.inputs(s))
            .collect::<Result<_, _>>()?;
        let yt: Vec<Vec<f32>> = y
            .iter()
            .map(|ys| {
                ys.iter()
                    .map(|v| ((v - y_center) / y_scale) as f32)
                    .collect()
            })
            .collect();

        let device = NdArrayDevice::default();
        let mut rng = SplitMix(self.seed ^ 0x6772_755f_7365_6564);
        let h = self.hidden;
        let dirs = 1 + usize::from(self.bidirectional);
        let mut grus = vec![seeded_gru::<TrainBackend>(n_in, h, &mut rng, &device)];
        if self.bidirectional {
            grus.push(seeded_gru(n_in, h, &mut rng, &device));
        }
        let head_in = dirs * h + n_in;
        let mut net = SeqNet {
            grus,
            head: uniform_linear(
                head_in,
                self.head,
                (6.0 / head_in as f64).sqrt(),
                &mut rng,
                &device,
            ),
            // zero output weights: the fit starts from predicting the target centre (a
            // residual model starts from its base)
            out: uniform_linear(self.head, 1, 0.0, &mut rng, &device),
        };
        let mut optim = AdamWConfig::new()
            .with_weight_decay(self.weight_decay as f32)
            .with_epsilon(1e-8)
            .init::<TrainBackend, SeqNet<TrainBackend>>();

        // Crops per epoch: ceil(len / crop) windows per sequence.
        let windows_per_epoch: usize = seqs.iter().map(|s| s.len().div_ceil(self.crop)).sum();
        let steps_per_epoch = windows_per_epoch.div_ceil(self.batch_size).max(1);
        let total_steps = (self.epochs * steps_per_epoch).max(1) as f64;
        let mut best: Option<(f64, GruModel)> = None;
        let mut valid_loss = Vec::new();
        if let Some((vs, vy)) = valid {
            // epoch 0 (output layer at zero: the target centre) is a candidate too
            export_into(&net, n_in, &mut model)?;
            best = Some((model.loss(vs, vy)?, model.clone()));
        }
        for epoch in 0..self.epochs {
            let mut crops: Vec<(usize, usize, usize)> = Vec::with_capacity(windows_per_epoch);
            for (i, s) in seqs.iter().enumerate() {
                let len = s.len();
                if len == 0 {
                    continue;
                }
                if len <= self.crop {
                    crops.push((i, 0, len));
                } else {
                    for _ in 0..len.div_ceil(self.crop) {
                        let start = rng.below(len - self.crop + 1);
                        crops.push((i, start, self.crop));
                    }
                }
            }
            rng.shuffle(&mut crops);
            for (bi, chunk) in crops.chunks(self.batch_size).enumerate() {
                let batch = make_batch::<TrainBackend>(chunk, &inputs, &yt, n_in, &device);
                if batch.n_labelled == 0.0 {
                    continue;
                }
                let step = (epoch * steps_per_epoch + bi) as f64;
                let lr = self.learning_rate
                    * (0.05
                        + 0.95 * 0.5 * (1.0 + (std::f64::consts::PI * step / total_steps).cos()));
                let pred = net.forward(batch.x, batch.rev_x, batch.rev_index);
                let diff = pred - batch.y;
                let per = match self.objective {
                    Objective::L2 => diff.clone() * diff,
                    _ => diff.abs(),
                };
                let loss = (per * batch.mask).sum().div_scalar(batch.n_labelled);
                let grads = GradientsParams::from_grads(loss.backward(), &net);
                if !loss.into_scalar().is_finite() {
                    return Err(ModelError::Numerical(format!(
                        "GRU training diverged in epoch {}",
                        epoch + 1
                    )));
                }
                net = optim.step(lr, net, grads);
            }
            progress(epoch + 1, self.epochs);
            export_into(&net, n_in, &mut model)?;
            model.epochs = epoch + 1;
            if let Some((vs, vy)) = valid {
                let loss = model.loss(vs, vy)?;
                valid_loss.push(loss);
                if best.as_ref().is_none_or(|(b, _)| loss < *b) {
                    best = Some((loss, model.clone()));
                } else if best
                    .as_ref()
                    .is_some_and(|(_, m)| epoch + 1 - m.epochs >= self.early_stopping_epochs)
                {
                    break;
                }
            }
        }
        if let Some((_, m)) = best {
            model = m;
        }
        model.valid_loss = valid_loss;
        if [&model.head_w, &model.head_b, &model.out_w]
            .iter()
            .any(|v| v.iter().any(|x| !x.is_finite()))
            || !model.out_b.is_finite()
        {
            return Err(ModelError::Numerical(
                "GRU training produced non-finite weights".into(),
            ));
        }
        model.check()?;
        Ok(model)
    }
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

fn empty_gate() -> GateWeights {
    GateWeights {
        wx: Vec::new(),
        bx: Vec::new(),
        wh: Vec::new(),
        bh: Vec::new(),
    }
}

fn export_into<B: Backend>(
    net: &SeqNet<B>,
    n_in: usize,
    model: &mut GruModel,
) -> Result<(), ModelError> {
    let mut layers = net
        .grus
        .iter()
        .map(|g| export_gru(g, n_in))
        .collect::<Result<Vec<_>, _>>()?
        .into_iter();
    model.fwd = layers
        .next()
        .ok_or_else(|| ModelError::Numerical("GRU: no forward layer".into()))?;
    model.bwd = layers.next();
    let (hw, hb) = linear_weights(&net.head)?;
    let (ow, ob) = linear_weights(&net.out)?;
    model.head_w = hw;
    model.head_b = hb;
    model.out_w = ow;
    model.out_b = ob.first().copied().unwrap_or(0.0);
    Ok(())
}

fn make_batch<B: Backend>(
    chunk: &[(usize, usize, usize)],
    inputs: &[Vec<f32>],
    yt: &[Vec<f32>],
    n_in: usize,
    device: &B::Device,
) -> Batch<B> {
    let b = chunk.len();
    let t_max = chunk.iter().map(|c| c.2).max().unwrap_or(1).max(1);
    let mut x = vec![0.0f32; b * t_max * n_in];
    let mut rx = vec![0.0f32; b * t_max * n_in];
    let mut y = vec![0.0f32; b * t_max];
    let mut mask = vec![0.0f32; b * t_max];
    let mut rev_index = Vec::with_capacity(b * t_max);
    for (bi, &(i, start, len)) in chunk.iter().enumerate() {
        let src = &inputs[i];
        for t in 0..t_max {
            let row = bi * t_max + t;
            if t < len {
                let s = start + t;
                x[row * n_in..(row + 1) * n_in].copy_from_slice(&src[s * n_in..(s + 1) * n_in]);
                let rs = start + len - 1 - t;
                rx[row * n_in..(row + 1) * n_in].copy_from_slice(&src[rs * n_in..(rs + 1) * n_in]);
                let target = yt[i][s];
                if target.is_finite() {
                    y[row] = target;
                    mask[row] = 1.0;
                }
                // aligned step t sits at reversed position len − 1 − t
                rev_index.push((bi * t_max + len - 1 - t) as i64);
            } else {
                rev_index.push(row as i64);
            }
        }
    }
    let n_labelled = mask.iter().sum();
    Batch {
        x: Tensor::from_data(TensorData::new(x, [b, t_max, n_in]), device),
        rev_x: Tensor::from_data(TensorData::new(rx, [b, t_max, n_in]), device),
        rev_index: Tensor::from_ints(TensorData::new(rev_index, [b * t_max]), device),
        y: Tensor::from_data(TensorData::new(y, [b * t_max, 1]), device),
        mask: Tensor::from_data(TensorData::new(mask, [b * t_max, 1]), device),
        n_labelled,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type B = NdArray<f32>;

    #[test]
    fn plain_forward_matches_burn() {
        let device = NdArrayDevice::default();
        let mut rng = SplitMix(3);
        let (n_in, h, len) = (5, 4, 7);
        let gru = seeded_gru::<B>(n_in, h, &mut rng, &device);
        // non-zero biases too
        let mut gru = gru;
        for gate in [&mut gru.update_gate, &mut gru.reset_gate, &mut gru.new_gate] {
            for l in [&mut gate.input_transform, &mut gate.hidden_transform] {
                let bias: Vec<f32> = (0..h).map(|_| (rng.unit() - 0.5) as f32).collect();
                l.bias = Some(Param::from_tensor(Tensor::from_data(
                    TensorData::new(bias, [h]),
                    &device,
                )));
            }
        }
        let xs: Vec<f32> = (0..len * n_in)
            .map(|_| (2.0 * rng.unit() - 1.0) as f32)
            .collect();
        let burn_out = gru
            .forward(
                Tensor::<B, 3>::from_data(TensorData::new(xs.clone(), [1, len, n_in]), &device),
                None,
            )
            .into_data()
            .to_vec::<f32>()
            .unwrap();
        let layer = export_gru(&gru, n_in).unwrap();
        let mut plain = vec![0.0f32; len * h];
        layer.run(&xs, 0..len, &mut plain);
        for (a, b) in burn_out.iter().zip(&plain) {
            assert!((a - b).abs() < 1e-5, "burn {a} vs plain {b}");
        }
    }
}
