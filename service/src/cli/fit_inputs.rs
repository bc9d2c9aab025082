//! `augur data fit-inputs`: the matrix `augur evaluate --task queue-wait` fits its median
//! (or bound) model on, written to a folder ([`augur_models::gbdt::FitInputs`]) so that the fit can be
//! re-run and timed alone and fitted by another library on the very same numbers
//! (`scripts/bench-same-matrix.py` times Augur's GBDT beside LightGBM on it).

use anyhow::Context;
use augur_predictor::{QueueWaitSplit, WaitModel};

use crate::cli::trace::load_one_trace;
use crate::cli::{FitInputsArgs, FitInputsModel};
use crate::trainers;

/// `augur data fit-inputs`.
pub fn run(args: &FitInputsArgs) -> anyhow::Result<()> {
    let jobs = load_one_trace(&args.trace)?;
    let trainer = trainers::queue_wait(None);
    eprintln!(
        "building the queue-wait features of {} jobs (the run-time model and the queue replay)",
        jobs.len()
    );
    let split =
        QueueWaitSplit::build(&jobs, &trainer).context("building the queue-wait features")?;
    let (model, name) = match args.model {
        FitInputsModel::Median => (WaitModel::Median, "median"),
        FitInputsModel::Bound => (WaitModel::Bound, "95% bound"),
    };
    let fit = trainer
        .fit_inputs(&split.data, &split.train_rows, model)
        .context("cutting the training rows")?;
    fit.write(&args.out)?;
    eprintln!(
        "wrote the queue-wait {name} model's {} fit rows and {} validation rows × {} columns to {}",
        fit.fit_rows(),
        fit.valid_rows(),
        fit.columns.len(),
        args.out.display()
    );
    Ok(())
}
