//! Multilayer perceptron: trained with burn, served in plain Rust.
//!
//! - **Input**: the shared [`preprocess`](crate::preprocess)ing (median imputation with
//!   missing indicators, signed log1p of heavy tails, robust standardisation with clipping),
//!   fitted on the training rows and stored in the model. Targets are trained in
//!   standardised units (median / robust scale) and mapped back at prediction.
//! - **Network**: `Linear → ReLU` per entry of [`MlpParams::hidden`], then `Linear → 1`.
//!   He-uniform hidden weights, Glorot-uniform output weights and zero biases, drawn from
//!   our own seeded generator (burn's ndarray backend seeds one process-global RNG, which
//!   concurrent fits would race on); with our own init and shuffling a fit is a
//!   deterministic function of the data and [`MlpParams::seed`].
//! - **Training**: burn 0.21 (`Autodiff<NdArray<f32>>`, pure-Rust ndarray backend, CPU,
//!   single-threaded), mini-batches reshuffled every epoch, AdamW (decoupled weight decay)
//!   with a cosine learning-rate decay to 5 % over [`MlpParams::epochs`], loss = the
//!   objective (L1 = mean absolute error, which is what runtime prediction is scored on in
//!   log space; L2; or pinball for a quantile). With a [`Validation`] set the validation
//!   loss is measured after every epoch, the best epoch's weights are kept and training
//!   stops after [`MlpParams::early_stopping_epochs`] epochs without improvement.
//! - **Serving**: after training the weights are copied out of the burn tensors into
//!   [`Dense`] layers (plain `Vec<f32>`), and [`MlpModel`] predicts with a hand-written
//!   forward pass: no burn, no allocation for small networks.
//!
//! Why burn: it is the maintained pure-Rust deep-learning framework with autodiff and
//! optimisers (no libtorch download, no C++ build); we enable only its `std`, `ndarray` and
//! `autodiff` features.

use augur_numeric::SplitMix64;
use burn::backend::ndarray::NdArrayDevice;
use burn::backend::{Autodiff, NdArray};
use burn::module::{Module, Param};
use burn::nn::Linear;
use burn::optim::{AdamWConfig, GradientsParams, Optimizer};
use burn::tensor::activation::relu;
use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorData};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::gbdt::{Objective, Validation};
use crate::linear::{check_predict_shape, pinball_slopes};
use crate::preprocess::{target_center_scale, with_scratch, PreprocessParams, Preprocessor};
use crate::{Fit, Matrix, ModelError, Predict, TrainSet};

type TrainBackend = Autodiff<NdArray<f32>>;

/// MLP hyperparameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MlpParams {
    /// Hidden layer widths (ReLU); empty = a linear model trained by AdamW.
    pub hidden: Vec<usize>,
    /// `L1` (default), `L2` or `Quantile { alpha }` (`LogLoss` is not supported).
    pub objective: Objective,
    /// Maximum passes over the training data.
    pub epochs: usize,
    pub batch_size: usize,
    /// Peak AdamW learning rate (cosine-decayed to 5 % over `epochs`).
    pub learning_rate: f64,
    /// AdamW decoupled weight decay.
    pub weight_decay: f64,
    /// Stop after this many epochs without validation improvement.
    pub early_stopping_epochs: usize,
    /// Feature preprocessing, fitted on the training rows and stored in the model.
    pub preprocess: PreprocessParams,
    pub seed: u64,
}

impl Default for MlpParams {
    fn default() -> Self {
        MlpParams {
            hidden: vec![128, 64],
            objective: Objective::L1,
            epochs: 60,
            batch_size: 256,
            learning_rate: 2e-3,
            weight_decay: 1e-4,
            early_stopping_epochs: 8,
            preprocess: PreprocessParams::default(),
            seed: 7,
        }
    }
}

/// A dense layer `out = b + inᵀ·W` with `w` row-major `[n_in][n_out]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Dense {
    pub n_in: usize,
    pub n_out: usize,
    pub w: Vec<f32>,
    pub b: Vec<f32>,
}

impl Dense {
    /// `out = b + Σ_k x_k·W[k]`, then ReLU if `relu`. Sizes are checked at construction.
    #[inline]
    fn forward(&self, x: &[f32], out: &mut [f32], relu: bool) {
        out.copy_from_slice(&self.b);
        for (&xk, wrow) in x.iter().zip(self.w.chunks_exact(self.n_out)) {
            // standardised features are often exactly 0 (imputed or at the median), and
            // ReLU outputs often are
            if xk != 0.0 {
                for (o, &w) in out.iter_mut().zip(wrow) {
                    *o += xk * w;
                }
            }
        }
        if relu {
            for o in out.iter_mut() {
                *o = o.max(0.0);
            }
        }
    }
}

