//! `augur evaluate` (`--task runtime`): the runtime predictor against the baselines on the
//! shared split, with the team's LightGBM peer rows.

use anyhow::Context;
use augur_predictor::{train_and_evaluate_runtime, RuntimeEvaluation};
use serde::Serialize;

use crate::cli::progress::TrainingBar;
use crate::cli::trace::load_inputs;
use crate::cli::EvaluateArgs;
use crate::report::runtime::{self as report, PeerRow};
use crate::trainers;

/// Peer numbers measured by the team with LightGBM on exactly this split.
fn peers(dataset: &str) -> Vec<PeerRow> {
    let rows: &[(&str, f64, f64)] = match dataset {
        "philly" => &[
            ("LightGBM + VC/user history (peer)", 1.443, 0.456),
            ("LightGBM, stronger (peer)", 1.331, 0.472),
        ],
        "itp" => &[
            ("LightGBM + VC/user history (peer)", 1.028, 0.491),
            ("LightGBM, stronger (peer)", 0.972, 0.475),
        ],
        "mira" => &[
            ("LightGBM + VC/user history (peer)", 0.644, 0.740),
            ("LightGBM, stronger (peer)", 0.640, 0.741),
        ],
        _ => &[],
    };
    rows.iter()
        .map(|&(method, mae_log, within2x)| PeerRow {
            method: method.to_string(),
            mae_log,
            within2x,
        })
        .collect()
}

#[derive(Serialize)]
struct DatasetEvaluation {
    dataset: String,
    runtime: RuntimeEvaluation,
    peers: Vec<PeerRow>,
}

/// `augur evaluate` (`--task runtime`).
pub fn run(args: &EvaluateArgs) -> anyhow::Result<()> {
    let inputs = load_inputs(
        &args.dataset,
        &args.trace,
        args.format.as_deref(),
        args.timezone.timezone,
    )?;
    let trainer = trainers::runtime(args.trees);
    for (name, jobs) in inputs {
        let mut bar = TrainingBar::start(&name, jobs.len());
        let (predictor, eval) =
            train_and_evaluate_runtime(&jobs, &trainer, &mut |d, t| bar.trees(d, t))
                .with_context(|| format!("evaluating on {name}"))?;
        bar.finish();
        let peer_rows = peers(&name);
        if !args.no_report {
            let dir = report::write(&args.report, &name, &eval, &peer_rows)
                .with_context(|| format!("writing the {name} report"))?;
            eprintln!("report: {}", dir.join("report.md").display());
        }
        if args.json {
            let out = DatasetEvaluation {
                dataset: name.clone(),
                runtime: eval,
                peers: peer_rows,
            };
            println!("{}", serde_json::to_string(&out)?);
        } else {
            print!(
                "{}",
                report::table(&name, &eval, Some(&predictor), &peer_rows)
            );
        }
    }
    Ok(())
}
