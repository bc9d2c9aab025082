//! The report folder of `augur evaluate` (`--task runtime`): `DIR/<dataset>/report.md` with
//! the evaluation table, and three PNG plots beside it:
//!
//! - `pred_vs_actual.png`: predicted vs actual run time of the test jobs (log-log), with
//!   y = x and the factor-of-2 band;
//! - `error_cdf.png`: the CDF of |ln pred − ln actual| for the model and the baselines;
//! - `coverage.png`: the share of test jobs inside the 80% interval per predicted-duration
//!   decile, static and online conformal, against the nominal 80%.
//!
//! Also the table `augur evaluate` prints.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context;
use augur_datasets::split::clamp_duration;
use augur_predictor::metrics::coverage;
use augur_predictor::{EvalRow, RuntimeEvaluation, RuntimePredictor};
use plotters::prelude::*;
use serde::Serialize;

use super::folder_slug;
use super::plot::{
    draw_identity_and_2x_band, legend, log_range, plot_err, pred_vs_actual_chart, render, Area,
    FAMILY,
};
use super::text::{duration, group_coverage};

/// A peer's row beside the evaluation's: numbers measured elsewhere on the same split.
#[derive(Debug, Clone, Serialize)]
pub struct PeerRow {
    pub method: String,
    pub mae_log: f64,
    pub within2x: f64,
}

/// File names of the plots, in the order they appear in the report.
pub const PLOTS: [&str; 3] = ["pred_vs_actual.png", "error_cdf.png", "coverage.png"];

/// Writes `dir/<slug of name>/report.md` and the plots; returns the folder.
pub fn write(
    dir: &Path,
    name: &str,
    eval: &RuntimeEvaluation,
    peers: &[PeerRow],
) -> anyhow::Result<PathBuf> {
    let out = dir.join(folder_slug(name, true));
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let deciles = coverage_by_decile(eval);
    let plots: [(&str, PlotFn); 3] = [
        (PLOTS[0], plot_pred_vs_actual),
        (PLOTS[1], plot_error_cdf),
        (PLOTS[2], plot_coverage),
    ];
    for (file, draw) in plots {
        let path = out.join(file);
        let png = render(|area| draw(area, name, eval, &deciles))
            .with_context(|| format!("drawing {}", path.display()))?;
        std::fs::write(&path, png).with_context(|| format!("writing {}", path.display()))?;
    }
    let md = markdown(name, eval, peers, &deciles);
    let path = out.join("report.md");
    std::fs::write(&path, md).with_context(|| format!("writing {}", path.display()))?;
    Ok(out)
}

/// Coverage of the 80% interval in one predicted-duration decile.
struct Decile {
    /// Predicted seconds at the decile's upper edge.
    upper_pred: f64,
    jobs: usize,
    static_cov: f64,
    online_cov: Option<f64>,
}

fn coverage_by_decile(eval: &RuntimeEvaluation) -> Vec<Decile> {
    let n = eval.test_actual.len().min(eval.test_pred.len());
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| {
        eval.test_pred[a]
            .seconds
            .total_cmp(&eval.test_pred[b].seconds)
    });
    let online = eval
        .test_methods
        .iter()
        .find_map(|m| m.interval.as_ref().filter(|iv| iv.len() == n));
    (0..10)
        .filter_map(|k| {
            let part = &order[k * n / 10..(k + 1) * n / 10];
            let last = *part.last()?;
            let actual: Vec<f64> = part.iter().map(|&i| eval.test_actual[i]).collect();
            let lo: Vec<f64> = part.iter().map(|&i| eval.test_pred[i].lower).collect();
            let hi: Vec<f64> = part.iter().map(|&i| eval.test_pred[i].upper).collect();
            let online_cov = online.map(|iv| {
                let lo: Vec<f64> = part.iter().map(|&i| iv[i].0).collect();
                let hi: Vec<f64> = part.iter().map(|&i| iv[i].1).collect();
                coverage(&lo, &hi, &actual)
            });
            Some(Decile {
                upper_pred: eval.test_pred[last].seconds,
                jobs: part.len(),
                static_cov: coverage(&lo, &hi, &actual),
                online_cov,
            })
        })
        .collect()
}

fn fmt_opt(v: Option<f64>, prec: usize, scale: f64) -> String {
    v.map(|x| format!("{:.*}", prec, x * scale))
        .unwrap_or_else(|| "-".into())
}

