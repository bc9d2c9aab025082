//! The network as burn trains it: seeded initialisation, the batched forward pass over padded
//! crops, and the export of its weights into the plain-Rust model.

use burn::module::{Module, Param};
use burn::nn::{GateController, Gru, GruConfig, Linear};
use burn::tensor::activation::relu;
use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor, TensorData};

use augur_numeric::SplitMix64;

use super::layer::{GateWeights, GruLayer};
use super::model::GruModel;
use crate::ModelError;

/// The trained network: forward (and backward) GRU, then `[h_fwd, h_bwd, input] → head
/// (ReLU) → 1` per step.
#[derive(Module, Debug)]
pub(super) struct SeqNet<B: Backend> {
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
    rng: &mut SplitMix64,
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
    rng: &mut SplitMix64,
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

/// A freshly initialised network on `n_in` inputs, all weights from `rng`: the GRU layers
/// (forward, then backward when `bidirectional`), the head, and a zero output layer, so the
/// fit starts from predicting the target centre (a residual model starts from its base).
pub(super) fn seeded_net<B: Backend>(
    n_in: usize,
    hidden: usize,
    head: usize,
    bidirectional: bool,
    rng: &mut SplitMix64,
    device: &B::Device,
) -> SeqNet<B> {
    let dirs = 1 + usize::from(bidirectional);
    let mut grus = vec![seeded_gru::<B>(n_in, hidden, rng, device)];
    if bidirectional {
        grus.push(seeded_gru(n_in, hidden, rng, device));
    }
    let head_in = dirs * hidden + n_in;
    SeqNet {
        grus,
        head: uniform_linear(head_in, head, (6.0 / head_in as f64).sqrt(), rng, device),
        out: uniform_linear(head, 1, 0.0, rng, device),
    }
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
pub(super) struct Batch<B: Backend> {
    pub x: Tensor<B, 3>,
    pub rev_x: Tensor<B, 3>,
    /// For each `(b, t)` of the reversed output, the row of `(b, t)` in the aligned output.
    pub rev_index: Tensor<B, 1, Int>,
    pub y: Tensor<B, 2>,
    pub mask: Tensor<B, 2>,
    pub n_labelled: f32,
}

impl<B: Backend> SeqNet<B> {
    pub(super) fn forward(
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

/// Copies the network's weights into `model`'s plain-Rust layers.
pub(super) fn export_into<B: Backend>(
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

/// The crops `(sequence, start, length)` of `chunk` padded to the longest, with each step's
/// reversed input and a mask of the labelled steps.
pub(super) fn make_batch<B: Backend>(
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
    use burn::backend::ndarray::NdArrayDevice;
    use burn::backend::NdArray;

    use super::*;

    type B = NdArray<f32>;

    #[test]
    fn plain_forward_matches_burn() {
        let device = NdArrayDevice::default();
        let mut rng = SplitMix64(3);
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
