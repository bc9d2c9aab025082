//! Command-line definition (clap derive). Every subcommand has `--help`.

use std::path::PathBuf;

use augur_datasets::TraceZone;
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
    ///
    /// Also writes a report folder per dataset (DIR/<dataset>/report.md with the table and
    /// PNG plots: predicted vs actual, error CDF, interval coverage) unless --no-report.
    Evaluate(EvaluateArgs),
    /// Train the runtime predictor on a trace and save it as the next version in the model
    /// registry, with its held-out metrics.
    ///
    /// The model is the one `augur evaluate` measures: trained on the first 80% of jobs (by
    /// submit time), its metrics measured on the last 20%. With --all-jobs it is then
    /// retrained on every labelled job (the stored metrics stay those of the 80% model).
    Train(TrainArgs),
    /// Work with the model registry: list versions, show (and verify) one, promote, roll back.
    #[command(subcommand)]
    Models(ModelsCommand),
    /// Check or repair the service's event store (`<data-dir>/events.sqlite`).
    #[command(subcommand)]
    Store(StoreCommand),
    /// Replay a trace on a simulated GPU cluster under several scheduling policies: one row
    /// per policy (avg / p50 / p99 JCT, avg / p99 queue wait, makespan, GPU utilisation,
    /// rescales, preemptions), and a report folder with plots (--report).
    ///
    /// The runtime predictor is trained on the first 80% of the trace (by submit time) and
    /// the last 20% is replayed with its out-of-sample predictions.
    Simulate(SimulateArgs),
    /// Run the prediction and autoscaling service (HTTP API): ingest job events, serve
    /// predictions, retrain and swap models. With no flags everything starts on the
    /// embedded default (models trained from the bundled Philly trace on first start, data
    /// under ./augur-data).
    ///
    /// Settings come from defaults, then --config FILE (TOML), then AUGUR_SERVE_* variables,
    /// then these flags (see the README's "Service" section).
    Serve(ServeArgs),
    /// Ask a running service when queued jobs will start and end: Augur's predicted start
    /// (median and 95% bound), the scheduler's own estimate beside it (Slurm's
    /// `squeue --start`, with `augur serve --backend slurm`) and the predicted end.
    Eta(EtaArgs),
    /// What to ask for: a job's alternatives (GPU counts, GPU types, queues) with predicted
    /// start, run time, finish and GPU-hours, from a running service (`POST /v1/advise`).
    ///
    /// The job comes from a Slurm batch script's #SBATCH lines (`augur advise job.sbatch`),
    /// from flags (which override the script's values), or is an ingested job (--job-id).
    /// Exits 2 naming the line, flag or field when the input is bad.
    Advise(AdviseArgs),
}