/// The printed table: one line per method and peer, and the ensemble's members.
/// `predictor` is the one the evaluation trained (its ensemble is listed under the table).
pub fn table(
    name: &str,
    eval: &RuntimeEvaluation,
    predictor: Option<&RuntimePredictor>,
    peers: &[PeerRow],
) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "runtime · {name} · time-ordered split: {} train / {} test jobs",
        eval.n_train, eval.n_test
    );
    let _ = writeln!(
        s,
        "  {:<38} {:>8} {:>9} {:>10} {:>9} {:>11}",
        "method", "mae_log", "within2x", "cover80%", "train s", "predict µs"
    );
    for r in &eval.rows {
        let _ = writeln!(
            s,
            "  {:<38} {:>8.3} {:>8.1}% {:>10} {:>9} {:>11}",
            r.method,
            r.metrics.mae_log,
            r.metrics.within2x * 100.0,
            fmt_opt(r.metrics.coverage80, 1, 100.0),
            fmt_opt(r.metrics.train_s, 2, 1.0),
            fmt_opt(r.metrics.predict_us, 2, 1.0)
        );
    }
    for p in peers {
        let _ = writeln!(
            s,
            "  {:<38} {:>8.3} {:>8.1}% {:>10} {:>9} {:>11}",
            p.method,
            p.mae_log,
            p.within2x * 100.0,
            "-",
            "-",
            "-"
        );
    }
    if let Some(pred) = predictor {
        let members: Vec<String> = pred
            .members
            .iter()
            .map(|m| format!("{:.2} × {}", m.weight, m.name))
            .collect();
        let _ = writeln!(s, "ensemble: {}", members.join(" + "));
    }
    if !eval.coverage_by_group.is_empty() {
        let _ = writeln!(s, "80% interval coverage per group of test jobs:");
        s.push_str(&group_coverage(&eval.coverage_by_group, 0.8));
    }
    let _ = writeln!(s);
    s
}

fn markdown(name: &str, eval: &RuntimeEvaluation, peers: &[PeerRow], deciles: &[Decile]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# Runtime prediction · {name}\n");
    let _ = writeln!(
        s,
        "Time-ordered split: {} train / {} test jobs (first 80% / last 20% by submit time). \
         Written by augur {} on {}.\n",
        eval.n_train,
        eval.n_test,
        env!("CARGO_PKG_VERSION"),
        chrono::Utc::now().format("%Y-%m-%d %H:%M UTC")
    );
    let _ = writeln!(
        s,
        "| method | mae_log | within2x | cover80% | train s | predict µs |\n|---|---:|---:|---:|---:|---:|"
    );
    let row = |s: &mut String, r: &EvalRow| {
        let _ = writeln!(
            s,
            "| {} | {:.3} | {:.1}% | {} | {} | {} |",
            r.method,
            r.metrics.mae_log,
            r.metrics.within2x * 100.0,
            fmt_opt(r.metrics.coverage80, 1, 100.0),
            fmt_opt(r.metrics.train_s, 2, 1.0),
            fmt_opt(r.metrics.predict_us, 2, 1.0)
        );
    };
    for r in &eval.rows {
        row(&mut s, r);
    }
    for p in peers {
        let _ = writeln!(
            s,
            "| {} | {:.3} | {:.1}% | - | - | - |",
            p.method,
            p.mae_log,
            p.within2x * 100.0
        );
    }
    let _ = writeln!(
        s,
        "\n`mae_log` = mean |ln pred − ln actual| (durations clamped to ≥ 1 s; lower is better), \
         `within2x` = share of test jobs predicted within a factor of 2, `cover80%` = share of \
         test jobs inside the predicted 80% interval. Peer rows are LightGBM models measured \
         by the team on exactly this split (not re-run here).\n"
    );
    let _ = writeln!(
        s,
        "## Predicted vs actual\n\n![predicted vs actual]({})\n\nEach point is a test job; the \
         solid line is a perfect prediction, the dashed lines a factor of 2 either way.\n",
        PLOTS[0]
    );
    let _ = writeln!(
        s,
        "## Error distribution\n\n![error CDF]({})\n\nShare of test jobs (y) whose \
         |ln pred − ln actual| is at most x, for the model and the baselines; the vertical line \
         is ln 2 (within a factor of 2).\n",
        PLOTS[1]
    );
    let _ = writeln!(
        s,
        "## Interval coverage\n\n![coverage by decile]({})\n\nShare of test jobs inside the 80% \
         interval, by decile of the predicted duration (1 = shortest predicted).\n",
        PLOTS[2]
    );
    let _ = writeln!(
        s,
        "| decile | predicted ≤ | jobs | static cover80% | online cover80% |\n|---:|---:|---:|---:|---:|"
    );
    for (k, d) in deciles.iter().enumerate() {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {:.1} | {} |",
            k + 1,
            duration(d.upper_pred),
            d.jobs,
            d.static_cov * 100.0,
            fmt_opt(d.online_cov, 1, 100.0)
        );
    }
    let _ = writeln!(
        s,
        "\n## Coverage per group\n\nShare of each group's test jobs inside the 80% interval \
         (partition: the busiest of the training period, the rest `other`; GPU or CPU job; \
         size in GPUs or CPUs). ⚠ marks a group more than 5 points below 80%.\n"
    );
    s.push_str(&group_coverage(&eval.coverage_by_group, 0.8));
    s
}

