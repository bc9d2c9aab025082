//! `augur evaluate --task queue-wait`: the queue-wait predictor against the baselines on the
//! shared split (time-ordered 80/20 by submit time), with the team's LightGBM peer rows.

use anyhow::Context;
use augur_predictor::{evaluate_queue_wait, QueueWaitEvaluation, QueueWaitTrainer, WaitEvalRow};
use serde::Serialize;

use crate::cli::EvaluateArgs;
use crate::evaluate::load_inputs;

/// Peer numbers measured by the team with LightGBM on exactly this split (issue #4), as
/// (method, MAE s, within 600 s, 95% coverage, median bound s).
fn peers(dataset: &str) -> Vec<WaitEvalRow> {
    let peer =
        |method: &str, mae: f64, w600: f64, cov: Option<f64>, bound: Option<f64>| WaitEvalRow {
            method: method.into(),
            mae_s: mae,
            within60: f64::NAN,
            within600: w600,
            coverage95: cov,
            median_bound_s: bound,
            train_s: None,
            predict_us: None,
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

pub fn run(args: &EvaluateArgs) -> anyhow::Result<()> {
    let inputs = load_inputs(&args.dataset, args.trace.as_deref(), args.format.as_deref())?;
    let mut trainer = QueueWaitTrainer::default();
    if let Some(n) = args.trees {
        trainer = trainer.with_trees(n);
    }
    for (name, jobs) in inputs {
        let eval = evaluate_queue_wait(&jobs, &trainer)
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
            print_table(&name, &eval, &peer_rows);
        }
    }
    Ok(())
}

fn print_table(name: &str, eval: &QueueWaitEvaluation, peers: &[WaitEvalRow]) {
    println!(
        "queue wait · {name} · time-ordered split: {} train / {} test jobs (capacity {:.0} {} inferred from the training period)",
        eval.n_train,
        eval.n_test,
        eval.capacity,
        eval.resource.name()
    );
    println!(
        "  {:<56} {:>9} {:>8} {:>9} {:>8} {:>11} {:>8} {:>11}",
        "method",
        "MAE s",
        "within60",
        "within600",
        "cover95%",
        "median bnd",
        "train s",
        "predict µs"
    );
    let pct = |v: f64| {
        if v.is_finite() {
            format!("{:.1}%", 100.0 * v)
        } else {
            "-".into()
        }
    };
    let num = |v: Option<f64>, digits: usize| match v {
        Some(v) if v.is_finite() => format!("{v:.digits$}"),
        _ => "-".into(),
    };
    for r in eval.rows.iter().chain(peers) {
        println!(
            "  {:<56} {:>9} {:>8} {:>9} {:>8} {:>11} {:>8} {:>11}",
            r.method,
            num(Some(r.mae_s), 0),
            pct(r.within60),
            pct(r.within600),
            r.coverage95
                .map_or("-".into(), |c| format!("{:.1}", 100.0 * c)),
            num(r.median_bound_s, 0),
            num(r.train_s, 2),
            num(r.predict_us, 2),
        );
    }
    for (how, m) in [
        ("static", &eval.risk_split_static),
        ("online", &eval.risk_split_online),
    ] {
        let Some(m) = m else { continue };
        println!(
            "  risk split, {how} ({} score, nominal low share {:.0}%, levels {:.1}% / {:.1}%): low group {} of jobs cover {:.1}% at median {:.0} s; high group cover {:.1}% at median {:.0} s; overall {:.1}% at median {:.0} s",
            m.score,
            100.0 * m.share_low_nominal,
            100.0 * m.level_low,
            100.0 * m.level_high,
            pct(m.share_low),
            100.0 * m.coverage_low,
            m.median_bound_low_s,
            100.0 * m.coverage_high,
            m.median_bound_high_s,
            100.0 * m.coverage,
            m.median_bound_s,
        );
    }
    println!();
}
