//! # augur
//!
//! The `augur` command: a thin layer over the Augur libraries. Each subcommand parses its
//! arguments, calls into `augur-datasets` / `augur-predictor` / `augur-autoscaler`, and
//! renders the result for people (tables, progress bars) or machines (`--json`).

mod cli;
mod convergence_eval;
mod dag_eval;
mod evaluate;
mod failure_eval;
mod failure_report;
mod inspect;
mod models;
mod progress;
mod queue_eval;
mod queue_train;
mod render;
mod report;
mod serve;
mod simulate;
mod train;

use clap::Parser;

fn main() {
    restore_default_sigpipe();
    let cli = cli::Cli::parse();
    init_tracing(&cli.log_format);
    if let Err(err) = run(cli) {
        eprintln!("error: {}", error_chain(&err));
        std::process::exit(1);
    }
}

/// The error and its causes, `: `-joined, skipping a cause whose text the message already
/// holds (library errors such as "cannot read PATH: REASON" carry their source in their own
/// text too, so `{:#}` would print REASON twice).
fn error_chain(err: &anyhow::Error) -> String {
    let mut msg = err.to_string();
    for cause in err.chain().skip(1) {
        let cause = cause.to_string();
        if !msg.contains(&cause) {
            msg.push_str(": ");
            msg.push_str(&cause);
        }
    }
    msg
}

fn run(cli: cli::Cli) -> anyhow::Result<()> {
    match cli.command {
        cli::Command::Data(cli::DataCommand::Inspect(args)) => inspect::run(&args),
        cli::Command::Evaluate(args) if args.task == cli::EvalTask::QueueWait => {
            queue_eval::run(&args)
        }
        cli::Command::Evaluate(args) if args.task == cli::EvalTask::Dag => dag_eval::run(&args),
        cli::Command::Evaluate(args) if args.task == cli::EvalTask::Convergence => {
            convergence_eval::run(&args)
        }
        cli::Command::Evaluate(args) if args.task == cli::EvalTask::Failure => {
            failure_eval::run(&args)
        }
        cli::Command::Evaluate(args) => evaluate::run(&args),
        cli::Command::Train(args) if args.task == cli::TrainTask::Failure => {
            failure_eval::train(&args)
        }
        cli::Command::Train(args) if args.task == cli::TrainTask::QueueWait => {
            queue_train::train(&args)
        }
        cli::Command::Train(args) => train::run(&args),
        cli::Command::Models(cmd) => models::run(&cmd),
        cli::Command::Simulate(args) => simulate::run(&args),
        cli::Command::Serve(args) => run_serve(&args),
    }
}

/// `augur serve`: resolve the configuration, then run the service on a tokio runtime.
fn run_serve(args: &cli::ServeArgs) -> anyhow::Result<()> {
    let flags = serve::config::PartialConfig {
        addr: args.addr,
        data_dir: args.data_dir.clone(),
        insecure: args.insecure.then_some(true),
        speed: args.speed,
        trees: args.trees,
        bootstrap_dataset: args.bootstrap.clone(),
        bootstrap_limit: args.bootstrap_limit,
        retrain_every_jobs: args.retrain_every_jobs,
        ..Default::default()
    };
    let env: std::collections::HashMap<String, String> = std::env::vars().collect();
    let config = serve::config::load(args.config.as_deref(), &env, flags)?;
    match args.backend {
        cli::ServeBackend::Kubernetes => serve::kube::select(serve::kube::KubeOptions {
            kubeconfig: args.kubeconfig.clone(),
            namespace: args.namespace.clone(),
            dry_run: args.dry_run,
        }),
        cli::ServeBackend::Sim => {
            if args.kubeconfig.is_some() || args.namespace.is_some() || args.dry_run {
                anyhow::bail!(
                    "--kubeconfig, --namespace and --dry-run need --backend kubernetes (the simulated cluster has POST /v1/autoscaler/dry-run)"
                );
            }
        }
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("augur-serve")
        .build()?;
    let result = runtime.block_on(serve::run(config));
    // a first-start training still running in the background is abandoned (registry
    // versions are written to a temporary folder and renamed, so nothing half-written stays)
    runtime.shutdown_timeout(std::time::Duration::from_secs(5));
    result
}

fn init_tracing(format: &cli::LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("AUGUR_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        cli::LogFormat::Json => builder.json().init(),
        cli::LogFormat::Text => builder.init(),
    }
}

/// `augur … | head` must end quietly when the reader goes away, as Unix tools do, not panic
/// in `println!`: restore the default SIGPIPE action that the Rust runtime sets to ignore.
#[cfg(unix)]
#[allow(unsafe_code)]
fn restore_default_sigpipe() {
    // SAFETY: called first thing in main, before any thread is spawned; SIG_DFL is a valid
    // disposition for SIGPIPE.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

#[cfg(not(unix))]
fn restore_default_sigpipe() {}
