//! The job traces a command reads: a trace file (`--trace PATH [--format F]`) or bundled
//! datasets by name.

use std::path::Path;

use anyhow::Context;
use augur_datasets::bundled::Dataset;
use augur_datasets::{load_jobs, JobRecord, ReadOptions, TraceFormat, TraceZone};

/// The jobs of the trace file `trace` (read as `format` when given), else of each bundled
/// dataset in `datasets`, each with its name. Zone-less local times are read in `timezone`.
pub fn load_inputs(
    datasets: &[String],
    trace: Option<&Path>,
    format: Option<&str>,
    timezone: TraceZone,
) -> anyhow::Result<Vec<(String, Vec<JobRecord>)>> {
    let opts = ReadOptions {
        timezone,
        ..Default::default()
    };
    let mut inputs: Vec<(String, Vec<JobRecord>)> = Vec::new();
    if let Some(path) = trace {
        let format = match format {
            Some(f) => Some(TraceFormat::parse(f).with_context(|| {
                format!("unknown --format `{f}`; known: {}", TraceFormat::names())
            })?),
            None => None,
        };
        let (table, _) = load_jobs(path, format, &opts)?;
        inputs.push((path.display().to_string(), table.to_records()?));
    } else {
        for name in datasets {
            let ds = Dataset::parse(name)?;
            let (table, _) = ds.load(&opts)?;
            inputs.push((ds.name().to_string(), table.to_records()?));
        }
    }
    Ok(inputs)
}
