//! `augur evaluate --task failure` and `augur train --task failure`: the failure predictor
//! (class-weighted SVM and log-loss GBDT, calibrated) beside the trivial baselines on the
//! shared split (time-ordered 80/20 by submit time; only jobs with a known outcome are
//! labelled), and saving it in the model registry.

use std::collections::BTreeMap;

use anyhow::Context;
use augur_datasets::{JobRecord, JobStatus};
use augur_predictor::failure::FailureEvalRow;
use augur_predictor::{evaluate_failure, FailureEvaluation, FailureTrainer, PredictorError};
use serde::Serialize;

use crate::cli::{EvaluateArgs, TrainArgs};
use crate::evaluate::load_inputs;

#[derive(Serialize)]
struct DatasetFailureEvaluation<'a> {
    dataset: &'a str,
    task: &'static str,
    failure: &'a FailureEvaluation,
}

#[derive(Serialize)]
struct SkippedDataset<'a> {
    dataset: &'a str,
    task: &'static str,
    skipped: &'a str,
}

/// The failure trainer with `--trees` applied.
fn trainer(trees: Option<usize>) -> FailureTrainer {
    let mut t = FailureTrainer::default();
    if let Some(n) = trees {
        t.gbdt.n_trees = n.max(1);
    }
    t
}

/// Why a trace cannot be evaluated for failures, in words that say what to do instead.
fn no_labels_reason(name: &str, jobs: &[JobRecord], err: &PredictorError) -> String {
    if jobs.iter().all(|j| j.status == JobStatus::Unknown) {
        let hint = if name == "philly" {
            "; the bundled Philly trace is Sia's CSV form, which has no status column: evaluate a Philly cluster_job_log with --trace FILE --format philly-joblog (Pass and Killed count as not failed, Failed as failed)"
        } else {
            ""
        };
        format!("the trace records no job status (every job's outcome is unknown){hint}")
    } else {
        err.to_string()
    }
}

pub fn run(args: &EvaluateArgs) -> anyhow::Result<()> {
    let inputs = load_inputs(&args.dataset, args.trace.as_deref(), args.format.as_deref())?;
    let trainer = trainer(args.trees);
    let mut evaluated = 0;
    let mut skipped = Vec::new();
    for (name, jobs) in inputs {
        let eval = match evaluate_failure(&jobs, &trainer) {
            Ok(e) => e,
            Err(err @ PredictorError::NotEnoughData(_)) => {
                let why = no_labels_reason(&name, &jobs, &err);
                if args.json {
                    let out = SkippedDataset {
                        dataset: &name,
                        task: "failure",
                        skipped: &why,
                    };
                    println!("{}", serde_json::to_string(&out)?);
                }
                eprintln!("failure · {name}: skipped: {why}");
                skipped.push(format!("{name}: {why}"));
                continue;
            }
            Err(e) => {
                return Err(e).with_context(|| format!("evaluating failure prediction on {name}"))
            }
        };
        evaluated += 1;
        if !args.no_report {
            let dir = crate::failure_report::write(&args.report, &name, &eval)
                .with_context(|| format!("writing the {name} failure report"))?;
            eprintln!("report: {}", dir.join("report.md").display());
        }
        if args.json {
            let out = DatasetFailureEvaluation {
                dataset: &name,
                task: "failure",
                failure: &eval,
            };
            println!("{}", serde_json::to_string(&out)?);
        } else {
            print_table(&name, &eval);
        }
    }
    if evaluated == 0 {
        anyhow::bail!(
            "no dataset could be evaluated for failures ({}); the bundled traces with job outcomes are openb and mlperf: --dataset openb,mlperf",
            skipped.join("; ")
        );
    }
    Ok(())
}

fn pct(v: f64) -> String {
    if v.is_finite() {
        format!("{:.1}%", 100.0 * v)
    } else {
        "-".into()
    }
}

fn num(v: f64, digits: usize) -> String {
    if v.is_finite() {
        format!("{v:.digits$}")
    } else {
        "-".into()
    }
}

/// `0.91–0.97`, or `-`.
pub(crate) fn interval(r: &FailureEvalRow) -> String {
    r.roc_auc_95
        .map_or("-".into(), |(lo, hi)| format!("{lo:.2}–{hi:.2}"))
}

/// The line under the table: which model is served and how each is calibrated.
pub(crate) fn served_line(eval: &FailureEvaluation) -> String {
    format!(
        "served: {} (ROC-AUC on {} out-of-sample training scores, {} failed{}: svm {}, gbdt {}; uncalibrated scores on the test jobs: svm {}, gbdt {}); calibration: svm {}, gbdt {}; svm: {} support vectors from {} jobs; gbdt: {} trees",
        eval.served.name(),
        eval.training.calibration_jobs,
        eval.training.calibration_failed,
        if eval.training.cross_fitted {
            ", cross-fitted: the newest 20% held too few failures"
        } else {
            ", the newest 20% of the training period"
        },
        num(eval.validation_auc.0, 3),
        num(eval.validation_auc.1, 3),
        num(eval.raw_test_auc.0, 3),
        num(eval.raw_test_auc.1, 3),
        eval.svm_calibration,
        eval.gbdt_calibration,
        eval.svm_support_vectors,
        eval.training.svm_rows,
        eval.gbdt_trees
    )
}

