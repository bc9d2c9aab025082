//! The tables and report folder of `augur evaluate --task convergence`:
//! `DIR/mlperf-convergence/` with `report.md`, `curve.png` (a test run's fitted extrapolation
//! and predicted convergence) and `errors.png` (median relative error per prefix and method).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context;
use augur_predictor::convergence::{
    ConvergenceEvaluation, Direction, FinalMetricScores, PrefixScores, TestCase, METHOD_AUGUR,
    METHOD_ENSEMBLE, METHOD_OPTIMUS, METHOD_PRIOR, METHOD_TRUNCATED_PRIOR, PREFIXES,
};
use plotters::prelude::*;
use serde::Serialize;

use super::plot::{legend, plot_err, render, Area, XyChart, FAMILY};

/// Peer numbers measured elsewhere at the 25/50/75% prefixes: median relative error of the
/// remaining wall time.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct TeamPeers {
    pub prefixes: [f64; 3],
    /// Optimus fit over wall time.
    pub optimus_wall_time: [f64; 3],
    /// The median time-to-train prior.
    pub prior_median_time_to_train: [f64; 3],
}

/// Table columns: (method, short header).
const COLUMNS: [(&str, &str); 5] = [
    (METHOD_AUGUR, "augur"),
    (METHOD_TRUNCATED_PRIOR, "EB prior|T>t"),
    (METHOD_ENSEMBLE, "curve ens."),
    (METHOD_OPTIMUS, "optimus"),
    (METHOD_PRIOR, "prior"),
];

fn cell(s: &PrefixScores, method: &str) -> String {
    s.methods
        .iter()
        .find(|m| m.method == method)
        .map_or("-".into(), |m| format!("{:.3}", m.metrics.median_rel_error))
}

fn coverage_cell(s: &PrefixScores) -> String {
    s.methods
        .iter()
        .find(|m| m.method == METHOD_AUGUR)
        .and_then(|m| m.metrics.coverage)
        .map_or("-".into(), |c| format!("{:.1}%", 100.0 * c))
}

/// The printed table: one line per (group, prefix), with the team's numbers beside the
/// overall rows.
pub fn table(eval: &ConvergenceEvaluation, team: &TeamPeers) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "convergence · mlperf v1.0 · split by run start: {} train / {} test runs · remaining wall time to target",
        eval.n_train_runs, eval.n_test_runs
    );
    let _ = writeln!(
        s,
        "  median |predicted − actual| / actual (no finite answer = 1.0); cover80 = augur's 80% interval"
    );
    let _ = write!(s, "  {:<8} {:>6} {:>5}", "group", "prefix", "runs");
    for (_, h) in COLUMNS {
        let _ = write!(s, " {h:>12}");
    }
    let _ = writeln!(
        s,
        " {:>8} {:>14} {:>12}",
        "cover80", "optimus (team)", "prior (team)"
    );
    for sc in &eval.scores {
        let _ = write!(
            s,
            "  {:<8} {:>5.0}% {:>5}",
            sc.group,
            100.0 * sc.prefix,
            sc.runs
        );
        for (m, _) in COLUMNS {
            let _ = write!(s, " {:>12}", cell(sc, m));
        }
        let at = team
            .prefixes
            .iter()
            .position(|p| (p - sc.prefix).abs() < 1e-9)
            .filter(|_| sc.group == "all");
        let _ = writeln!(
            s,
            " {:>8} {:>14} {:>12}",
            coverage_cell(sc),
            at.map_or("".into(), |i| format!("{:.3}", team.optimus_wall_time[i])),
            at.map_or("".into(), |i| format!(
                "{:.3}",
                team.prior_median_time_to_train[i]
            )),
        );
    }
    let targets: Vec<String> = eval
        .targets
        .iter()
        .map(|(b, d, t)| {
            format!(
                "{b} {} {t:.4}",
                if format!("{d:?}") == "Rising" {
                    "≥"
                } else {
                    "≤"
                }
            )
        })
        .collect();
    let _ = writeln!(s, "learned targets: {}", targets.join(", "));
    let _ = writeln!(
        s,
        "train {:.1} s · predict {:.0} µs per prefix (fits 4 curve families + 3 tree models)",
        eval.train_s, eval.predict_us
    );
    s
}