#[derive(Debug, Args)]
pub struct AdviseArgs {
    /// A Slurm batch script: its #SBATCH lines (before the first command) are the request.
    #[arg(value_name = "SCRIPT")]
    pub script: Option<PathBuf>,
    /// An ingested job (the service's job id): its profile, unless flags or a script give one.
    #[arg(long)]
    pub job_id: Option<String>,
    /// GPUs requested, `[type:]N` (as sbatch's --gpus).
    #[arg(long, value_name = "[TYPE:]N")]
    pub gpus: Option<String>,
    /// GPU type requested.
    #[arg(long)]
    pub gpu_type: Option<String>,
    /// Nodes requested.
    #[arg(long)]
    pub nodes: Option<String>,
    /// CPUs requested (in all).
    #[arg(long)]
    pub cpus: Option<String>,
    /// Memory requested, with a K, M (default), G or T suffix.
    #[arg(long)]
    pub mem: Option<String>,
    /// Time limit, in Slurm's formats (M, M:S, H:M:S, D-H, D-H:M, D-H:M:S).
    #[arg(long)]
    pub time: Option<String>,
    /// Partition (queue) requested.
    #[arg(long, short = 'p')]
    pub partition: Option<String>,
    /// Account (group).
    #[arg(long, short = 'A')]
    pub account: Option<String>,
    /// The submitting user (default: $USER when a profile is given).
    #[arg(long)]
    pub user: Option<String>,
    /// The job's name (its past runs at other sizes are the best scaling evidence).
    #[arg(long, short = 'J')]
    pub job_name: Option<String>,
    /// Fewest GPUs to weigh (default: a quarter of the request).
    #[arg(long)]
    pub min_gpus: Option<u32>,
    /// Most GPUs to weigh (default: four times the request, within the cluster).
    #[arg(long)]
    pub max_gpus: Option<u32>,
    /// GPU types to weigh, comma-separated (default: every type the cluster's jobs named).
    #[arg(long, value_delimiter = ',')]
    pub gpu_types: Vec<String>,
    /// Queues / partitions to weigh, comma-separated (default: the ones your jobs used).
    #[arg(long, value_delimiter = ',')]
    pub queues: Vec<String>,
    /// Print the service's JSON answer.
    #[arg(long)]
    pub json: bool,
    /// The service's address.
    #[arg(long, env = "AUGUR_URL", default_value = "http://127.0.0.1:8080")]
    pub url: String,
    /// A bearer token to send (the endpoint needs none; a proxy in front may).
    #[arg(long, env = "AUGUR_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
}

#[derive(Debug, Args)]
pub struct EtaArgs {
    /// Only these jobs: Slurm job ids (`123`, `123_4`) or the service's job ids.
    #[arg(value_name = "JOBID")]
    pub jobs: Vec<String>,
    /// Only this user's jobs.
    #[arg(long)]
    pub user: Option<String>,
    /// Under each job, why it waits: Augur's reading of the queue (jobs and GPUs ahead, the
    /// running jobs whose predicted ends free enough for it) and the scheduler's reason
    /// (Slurm's `Reason`).
    #[arg(long)]
    pub why: bool,
    /// Print the service's JSON answer.
    #[arg(long)]
    pub json: bool,
    /// The service's address.
    #[arg(long, env = "AUGUR_URL", default_value = "http://127.0.0.1:8080")]
    pub url: String,
    /// A bearer token to send (the endpoint needs none; a proxy in front may).
    #[arg(long, env = "AUGUR_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
}

/// The zone of a trace's zone-less local times (`--timezone`).
#[derive(Debug, Args)]
pub struct TimezoneArg {
    /// Zone the trace's local times were written in (`sacct` prints the cluster's local
    /// time): an IANA name (`Europe/Berlin`), `UTC` or a fixed offset (`+02:00`). Readers of
    /// formats with explicit zones or Unix times ignore it.
    #[arg(
        long,
        value_name = "ZONE",
        default_value = "UTC",
        allow_hyphen_values = true
    )]
    pub timezone: TraceZone,
}

/// Where saved models live (`--registry`, or `AUGUR_REGISTRY`).
#[derive(Debug, Args)]
pub struct RegistryArg {
    /// Model registry folder.
    #[arg(long, env = "AUGUR_REGISTRY", default_value = "augur-data/models")]
    pub registry: PathBuf,
}

#[derive(Debug, Args)]
pub struct TrainArgs {
    /// Bundled dataset to train on: philly, itp, mira, ...
    #[arg(long, required_unless_present = "trace")]
    pub dataset: Option<String>,
    /// Trace files or folders to train on instead of a bundled dataset (repeat for several:
    /// their jobs are trained on together).
    #[arg(long, conflicts_with = "dataset")]
    pub trace: Vec<PathBuf>,
    /// Format of --trace when it cannot be detected.
    #[arg(long, requires = "trace")]
    pub format: Option<String>,
    #[command(flatten)]
    pub timezone: TimezoneArg,
    #[command(flatten)]
    pub registry: RegistryArg,
    /// Maximum boosting rounds (default 1500; early stopping usually ends sooner). Lower it
    /// for a quick, weaker model.
    #[arg(long)]
    pub trees: Option<usize>,
    /// After measuring, retrain on every labelled job (the newest included) and save that.
    #[arg(long)]
    pub all_jobs: bool,
    /// Print the saved artifact's metadata as JSON.
    #[arg(long)]
    pub json: bool,
    /// Which predictor to train; each is saved under its own registry kind (`runtime`,
    /// `queue_wait`, `failure`). `--all-jobs` applies to the runtime predictor only.
    #[arg(long, value_enum, default_value_t = TrainTask::Runtime)]
    pub task: TrainTask,
}

