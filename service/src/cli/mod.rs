//! The `augur` command line: the arguments ([`args`], clap derive) and one module per command,
//! each parsing nothing itself: it loads its inputs, calls the predictor / autoscaler
//! libraries, and prints for people (tables, progress bars) or machines (`--json`). Plots and
//! tables are drawn by [`crate::report`]; `augur serve` starts [`crate::serve`].

pub mod advise;
pub mod args;
pub mod client;
pub mod eta;
pub mod evaluate;
pub mod export;
pub mod fit_inputs;
pub mod inspect;
pub mod models;
pub mod progress;
pub mod serve;
pub mod simulate;
pub mod store;
pub mod trace;
pub mod train;

pub use args::*;

/// Runs the command `cli` names.
pub fn run(cli: Cli) -> anyhow::Result<()> {
    if matches!(
        cli.command,
        Command::Serve(_) | Command::Store(_) | Command::Models(_) | Command::Train(_)
    ) {
        private_files();
    }
    match cli.command {
        Command::Data(DataCommand::Inspect(args)) => inspect::run(&args),
        Command::Data(DataCommand::Export(args)) => export::run(&args),
        Command::Data(DataCommand::FitInputs(args)) => fit_inputs::run(&args),
        Command::Evaluate(args) => evaluate::run(&args),
        Command::Train(args) => train::run(&args),
        Command::Models(cmd) => models::run(&cmd),
        Command::Store(cmd) => store::run(&cmd),
        Command::Simulate(args) => simulate::run(&args),
        Command::Serve(args) => serve::run(&args),
        Command::Eta(args) => eta::run(&args),
        Command::Advise(args) => advise::run(&args),
    }
}

/// The commands that write a data folder or model registry (events, snapshots, models, the
/// token) create their files readable by their owner only (mode 0600, folders 0700).
#[cfg(unix)]
#[allow(unsafe_code)]
fn private_files() {
    // SAFETY: umask only sets the process's file-creation mask
    unsafe {
        libc::umask(0o077);
    }
}

#[cfg(not(unix))]
fn private_files() {}

/// The exit status for an error: 2 for input the command cannot use ([`advise::BadInput`]),
/// as for a usage error, else 1.
pub fn exit_code(err: &anyhow::Error) -> i32 {
    if err.is::<advise::BadInput>() {
        2
    } else {
        1
    }
}

/// The error and its causes, `: `-joined, skipping a cause whose text the message already
/// holds (library errors such as "cannot read PATH: REASON" carry their source in their own
/// text too, so `{:#}` would print REASON twice).
pub fn error_chain(err: &anyhow::Error) -> String {
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