fn print_table(name: &str, eval: &FailureEvaluation) {
    println!(
        "failure · {name} · time-ordered split: {} train / {} test labelled jobs ({} without a known outcome, not labelled)",
        eval.n_train, eval.n_test, eval.n_censored
    );
    println!(
        "  base rate: {} train, {} test ({} failed test jobs)",
        pct(eval.base_rate_train),
        pct(eval.base_rate_test),
        eval.failed_test
    );
    println!(
        "  {:<44} {:>7} {:>11} {:>7} {:>10} {:>7} {:>6} {:>8} {:>10}",
        "method",
        "ROC-AUC",
        "95% CI",
        "PR-AUC",
        "rec@10%FPR",
        "Brier",
        "ECE",
        "train s",
        "predict µs"
    );
    for r in &eval.rows {
        println!(
            "  {:<44} {:>7} {:>11} {:>7} {:>10} {:>7} {:>6} {:>8} {:>10}",
            r.method,
            num(r.roc_auc, 3),
            interval(r),
            num(r.pr_auc, 3),
            pct(r.recall_at_10fpr),
            num(r.brier, 4),
            num(r.ece, 3),
            r.train_s.map_or("-".into(), |v| num(v, 2)),
            r.predict_us.map_or("-".into(), |v| num(v, 2)),
        );
    }
    println!("{}", served_line(eval));
    println!();
}

/// `augur train --task failure`: trains as `evaluate` does (first 80% by submit time) and
/// saves the predictor under the `failure` kind with its held-out metrics.
pub fn train(args: &TrainArgs) -> anyhow::Result<()> {
    let (name, jobs, registry) = crate::train::trace_and_registry(args)?;
    let mut eval = evaluate_failure(&jobs, &trainer(args.trees)).map_err(|e| match &e {
        PredictorError::NotEnoughData(_) => anyhow::anyhow!(
            "cannot train the failure predictor on {name}: {}",
            no_labels_reason(&name, &jobs, &e)
        ),
        _ => anyhow::Error::new(e).context(format!("training on {name}")),
    })?;
    let predictor = eval
        .predictor
        .take()
        .context("the evaluation returned no trained predictor")?;
    let metrics = held_out_metrics(&eval);
    let mut notes = BTreeMap::new();
    notes.insert("served".to_string(), eval.served.name().to_string());
    notes.insert(
        "trained_on".to_string(),
        format!(
            "first 80% of jobs by submit time: {} labelled jobs fit, the newest {} calibrate",
            eval.training.fit_jobs, eval.training.calibration_jobs
        ),
    );
    notes.insert(
        "metrics_on".to_string(),
        format!(
            "last 20% of jobs by submit time ({} labelled, held out)",
            eval.n_test
        ),
    );
    notes.insert(
        "labels".to_string(),
        "failed = 1; completed and killed = 0; unknown (censored) not labelled".to_string(),
    );
    let meta =
        crate::train::save_artifact(&registry, &predictor, &name, eval.n_train, metrics, notes)?;
    let dir = registry.version_dir(&meta.kind, meta.version);
    if args.json {
        crate::train::print_saved_json(&dir, &meta)?;
    } else {
        print_table(&name, &eval);
        println!(
            "saved failure v{} → {} ({}, sha256 {}…)",
            meta.version,
            dir.display(),
            crate::models::bytes(meta.payload_bytes),
            meta.payload_sha256
                .get(..12)
                .unwrap_or(&meta.payload_sha256)
        );
    }
    Ok(())
}

/// The failure models' held-out metrics as the registry stores them (one source for
/// `augur train --task failure` and `augur serve`'s retraining).
pub(crate) fn held_out_metrics(eval: &FailureEvaluation) -> BTreeMap<String, f64> {
    let mut metrics = BTreeMap::new();
    for r in &eval.rows {
        let tag = if r.method == augur_predictor::failure::METHOD_SVM {
            "svm"
        } else if r.method == augur_predictor::failure::METHOD_GBDT {
            "gbdt"
        } else {
            continue;
        };
        metrics.insert(format!("{tag} roc_auc"), r.roc_auc);
        metrics.insert(format!("{tag} pr_auc"), r.pr_auc);
        metrics.insert(format!("{tag} recall_at_10fpr"), r.recall_at_10fpr);
        metrics.insert(format!("{tag} brier"), r.brier);
    }
    metrics.insert("base_rate_test".into(), eval.base_rate_test);
    metrics.insert("test_jobs".into(), eval.n_test as f64);
    metrics.retain(|_, v| v.is_finite());
    metrics
}
