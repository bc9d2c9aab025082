//! `augur train`: train the runtime predictor on a trace and save it in the model registry.
//!
//! What is stored: the model `augur evaluate` measures — trained on the first 80% of the
//! labelled jobs by submit time — with its metrics on the last 20% (held out), so the
//! metadata describes exactly the stored model. `--all-jobs` then retrains the same recipe
//! on every labelled job and stores that model instead; its metrics are still those of the
//! 80% model (noted in the metadata), as the newest jobs are no longer held out.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context;
use augur_datasets::split::clamp_duration;
use augur_datasets::JobRecord;
use augur_features::{batch_features, FeatureSchema};
use augur_predictor::{
    train_and_evaluate_runtime, ArtifactMeta, RuntimeEvaluation, RuntimePredictor, RuntimeTrainer,
};

use super::{print_saved_json, trace_and_registry};
use crate::cli::progress::TrainingBar;
use crate::cli::TrainArgs;
use crate::model_store::{runtime_metrics, save_artifact};
use crate::report::text::{bytes, thousands};
use crate::trainers;

/// `augur train` (`--task runtime`).
pub fn run(args: &TrainArgs) -> anyhow::Result<()> {
    // open the registry first: a bad --registry should fail before minutes of training
    let (name, jobs, registry) = trace_and_registry(args)?;
    let trainer = trainers::runtime(args.trees);

    let mut bar = TrainingBar::start(&name, jobs.len());
    let trained = train_and_evaluate_runtime(&jobs, &trainer, &mut |d, t| bar.trees(d, t))
        .with_context(|| format!("training on {name}"));
    bar.finish();
    let (held_out_predictor, eval) = trained?;
    let metrics = runtime_metrics(&eval);

    let mut notes = BTreeMap::new();
    notes.insert("max_trees".to_string(), trainer.params.n_trees.to_string());
    notes.insert(
        "metrics_on".to_string(),
        format!(
            "last 20% of labelled jobs by submit time ({} jobs, held out)",
            eval.n_test
        ),
    );
    let (predictor, training_rows) = if args.all_jobs {
        let mut bar = TrainingBar::start(&format!("{name} (all jobs)"), jobs.len());
        let trained = train_on_all(&jobs, &trainer, &mut |d, t| bar.trees(d, t));
        bar.finish();
        let (p, n) = trained.with_context(|| format!("retraining on all of {name}"))?;
        notes.insert(
            "trained_on".to_string(),
            "all labelled jobs; metrics are those of the same recipe trained on the first 80%"
                .to_string(),
        );
        (p, n)
    } else {
        notes.insert(
            "trained_on".to_string(),
            "first 80% of labelled jobs by submit time".to_string(),
        );
        (held_out_predictor, eval.n_train)
    };

    let meta = save_artifact(&registry, &predictor, &name, training_rows, metrics, notes)?;
    let dir = registry.version_dir(&meta.kind, meta.version);
    if args.json {
        print_saved_json(&dir, &meta)?;
    } else {
        print_summary(&name, &meta, &eval, &dir);
    }
    Ok(())
}

/// Trains `trainer` on every labelled job, in submit order; returns the predictor and the
/// number of jobs it was trained on.
fn train_on_all(
    jobs: &[JobRecord],
    trainer: &RuntimeTrainer,
    progress: &mut dyn FnMut(usize, usize),
) -> anyhow::Result<(RuntimePredictor, usize)> {
    let mut rows: Vec<usize> = (0..jobs.len())
        .filter(|&i| jobs[i].duration.is_some_and(f64::is_finite))
        .collect();
    rows.sort_by(|&a, &b| jobs[a].submit_time.total_cmp(&jobs[b].submit_time));
    let labelled: Vec<JobRecord> = rows.iter().map(|&i| jobs[i].clone()).collect();
    let schema = FeatureSchema::for_jobs(&labelled);
    let x = batch_features(jobs, &schema);
    let y_log: Vec<f64> = jobs
        .iter()
        .map(|j| clamp_duration(j.duration.unwrap_or(1.0)).ln())
        .collect();
    let predictor = trainer.train_with_progress(&schema, &x, &y_log, &rows, progress)?;
    Ok((predictor, rows.len()))
}

fn print_summary(name: &str, meta: &ArtifactMeta, eval: &RuntimeEvaluation, dir: &Path) {
    let get = |k: &str| meta.metrics.get(k).copied().unwrap_or(f64::NAN);
    println!(
        "runtime model · {name} · trained on {} jobs ({})",
        thousands(meta.training_rows as u64),
        meta.notes.get("trained_on").map_or("", String::as_str)
    );
    println!(
        "  held out ({} test jobs): mae_log {:.3} · within2x {:.1}% · cover80 {:.1}% online, {:.1}% static",
        thousands(eval.n_test as u64),
        get("mae_log"),
        get("within2x") * 100.0,
        get("coverage80") * 100.0,
        get("coverage80_static") * 100.0
    );
    println!(
        "saved runtime v{} → {} ({}, {}, sha256 {}…)",
        meta.version,
        dir.display(),
        meta.payload_file,
        bytes(meta.payload_bytes),
        meta.payload_sha256
            .get(..12)
            .unwrap_or(&meta.payload_sha256)
    );
}