/// A fitted MLP, independent of burn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "MlpModelData")]
pub struct MlpModel {
    objective: Objective,
    preprocess: Preprocessor,
    layers: Vec<Dense>,
    /// Prediction = `y_center + y_scale · network output`.
    y_center: f64,
    y_scale: f64,
    /// Epochs trained (up to the kept, best one).
    epochs: usize,
    /// Validation loss after each epoch (empty without a validation set).
    valid_loss: Vec<f64>,
}

/// The serialised form of [`MlpModel`], checked for consistent shapes when loaded.
#[derive(Deserialize)]
struct MlpModelData {
    objective: Objective,
    preprocess: Preprocessor,
    layers: Vec<Dense>,
    y_center: f64,
    y_scale: f64,
    epochs: usize,
    valid_loss: Vec<f64>,
}

impl TryFrom<MlpModelData> for MlpModel {
    type Error = ModelError;
    fn try_from(d: MlpModelData) -> Result<MlpModel, ModelError> {
        let m = MlpModel {
            objective: d.objective,
            preprocess: d.preprocess,
            layers: d.layers,
            y_center: d.y_center,
            y_scale: d.y_scale,
            epochs: d.epochs,
            valid_loss: d.valid_loss,
        };
        m.check_shapes()?;
        Ok(m)
    }
}

impl MlpModel {
    fn check_shapes(&self) -> Result<(), ModelError> {
        let mut width = self.preprocess.n_out();
        for (i, l) in self.layers.iter().enumerate() {
            if l.n_in != width
                || l.n_out == 0
                || l.w.len() != l.n_in * l.n_out
                || l.b.len() != l.n_out
            {
                return Err(ModelError::InvalidData(format!(
                    "MLP layer {i} has inconsistent shapes"
                )));
            }
            width = l.n_out;
        }
        if self.layers.is_empty() || width != 1 {
            return Err(ModelError::InvalidData(
                "MLP must end in a layer with one output".into(),
            ));
        }
        Ok(())
    }

    /// The objective it was trained with.
    pub fn objective(&self) -> Objective {
        self.objective
    }
    /// The layers (hidden layers, then the output layer).
    pub fn layers(&self) -> &[Dense] {
        &self.layers
    }
    /// The stored preprocessing.
    pub fn preprocessor(&self) -> &Preprocessor {
        &self.preprocess
    }
    /// Epochs trained, up to the kept (best-validation) epoch.
    pub fn epochs(&self) -> usize {
        self.epochs
    }
    /// Validation loss after each epoch (empty when fitted without validation).
    pub fn valid_loss(&self) -> &[f64] {
        &self.valid_loss
    }

    fn scratch_len(&self) -> usize {
        let widest = self.layers.iter().map(|l| l.n_out).max().unwrap_or(1);
        self.preprocess.n_out() + 2 * widest
    }

    /// Preprocessing and forward pass with `buf.len() == scratch_len()`.
    #[inline]
    fn predict_with(&self, row: &[f32], buf: &mut [f32]) -> f64 {
        self.preprocess
            .transform_row(row, &mut buf[..self.preprocess.n_out()]);
        self.forward_from_buffer(buf)
    }

    /// Forward pass of the preprocessed row held in `buf[..n_out()]`.
    #[inline]
    fn forward_from_buffer(&self, buf: &mut [f32]) -> f64 {
        let (z, rest) = buf.split_at_mut(self.preprocess.n_out());
        let (a, b) = rest.split_at_mut(rest.len() / 2);
        let last = self.layers.len() - 1;
        for (i, l) in self.layers.iter().enumerate() {
            let relu = i != last;
            match i {
                0 => l.forward(z, &mut a[..l.n_out], relu),
                _ if i % 2 == 1 => l.forward(&a[..l.n_in], &mut b[..l.n_out], relu),
                _ => l.forward(&b[..l.n_in], &mut a[..l.n_out], relu),
            }
        }
        let out = if last % 2 == 1 { b[0] } else { a[0] };
        self.y_center + self.y_scale * f64::from(out)
    }
}

