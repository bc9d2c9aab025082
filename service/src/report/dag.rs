//! The table and report folder of `augur evaluate --task dag`: `DIR/<dataset>/report.md`
//! with the table and `makespan_pred_vs_actual.png` (predicted vs actual makespan of every
//! held-out job).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context;
use augur_predictor::dag::DagEvaluation;
use plotters::prelude::*;

use super::folder_slug;
use super::plot::{
    draw_identity_and_2x_band, legend, log_range, plot_err, pred_vs_actual_chart, render, Area,
};

/// File name of the makespan plot in the report folder.
pub const MAKESPAN_PLOT: &str = "makespan_pred_vs_actual.png";

fn pct(v: Option<f64>) -> String {
    match v {
        Some(v) if v.is_finite() => format!("{:.1}%", 100.0 * v),
        _ => "-".into(),
    }
}

fn num(v: Option<f64>, digits: usize) -> String {
    match v {
        Some(v) if v.is_finite() => format!("{v:.digits$}"),
        _ => "-".into(),
    }
}

/// The printed table.
pub fn table(eval: &DagEvaluation) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "dag · {} · {} jobs, {} stages, {} groups, grouped {}-fold cross-validation (GRU {} epochs)",
        eval.dataset, eval.jobs, eval.stages, eval.groups, eval.folds, eval.gru_epochs
    );
    let _ = writeln!(
        s,
        "  {:<42} {:>9} {:>9} {:>9} {:>9} {:>8} {:>10}",
        "method", "mk mae", "mk w2x", "stage mae", "stage w2x", "train s", "predict µs"
    );
    for r in &eval.rows {
        let _ = writeln!(
            s,
            "  {:<42} {:>9} {:>9} {:>9} {:>9} {:>8} {:>10}",
            r.method,
            num(Some(r.metrics.makespan_mae_log), 3),
            pct(Some(r.metrics.makespan_within2x)),
            num(r.metrics.stage_mae_log, 3),
            pct(r.metrics.stage_within2x),
            num(r.metrics.train_s, 2),
            num(r.metrics.predict_us, 1),
        );
    }
    let _ = writeln!(s, "  (mk = makespan; mae = mae_log; w2x = within2x)");
    s
}

/// Writes `dir/<dataset>/report.md` and the makespan plot; returns the folder.
pub fn write_report(dir: &Path, eval: &DagEvaluation) -> anyhow::Result<PathBuf> {
    let out = dir.join(folder_slug(&eval.dataset, true));
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let path = out.join(MAKESPAN_PLOT);
    let png = render(|area| plot_makespan(area, eval))
        .with_context(|| format!("drawing {}", path.display()))?;
    std::fs::write(&path, png).with_context(|| format!("writing {}", path.display()))?;
    let mut md = String::new();
    let _ = writeln!(md, "# DAG jobs · {}\n", eval.dataset);
    let _ = writeln!(md, "Split: {}.\n", eval.split);
    let _ = writeln!(
        md,
        "| method | makespan mae_log | makespan within2x | stage mae_log | stage within2x | train s / fold | predict µs / job |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|---|---|");
    for r in &eval.rows {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} |",
            r.method,
            num(Some(r.metrics.makespan_mae_log), 3),
            pct(Some(r.metrics.makespan_within2x)),
            num(r.metrics.stage_mae_log, 3),
            pct(r.metrics.stage_within2x),
            num(r.metrics.train_s, 2),
            num(r.metrics.predict_us, 1)
        );
    }
    let _ = writeln!(
        md,
        "\n![predicted vs actual makespan]({MAKESPAN_PLOT})\n\nEach point is one held-out job, predicted by models trained on the other folds."
    );
    let path = out.join("report.md");
    std::fs::write(&path, md).with_context(|| format!("writing {}", path.display()))?;
    Ok(out)
}

fn plot_makespan(area: &Area, eval: &DagEvaluation) -> anyhow::Result<()> {
    let model = eval.model_row;
    let baselines = [0usize, 1];
    let series: Vec<(usize, Vec<(f64, f64)>)> = std::iter::once(model)
        .chain(baselines)
        .map(|k| {
            let pts = eval
                .results
                .iter()
                .filter_map(|r| {
                    let p = *r.predicted_makespan_s.get(k)?;
                    let a = r.actual_makespan_s;
                    (p.is_finite() && a.is_finite()).then_some((a.max(1.0), p.max(1.0)))
                })
                .collect();
            (k, pts)
        })
        .collect();
    let (lo, hi) = log_range(
        series
            .iter()
            .flat_map(|(_, p)| p.iter().flat_map(|&(a, b)| [a, b])),
    );
    let mut chart = pred_vs_actual_chart(
        area,
        format!(
            "{}: predicted vs actual makespan (held-out jobs)",
            eval.dataset
        ),
        ("actual makespan, seconds", "predicted makespan, seconds"),
        (lo, hi),
    )?;
    let colours = [
        RGBColor(31, 119, 180),
        RGBColor(127, 127, 127),
        RGBColor(255, 127, 14),
    ];
    for (i, (k, pts)) in series.iter().enumerate().rev() {
        let c = colours[i % colours.len()];
        let (size, alpha) = if i == 0 { (4, 0.8) } else { (3, 0.45) };
        let label = eval
            .rows
            .get(*k)
            .map(|r| r.method.clone())
            .unwrap_or_default();
        chart
            .draw_series(
                pts.iter()
                    .map(move |&p| Circle::new(p, size, c.mix(alpha).filled())),
            )
            .map_err(plot_err)?
            .label(label)
            .legend(move |(x, y)| Circle::new((x + 10, y), 4, c.filled()));
    }
    draw_identity_and_2x_band(&mut chart, (lo, hi))?;
    legend(&mut chart, SeriesLabelPosition::UpperLeft, 14)?;
    Ok(())
}
