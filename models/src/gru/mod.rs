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
//!   Weights are drawn from our own seeded generator (burn's backend RNG is
//!   process-global), sequences are cropped to [`GruParams::crop`] steps and shuffled with
//!   the same generator, so a fit is a deterministic function of the data and
//!   [`GruParams::seed`].
//! - **Training**: `Autodiff<NdArray<f32>>` on the CPU, AdamW with a cosine decay to 5 %,
//!   loss L1 (or L2) on the labelled steps in standardised target units; with a validation
//!   set the best epoch is kept and training stops after
//!   [`GruParams::early_stopping_epochs`] epochs without improvement.
//! - **Serving**: the weights are copied into plain `Vec<f32>` gates ([`GruLayer`]) and
//!   [`GruModel::predict`] runs the same recurrence by hand (PyTorch/burn `reset_after`
//!   convention: `n = tanh(W_xn·x + b_xn + r ⊙ (W_hn·h + b_hn))`), no burn at inference. A
//!   test checks it against burn's forward pass.

mod layer;
mod model;
mod net;
mod params;
mod train;

pub use layer::{GateWeights, GruLayer};
pub use model::{GruModel, Sequence};
pub use params::GruParams;