/// The predictor `augur train` trains.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TrainTask {
    Runtime,
    QueueWait,
    Failure,
}

#[derive(Debug, Subcommand)]
pub enum StoreCommand {
    /// Verify the store without changing it: SQLite's structural check, every event
    /// readable, no acknowledged sequence number missing (exit 1 when damaged).
    Check(StoreArgs),
    /// Repair a damaged store (the service must be stopped): keep every intact event with its
    /// sequence number, record exactly what was lost, move the damaged files aside and never
    /// hand out a lost sequence number again.
    Repair(StoreArgs),
}

#[derive(Debug, Args)]
pub struct StoreArgs {
    /// The service's data folder.
    #[arg(long, env = "AUGUR_SERVE_DATA_DIR", default_value = "augur-data")]
    pub data_dir: PathBuf,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum ModelsCommand {
    /// List the saved versions of every model kind with their metrics (newest last).
    List(ModelsListArgs),
    /// Load a version (verifying its hash, format and feature schema) and describe it.
    Show(ModelsShowArgs),
    /// Make a version the one to serve.
    Promote(ModelsPromoteArgs),
    /// Serve the version promoted before the current one again.
    Rollback(ModelsRollbackArgs),
}

#[derive(Debug, Args)]
pub struct ModelsListArgs {
    #[command(flatten)]
    pub registry: RegistryArg,
    /// Also check every payload's size and SHA-256 (reads every model file).
    #[arg(long)]
    pub verify: bool,
    /// Print JSON (one object per kind).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ModelsShowArgs {
    /// Which version: v1, v2, ..., latest, promoted, or serving (promoted, else latest).
    #[arg(value_name = "VERSION", default_value = "serving")]
    pub which: String,
    #[command(flatten)]
    pub registry: RegistryArg,
    /// Print the metadata as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ModelsPromoteArgs {
    /// The version to serve: v1, v2, ... or latest.
    #[arg(value_name = "VERSION")]
    pub which: String,
    /// Model kind.
    #[arg(long, default_value = "runtime")]
    pub kind: String,
    #[command(flatten)]
    pub registry: RegistryArg,
}

#[derive(Debug, Args)]
pub struct ModelsRollbackArgs {
    /// Model kind.
    #[arg(long, default_value = "runtime")]
    pub kind: String,
    #[command(flatten)]
    pub registry: RegistryArg,
}

#[derive(Debug, Args)]
pub struct EvaluateArgs {
    /// Bundled datasets to evaluate on (repeat or comma-separate): philly, itp, mira, ...
    #[arg(long, value_delimiter = ',', default_value = "philly")]
    pub dataset: Vec<String>,
    /// Trace files or folders to evaluate on instead of bundled datasets (repeat for
    /// several: one evaluation each).
    #[arg(long, conflicts_with = "dataset")]
    pub trace: Vec<PathBuf>,
    /// Format of --trace when it cannot be detected.
    #[arg(long, requires = "trace")]
    pub format: Option<String>,
    #[command(flatten)]
    pub timezone: TimezoneArg,
    /// Print one JSON object per dataset.
    #[arg(long)]
    pub json: bool,
    /// Report folder: DIR/<dataset>/report.md and PNG plots.
    #[arg(long, default_value = "augur-report")]
    pub report: PathBuf,
    /// Do not write the report folder.
    #[arg(long, conflicts_with = "report")]
    pub no_report: bool,
    /// Maximum boosting rounds (default 1500; early stopping usually ends sooner). Lower it
    /// for a quick, weaker run.
    #[arg(long)]
    pub trees: Option<usize>,
    /// What to predict: job run time, or queue wait (mira, openb: MAE, share within 60 s and
    /// 600 s, 95%-bound coverage and median bound; no report folder yet).
    #[arg(long, value_enum, default_value_t = EvalTask::Runtime)]
    pub task: EvalTask,
    /// `--task dag`: train the GRU for exactly N epochs (default: 40, more on small datasets
    /// so that it takes at least 600 steps; early stopping may end sooner) for a quick run.
    #[arg(long)]
    pub epochs: Option<usize>,
    /// `--task queue-wait`: also fit the hindsight row, a 95% bound fitted on the test
    /// period itself (5 more fits): how sharp a bound the features allow without drift.
    #[arg(long)]
    pub hindsight: bool,
}

/// The predictor `augur evaluate` measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EvalTask {
    Runtime,
    QueueWait,
    /// Probability that a job ends failed (openb, mlperf, or a trace with a status column):
    /// ROC-AUC, PR-AUC, recall at 10% FPR, Brier, calibration; SVM and GBDT side by side.
    Failure,
    /// Stage run times and makespans of DAG jobs (dag-tpch, dag-wfcommons).
    Dag,
    /// Remaining wall time to a training run's quality target from a prefix of its eval
    /// curve (bundled MLPerf v1.0 curves).
    Convergence,
    /// Run time under another GPU count or type: the scaling model on held-out MLPerf v1.0
    /// pairs (and Gavel families) beside linear speedup, no speedup and no change.
    Scaling,
}

