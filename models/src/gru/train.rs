//! Fitting a GRU sequence regressor with burn: the data checked, the network seeded, epochs of
//! shuffled crops under a cosine learning-rate decay, and the best validation epoch kept.

use burn::backend::ndarray::NdArrayDevice;
use burn::backend::{Autodiff, NdArray};
use burn::optim::{AdamWConfig, GradientsParams, Optimizer};

use augur_numeric::SplitMix64;

use super::layer::{GateWeights, GruLayer};
use super::model::{check_sequence, GruModel, Sequence};
use super::net::{export_into, make_batch, seeded_net, SeqNet};
use super::params::GruParams;
use crate::gbdt::Objective;
use crate::preprocess::target_center_scale;
use crate::{Matrix, ModelError};

type TrainBackend = Autodiff<NdArray<f32>>;

/// A crop of a training sequence: `(sequence index, first step, steps)`.
type Crop = (usize, usize, usize);

/// What every epoch trains on, and the step counts of the learning-rate schedule.
struct TrainData<'a> {
    /// Network inputs of every training sequence.
    inputs: &'a [Vec<f32>],
    /// Standardised targets of every training sequence (NaN = unlabelled).
    yt: &'a [Vec<f32>],
    n_in: usize,
    device: &'a NdArrayDevice,
    steps_per_epoch: usize,
    total_steps: f64,
}

impl GruParams {
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
        let (d, labelled) = self.check_training_data(seqs, y)?;
        let mut model = self.untrained_model(seqs, d, &labelled)?;
        let n_in = model.n_input();
        let inputs: Vec<Vec<f32>> = seqs
            .iter()
            .map(|s| model.inputs(s))
            .collect::<Result<_, _>>()?;
        let yt: Vec<Vec<f32>> = y
            .iter()
            .map(|ys| {
                ys.iter()
                    .map(|v| ((v - model.y_center) / model.y_scale) as f32)
                    .collect()
            })
            .collect();

        let device = NdArrayDevice::default();
        let mut rng = SplitMix64(self.seed ^ 0x6772_755f_7365_6564);
        let mut net: SeqNet<TrainBackend> = seeded_net(
            n_in,
            self.hidden,
            self.head,
            self.bidirectional,
            &mut rng,
            &device,
        );
        let mut optim = AdamWConfig::new()
            .with_weight_decay(self.weight_decay as f32)
            .with_epsilon(1e-8)
            .init::<TrainBackend, SeqNet<TrainBackend>>();

        // Crops per epoch: ceil(len / crop) windows per sequence.
        let windows_per_epoch: usize = seqs.iter().map(|s| s.len().div_ceil(self.crop)).sum();
        let steps_per_epoch = windows_per_epoch.div_ceil(self.batch_size).max(1);
        let data = TrainData {
            inputs: &inputs,
            yt: &yt,
            n_in,
            device: &device,
            steps_per_epoch,
            total_steps: (self.epochs * steps_per_epoch).max(1) as f64,
        };
        let mut best: Option<(f64, GruModel)> = None;
        let mut valid_loss = Vec::new();
        if let Some((vs, vy)) = valid {
            // epoch 0 (output layer at zero: the target centre) is a candidate too
            export_into(&net, n_in, &mut model)?;
            best = Some((model.loss(vs, vy)?, model.clone()));
        }
        for epoch in 0..self.epochs {
            let crops = self.epoch_crops(seqs, &mut rng, windows_per_epoch);
            net = self.train_epoch(net, &mut optim, &crops, epoch, &data)?;
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
        check_finite_weights(&model)?;
        model.check()?;
        Ok(model)
    }

    /// Checks the sequences against their targets; returns the step width and the labelled
    /// (finite) targets.
    fn check_training_data(
        &self,
        seqs: &[Sequence],
        y: &[Vec<f64>],
    ) -> Result<(usize, Vec<f64>), ModelError> {
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
        Ok((d, labelled))
    }

    /// The model before training: the step preprocessing fitted on every training step and
    /// the target centre and scale, with empty layers.
    fn untrained_model(
        &self,
        seqs: &[Sequence],
        d: usize,
        labelled: &[f64],
    ) -> Result<GruModel, ModelError> {
        let all_x: Vec<f32> = seqs.iter().flat_map(|s| s.x.iter().copied()).collect();
        let n_steps = all_x.len() / d.max(1);
        let pre = self.preprocess.fit(&Matrix::new(&all_x, n_steps, d)?)?;
        let (y_center, y_scale) = target_center_scale(labelled);
        Ok(GruModel {
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
        })
    }

    /// One epoch's crops in random order: a sequence up to `crop` steps whole, a longer one
    /// as ceil(len / crop) windows at random starts.
    fn epoch_crops(&self, seqs: &[Sequence], rng: &mut SplitMix64, windows: usize) -> Vec<Crop> {
        let mut crops: Vec<Crop> = Vec::with_capacity(windows);
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
        crops
    }

    /// One optimiser step per mini-batch of `crops` (batches without a labelled step are
    /// skipped); the learning rate decays along a cosine from the peak to 5 % of it.
    fn train_epoch(
        &self,
        mut net: SeqNet<TrainBackend>,
        optim: &mut impl Optimizer<SeqNet<TrainBackend>, TrainBackend>,
        crops: &[Crop],
        epoch: usize,
        data: &TrainData,
    ) -> Result<SeqNet<TrainBackend>, ModelError> {
        for (bi, chunk) in crops.chunks(self.batch_size).enumerate() {
            let batch =
                make_batch::<TrainBackend>(chunk, data.inputs, data.yt, data.n_in, data.device);
            if batch.n_labelled == 0.0 {
                continue;
            }
            let step = (epoch * data.steps_per_epoch + bi) as f64;
            let lr = self.learning_rate
                * (0.05
                    + 0.95 * 0.5 * (1.0 + (std::f64::consts::PI * step / data.total_steps).cos()));
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
        Ok(net)
    }
}

/// Refuses a fit whose head or output weights are not all finite.
fn check_finite_weights(model: &GruModel) -> Result<(), ModelError> {
    if [&model.head_w, &model.head_b, &model.out_w]
        .iter()
        .any(|v| v.iter().any(|x| !x.is_finite()))
        || !model.out_b.is_finite()
    {
        return Err(ModelError::Numerical(
            "GRU training produced non-finite weights".into(),
        ));
    }
    Ok(())
}

fn empty_gate() -> GateWeights {
    GateWeights {
        wx: Vec::new(),
        bx: Vec::new(),
        wh: Vec::new(),
        bh: Vec::new(),
    }
}
