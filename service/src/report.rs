//! The report folder of `augur evaluate`: `DIR/<dataset>/report.md` with the evaluation
//! table, and three PNG plots beside it:
//!
//! - `pred_vs_actual.png`: predicted vs actual run time of the test jobs (log-log), with
//!   y = x and the factor-of-2 band;
//! - `error_cdf.png`: the CDF of |ln pred − ln actual| for the model and the baselines;
//! - `coverage.png`: the share of test jobs inside the 80% interval per predicted-duration
//!   decile, static and online conformal, against the nominal 80%.
//!
//! Plots are drawn with `plotters` into an in-memory RGB buffer and written with `png`; text
//! uses DejaVu Sans embedded in the binary (`assets/fonts/`, Bitstream Vera license), so no
//! system font is needed.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use anyhow::{anyhow, Context};
use augur_datasets::split::clamp_duration;
use augur_predictor::metrics::coverage;
use augur_predictor::{EvalRow, RuntimeEvaluation};
use plotters::prelude::*;

use crate::evaluate::PeerRow;

const WIDTH: u32 = 900;
const HEIGHT: u32 = 640;
const FONT: &[u8] = include_bytes!("../assets/fonts/DejaVuSans.ttf");
/// The embedded font's family name in plot text styles.
pub(crate) const FAMILY: &str = "sans-serif";

/// File names of the plots, in the order they appear in the report.
pub const PLOTS: [&str; 3] = ["pred_vs_actual.png", "error_cdf.png", "coverage.png"];

/// Writes `dir/<slug of name>/report.md` and the plots; returns the folder.
pub fn write(
    dir: &Path,
    name: &str,
    eval: &RuntimeEvaluation,
    peers: &[PeerRow],
) -> anyhow::Result<PathBuf> {
    let out = dir.join(slug(name));
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

/// A dataset name or trace path as a folder name: `mira`, `my-trace.csv`.
fn slug(name: &str) -> String {
    folder_slug(name, true)
}

/// A plain folder-name part for a dataset, trace path or policy name: its file name with
/// anything but ASCII letters, digits, `-`, `_` (and `.` when `keep_dots`) replaced by `_`;
/// `trace` when nothing (or only dots) is left.
pub(crate) fn folder_slug(name: &str, keep_dots: bool) -> String {
    let base = Path::new(name)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| name.to_string());
    let s: String = base
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_') || (keep_dots && c == '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() || s.chars().all(|c| c == '.') {
        "trace".into()
    } else {
        s
    }
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
            r.mae_log,
            r.within2x * 100.0,
            fmt_opt(r.coverage80, 1, 100.0),
            fmt_opt(r.train_s, 2, 1.0),
            fmt_opt(r.predict_us, 2, 1.0)
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
            crate::render::duration(d.upper_pred),
            d.jobs,
            d.static_cov * 100.0,
            fmt_opt(d.online_cov, 1, 100.0)
        );
    }
    s
}

/// A bitmap plot area, as [`render`] hands it to a drawing function.
pub(crate) type Area<'a> = DrawingArea<BitMapBackend<'a>, plotters::coord::Shift>;
type PlotFn = fn(&Area, &str, &RuntimeEvaluation, &[Decile]) -> anyhow::Result<()>;

/// Draws the chart's series legend at `pos` in the reports' style (translucent white box,
/// black border, `font_px` text).
pub(crate) fn legend<'a, 'b: 'a, CT: plotters::coord::CoordTranslate>(
    chart: &mut ChartContext<'a, BitMapBackend<'b>, CT>,
    pos: SeriesLabelPosition,
    font_px: u32,
) -> anyhow::Result<()> {
    chart
        .configure_series_labels()
        .position(pos)
        .label_font((FAMILY, font_px))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(plot_err)
}

pub(crate) fn plot_err<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow!("plot: {e}")
}

/// Draws into an RGB buffer with `draw` and encodes it as PNG (report and simulate plots).
pub(crate) fn render(draw: impl FnOnce(&Area) -> anyhow::Result<()>) -> anyhow::Result<Vec<u8>> {
    static FONT_OK: OnceLock<bool> = OnceLock::new();
    let font_ok = *FONT_OK
        .get_or_init(|| plotters::style::register_font(FAMILY, FontStyle::Normal, FONT).is_ok());
    if !font_ok {
        return Err(anyhow!("the embedded plot font does not load"));
    }
    let mut buf = vec![255u8; (WIDTH * HEIGHT * 3) as usize];
    {
        let area = BitMapBackend::with_buffer(&mut buf, (WIDTH, HEIGHT)).into_drawing_area();
        area.fill(&WHITE).map_err(plot_err)?;
        draw(&area)?;
        area.present().map_err(plot_err)?;
    }
    let mut png_bytes = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut png_bytes, WIDTH, HEIGHT);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        enc.set_compression(png::Compression::Best);
        let mut w = enc.write_header().context("png header")?;
        w.write_image_data(&buf).context("png data")?;
        w.finish().context("png end")?;
    }
    Ok(png_bytes)
}