/// The Pollux/Sia final-metric table: one line per method, one column per prefix.
pub fn final_metric_table(rows: &[FinalMetricScores]) -> String {
    let mut s = String::new();
    let curves = rows.first().map_or(0, |r| r.curves);
    let _ = writeln!(
        s,
        "\nfinal metric · pollux/sia validation curves ({curves} with ≥ 8 points) · median |predicted − actual last value| / curve range"
    );
    let _ = write!(s, "  {:<34}", "method");
    for r in rows {
        let _ = write!(s, " {:>10}", format!("first {:.0}%", 100.0 * r.prefix));
    }
    let _ = writeln!(s);
    if let Some(first) = rows.first() {
        for (i, (name, _)) in first.methods.iter().enumerate() {
            let _ = write!(s, "  {name:<34}");
            for r in rows {
                let v = r.methods.get(i).map_or(f64::NAN, |m| m.1);
                let _ = write!(s, " {v:>10.3}");
            }
            let _ = writeln!(s);
        }
    }
    s
}

/// Writes `dir/mlperf-convergence/` with `report.md`, `curve.png` and `errors.png`.
pub fn write_report(
    dir: &Path,
    eval: &ConvergenceEvaluation,
    final_metric: &[FinalMetricScores],
    team: &TeamPeers,
) -> anyhow::Result<PathBuf> {
    let out = dir.join("mlperf-convergence");
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let case = representative_case(eval);
    if let Some(case) = case {
        let png = render(|area| plot_curve(area, eval, case)).context("drawing curve.png")?;
        let path = out.join("curve.png");
        std::fs::write(&path, png).with_context(|| format!("writing {}", path.display()))?;
    }
    let png = render(|area| plot_errors(area, eval)).context("drawing errors.png")?;
    let path = out.join("errors.png");
    std::fs::write(&path, png).with_context(|| format!("writing {}", path.display()))?;
    let mut md = String::new();
    let _ = writeln!(md, "# Convergence · MLPerf v1.0\n");
    let _ = writeln!(
        md,
        "Written by augur {} on {}. Successful runs split by run start (first 80% train, last 20% test); \
         each test run's first 25/50/75% of points given; remaining wall time to the quality target predicted.\n",
        env!("CARGO_PKG_VERSION"),
        chrono::Utc::now().format("%Y-%m-%d %H:%M UTC")
    );
    let _ = writeln!(
        md,
        "```\n{}{}```\n",
        table(eval, team),
        final_metric_table(final_metric)
    );
    if let Some(c) = case {
        let _ = writeln!(
            md,
            "![curve](curve.png)\n\n`curve.png`: test run {} ({}) given its first {} points ({:.0}%): \
             the curve-fit ensemble over wall time, the predicted convergence time with its 80% interval, and the actual time-to-train.\n",
            c.run_id,
            c.benchmark,
            c.points_given,
            100.0 * c.prefix
        );
    }
    let _ = writeln!(
        md,
        "![errors](errors.png)\n\n`errors.png`: median relative error per prefix and method, whiskers at the 25th and 75th percentiles.\n"
    );
    let path = out.join("report.md");
    std::fs::write(&path, md).with_context(|| format!("writing {}", path.display()))?;
    Ok(out)
}

/// A 50%-prefix case with a curve whose error is closest to the overall median.
fn representative_case(eval: &ConvergenceEvaluation) -> Option<&TestCase> {
    let med = eval
        .score("all", 0.5, METHOD_AUGUR)
        .map_or(0.3, |m| m.median_rel_error);
    eval.cases
        .iter()
        .filter(|c| (c.prefix - 0.5).abs() < 1e-9 && c.prediction.curve.is_some())
        .filter(|c| c.points_given >= 5)
        .min_by(|a, b| {
            let e = |c: &TestCase| {
                ((c.prediction.remaining_s - c.actual_remaining_s).abs() / c.actual_remaining_s
                    - med)
                    .abs()
            };
            e(a).total_cmp(&e(b))
        })
}

