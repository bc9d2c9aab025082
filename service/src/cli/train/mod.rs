//! `augur train`: train a predictor on a trace exactly as `augur evaluate` measures it and save
//! it in the model registry with its held-out metrics, one module per `--task`.

pub mod failure;
pub mod queue_wait;
pub mod runtime;

use std::path::Path;

use anyhow::Context;
use augur_datasets::JobRecord;
use augur_predictor::{ArtifactMeta, ModelRegistry};

use super::trace::load_inputs;
use super::{TrainArgs, TrainTask};

/// Runs `augur train` for the task `args` names.
pub fn run(args: &TrainArgs) -> anyhow::Result<()> {
    match args.task {
        TrainTask::Runtime => runtime::run(args),
        TrainTask::QueueWait => queue_wait::run(args),
        TrainTask::Failure => failure::run(args),
    }
}

/// What every `augur train` task starts from: the trace to train on (its name and jobs) and
/// the opened model registry.
fn trace_and_registry(args: &TrainArgs) -> anyhow::Result<(String, Vec<JobRecord>, ModelRegistry)> {
    let datasets: Vec<String> = args.dataset.iter().cloned().collect();
    let inputs = load_inputs(
        &datasets,
        &args.trace,
        args.format.as_deref(),
        args.timezone.timezone,
    )?;
    if inputs.is_empty() {
        anyhow::bail!("give a trace to train on: --dataset NAME or --trace PATH");
    }
    // several traces are trained on together, in submit order
    let name = inputs
        .iter()
        .map(|(n, _)| n.as_str())
        .collect::<Vec<_>>()
        .join("+");
    let several = inputs.len() > 1;
    let mut jobs: Vec<JobRecord> = inputs.into_iter().flat_map(|(_, j)| j).collect();
    if several {
        jobs.sort_by(|a, b| a.submit_time.total_cmp(&b.submit_time));
    }
    let registry = ModelRegistry::open(&args.registry.registry)
        .with_context(|| "opening the model registry")?;
    Ok((name, jobs, registry))
}

/// The `--json` answer of `augur train`: where the saved version is, and its metadata.
fn print_saved_json(dir: &Path, meta: &ArtifactMeta) -> anyhow::Result<()> {
    let out = serde_json::json!({ "path": dir.display().to_string(), "meta": meta });
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}
