//! Command-line definition (clap derive). Every subcommand has `--help`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Augur: predicts GPU job runtimes, queue waits, failures and convergence, and scales
/// elastic training jobs on a cluster.
#[derive(Debug, Parser)]
#[command(name = "augur", version, about, long_about = None, propagate_version = true)]
pub struct Cli {
    /// Log line format on stderr (set the level with AUGUR_LOG, e.g. AUGUR_LOG=info).
    #[arg(long, value_enum, default_value_t = LogFormat::Text, global = true)]
    pub log_format: LogFormat,
    #[command(subcommand)]
    pub command: Command,
}

/// Log output format.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Work with trace files: inspect what a file holds and what a reader makes of it.
    #[command(subcommand)]
    Data(DataCommand),
    /// Evaluate the predictors on a trace: time-ordered 80/20 split, the model beside the
    /// simple baselines, one table per dataset (or one JSON object per dataset with --json).
    Evaluate(EvaluateArgs),
}

#[derive(Debug, Args)]
pub struct EvaluateArgs {
    /// Bundled datasets to evaluate on (repeat or comma-separate): philly, itp, mira, ...
    #[arg(long, value_delimiter = ',', default_value = "philly")]
    pub dataset: Vec<String>,
    /// A trace file to evaluate on instead of bundled datasets.
    #[arg(long, conflicts_with = "dataset")]
    pub trace: Option<PathBuf>,
    /// Format of --trace when it cannot be detected.
    #[arg(long, requires = "trace")]
    pub format: Option<String>,
    /// Print one JSON object per dataset.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum DataCommand {
    /// Read trace files and report rows kept/dropped (with reasons), time span, nulls per
    /// column, GPU-count histogram and runtime/wait quantiles.
    ///
    /// With no PATH and no --dataset, inspects the bundled Philly trace. A folder is
    /// inspected file by file (SOURCE/LICENSE/README files are skipped).
    Inspect(InspectArgs),
}

#[derive(Debug, Args)]
pub struct InspectArgs {
    /// Trace files or folders to inspect.
    pub paths: Vec<PathBuf>,
    /// A bundled dataset instead of a path: philly, itp, mira, nasa, openb, mlperf.
    #[arg(long, conflicts_with = "paths")]
    pub dataset: Option<String>,
    /// The file format, when detection from the name and header is not enough (see
    /// `--format help`): philly, philly-joblog, itp, openb-pods, swf, swf-alcf, helios, pai, ...
    #[arg(long)]
    pub format: Option<String>,
    /// Stop at the first malformed row, with its file, line and reason.
    #[arg(long)]
    pub strict: bool,
    /// Print one JSON object per file instead of text.
    #[arg(long)]
    pub json: bool,
    /// How many dropped rows to list in full per file.
    #[arg(long, default_value_t = 10)]
    pub show_issues: usize,
}
