//! `augur evaluate --task dag`: per-stage run times and makespans of DAG jobs (TPC-H on
//! Spark, WfCommons workflows), Augur's GRU over the stages beside the per-stage GBDT and
//! per-stage-type-median baselines, by grouped cross-validation (whole queries / workflow
//! instances held out). Prints a table (or one JSON object per dataset with `--json`) and
//! writes the report folder ([`crate::report::dag`]).

use anyhow::{bail, Context};
use augur_datasets::bundled::bundled_file;
use augur_predictor::dag::{evaluate_dag, load_tpch, load_wfcommons};
use indicatif::{ProgressBar, ProgressStyle};

use crate::cli::EvaluateArgs;
use crate::report::dag::{table, write_report};
use crate::trainers;

/// The DAG datasets `--task dag` knows.
const DATASETS: [&str; 2] = ["dag-tpch", "dag-wfcommons"];

/// `augur evaluate --task dag`.
pub fn run(args: &EvaluateArgs) -> anyhow::Result<()> {
    if !args.trace.is_empty() {
        bail!("--task dag reads the bundled DAG datasets: use --dataset dag-tpch,dag-wfcommons");
    }
    // `--dataset` defaults to the runtime task's `philly`: that default means both DAG sets
    let names: Vec<String> = if args.dataset == ["philly"] {
        DATASETS.iter().map(|s| s.to_string()).collect()
    } else {
        args.dataset.clone()
    };
    let trainer = trainers::dag(args.trees, args.epochs);
    for name in names {
        let data = match name.as_str() {
            "dag-tpch" => load_tpch(&bundled_file("dag-tpch/tpch_dags.json.gz")?)?,
            "dag-wfcommons" => load_wfcommons(&bundled_file("dag-wfcommons")?)?,
            other => bail!(
                "unknown DAG dataset `{other}` for --task dag (known: {})",
                DATASETS.join(", ")
            ),
        };
        let bar = ProgressBar::new(trainer.folds as u64);
        bar.set_style(
            ProgressStyle::with_template(
                "{spinner} {msg} [{bar:20}] {pos}/{len} folds [{elapsed}]",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        bar.set_message(format!("{name}: training"));
        let eval = evaluate_dag(&name, &data.jobs, &data.groups, &trainer, &mut |d, t| {
            bar.set_length(t as u64);
            bar.set_position(d as u64);
        })
        .with_context(|| format!("evaluating DAG predictions on {name}"))?;
        bar.finish_and_clear();
        if args.json {
            println!("{}", serde_json::to_string(&eval)?);
        } else {
            print!("{}", table(&eval));
        }
        if !args.no_report {
            let dir = write_report(&args.report, &eval)?;
            if !args.json {
                println!("report: {}\n", dir.display());
            }
        }
    }
    Ok(())
}