const MODEL: RGBColor = RGBColor(31, 119, 180);
const ONLINE: RGBColor = RGBColor(214, 39, 40);
const BASELINES: [RGBColor; 3] = [
    RGBColor(127, 127, 127),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
];

type PlotFn = fn(&Area, &str, &RuntimeEvaluation, &[Decile]) -> anyhow::Result<()>;

fn plot_pred_vs_actual(
    area: &Area,
    name: &str,
    eval: &RuntimeEvaluation,
    _: &[Decile],
) -> anyhow::Result<()> {
    let pts: Vec<(f64, f64)> = eval
        .test_actual
        .iter()
        .zip(&eval.test_pred)
        .map(|(a, p)| (clamp_duration(*a), clamp_duration(p.seconds)))
        .filter(|(a, p)| a.is_finite() && p.is_finite())
        .collect();
    let (lo, hi) = log_range(pts.iter().flat_map(|&(a, p)| [a, p]));
    let mut chart = pred_vs_actual_chart(
        area,
        format!("{name}: predicted vs actual run time (test jobs)"),
        ("actual seconds", "predicted seconds"),
        (lo, hi),
    )?;
    // at most ~20k points, evenly thinned, drawn translucent
    let step = (pts.len() / 20_000).max(1);
    chart
        .draw_series(
            pts.iter()
                .step_by(step)
                .map(|&p| Circle::new(p, 2, MODEL.mix(0.25).filled())),
        )
        .map_err(plot_err)?
        .label(format!("test jobs ({})", pts.len()))
        .legend(|(x, y)| Circle::new((x + 10, y), 3, MODEL.filled()));
    draw_identity_and_2x_band(&mut chart, (lo, hi))?;
    legend(&mut chart, SeriesLabelPosition::UpperLeft, 14)?;
    Ok(())
}

/// The sorted absolute log errors of `pred` against the test durations.
fn abs_log_errors(pred: impl Iterator<Item = f64>, actual: &[f64]) -> Vec<f64> {
    let mut e: Vec<f64> = pred
        .zip(actual)
        .map(|(p, a)| (clamp_duration(p).ln() - clamp_duration(*a).ln()).abs())
        .filter(|e| e.is_finite())
        .collect();
    e.sort_by(f64::total_cmp);
    e
}