const MODEL: RGBColor = RGBColor(31, 119, 180);
const GREY: RGBColor = RGBColor(150, 150, 150);
const METHOD_COLORS: [RGBColor; 5] = [
    RGBColor(31, 119, 180),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(214, 39, 40),
    RGBColor(255, 127, 14),
];

fn plot_curve(area: &Area, eval: &ConvergenceEvaluation, case: &TestCase) -> anyhow::Result<()> {
    let run = eval
        .test_runs
        .iter()
        .find(|r| r.run_id == case.run_id)
        .context("the plotted case's run")?;
    let p = &case.prediction;
    let t_end = (p.elapsed_s + p.remaining_upper_s)
        .max(run.time_to_train_s)
        .max(1.0)
        * 1.05;
    // the y range leaves out the first two evaluations (a fresh model's metric can be far
    // off the scale of the rest, e.g. rnnt's first WER of 13)
    let values = run.points.iter().skip(2).map(|q| q.value).chain(p.target);
    let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
        (a.min(v), b.max(v))
    });
    let pad = 0.08 * (hi - lo).abs().max(1e-6);
    let (y0, y1) = (lo - pad, hi + pad);
    let mut chart = ChartBuilder::on(area)
        .caption(
            format!(
                "{} run {}: first {:.0}% of points, predicted convergence",
                case.benchmark,
                case.run_id,
                100.0 * case.prefix
            ),
            (FAMILY, 20),
        )
        .margin(12)
        .x_label_area_size(48)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..t_end, y0..y1)
        .map_err(plot_err)?;
    chart
        .configure_mesh()
        .x_desc("wall seconds since start")
        .y_desc("eval metric")
        .label_style((FAMILY, 14))
        .draw()
        .map_err(plot_err)?;
    // 80% interval of the convergence time
    let (c_lo, c_hi) = (
        p.elapsed_s + p.remaining_lower_s,
        p.elapsed_s + p.remaining_upper_s,
    );
    chart
        .draw_series(std::iter::once(Rectangle::new(
            [(c_lo, y0), (c_hi.min(t_end), y1)],
            MODEL.mix(0.15).filled(),
        )))
        .map_err(plot_err)?
        .label("80% interval of convergence time")
        .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 20, y + 5)], MODEL.mix(0.3).filled()));
    let given = case.points_given;
    chart
        .draw_series(
            run.points[..given]
                .iter()
                .filter(|q| (y0..=y1).contains(&q.value))
                .map(|q| Circle::new((q.wall_time_s, q.value), 4, MODEL.filled())),
        )
        .map_err(plot_err)?
        .label(format!("given points ({given})"))
        .legend(|(x, y)| Circle::new((x + 10, y), 4, MODEL.filled()));
    chart
        .draw_series(
            run.points[given..]
                .iter()
                .filter(|q| (y0..=y1).contains(&q.value))
                .map(|q| Circle::new((q.wall_time_s, q.value), 3, GREY.filled())),
        )
        .map_err(plot_err)?
        .label("later points (unseen)")
        .legend(|(x, y)| Circle::new((x + 10, y), 3, GREY.filled()));
    draw_fit_and_times(&mut chart, case, run.time_to_train_s, t_end, (y0, y1))?;
    let rising = p.direction == Direction::Rising;
    let pos = if rising {
        SeriesLabelPosition::LowerRight
    } else {
        SeriesLabelPosition::UpperRight
    };
    legend(&mut chart, pos, 14)?;
    Ok(())
}

