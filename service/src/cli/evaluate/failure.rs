//! `augur evaluate --task failure`: the failure predictor (class-weighted SVM and log-loss
//! GBDT, calibrated) beside the trivial baselines on the shared split (time-ordered 80/20 by
//! submit time; only jobs with a known outcome are labelled).

use anyhow::Context;
use augur_datasets::{JobRecord, JobStatus};
use augur_predictor::{evaluate_failure, FailureEvaluation, PredictorError};
use serde::Serialize;

use crate::cli::trace::load_inputs;
use crate::cli::EvaluateArgs;
use crate::report::failure as report;
use crate::trainers;

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

/// Why a trace cannot be evaluated for failures, in words that say what to do instead.
pub fn no_labels_reason(name: &str, jobs: &[JobRecord], err: &PredictorError) -> String {
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

/// `augur evaluate --task failure`.
pub fn run(args: &EvaluateArgs) -> anyhow::Result<()> {
    let inputs = load_inputs(
        &args.dataset,
        &args.trace,
        args.format.as_deref(),
        args.timezone.timezone,
    )?;
    let trainer = trainers::failure(args.trees);
    let mut evaluated = 0;
    let mut skipped = Vec::new();
    for (name, jobs) in inputs {
        let eval = match evaluate_failure(&jobs, &trainer) {
            Ok(e) => e,
            Err(err @ PredictorError::NotEnoughData { .. }) => {
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
            let dir = report::write(&args.report, &name, &eval)
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
            print!("{}", report::table(&name, &eval));
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