const MODEL: RGBColor = RGBColor(31, 119, 180);
const ONLINE: RGBColor = RGBColor(214, 39, 40);
const BASELINES: [RGBColor; 3] = [
    RGBColor(127, 127, 127),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
];

/// Axis range `[lo, hi]` on a log scale covering the values (≥ 1 s), one decade rounded.
pub(crate) fn log_range(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = values
        .filter(|v| v.is_finite())
        .map(clamp_duration)
        .fold((f64::INFINITY, 0.0f64), |(a, b), v| (a.min(v), b.max(v)));
    if !lo.is_finite() || hi <= 0.0 {
        return (1.0, 10.0);
    }
    let lo = 10f64.powf(lo.log10().floor());
    let hi = 10f64.powf(hi.log10().ceil()).max(lo * 10.0);
    (lo, hi)
}

/// A log-log chart over `range` on both axes (actual on x, predicted on y) with its mesh
/// drawn: the frame of every predicted-vs-actual plot.
pub(crate) fn pred_vs_actual_chart<'a, 'b>(
    area: &'a Area<'b>,
    caption: String,
    (x_desc, y_desc): (&str, &str),
    (lo, hi): (f64, f64),
) -> anyhow::Result<LogLogChart<'a, 'b>> {
    let mut chart = ChartBuilder::on(area)
        .caption(caption, (FAMILY, 22))
        .margin(12)
        .x_label_area_size(48)
        .y_label_area_size(70)
        .build_cartesian_2d((lo..hi).log_scale(), (lo..hi).log_scale())
        .map_err(plot_err)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .x_label_formatter(&|v| format!("{v:.0e}"))
        .y_label_formatter(&|v| format!("{v:.0e}"))
        .label_style((FAMILY, 14))
        .draw()
        .map_err(plot_err)?;
    Ok(chart)
}

/// Draws y = x and the factor-of-2 band (y = 2x, y = x/2) over `range` on a
/// [`pred_vs_actual_chart`], with their legend entries.
pub(crate) fn draw_identity_and_2x_band(
    chart: &mut LogLogChart<'_, '_>,
    (lo, hi): (f64, f64),
) -> anyhow::Result<()> {
    chart
        .draw_series(LineSeries::new([(lo, lo), (hi, hi)], BLACK.stroke_width(2)))
        .map_err(plot_err)?
        .label("y = x")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], BLACK.stroke_width(2)));
    for (k, label) in [(2.0, Some("2x band")), (0.5, None)] {
        let line = [
            (lo.max(lo / k), (lo * k).max(lo)),
            ((hi / k).min(hi), (hi * k).min(hi)),
        ];
        let s = chart
            .draw_series(DashedLineSeries::new(line, 8, 6, BLACK.stroke_width(1)))
            .map_err(plot_err)?;
        if let Some(l) = label {
            s.label(l)
                .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], BLACK.stroke_width(1)));
        }
    }
    Ok(())
}

/// A chart with logarithmic x and y axes.
pub(crate) type LogLogChart<'a, 'b> = ChartContext<
    'a,
    BitMapBackend<'b>,
    Cartesian2d<
        plotters::coord::combinators::LogCoord<f64>,
        plotters::coord::combinators::LogCoord<f64>,
    >,
>;

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_are_plain_folder_names() {
        assert_eq!(slug("mira"), "mira");
        assert_eq!(slug("/data/my trace.csv"), "my_trace.csv");
        assert_eq!(slug(".."), "trace");
        // simulate's flavour replaces dots too
        assert_eq!(folder_slug("/data/my trace.csv", false), "my_trace_csv");
        assert_eq!(folder_slug("", false), "trace");
    }

    #[test]
    fn log_ranges_round_to_decades() {
        assert_eq!(log_range([3.0, 4000.0].into_iter()), (1.0, 10000.0));
        assert_eq!(log_range(std::iter::empty()), (1.0, 10.0));
    }
}
