//! `augur evaluate --task queue-wait`: the queue-wait predictor against the baselines on the
//! shared split (time-ordered 80/20 by submit time), with the team's LightGBM peer rows.

use anyhow::Context;
use augur_predictor::{
    train_and_evaluate_queue_wait_with, QueueWaitEvaluation, QueueWaitRun, WaitEvalRow, WaitMetrics,
};
use serde::Serialize;

use crate::cli::trace::load_inputs;
use crate::cli::EvaluateArgs;
use crate::report::queue_wait::table;
use crate::trainers;

/// Peer numbers measured by the team with LightGBM on exactly this split, as (method, MAE s,
/// within 600 s, 95% coverage, median bound s).
fn peers(dataset: &str) -> Vec<WaitEvalRow> {
    let peer = |method: &str, mae: f64, w600: f64, cov: Option<f64>, bound: Option<f64>| {
        WaitEvalRow::new(
            method,
            WaitMetrics {
                mae_s: mae,
                within60: f64::NAN,
                within600: w600,
                coverage95: cov,
                median_bound_s: bound,
                train_s: None,
                predict_us: None,
                within2x: None,
                mae_log10: None,
            },
        )
    };
    match dataset {
        "mira" => vec![
            peer(
                "LightGBM, request + queue state (peer)",
                54_651.0,
                0.102,
                None,
                None,
            ),
            peer(
                "LightGBM 95% quantile (peer)",
                f64::NAN,
                f64::NAN,
                Some(0.793),
                Some(77_990.0),
            ),
        ],
        _ => vec![],
    }
}

#[derive(Serialize)]
struct DatasetQueueEvaluation<'a> {
    dataset: &'a str,
    task: &'static str,
    queue_wait: &'a QueueWaitEvaluation,
    peers: Vec<WaitEvalRow>,
}

/// `augur evaluate --task queue-wait`.
pub fn run(args: &EvaluateArgs) -> anyhow::Result<()> {
    let inputs = load_inputs(
        &args.dataset,
        &args.trace,
        args.format.as_deref(),
        args.timezone.timezone,
    )?;
    let trainer = trainers::queue_wait(args.trees);
    for (name, jobs) in inputs {
        let run = QueueWaitRun {
            hindsight: args.hindsight,
            ..QueueWaitRun::default()
        };
        let (_, eval) = train_and_evaluate_queue_wait_with(&jobs, &trainer, run)
            .with_context(|| format!("evaluating queue wait on {name}"))?;
        let peer_rows = peers(&name);
        if args.json {
            let out = DatasetQueueEvaluation {
                dataset: &name,
                task: "queue-wait",
                queue_wait: &eval,
                peers: peer_rows,
            };
            println!("{}", serde_json::to_string(&out)?);
        } else {
            print!("{}", table(&name, &eval, &peer_rows));
        }
    }
    Ok(())
}
