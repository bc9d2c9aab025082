//! The failure report of `augur evaluate --task failure`: `DIR/<dataset>/failure/report.md`
//! with the evaluation table and three PNG plots beside it:
//!
//! - `roc.png`: ROC curves of the models and the baselines, with the chance diagonal and the
//!   10% false-positive-rate line;
//! - `pr.png`: precision–recall curves, with the test base rate (no skill);
//! - `reliability.png`: the reliability diagram of the calibrated probabilities (observed
//!   failed share per predicted-probability bin, against y = x).
//!
//! Also the table `augur evaluate --task failure` and `augur train --task failure` print.
//! Drawn with the shared helpers of [`super::plot`] (embedded font, PNG encoder).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context;
use augur_predictor::failure::{
    pr_curve, reliability, roc_curve, MethodProbabilities, METHOD_GBDT, METHOD_SVM, RECALL_AT_FPR,
};
use augur_predictor::failure::{CandidateScores, FailureEvalRow};
use augur_predictor::FailureEvaluation;
use plotters::prelude::*;

use super::folder_slug;
use super::plot::{legend, plot_err, render, Area, XyChart, FAMILY};

/// File names of the plots, in report order.
pub const PLOTS: [&str; 3] = ["roc.png", "pr.png", "reliability.png"];

const COLORS: [RGBColor; 4] = [
    RGBColor(127, 127, 127),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(31, 119, 180),
];

/// Reliability bins.
const BINS: usize = 10;

/// Writes `dir/<slug of name>/failure/report.md` and the plots; returns that folder.
pub fn write(dir: &Path, name: &str, eval: &FailureEvaluation) -> anyhow::Result<PathBuf> {
    let out = dir.join(folder_slug(name, true)).join("failure");
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    type Plot = fn(&Area, &str, &FailureEvaluation) -> anyhow::Result<()>;
    let plots: [(&str, Plot); 3] = [
        (PLOTS[0], plot_roc),
        (PLOTS[1], plot_pr),
        (PLOTS[2], plot_reliability),
    ];
    for (file, draw) in plots {
        let path = out.join(file);
        let png = render(|area| draw(area, name, eval))
            .with_context(|| format!("drawing {}", path.display()))?;
        std::fs::write(&path, png).with_context(|| format!("writing {}", path.display()))?;
    }
    let path = out.join("report.md");
    std::fs::write(&path, markdown(name, eval))
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(out)
}

fn num(v: f64, digits: usize) -> String {
    if v.is_finite() {
        format!("{v:.digits$}")
    } else {
        "-".into()
    }
}

fn pct(v: f64) -> String {
    if v.is_finite() {
        format!("{:.1}%", 100.0 * v)
    } else {
        "-".into()
    }
}

/// `0.91–0.97`, or `-`.
fn interval(r: &FailureEvalRow) -> String {
    r.metrics
        .roc_auc_95
        .map_or("-".into(), |(lo, hi)| format!("{lo:.2}–{hi:.2}"))
}

/// The line under the table: which model is served and how each is calibrated.
fn served_line(eval: &FailureEvaluation) -> String {
    let past = |c: &CandidateScores| {
        c.past_rate
            .map_or(String::new(), |p| format!(", past rate {}", num(p, 3)))
    };
    let chosen = match (&eval.validation_roc_auc, &eval.validation_pr_auc) {
        (Some(r), Some(p)) => format!(
            "ROC-AUC on {} out-of-sample training scores, {} failed{}: svm {}, gbdt {}{}; PR-AUC there: svm {}, gbdt {}{}",
            eval.training.calibration_jobs,
            eval.training.calibration_failed,
            slice_words(eval),
            num(r.svm, 3),
            num(r.gbdt, 3),
            past(r),
            num(p.svm, 3),
            num(p.gbdt, 3),
            past(p),
        ),
        _ => format!(
            "ROC-AUC on {} out-of-sample training scores, {} failed{}: svm {}, gbdt {}",
            eval.training.calibration_jobs,
            eval.training.calibration_failed,
            slice_words(eval),
            num(eval.validation_auc.0, 3),
            num(eval.validation_auc.1, 3),
        ),
    };
    format!(
        "served: {} ({chosen}; uncalibrated scores on the test jobs: svm {}, gbdt {}); calibration: svm {}, gbdt {}{}; svm: {} support vectors from {} jobs; gbdt: {} trees",
        eval.served.name(),
        num(eval.raw_test_auc.0, 3),
        num(eval.raw_test_auc.1, 3),
        eval.svm_calibration,
        eval.gbdt_calibration,
        eval.past_rate_calibration
            .as_ref()
            .map_or(String::new(), |p| format!(", past rate of the {p}")),
        eval.svm_support_vectors,
        eval.training.svm_rows,
        eval.gbdt_trees
    )
}

