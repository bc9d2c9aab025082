//! `augur train --task failure`: trains the failure predictor as `augur evaluate --task
//! failure` measures it (first 80% by submit time) and saves it under the `failure` kind with
//! its held-out metrics.

use std::collections::BTreeMap;

use augur_predictor::{train_and_evaluate_failure, PredictorError};

use super::{print_saved_json, trace_and_registry};
use crate::cli::evaluate::failure::no_labels_reason;
use crate::cli::TrainArgs;
use crate::model_store::{failure_metrics, save_artifact};
use crate::report::failure::table;
use crate::report::text::bytes;
use crate::trainers;

/// `augur train --task failure`.
pub fn run(args: &TrainArgs) -> anyhow::Result<()> {
    let (name, jobs, registry) = trace_and_registry(args)?;
    let (predictor, eval) = train_and_evaluate_failure(&jobs, &trainers::failure(args.trees))
        .map_err(|e| match &e {
            PredictorError::NotEnoughData { .. } => anyhow::anyhow!(
                "cannot train the failure predictor on {name}: {}",
                no_labels_reason(&name, &jobs, &e)
            ),
            _ => anyhow::Error::new(e).context(format!("training on {name}")),
        })?;
    let metrics = failure_metrics(&eval);
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
    let meta = save_artifact(&registry, &predictor, &name, eval.n_train, metrics, notes)?;
    let dir = registry.version_dir(&meta.kind, meta.version);
    if args.json {
        print_saved_json(&dir, &meta)?;
    } else {
        print!("{}", table(&name, &eval));
        println!(
            "saved failure v{} → {} ({}, sha256 {}…)",
            meta.version,
            dir.display(),
            bytes(meta.payload_bytes),
            meta.payload_sha256
                .get(..12)
                .unwrap_or(&meta.payload_sha256)
        );
    }
    Ok(())
}
