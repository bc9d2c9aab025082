//! `augur train --task queue-wait`: trains the queue-wait predictor exactly as
//! `augur evaluate --task queue-wait` measures it (first 80% of jobs by submit time) and saves
//! it under the `queue-wait` kind with its held-out metrics (last 20%).

use std::collections::BTreeMap;

use anyhow::Context;
use augur_predictor::train_and_evaluate_queue_wait;

use super::{print_saved_json, trace_and_registry};
use crate::cli::TrainArgs;
use crate::model_store::{queue_wait_metrics, save_artifact};
use crate::report::text::bytes;
use crate::trainers;

/// `augur train --task queue-wait`.
pub fn run(args: &TrainArgs) -> anyhow::Result<()> {
    let (name, jobs, registry) = trace_and_registry(args)?;
    let trainer = trainers::queue_wait(args.trees);
    let (predictor, eval) = train_and_evaluate_queue_wait(&jobs, &trainer)
        .with_context(|| format!("training the queue-wait predictor on {name}"))?;
    let metrics = queue_wait_metrics(&eval);
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
    let meta = save_artifact(&registry, &predictor, &name, eval.n_train, metrics, notes)?;
    let dir = registry.version_dir(&meta.kind, meta.version);
    if args.json {
        print_saved_json(&dir, &meta)?;
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
            bytes(meta.payload_bytes)
        );
    }
    Ok(())
}