/// Where the calibration scores came from.
fn slice_words(eval: &FailureEvaluation) -> &'static str {
    if eval.training.cross_fitted {
        ", cross-fitted: the newest 20% held too few failures"
    } else {
        ", the newest 20% of the training period"
    }
}

/// The printed table: the split, the base rates, one line per method, the served line.
pub fn table(name: &str, eval: &FailureEvaluation) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "failure · {name} · time-ordered split: {} train / {} test labelled jobs ({} without a known outcome, not labelled)",
        eval.n_train, eval.n_test, eval.n_censored
    );
    let _ = writeln!(
        s,
        "  base rate: {} train, {} test ({} failed test jobs)",
        pct(eval.base_rate_train),
        pct(eval.base_rate_test),
        eval.failed_test
    );
    let _ = writeln!(
        s,
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
        let _ = writeln!(
            s,
            "  {:<44} {:>7} {:>11} {:>7} {:>10} {:>7} {:>6} {:>8} {:>10}",
            r.method,
            num(r.metrics.roc_auc, 3),
            interval(r),
            num(r.metrics.pr_auc, 3),
            pct(r.metrics.recall_at_10fpr),
            num(r.metrics.brier, 4),
            num(r.metrics.ece, 3),
            r.metrics.train_s.map_or("-".into(), |v| num(v, 2)),
            r.metrics.predict_us.map_or("-".into(), |v| num(v, 2)),
        );
    }
    let _ = writeln!(s, "{}", served_line(eval));
    let _ = writeln!(s);
    s
}

fn markdown(name: &str, eval: &FailureEvaluation) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# Failure prediction · {name}\n");
    let _ = writeln!(
        s,
        "Time-ordered split of all jobs by submit time (first 80% / last 20%); labelled jobs: \
         {} train / {} test; {} jobs have no known outcome (still running or pending at the \
         trace end, or no status) and are never labelled. Failed = `failed`; not failed = \
         `completed` or `killed`. Base rate {:.1}% in training, {:.1}% in test ({} failed test \
         jobs). Written by augur {} on {}.\n",
        eval.n_train,
        eval.n_test,
        eval.n_censored,
        100.0 * eval.base_rate_train,
        100.0 * eval.base_rate_test,
        eval.failed_test,
        env!("CARGO_PKG_VERSION"),
        chrono::Utc::now().format("%Y-%m-%d %H:%M UTC")
    );
    let _ = writeln!(
        s,
        "| method | ROC-AUC | 95% CI | PR-AUC | recall @ 10% FPR | Brier | ECE | train s | predict µs |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for r in &eval.rows {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {:.1}% | {} | {} | {} | {} |",
            r.method,
            num(r.metrics.roc_auc, 3),
            interval(r),
            num(r.metrics.pr_auc, 3),
            100.0 * r.metrics.recall_at_10fpr,
            num(r.metrics.brier, 4),
            num(r.metrics.ece, 3),
            r.metrics.train_s.map_or("-".into(), |v| num(v, 2)),
            r.metrics.predict_us.map_or("-".into(), |v| num(v, 2)),
        );
    }
    let _ = writeln!(
        s,
        "\n{}\n\nPR-AUC is average precision (its no-skill value is the test base rate); the 95% \
         CI is a bootstrap over test jobs; ECE = job-weighted mean |predicted − observed| over \
         10 probability bins.\n",
        served_line(eval)
    );
    let _ = writeln!(
        s,
        "## ROC\n\n![ROC curves]({})\n\n## Precision–recall\n\n![PR curves]({})\n\n\
         ## Calibration\n\n![reliability diagram]({})\n",
        PLOTS[0], PLOTS[1], PLOTS[2]
    );
    let _ = writeln!(
        s,
        "| model | bin | jobs | mean predicted | observed failed share |\n|---|---|---:|---:|---:|"
    );
    for mp in models(eval) {
        for b in reliability(&mp.probs, &eval.test_labels, BINS) {
            let _ = writeln!(
                s,
                "| {} | {:.1}–{:.1} | {} | {:.3} | {:.3} |",
                mp.method, b.lo, b.hi, b.jobs, b.mean_predicted, b.observed
            );
        }
    }
    s
}

/// The two models' probabilities (not the baselines).
fn models(eval: &FailureEvaluation) -> impl Iterator<Item = &MethodProbabilities> {
    eval.test_probs
        .iter()
        .filter(|m| m.method == METHOD_SVM || m.method == METHOD_GBDT)
}