#[derive(Debug, Subcommand)]
pub enum DataCommand {
    /// Read trace files and report rows kept/dropped (with reasons), time span, nulls per
    /// column, GPU-count histogram and runtime/wait quantiles.
    ///
    /// With no PATH and no --dataset, inspects the bundled Philly trace. A folder is
    /// inspected file by file (SOURCE/LICENSE/README files are skipped).
    Inspect(InspectArgs),
    /// Write a trace's canonical job table as CSV (submit order, with each job's side of the
    /// time-ordered 80/20 split `evaluate` uses): what outside tools score on.
    Export(ExportArgs),
    /// Write the matrix `augur evaluate --task queue-wait` fits one of its models on (the
    /// training rows' features and targets, the validation rows that stop it early, its
    /// parameters and the column names) to a folder: the fit can then be re-run and timed
    /// alone, or fitted by another library on the same numbers
    /// (`scripts/bench-same-matrix.py`).
    FitInputs(FitInputsArgs),
}

/// Which queue-wait model `augur data fit-inputs` writes the inputs of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FitInputsModel {
    /// The median of the wait (absolute loss on ln(1 + wait)).
    Median,
    /// The 95% bound's quantile model.
    Bound,
}

/// One trace: files or folders read together, or a bundled dataset.
#[derive(Debug, Args)]
pub struct OneTraceArgs {
    /// Trace files or folders (read together as one trace).
    pub paths: Vec<PathBuf>,
    /// A bundled dataset instead of a path: philly, itp, mira, nasa, openb, mlperf, graham.
    #[arg(long, conflicts_with = "paths", required_unless_present = "paths")]
    pub dataset: Option<String>,
    /// Format of the paths when it cannot be detected.
    #[arg(long)]
    pub format: Option<String>,
    #[command(flatten)]
    pub timezone: TimezoneArg,
}

#[derive(Debug, Args)]
pub struct FitInputsArgs {
    #[command(flatten)]
    pub trace: OneTraceArgs,
    /// The folder to write (created if missing): `fit.json` and four raw arrays.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// The model whose inputs are written.
    #[arg(long, value_enum, default_value_t = FitInputsModel::Median)]
    pub model: FitInputsModel,
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    #[command(flatten)]
    pub trace: OneTraceArgs,
    /// Output CSV file (`-` for standard output).
    #[arg(long, value_name = "OUT")]
    pub csv: PathBuf,
}