impl Predict for MlpModel {
    fn n_features(&self) -> usize {
        self.preprocess.n_in()
    }
    /// Prediction for one row; features absent from a short row count as missing.
    fn predict_row(&self, row: &[f32]) -> f64 {
        with_scratch(self.scratch_len(), |buf| self.predict_with(row, buf))
    }
    fn predict_into(&self, x: &Matrix, out: &mut [f64]) -> Result<(), ModelError> {
        check_predict_shape(self.n_features(), x, out)?;
        let len = self.scratch_len();
        out.par_chunks_mut(256).enumerate().for_each_init(
            || vec![0.0f32; len],
            |buf, (c, o)| {
                for (k, v) in o.iter_mut().enumerate() {
                    *v = self.predict_with(x.row(c * 256 + k), buf);
                }
            },
        );
        Ok(())
    }
}

#[derive(Module, Debug)]
struct Net<B: Backend> {
    layers: Vec<Linear<B>>,
}

impl<B: Backend> Net<B> {
    fn forward(&self, x: Tensor<B, 2>) -> Tensor<B, 2> {
        let last = self.layers.len().saturating_sub(1);
        let mut h = x;
        for (i, l) in self.layers.iter().enumerate() {
            h = l.forward(h);
            if i != last {
                h = relu(h);
            }
        }
        h
    }
}

fn backend_err(what: &str, e: impl std::fmt::Debug) -> ModelError {
    ModelError::Numerical(format!("{what}: {e:?}"))
}

fn export(net: &Net<TrainBackend>) -> Result<Vec<Dense>, ModelError> {
    net.layers
        .iter()
        .map(|l| {
            let [n_in, n_out] = l.weight.val().dims();
            let w = l
                .weight
                .val()
                .into_data()
                .to_vec::<f32>()
                .map_err(|e| backend_err("reading weights", e))?;
            let b = match &l.bias {
                Some(b) => b
                    .val()
                    .into_data()
                    .to_vec::<f32>()
                    .map_err(|e| backend_err("reading biases", e))?,
                None => vec![0.0; n_out],
            };
            Ok(Dense { n_in, n_out, w, b })
        })
        .collect()
}

impl MlpParams {
    fn check(&self) -> Result<Option<(f64, f64)>, ModelError> {
        let bad = |what: &str| Err(ModelError::InvalidData(format!("MLP: {what}")));
        if self.hidden.contains(&0) {
            return bad("hidden layer widths must be > 0");
        }
        if self.epochs == 0 || self.batch_size == 0 {
            return bad("epochs and batch_size must be > 0");
        }
        if !(self.learning_rate.is_finite() && self.learning_rate > 0.0) {
            return bad("learning_rate must be > 0");
        }
        if !(self.weight_decay.is_finite() && self.weight_decay >= 0.0) {
            return bad("weight_decay must be >= 0");
        }
        pinball_slopes(self.objective)
    }

    /// Mean loss (original target units) of `layers` on a preprocessed matrix.
    fn loss_of(&self, model: &MlpModel, z: &[f32], y: &[f64], slopes: Option<(f64, f64)>) -> f64 {
        let n_z = model.preprocess.n_out();
        let len = model.scratch_len();
        let total: f64 = y
            .par_iter()
            .enumerate()
            .with_min_len(256)
            .map_init(
                || vec![0.0f32; len],
                |buf, (i, &yi)| {
                    let p = model.forward_preprocessed(&z[i * n_z..(i + 1) * n_z], buf);
                    let r = yi - p;
                    match slopes {
                        None => r * r,
                        Some((a, b)) => (a * r).max(-b * r),
                    }
                },
            )
            .collect::<Vec<f64>>()
            .iter()
            .sum();
        total / y.len().max(1) as f64
    }

    /// Fits, keeping the epoch with the best loss on `valid` (and stopping early) when given.
    pub fn fit_with_validation(
        &self,
        train: &TrainSet,
        valid: Option<Validation>,
    ) -> Result<MlpModel, ModelError> {
        self.fit_with_progress(train, valid, &mut |_, _| {})
    }

