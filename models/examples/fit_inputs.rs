//! Fits a GBDT on inputs saved by `augur data fit-inputs` and prints, as one JSON line, how
//! long the fit took, the trees it grew and kept, and its validation loss: Augur's side of
//! `scripts/bench-same-matrix.py`, which fits LightGBM on the same files.
//!
//! `cargo run --release -p augur-models --example fit_inputs -- DIR [--trees N]`: with
//! `--trees N` exactly N trees are grown without early stopping (the validation rows are
//! only scored), so both libraries grow the same number.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context};
use augur_models::gbdt::FitInputs;

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let mut dir: Option<PathBuf> = None;
    let mut trees: Option<usize> = None;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--trees" => {
                let v = args.next().context("--trees needs a count")?;
                trees = Some(v.parse().with_context(|| format!("--trees {v}"))?);
            }
            _ if dir.is_none() && !a.starts_with("--") => dir = Some(PathBuf::from(a)),
            _ => bail!("usage: fit_inputs DIR [--trees N] (unexpected {a:?})"),
        }
    }
    let dir = dir.context("usage: fit_inputs DIR [--trees N]")?;
    let mut inputs = FitInputs::read(&dir)?;
    let scored = inputs.clone();
    if let Some(n) = trees {
        inputs.params.n_trees = n;
        inputs.valid_x.clear();
        inputs.valid_y.clear();
    }
    let mut grown = 0;
    let t0 = Instant::now();
    let model = inputs.fit(&mut |done, _| grown = done)?;
    let seconds = t0.elapsed().as_secs_f64();
    let line = serde_json::json!({
        "library": "augur",
        "rows": inputs.fit_rows(),
        "columns": inputs.columns.len(),
        "trees_grown": grown,
        "trees_kept": model.n_trees(),
        "seconds": seconds,
        "ms_per_tree": 1e3 * seconds / grown.max(1) as f64,
        "valid_loss": scored.valid_loss(&model)?,
    });
    println!("{line}");
    Ok(())
}