#[derive(Debug, Args)]
pub struct InspectArgs {
    /// Trace files or folders to inspect.
    pub paths: Vec<PathBuf>,
    /// A bundled dataset instead of a path: philly, itp, mira, nasa, openb, mlperf, graham.
    #[arg(long, conflicts_with = "paths")]
    pub dataset: Option<String>,
    /// The file format, when detection from the name and header is not enough (see
    /// `--format help`): philly, philly-joblog, itp, openb-pods, swf, swf-alcf, helios, pai, ...
    #[arg(long)]
    pub format: Option<String>,
    #[command(flatten)]
    pub timezone: TimezoneArg,
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

/// Which part of the trace `augur simulate` replays.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReplayPart {
    /// The last 20% by submit time: every job has an out-of-sample prediction.
    Test,
    /// Every job; only the last 20% have predictions (the rest get a 1-hour guess).
    All,
}

#[derive(Debug, Args)]
pub struct SimulateArgs {
    /// Bundled job trace: philly, itp (clusters 01-07 pooled), mira, openb, ...
    #[arg(long, default_value = "philly")]
    pub trace: String,
    /// A trace file instead of a bundled trace.
    #[arg(long)]
    pub file: Option<PathBuf>,
    /// Format of --file when it cannot be detected.
    #[arg(long, requires = "file")]
    pub format: Option<String>,
    #[command(flatten)]
    pub timezone: TimezoneArg,
    /// Cluster size(s) in GPUs (comma-separate for several load levels).
    #[arg(long, value_delimiter = ',', required = true)]
    pub gpus: Vec<u32>,
    /// Policies to compare: fifo, sjf-pred, srtf-oracle, tiresias, optimus, elastic, and on
    /// mixed GPU types elastic-typed (the elastic policy choosing each job's type) and gavel
    /// (each job on its fastest type with room).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "fifo,sjf-pred,srtf-oracle,tiresias,optimus,elastic"
    )]
    pub policies: Vec<String>,
    /// Share of jobs that are elastic (chosen with --seed).
    #[arg(long, default_value_t = 0.5)]
    pub elastic_share: f64,
    /// An elastic job may grow to this many times its requested GPUs.
    #[arg(long, default_value_t = 4.0)]
    pub elastic_max_factor: f64,
    /// Seed of the simulation (which jobs are elastic).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// GPUs per node.
    #[arg(long, default_value_t = 8)]
    pub gpus_per_node: u32,
    /// Nodes per rack.
    #[arg(long, default_value_t = 16)]
    pub nodes_per_rack: u32,
    /// Heterogeneous GPU types as `name:share` (speeds from the bundled Gavel throughputs,
    /// relative to the first type, on which the trace durations are assumed measured), e.g.
    /// `k80:0.34,p100:0.33,v100:0.33`. Each job runs at its own model's measured speed per
    /// type (a model named in its job name, else one drawn with --seed from Gavel's models).
    #[arg(long)]
    pub gpu_types: Option<String>,
    /// Placement: pack or spread.
    #[arg(long, default_value = "pack")]
    pub placement: String,
    /// Checkpoint-restart pause of a rescale or resume, seconds.
    #[arg(long, default_value_t = 30.0)]
    pub rescale_pause: f64,
    /// Inject node failures from the bundled StepFun node-fault episodes.
    #[arg(long)]
    pub faults: bool,
    /// Which part of the trace to replay.
    #[arg(long, value_enum, default_value_t = ReplayPart::Test)]
    pub replay: ReplayPart,
    /// Use only the first N jobs of the trace (by submit time) before splitting: a quick slice.
    #[arg(long)]
    pub limit: Option<usize>,
    /// Do not train the predictor (prediction-driven policies then use a 1-hour guess).
    #[arg(long)]
    pub no_predictor: bool,
    /// Maximum boosting rounds of the predictor (default 1500).
    #[arg(long)]
    pub trees: Option<usize>,
    /// Print one JSON object per cluster size.
    #[arg(long)]
    pub json: bool,
    /// Write a report folder per cluster size into DIR (summary.md, JCT CDF, queue length and
    /// utilisation plots, decision logs).
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// Advice replay: this share of users (chosen by a seeded hash of the user name) take the
    /// advisor's earliest-finish shape at submit; each policy is replayed with and without.
    #[arg(long)]
    pub advice_share: Option<f64>,
    /// What the advisor reads as running jobs' ends: their predicted run times, or the
    /// simulator's true remaining times (an oracle run).
    #[arg(long, value_enum, default_value_t = AdviceEnds::Predicted, requires = "advice_share")]
    pub advice_ends: AdviceEnds,
    /// Let the advisor pick options that cost more GPU-hours than the request (by default an
    /// option may cost at most the request's predicted GPU-hours).
    #[arg(long, requires = "advice_share")]
    pub advice_greedy: bool,
}