    /// [`fit_with_validation`](Self::fit_with_validation), calling `progress(epochs_done,
    /// epochs)` after each epoch (early stopping may end before `epochs`).
    pub fn fit_with_progress(
        &self,
        train: &TrainSet,
        valid: Option<Validation>,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<MlpModel, ModelError> {
        let slopes = self.check()?;
        let pre = self.preprocess.fit(&train.x)?;
        let z = pre.transform(&train.x)?;
        let (n, m) = (train.x.rows(), pre.n_out());
        if m == 0 {
            return Err(ModelError::InvalidData(
                "MLP: no feature varies in the training data".into(),
            ));
        }
        let (y_center, y_scale) = target_center_scale(train.y);
        let yt: Vec<f32> = train
            .y
            .iter()
            .map(|v| ((v - y_center) / y_scale) as f32)
            .collect();
        let valid = preprocessed_validation(&pre, valid)?;
        let weights: Option<Vec<f32>> = train.weights.map(|w| {
            let mean = w.iter().sum::<f64>() / n as f64;
            w.iter().map(|v| (v / mean.max(1e-300)) as f32).collect()
        });

        let device = NdArrayDevice::default();
        let mut rng = SplitMix64(self.seed ^ 0x6d6c_705f_7365_6564);
        let mut dims = vec![m];
        dims.extend(&self.hidden);
        dims.push(1);
        let mut net = Net {
            layers: seeded_layers(&dims, &mut rng, &device),
        };
        let mut optim = AdamWConfig::new()
            .with_weight_decay(self.weight_decay as f32)
            .with_epsilon(1e-8)
            .init::<TrainBackend, Net<TrainBackend>>();

        let bs = self.batch_size.min(n);
        let steps_per_epoch = n.div_ceil(bs);
        let data = TrainData {
            z: &z,
            yt: &yt,
            weights: weights.as_deref(),
            m,
            batch_size: bs,
            slopes,
            device: &device,
            steps_per_epoch,
            total_steps: (self.epochs * steps_per_epoch).max(1) as f64,
        };
        let mut order: Vec<usize> = (0..n).collect();
        let snapshot = |layers: Vec<Dense>, epochs: usize, valid_loss: Vec<f64>| MlpModel {
            objective: self.objective,
            preprocess: pre.clone(),
            layers,
            y_center,
            y_scale,
            epochs,
            valid_loss,
        };
        let mut best: Option<(f64, MlpModel)> = None;
        let mut valid_loss = Vec::new();
        let mut last_layers = Vec::new();
        for epoch in 0..self.epochs {
            rng.shuffle(&mut order);
            net = self.train_epoch(net, &mut optim, &order, epoch, &data)?;
            progress(epoch + 1, self.epochs);
            let layers = export(&net)?;
            if let Some((vz, vy)) = &valid {
                let model = snapshot(layers, epoch + 1, Vec::new());
                let loss = self.loss_of(&model, vz, vy, slopes);
                valid_loss.push(loss);
                if best.as_ref().is_none_or(|(b, _)| loss < *b) {
                    best = Some((loss, model));
                } else if best
                    .as_ref()
                    .is_some_and(|(_, m)| epoch + 1 - m.epochs >= self.early_stopping_epochs)
                {
                    break;
                }
            } else {
                last_layers = layers;
            }
        }
        let mut model = match best {
            Some((_, m)) => m,
            None => snapshot(last_layers, self.epochs, Vec::new()),
        };
        model.valid_loss = valid_loss;
        check_finite_weights(&model)?;
        model.check_shapes()?;
        Ok(model)
    }

    /// One optimiser step per mini-batch of rows in `order`; the learning rate decays along a
    /// cosine from the peak to 5 % of it.
    fn train_epoch(
        &self,
        mut net: Net<TrainBackend>,
        optim: &mut impl Optimizer<Net<TrainBackend>, TrainBackend>,
        order: &[usize],
        epoch: usize,
        data: &TrainData,
    ) -> Result<Net<TrainBackend>, ModelError> {
        let (m, device) = (data.m, data.device);
        for (bi, idx) in order.chunks(data.batch_size).enumerate() {
            let b = idx.len();
            let mut xb = Vec::with_capacity(b * m);
            for &i in idx {
                xb.extend_from_slice(&data.z[i * m..(i + 1) * m]);
            }
            let yb: Vec<f32> = idx.iter().map(|&i| data.yt[i]).collect();
            let step = (epoch * data.steps_per_epoch + bi) as f64;
            let lr = self.learning_rate
                * (0.05
                    + 0.95 * 0.5 * (1.0 + (std::f64::consts::PI * step / data.total_steps).cos()));
            let x = Tensor::<TrainBackend, 2>::from_data(TensorData::new(xb, [b, m]), device);
            let y = Tensor::<TrainBackend, 2>::from_data(TensorData::new(yb, [b, 1]), device);
            let diff = net.forward(x) - y;
            let per_row = match data.slopes {
                None => diff.clone() * diff,
                Some((a, c)) => {
                    // residual r = y − pred = −diff; pinball = max(a·r, −c·r)
                    let r = diff.neg();
                    r.clone().mul_scalar(a).max_pair(r.mul_scalar(-c))
                }
            };
            let loss = match data.weights {
                None => per_row.mean(),
                Some(w) => {
                    let wb: Vec<f32> = idx.iter().map(|&i| w[i]).collect();
                    let wsum: f32 = wb.iter().sum();
                    let wt =
                        Tensor::<TrainBackend, 2>::from_data(TensorData::new(wb, [b, 1]), device);
                    (per_row * wt).sum().div_scalar(wsum.max(1e-12))
                }
            };
            let grads = GradientsParams::from_grads(loss.backward(), &net);
            if !loss.into_scalar().is_finite() {
                return Err(ModelError::Numerical(format!(
                    "MLP training diverged in epoch {}",
                    epoch + 1
                )));
            }
            net = optim.step(lr, net, grads);
        }
        Ok(net)
    }
}

/// Refuses a fit with a weight or bias that is not finite.
fn check_finite_weights(model: &MlpModel) -> Result<(), ModelError> {
    if model
        .layers
        .iter()
        .any(|l| l.w.iter().chain(&l.b).any(|v| !v.is_finite()))
    {
        return Err(ModelError::Numerical(
            "MLP training produced non-finite weights".into(),
        ));
    }
    Ok(())
}

/// What every epoch trains on, and the step counts of the learning-rate schedule.
struct TrainData<'a> {
    /// Preprocessed training rows, row-major `n × m`.
    z: &'a [f32],
    /// Standardised targets.
    yt: &'a [f32],
    /// Row weights normalised to mean 1.
    weights: Option<&'a [f32]>,
    m: usize,
    batch_size: usize,
    /// Pinball slopes of a quantile objective; `None` for squared error.
    slopes: Option<(f64, f64)>,
    device: &'a NdArrayDevice,
    steps_per_epoch: usize,
    total_steps: f64,
}

