//! The `augur` command: parses the arguments, sets up logging and runs the command through
//! the `augur` library (see its crate docs for the layout).

use clap::Parser;

use augur::cli;

fn main() {
    let args = cli::Cli::parse();
    // `serve` keeps SIGPIPE ignored: a client or API server that resets its connection
    // must fail that one write (EPIPE), never end the process
    if !matches!(args.command, cli::Command::Serve(_)) {
        restore_default_sigpipe();
    }
    init_tracing(args.log_format);
    if let Err(err) = cli::run(args) {
        eprintln!("error: {}", cli::error_chain(&err));
        std::process::exit(cli::exit_code(&err));
    }
}

/// Log lines on stderr, filtered by `AUGUR_LOG` (default `warn`).
fn init_tracing(format: cli::LogFormat) {
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
/// Only for the short-lived commands that print: never for `serve`, whose sockets would
/// then kill it.
#[cfg(unix)]
#[allow(unsafe_code)]
fn restore_default_sigpipe() {
    // SAFETY: called in main before any thread is spawned; SIG_DFL is a valid
    // disposition for SIGPIPE.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

#[cfg(not(unix))]
fn restore_default_sigpipe() {}