fn plot_error_cdf(
    area: &Area,
    name: &str,
    eval: &RuntimeEvaluation,
    _: &[Decile],
) -> anyhow::Result<()> {
    let mut curves: Vec<(String, RGBColor, Vec<f64>)> = vec![(
        "augur model".into(),
        MODEL,
        abs_log_errors(eval.test_pred.iter().map(|p| p.seconds), &eval.test_actual),
    )];
    let baselines = eval.test_methods.iter().filter(|m| m.interval.is_none());
    for (m, color) in baselines.zip(BASELINES.iter().cycle()) {
        curves.push((
            m.method.clone(),
            *color,
            abs_log_errors(m.seconds.iter().copied(), &eval.test_actual),
        ));
    }
    // x up to the 98th percentile of the worst curve, at least ln 2 · 2
    let x_max = curves
        .iter()
        .filter_map(|(_, _, e)| e.get(e.len().saturating_sub(1) * 98 / 100).copied())
        .fold(2.0 * 2f64.ln(), f64::max)
        .ceil();
    let mut chart = ChartBuilder::on(area)
        .caption(
            format!("{name}: error distribution (test jobs)"),
            (FAMILY, 22),
        )
        .margin(12)
        .x_label_area_size(48)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..x_max, 0f64..1f64)
        .map_err(plot_err)?;
    chart
        .configure_mesh()
        .x_desc("|ln predicted − ln actual|")
        .y_desc("share of test jobs")
        .y_label_formatter(&|v| format!("{:.0}%", v * 100.0))
        .label_style((FAMILY, 14))
        .draw()
        .map_err(plot_err)?;
    for (label, color, errors) in &curves {
        let n = errors.len().max(1) as f64;
        // one point per ~0.2% of jobs is plenty for a smooth step curve
        let step = (errors.len() / 500).max(1);
        let mut pts: Vec<(f64, f64)> = vec![(0.0, 0.0)];
        pts.extend(
            errors
                .iter()
                .enumerate()
                .step_by(step)
                .chain(errors.iter().enumerate().next_back())
                .map(|(i, &e)| (e.min(x_max), (i + 1) as f64 / n)),
        );
        pts.push((x_max, pts.last().map_or(0.0, |p| p.1)));
        let mae = errors.iter().sum::<f64>() / n;
        let c = *color;
        chart
            .draw_series(LineSeries::new(pts, c.stroke_width(2)))
            .map_err(plot_err)?
            .label(format!("{label} (mae_log {mae:.3})"))
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], c.stroke_width(2)));
    }
    let ln2 = 2f64.ln();
    chart
        .draw_series(DashedLineSeries::new(
            [(ln2, 0.0), (ln2, 1.0)],
            6,
            5,
            BLACK.stroke_width(1),
        ))
        .map_err(plot_err)?
        .label("ln 2 (within 2x)")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], BLACK.stroke_width(1)));
    legend(&mut chart, SeriesLabelPosition::LowerRight, 14)?;
    Ok(())
}

fn plot_coverage(
    area: &Area,
    name: &str,
    eval: &RuntimeEvaluation,
    deciles: &[Decile],
) -> anyhow::Result<()> {
    let nominal = eval.test_pred.first().map_or(0.8, |p| p.coverage);
    let mut chart = ChartBuilder::on(area)
        .caption(
            format!("{name}: interval coverage by predicted-duration decile"),
            (FAMILY, 22),
        )
        .margin(12)
        .x_label_area_size(48)
        .y_label_area_size(60)
        .build_cartesian_2d(0.5f64..10.5f64, 0f64..1f64)
        .map_err(plot_err)?;
    chart
        .configure_mesh()
        .x_desc("decile of predicted duration (1 = shortest)")
        .y_desc("share of test jobs inside the interval")
        .x_labels(10)
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_label_formatter(&|v| format!("{:.0}%", v * 100.0))
        .label_style((FAMILY, 14))
        .draw()
        .map_err(plot_err)?;
    chart
        .draw_series(DashedLineSeries::new(
            [(0.5, nominal), (10.5, nominal)],
            8,
            6,
            BLACK.stroke_width(2),
        ))
        .map_err(plot_err)?
        .label(format!("nominal {:.0}%", nominal * 100.0))
        .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], BLACK.stroke_width(2)));
    let static_pts: Vec<(f64, f64)> = deciles
        .iter()
        .enumerate()
        .map(|(k, d)| ((k + 1) as f64, d.static_cov))
        .collect();
    let online_pts: Vec<(f64, f64)> = deciles
        .iter()
        .enumerate()
        .filter_map(|(k, d)| d.online_cov.map(|c| ((k + 1) as f64, c)))
        .collect();
    for (label, color, pts) in [
        ("static conformal", MODEL, static_pts),
        ("online conformal", ONLINE, online_pts),
    ] {
        if pts.is_empty() {
            continue;
        }
        chart
            .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
            .map_err(plot_err)?
            .label(label)
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], color.stroke_width(2)));
        chart
            .draw_series(pts.into_iter().map(|p| Circle::new(p, 4, color.filled())))
            .map_err(plot_err)?;
    }
    legend(&mut chart, SeriesLabelPosition::LowerRight, 14)?;
    Ok(())
}
