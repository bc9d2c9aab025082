//! The job traces a command reads: trace files or folders (`--trace PATH`, repeatable,
//! `--format F`) or bundled datasets by name ([`crate::trace_sources`]).

use std::path::PathBuf;

use augur_datasets::{JobRecord, ReadOptions, TraceZone};

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