/// What the simulator's advisor reads as running jobs' ends (`--advice-ends`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AdviceEnds {
    /// First start + predicted run time (once past: now + the time it has run).
    Predicted,
    /// The simulator's true remaining time.
    Oracle,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on [default: 127.0.0.1:8080].
    #[arg(long)]
    pub addr: Option<std::net::SocketAddr>,
    /// Folder of the event store, model registry and API token [default: ./augur-data].
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// The event log: a `postgres://user:password@host/db` connection string shared by
    /// replicas [default: the SQLite store in the data folder].
    #[arg(long)]
    pub store: Option<String>,
    /// A TOML configuration file (keys as in the README).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Turn authentication of mutating endpoints off.
    #[arg(long)]
    pub insecure: bool,
    /// Clock speed of the simulated cluster (simulated seconds per real second).
    #[arg(long)]
    pub speed: Option<f64>,
    /// Maximum boosting rounds when training (first start, retrain); lower is quicker.
    #[arg(long)]
    pub trees: Option<usize>,
    /// What to train on at first start: a bundled dataset name, a trace file or a folder of
    /// trace files (repeat for several; trained on together) [default: philly].
    #[arg(long)]
    pub bootstrap: Vec<String>,
    /// Format of the --bootstrap trace files when it cannot be detected.
    #[arg(long)]
    pub bootstrap_format: Option<String>,
    /// Train on only the first N jobs of the bootstrap dataset (by submit time).
    #[arg(long)]
    pub bootstrap_limit: Option<usize>,
    /// Retrain in the background on the ingested history after N newly finished jobs
    /// (0 = off) [default: 2000].
    #[arg(long)]
    pub retrain_every_jobs: Option<usize>,
    /// The cluster behind the service: `none` (a prediction service fed only by its API),
    /// `sim` (the simulated replay of the bootstrap trace, a demonstration), `kubernetes`
    /// (Kubeflow PyTorchJobs scaled through /scale) or `slurm` (observed through squeue,
    /// sacct and sinfo; no scaling) [default: sim]. A data folder belongs to
    /// one backend and cluster for good.
    #[arg(long, value_enum)]
    pub backend: Option<crate::serve::config::Backend>,
    /// `--backend kubernetes`: kubeconfig to use [default: the in-cluster configuration when
    /// run as a pod, else $KUBECONFIG or ~/.kube/config].
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// `--backend kubernetes`: namespace of the PyTorchJobs to watch and scale [default: all].
    #[arg(long)]
    pub namespace: Option<String>,
    /// `--backend kubernetes`: decide and log, never patch.
    #[arg(long)]
    pub dry_run: bool,
    /// `--backend slurm`: seconds between two polls of squeue, sacct and sinfo [default: 15].
    #[arg(long)]
    pub slurm_poll_seconds: Option<f64>,
    /// Days of job time a finished job stays in memory before it leaves (its events move to
    /// the archive at the next compaction) [default: 30; 0 keeps every job].
    #[arg(long)]
    pub retention_days: Option<f64>,
}
