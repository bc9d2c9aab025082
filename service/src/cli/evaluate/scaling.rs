//! `augur evaluate --task scaling`: the run-time ratio model for another GPU count or type
//! ([`Reshaper`]) on held-out real pairs (bundled MLPerf v1.0 runs; Gavel's per-type
//! throughputs by model family) beside the naive assumptions.

use anyhow::{bail, Context};
use augur_autoscaler::scaling::holdout::{evaluate, ScalingHoldout};
use augur_autoscaler::scaling::reshape::Reshaper;
use augur_datasets::bundled::bundled_file;
use augur_datasets::curves::read_mlperf_runs;
use augur_datasets::ReadOptions;
use serde::Serialize;

use crate::cli::EvaluateArgs;

#[derive(Serialize)]
struct JsonOut<'a> {
    dataset: &'static str,
    task: &'static str,
    scaling: &'a ScalingHoldout,
}

/// The holdout as a text table.
fn table(h: &ScalingHoldout) -> String {
    let mut s = format!(
        "{:<62} {:<38} {:>5} {:>8} {:>8} {:>7} {:>7} {:>7}\n",
        "pairs", "method", "n", "med|ln|", "mean|ln|", "≤1.25x", "≤2x", "cov80"
    );
    for r in &h.rows {
        s.push_str(&format!(
            "{:<62} {:<38} {:>5} {:>8.3} {:>8.3} {:>7.2} {:>7.2} {:>7}\n",
            r.subset,
            r.method,
            r.stats.pairs,
            r.stats.median_abs_log,
            r.stats.mean_abs_log,
            r.stats.within_1_25x,
            r.stats.within_2x,
            r.coverage_80
                .map(|c| format!("{c:.2}"))
                .unwrap_or_else(|| "-".into()),
        ));
    }
    s.push_str(&format!(
        "size: model beats linear and no speedup (median and mean): {}\n",
        if h.size_beats_naive { "yes" } else { "NO" }
    ));
    s.push_str(&format!(
        "type (mlperf): model at or below no change (median and mean): {}\n",
        if h.type_beats_no_change { "yes" } else { "NO" }
    ));
    s.push_str(&format!(
        "size laws (Amdahl serial fraction): pollux {:.4}; mlperf {}\n",
        h.pollux_serial,
        h.mlperf_serial
            .iter()
            .map(|(b, x)| format!("{b} {x:.4}"))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    for n in &h.notes {
        s.push_str(&format!("note: {n}\n"));
    }
    s
}

/// `augur evaluate --task scaling`.
pub fn run(args: &EvaluateArgs) -> anyhow::Result<()> {
    if !args.trace.is_empty() {
        bail!("--task scaling evaluates the bundled MLPerf v1.0 runs; --trace is not supported for it");
    }
    if let Some(d) = args
        .dataset
        .iter()
        .find(|d| !matches!(d.as_str(), "mlperf" | "philly"))
    {
        bail!(
            "--task scaling evaluates the bundled MLPerf v1.0 runs (--dataset mlperf), not `{d}`"
        );
    }
    let reshaper =
        Reshaper::bundled().context("building the scaling model from the bundled data")?;
    let (runs, _) = read_mlperf_runs(
        &bundled_file("mlperf-v1.0/runs.csv.gz").context("finding the bundled MLPerf runs")?,
        &ReadOptions::default(),
    )
    .context("reading the bundled MLPerf v1.0 runs")?;
    let h = evaluate(&runs, &reshaper);
    if args.json {
        let out = JsonOut {
            dataset: "mlperf",
            task: "scaling",
            scaling: &h,
        };
        println!("{}", serde_json::to_string(&out)?);
    } else {
        print!("{}", table(&h));
    }
    Ok(())
}
