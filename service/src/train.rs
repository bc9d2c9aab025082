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
use augur_predictor::metrics::{coverage, mae_log, within2x};
use augur_predictor::registry::Artifact;
use augur_predictor::{
    evaluate_runtime_with_progress, ArtifactMeta, ModelRegistry, NewArtifact, RuntimeEvaluation,
    RuntimePredictor, RuntimeTrainer,
};

use crate::cli::TrainArgs;
use crate::evaluate::{load_inputs, trainer};
use crate::progress::TrainingBar;
use crate::render::thousands;

pub fn run(args: &TrainArgs) -> anyhow::Result<()> {
    // open the registry first: a bad --registry should fail before minutes of training
    let (name, jobs, registry) = trace_and_registry(args)?;
    let trainer = trainer(args.trees);

    let mut bar = TrainingBar::start(&name, jobs.len());
    let eval = evaluate_runtime_with_progress(&jobs, &trainer, &mut |d, t| bar.trees(d, t))
        .with_context(|| format!("training on {name}"));
    bar.finish();
    let mut eval = eval?;
    let metrics = held_out_metrics(&eval);

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
        let p = eval
            .predictor
            .take()
            .context("the evaluation returned no trained predictor")?;
        (p, eval.n_train)
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

/// What every `augur train` task starts from: the trace to train on (its name and jobs) and
/// the opened model registry.
pub(crate) fn trace_and_registry(
    args: &TrainArgs,
) -> anyhow::Result<(String, Vec<JobRecord>, ModelRegistry)> {
    let datasets: Vec<String> = args.dataset.iter().cloned().collect();
    let inputs = load_inputs(&datasets, args.trace.as_deref(), args.format.as_deref())?;
    let Some((name, jobs)) = inputs.into_iter().next() else {
        anyhow::bail!("give a trace to train on: --dataset NAME or --trace PATH");
    };
    let registry = ModelRegistry::open(&args.registry.registry)
        .with_context(|| "opening the model registry")?;
    Ok((name, jobs, registry))
}

/// Saves `predictor` as the next version of its kind in `registry`, with what it was trained
/// on (`source`, `training_rows`), its held-out metrics and its notes.
pub(crate) fn save_artifact<T: Artifact>(
    registry: &ModelRegistry,
    predictor: &T,
    source: &str,
    training_rows: usize,
    metrics: BTreeMap<String, f64>,
    notes: BTreeMap<String, String>,
) -> anyhow::Result<ArtifactMeta> {
    let mut info = NewArtifact::new(source, training_rows);
    info.metrics = metrics;
    info.notes = notes;
    registry
        .save(predictor, info)
        .with_context(|| format!("saving to the registry {}", registry.root().display()))
}

/// The `--json` answer of `augur train`: where the saved version is, and its metadata.
pub(crate) fn print_saved_json(dir: &Path, meta: &ArtifactMeta) -> anyhow::Result<()> {
    let out = serde_json::json!({ "path": dir.display().to_string(), "meta": meta });
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}

/// Metrics of the model on the held-out test jobs, plus the baselines' `mae_log`.
pub(crate) fn held_out_metrics(eval: &RuntimeEvaluation) -> BTreeMap<String, f64> {
    let actual = &eval.test_actual;
    let p: Vec<f64> = eval.test_pred.iter().map(|p| p.seconds).collect();
    let lo: Vec<f64> = eval.test_pred.iter().map(|p| p.lower).collect();
    let hi: Vec<f64> = eval.test_pred.iter().map(|p| p.upper).collect();
    let static_cov = coverage(&lo, &hi, actual);
    let mut m = BTreeMap::new();
    m.insert("mae_log".to_string(), mae_log(&p, actual));
    m.insert("within2x".to_string(), within2x(&p, actual));
    m.insert("coverage80_static".to_string(), static_cov);
    // the service serves online-conformal intervals: that is the headline coverage
    let online = eval.test_methods.iter().find_map(|mp| mp.interval.as_ref());
    let cov = online.map_or(static_cov, |iv| {
        let lo: Vec<f64> = iv.iter().map(|v| v.0).collect();
        let hi: Vec<f64> = iv.iter().map(|v| v.1).collect();
        coverage(&lo, &hi, actual)
    });
    m.insert("coverage80".to_string(), cov);
    for b in eval.test_methods.iter().filter(|mp| mp.interval.is_none()) {
        m.insert(
            format!("baseline mae_log: {}", b.method),
            mae_log(&b.seconds, actual),
        );
    }
    m.insert("test_jobs".to_string(), eval.n_test as f64);
    m.retain(|_, v| v.is_finite());
    m
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

fn print_summary(name: &str, meta: &ArtifactMeta, eval: &RuntimeEvaluation, dir: &std::path::Path) {
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
        crate::models::bytes(meta.payload_bytes),
        meta.payload_sha256
            .get(..12)
            .unwrap_or(&meta.payload_sha256)
    );
}
