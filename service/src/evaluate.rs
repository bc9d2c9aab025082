//! `augur evaluate`: the predictors against the baselines on the shared split.

use anyhow::Context;
use augur_datasets::bundled::Dataset;
use augur_datasets::{load_jobs, JobRecord, ReadOptions, TraceFormat};
use std::path::Path;

use augur_predictor::{evaluate_runtime_with_progress, RuntimeEvaluation, RuntimeTrainer};
use serde::Serialize;

use crate::cli::EvaluateArgs;
use crate::progress::TrainingBar;

/// Peer numbers measured by the team with LightGBM on exactly this split (issue #3).
fn peers(dataset: &str) -> Vec<(&'static str, f64, f64)> {
    match dataset {
        "philly" => vec![
            ("LightGBM + VC/user history (peer)", 1.443, 0.456),
            ("LightGBM, stronger (peer)", 1.331, 0.472),
        ],
        "itp" => vec![
            ("LightGBM + VC/user history (peer)", 1.028, 0.491),
            ("LightGBM, stronger (peer)", 0.972, 0.475),
        ],
        "mira" => vec![
            ("LightGBM + VC/user history (peer)", 0.644, 0.740),
            ("LightGBM, stronger (peer)", 0.640, 0.741),
        ],
        _ => vec![],
    }
}

#[derive(Serialize)]
struct DatasetEvaluation {
    dataset: String,
    runtime: RuntimeEvaluation,
    peers: Vec<PeerRow>,
}

#[derive(Serialize)]
pub(crate) struct PeerRow {
    pub method: String,
    pub mae_log: f64,
    pub within2x: f64,
}

/// The jobs of `--trace PATH [--format F]`, else of each bundled `--dataset`, by name.
pub(crate) fn load_inputs(
    datasets: &[String],
    trace: Option<&Path>,
    format: Option<&str>,
) -> anyhow::Result<Vec<(String, Vec<JobRecord>)>> {
    let opts = ReadOptions::default();
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

/// The runtime trainer of `augur evaluate` / `augur train`, with `--trees` applied.
pub(crate) fn trainer(trees: Option<usize>) -> RuntimeTrainer {
    let mut trainer = RuntimeTrainer::default();
    if let Some(n) = trees {
        trainer.params.n_trees = n.max(1);
    }
    trainer
}

pub fn run(args: &EvaluateArgs) -> anyhow::Result<()> {
    let inputs = load_inputs(&args.dataset, args.trace.as_deref(), args.format.as_deref())?;
    let trainer = trainer(args.trees);
    for (name, jobs) in inputs {
        let mut bar = TrainingBar::start(&name, jobs.len());
        let eval = evaluate_runtime_with_progress(&jobs, &trainer, &mut |d, t| bar.trees(d, t))
            .with_context(|| format!("evaluating on {name}"))?;
        bar.finish();
        let peer_rows: Vec<PeerRow> = peers(&name)
            .into_iter()
            .map(|(m, a, b)| PeerRow {
                method: m.to_string(),
                mae_log: a,
                within2x: b,
            })
            .collect();
        if !args.no_report {
            let dir = crate::report::write(&args.report, &name, &eval, &peer_rows)
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
            print_table(&name, &eval, &peer_rows);
        }
    }
    Ok(())
}

fn print_table(name: &str, eval: &RuntimeEvaluation, peers: &[PeerRow]) {
    println!(
        "runtime · {name} · time-ordered split: {} train / {} test jobs",
        eval.n_train, eval.n_test
    );
    println!(
        "  {:<38} {:>8} {:>9} {:>10} {:>9} {:>11}",
        "method", "mae_log", "within2x", "cover80%", "train s", "predict µs"
    );
    let opt = |v: Option<f64>, prec: usize, scale: f64| {
        v.map(|x| format!("{:.*}", prec, x * scale))
            .unwrap_or_else(|| "-".into())
    };
    for r in &eval.rows {
        println!(
            "  {:<38} {:>8.3} {:>8.1}% {:>10} {:>9} {:>11}",
            r.method,
            r.mae_log,
            r.within2x * 100.0,
            opt(r.coverage80, 1, 100.0),
            opt(r.train_s, 2, 1.0),
            opt(r.predict_us, 2, 1.0)
        );
    }
    for p in peers {
        println!(
            "  {:<38} {:>8.3} {:>8.1}% {:>10} {:>9} {:>11}",
            p.method,
            p.mae_log,
            p.within2x * 100.0,
            "-",
            "-",
            "-"
        );
    }
    if let Some(pred) = &eval.predictor {
        let members: Vec<String> = pred
            .members
            .iter()
            .map(|m| format!("{:.2} × {}", m.weight, m.name))
            .collect();
        println!("ensemble: {}", members.join(" + "));
    }
    println!();
}
