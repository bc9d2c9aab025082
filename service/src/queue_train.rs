//! `augur train --task queue-wait`: trains the queue-wait predictor exactly as
//! `augur evaluate --task queue-wait` measures it (first 80% of jobs by submit time) and saves
//! it under the `queue-wait` kind with its held-out metrics (last 20%).

use std::collections::BTreeMap;

use anyhow::Context;
use augur_predictor::{evaluate_queue_wait, QueueWaitEvaluation, QueueWaitTrainer};

use crate::cli::TrainArgs;

pub fn train(args: &TrainArgs) -> anyhow::Result<()> {
    let (name, jobs, registry) = crate::train::trace_and_registry(args)?;
    let mut trainer = QueueWaitTrainer::default();
    if let Some(n) = args.trees {
        trainer = trainer.with_trees(n);
    }
    let mut eval = evaluate_queue_wait(&jobs, &trainer)
        .with_context(|| format!("training the queue-wait predictor on {name}"))?;
    let predictor = eval
        .predictor
        .take()
        .context("the evaluation returned no trained predictor")?;
    let metrics = held_out_metrics(&eval);
    let mut notes = BTreeMap::new();
    notes.insert(
        "trained_on".to_string(),
        "first 80% of jobs by submit time".to_string(),
    );
    notes.insert(
        "metrics_on".to_string(),
        format!(
            "last 20% of jobs by submit time ({} with a known wait, held out)",
            eval.n_test
        ),
    );
    let meta =
        crate::train::save_artifact(&registry, &predictor, &name, eval.n_train, metrics, notes)?;
    let dir = registry.version_dir(&meta.kind, meta.version);
    if args.json {
        crate::train::print_saved_json(&dir, &meta)?;
    } else {
        let get = |k: &str| meta.metrics.get(k).copied().unwrap_or(f64::NAN);
        println!(
            "queue-wait model · {name} · trained on {} jobs; held out ({} jobs): MAE {:.0} s · within600 {:.1}% · cover95 {:.1}%",
            eval.n_train,
            eval.n_test,
            get("mae_s"),
            100.0 * get("within600"),
            100.0 * get("coverage95")
        );
        println!(
            "saved queue-wait v{} → {} ({})",
            meta.version,
            dir.display(),
            crate::models::bytes(meta.payload_bytes)
        );
    }
    Ok(())
}

/// The served queue-wait model's held-out metrics as the registry stores them (one source for
/// `augur train` and `augur serve`'s retraining).
pub(crate) fn held_out_metrics(eval: &QueueWaitEvaluation) -> BTreeMap<String, f64> {
    // the served model's row (the risk-split bound online when the model has one, else the
    // online adaptive bound; not the baselines' or the hindsight row): its metrics on the
    // held-out jobs
    let mut metrics = BTreeMap::new();
    let served = eval
        .rows
        .iter()
        .find(|r| r.method.starts_with("augur") && r.method.contains("risk-split online"))
        .or_else(|| {
            eval.rows
                .iter()
                .find(|r| r.method.starts_with("augur") && r.method.contains("online"))
        })
        .or_else(|| {
            eval.rows
                .iter()
                .find(|r| r.method.starts_with("augur") && r.coverage95.is_some())
        });
    if let Some(r) = served {
        metrics.insert("mae_s".to_string(), r.mae_s);
        metrics.insert("within60".to_string(), r.within60);
        metrics.insert("within600".to_string(), r.within600);
        if let Some(c) = r.coverage95 {
            metrics.insert("coverage95".to_string(), c);
        }
        if let Some(b) = r.median_bound_s {
            metrics.insert("median_bound_s".to_string(), b);
        }
    }
    metrics.insert("test_jobs".to_string(), eval.n_test as f64);
    metrics.retain(|_, v| v.is_finite());
    metrics
}
