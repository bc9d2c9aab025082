//! The job traces a command reads: trace files or folders (`--trace PATH`, repeatable,
//! `--format F`) or bundled datasets by name ([`crate::trace_sources`]).

use std::path::PathBuf;

use augur_datasets::{JobRecord, ReadOptions, TraceZone};

use crate::cli::OneTraceArgs;
use crate::trace_sources::{load_path, load_sources};

/// The jobs of each trace in `traces` (read as `format` when given), else of each bundled
/// dataset in `datasets`, each with its name. Zone-less local times are read in `timezone`.
pub fn load_inputs(
    datasets: &[String],
    traces: &[PathBuf],
    format: Option<&str>,
    timezone: TraceZone,
) -> anyhow::Result<Vec<(String, Vec<JobRecord>)>> {
    let opts = ReadOptions {
        timezone,
        ..Default::default()
    };
    if traces.is_empty() {
        return load_sources(datasets, None, &opts);
    }
    traces
        .iter()
        .map(|p| Ok((p.display().to_string(), load_path(p, format, &opts)?)))
        .collect()
}

/// The jobs of the one trace `args` names: its files read together, or the bundled dataset.
pub fn load_one_trace(args: &OneTraceArgs) -> anyhow::Result<Vec<JobRecord>> {
    let datasets: Vec<String> = args.dataset.iter().cloned().collect();
    let inputs = load_inputs(
        &datasets,
        &args.paths,
        args.format.as_deref(),
        args.timezone.timezone,
    )?;
    Ok(inputs.into_iter().flat_map(|(_, j)| j).collect())
}