/// The curve-fit ensemble over `[0, t_end]`, the learned target, and the predicted and actual
/// convergence times, on a chart whose y axis spans `(y0, y1)`.
fn draw_fit_and_times(
    chart: &mut XyChart<'_, '_>,
    case: &TestCase,
    time_to_train_s: f64,
    t_end: f64,
    (y0, y1): (f64, f64),
) -> anyhow::Result<()> {
    let p = &case.prediction;
    let curve = p.curve.as_ref().context("the plotted case's curve fit")?;
    let steps = 200;
    let fitted: Vec<(f64, f64)> = (0..=steps)
        .map(|i| {
            let t = t_end * i as f64 / steps as f64;
            (t, curve.value_at(t.max(1e-6)))
        })
        .filter(|(_, v)| v.is_finite() && *v >= y0 && *v <= y1)
        .collect();
    chart
        .draw_series(LineSeries::new(fitted, MODEL.stroke_width(2)))
        .map_err(plot_err)?
        .label("curve-fit ensemble (extrapolated)")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], MODEL.stroke_width(2)));
    if let Some(target) = p.target {
        chart
            .draw_series(DashedLineSeries::new(
                [(0.0, target), (t_end, target)],
                8,
                6,
                BLACK.stroke_width(1),
            ))
            .map_err(plot_err)?
            .label(format!("learned target {target:.4}"))
            .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], BLACK.stroke_width(1)));
    }
    chart
        .draw_series(LineSeries::new(
            [(p.total_s, y0), (p.total_s, y1)],
            MODEL.stroke_width(3),
        ))
        .map_err(plot_err)?
        .label(format!("predicted convergence {:.0} s", p.total_s))
        .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], MODEL.stroke_width(3)));
    chart
        .draw_series(LineSeries::new(
            [(time_to_train_s, y0), (time_to_train_s, y1)],
            BLACK.stroke_width(2),
        ))
        .map_err(plot_err)?
        .label(format!("actual time-to-train {:.0} s", time_to_train_s))
        .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], BLACK.stroke_width(2)));
    Ok(())
}

fn plot_errors(area: &Area, eval: &ConvergenceEvaluation) -> anyhow::Result<()> {
    let n_methods = COLUMNS.len();
    let y_max = eval
        .scores
        .iter()
        .filter(|s| s.group == "all")
        .flat_map(|s| s.methods.iter().map(|m| m.metrics.q75_rel_error))
        .filter(|v| v.is_finite())
        .fold(1.0f64, f64::max)
        .min(3.0)
        * 1.1;
    let mut chart = ChartBuilder::on(area)
        .caption(
            "remaining-time error per prefix (all test runs)",
            (FAMILY, 22),
        )
        .margin(12)
        .x_label_area_size(48)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..PREFIXES.len() as f64, 0f64..y_max)
        .map_err(plot_err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(PREFIXES.len() * 2 + 1)
        .x_label_formatter(&|x| {
            let i = x.floor() as usize;
            if (x - i as f64 - 0.5).abs() < 0.01 && i < PREFIXES.len() {
                format!("first {:.0}%", 100.0 * PREFIXES[i])
            } else {
                String::new()
            }
        })
        .y_desc("median |pred − actual| / actual")
        .label_style((FAMILY, 14))
        .draw()
        .map_err(plot_err)?;
    let width = 0.8 / n_methods as f64;
    for (mi, ((method, header), color)) in COLUMNS.iter().zip(METHOD_COLORS).enumerate() {
        let mut bars = Vec::new();
        let mut whiskers = Vec::new();
        for (pi, &prefix) in PREFIXES.iter().enumerate() {
            let Some(m) = eval.score("all", prefix, method) else {
                continue;
            };
            let x0 = pi as f64 + 0.1 + mi as f64 * width;
            let v = m.median_rel_error.min(y_max);
            bars.push(Rectangle::new(
                [(x0, 0.0), (x0 + width * 0.9, v)],
                color.filled(),
            ));
            let xm = x0 + width * 0.45;
            whiskers.push(PathElement::new(
                [
                    (xm, m.q25_rel_error.min(y_max)),
                    (xm, m.q75_rel_error.min(y_max)),
                ],
                BLACK.stroke_width(2),
            ));
        }
        chart
            .draw_series(bars)
            .map_err(plot_err)?
            .label(*header)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 16, y + 5)], color.filled()));
        chart.draw_series(whiskers).map_err(plot_err)?;
    }
    legend(&mut chart, SeriesLabelPosition::UpperLeft, 14)?;
    Ok(())
}
