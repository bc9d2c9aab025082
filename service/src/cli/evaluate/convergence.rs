//! `augur evaluate --task convergence`: the convergence predictor on the bundled MLPerf v1.0
//! curves beside the two peers, per prefix, overall and per benchmark; a report folder with a
//! test curve's fitted extrapolation and the per-prefix error bars ([`crate::report::convergence`]).

use anyhow::{bail, Context};
use augur_predictor::convergence::{
    evaluate_final_metric, load_bundled_mlperf, load_bundled_pollux_curves, ConvergenceEvaluation,
    FinalMetricScores, PREFIXES,
};
use augur_predictor::{evaluate_convergence, ConvergenceRun};
use serde::Serialize;

use crate::cli::EvaluateArgs;
use crate::report::convergence::{final_metric_table, table, write_report, TeamPeers};
use crate::trainers;

/// The team's peer numbers (median relative error of remaining wall time at the 25/50/75%
/// prefixes): Optimus fit over wall time, and the median time-to-train prior.
const TEAM: TeamPeers = TeamPeers {
    prefixes: PREFIXES,
    optimus_wall_time: [1.000, 1.000, 1.000],
    prior_median_time_to_train: [0.378, 0.569, 1.000],
};

#[derive(Serialize)]
struct JsonOut<'a> {
    dataset: &'static str,
    task: &'static str,
    convergence: &'a ConvergenceEvaluation,
    team_peers: TeamPeers,
    /// Final-metric extrapolation on the Pollux/Sia validation curves.
    pollux_final_metric: &'a [FinalMetricScores],
}

/// `augur evaluate --task convergence`.
pub fn run(args: &EvaluateArgs) -> anyhow::Result<()> {
    if !args.trace.is_empty() {
        bail!("--task convergence evaluates the bundled MLPerf v1.0 curves; --trace is not supported for it");
    }
    if let Some(d) = args
        .dataset
        .iter()
        .find(|d| !matches!(d.as_str(), "mlperf" | "philly"))
    {
        bail!("--task convergence evaluates the bundled MLPerf v1.0 curves (--dataset mlperf), not `{d}`");
    }
    let runs: Vec<ConvergenceRun> =
        load_bundled_mlperf().context("reading the bundled MLPerf v1.0 runs and eval curves")?;
    let trainer = trainers::convergence(args.trees);
    let eval = evaluate_convergence(&runs, &trainer).context("evaluating convergence on mlperf")?;
    let pollux =
        load_bundled_pollux_curves().context("reading the bundled Pollux/Sia validation curves")?;
    let final_metric = evaluate_final_metric(&pollux);
    if args.json {
        let out = JsonOut {
            dataset: "mlperf",
            task: "convergence",
            convergence: &eval,
            team_peers: TEAM,
            pollux_final_metric: &final_metric,
        };
        println!("{}", serde_json::to_string(&out)?);
    } else {
        print!("{}", table(&eval, &TEAM));
        print!("{}", final_metric_table(&final_metric));
    }
    if !args.no_report {
        let dir = write_report(&args.report, &eval, &final_metric, &TEAM)
            .context("writing the convergence report")?;
        eprintln!("report: {}", dir.join("report.md").display());
    }
    Ok(())
}