/// A chart over [0, 1] × [0, 1] with its mesh drawn.
fn unit_chart<'a, 'b>(
    area: &'a Area<'b>,
    caption: String,
    x_desc: &str,
    y_desc: &str,
) -> anyhow::Result<XyChart<'a, 'b>> {
    let mut chart = ChartBuilder::on(area)
        .caption(caption, (FAMILY, 22))
        .margin(12)
        .x_label_area_size(48)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..1f64, 0f64..1f64)
        .map_err(plot_err)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .label_style((FAMILY, 14))
        .draw()
        .map_err(plot_err)?;
    Ok(chart)
}

fn plot_roc(area: &Area, name: &str, eval: &FailureEvaluation) -> anyhow::Result<()> {
    let mut chart = unit_chart(
        area,
        format!("{name}: ROC (test jobs)"),
        "false-positive rate",
        "true-positive rate (recall)",
    )?;
    chart
        .draw_series(DashedLineSeries::new(
            [(0.0, 0.0), (1.0, 1.0)],
            8,
            6,
            BLACK.stroke_width(1),
        ))
        .map_err(plot_err)?
        .label("chance")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], BLACK.stroke_width(1)));
    chart
        .draw_series(DashedLineSeries::new(
            [(RECALL_AT_FPR, 0.0), (RECALL_AT_FPR, 1.0)],
            4,
            4,
            BLACK.mix(0.5).stroke_width(1),
        ))
        .map_err(plot_err)?;
    for ((mp, row), color) in eval
        .test_probs
        .iter()
        .zip(&eval.rows)
        .zip(COLORS.iter().cycle())
    {
        let pts = roc_curve(&mp.probs, &eval.test_labels);
        let c = *color;
        chart
            .draw_series(LineSeries::new(pts, c.stroke_width(2)))
            .map_err(plot_err)?
            .label(format!(
                "{} (AUC {})",
                mp.method,
                num(row.metrics.roc_auc, 3)
            ))
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], c.stroke_width(2)));
    }
    legend(&mut chart, SeriesLabelPosition::LowerRight, 14)
}

fn plot_pr(area: &Area, name: &str, eval: &FailureEvaluation) -> anyhow::Result<()> {
    let mut chart = unit_chart(
        area,
        format!("{name}: precision–recall (test jobs)"),
        "recall",
        "precision",
    )?;
    let base = eval.base_rate_test;
    chart
        .draw_series(DashedLineSeries::new(
            [(0.0, base), (1.0, base)],
            8,
            6,
            BLACK.stroke_width(1),
        ))
        .map_err(plot_err)?
        .label(format!("no skill (base rate {:.1}%)", 100.0 * base))
        .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], BLACK.stroke_width(1)));
    for ((mp, row), color) in eval
        .test_probs
        .iter()
        .zip(&eval.rows)
        .zip(COLORS.iter().cycle())
    {
        let mut pts = vec![(
            0.0,
            pr_curve(&mp.probs, &eval.test_labels)
                .first()
                .map_or(1.0, |p| p.1),
        )];
        pts.extend(pr_curve(&mp.probs, &eval.test_labels));
        let c = *color;
        chart
            .draw_series(LineSeries::new(pts, c.stroke_width(2)))
            .map_err(plot_err)?
            .label(format!("{} (AP {})", mp.method, num(row.metrics.pr_auc, 3)))
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], c.stroke_width(2)));
    }
    let pos = if base > 0.5 {
        SeriesLabelPosition::LowerLeft
    } else {
        SeriesLabelPosition::UpperRight
    };
    legend(&mut chart, pos, 14)
}

fn plot_reliability(area: &Area, name: &str, eval: &FailureEvaluation) -> anyhow::Result<()> {
    let mut chart = unit_chart(
        area,
        format!("{name}: calibration of failure probabilities (test jobs)"),
        "predicted probability",
        "observed failed share",
    )?;
    chart
        .draw_series(LineSeries::new(
            [(0.0, 0.0), (1.0, 1.0)],
            BLACK.stroke_width(1),
        ))
        .map_err(plot_err)?
        .label("perfect calibration")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], BLACK.stroke_width(1)));
    let n = eval.test_labels.len().max(1) as f64;
    for (mp, color) in models(eval).zip(COLORS[2..].iter()) {
        let bins = reliability(&mp.probs, &eval.test_labels, BINS);
        let pts: Vec<(f64, f64)> = bins
            .iter()
            .map(|b| (b.mean_predicted, b.observed))
            .collect();
        let c = *color;
        chart
            .draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))
            .map_err(plot_err)?
            .label(format!("{} (point area ∝ jobs)", mp.method))
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], c.stroke_width(2)));
        chart
            .draw_series(bins.iter().map(|b| {
                let r = (3.0 + 20.0 * (b.jobs as f64 / n).sqrt()) as i32;
                Circle::new((b.mean_predicted, b.observed), r, c.mix(0.6).filled())
            }))
            .map_err(plot_err)?;
    }
    legend(&mut chart, SeriesLabelPosition::UpperLeft, 14)
}