/// Validation rows preprocessed like the training rows (row-major), and their targets.
type PreprocessedValidation<'a> = (Vec<f32>, &'a [f64]);

/// The validation rows preprocessed like the training rows, with their targets.
fn preprocessed_validation<'a>(
    pre: &Preprocessor,
    valid: Option<Validation<'a>>,
) -> Result<Option<PreprocessedValidation<'a>>, ModelError> {
    let Some(v) = valid else {
        return Ok(None);
    };
    if v.y.len() != v.x.rows() {
        return Err(ModelError::InvalidData(format!(
            "{} validation targets for {} rows",
            v.y.len(),
            v.x.rows()
        )));
    }
    Ok(Some((pre.transform(&v.x)?, v.y)))
}

/// Seeded layers of widths `dims` (input, hidden..., 1) with zero biases: He-uniform hidden
/// weights, Glorot-uniform output weights, drawn from `rng` layer by layer.
fn seeded_layers(
    dims: &[usize],
    rng: &mut SplitMix64,
    device: &NdArrayDevice,
) -> Vec<Linear<TrainBackend>> {
    let n_layers = dims.len() - 1;
    dims.windows(2)
        .enumerate()
        .map(|(i, d)| {
            let (fan_in, fan_out) = (d[0], d[1]);
            let bound = if i + 1 == n_layers {
                (6.0 / (fan_in + fan_out) as f64).sqrt()
            } else {
                (6.0 / fan_in.max(1) as f64).sqrt()
            };
            let w: Vec<f32> = (0..fan_in * fan_out)
                .map(|_| ((2.0 * rng.unit() - 1.0) * bound) as f32)
                .collect();
            Linear {
                weight: Param::from_tensor(Tensor::from_data(
                    TensorData::new(w, [fan_in, fan_out]),
                    device,
                )),
                bias: Some(Param::from_tensor(Tensor::from_data(
                    TensorData::new(vec![0.0f32; fan_out], [fan_out]),
                    device,
                ))),
            }
        })
        .collect()
}

impl MlpModel {
    /// Forward pass on an already preprocessed row.
    fn forward_preprocessed(&self, z: &[f32], buf: &mut [f32]) -> f64 {
        let n_z = self.preprocess.n_out();
        let (zb, _) = buf.split_at_mut(n_z);
        zb.copy_from_slice(z);
        self.forward_from_buffer(buf)
    }
}

impl Fit for MlpParams {
    type Model = MlpModel;
    fn fit(&self, train: &TrainSet) -> Result<MlpModel, ModelError> {
        self.fit_with_validation(train, None)
    }
}
