//! The drawing machinery every report plot shares: [`render`] draws into an in-memory RGB
//! buffer with `plotters` and encodes it as PNG; text uses DejaVu Sans embedded in the binary
//! (`assets/fonts/`, Bitstream Vera license), so no system font is needed. Also the reports'
//! legend style and the frame of the predicted-vs-actual plots.

use std::sync::OnceLock;

use anyhow::{anyhow, Context};
use augur_datasets::split::clamp_duration;
use plotters::prelude::*;

const WIDTH: u32 = 900;
const HEIGHT: u32 = 640;
const FONT: &[u8] = include_bytes!("../../assets/fonts/DejaVuSans.ttf");
/// The embedded font's family name in plot text styles.
pub const FAMILY: &str = "sans-serif";

/// A bitmap plot area, as [`render`] hands it to a drawing function.
pub type Area<'a> = DrawingArea<BitMapBackend<'a>, plotters::coord::Shift>;

/// Draws the chart's series legend at `pos` in the reports' style (translucent white box,
/// black border, `font_px` text).
pub fn legend<'a, 'b: 'a, CT: plotters::coord::CoordTranslate>(
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

pub fn plot_err<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow!("plot: {e}")
}

/// Draws into an RGB buffer with `draw` and encodes it as PNG (report and simulate plots).
pub fn render(draw: impl FnOnce(&Area) -> anyhow::Result<()>) -> anyhow::Result<Vec<u8>> {
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

/// Axis range `[lo, hi]` on a log scale covering the values (≥ 1 s), one decade rounded.
pub fn log_range(values: impl Iterator<Item = f64>) -> (f64, f64) {
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
pub fn pred_vs_actual_chart<'a, 'b>(
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
pub fn draw_identity_and_2x_band(
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

/// A chart with linear x and y axes.
pub type XyChart<'a, 'b> = ChartContext<
    'a,
    BitMapBackend<'b>,
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
>;

/// A chart with logarithmic x and y axes.
pub type LogLogChart<'a, 'b> = ChartContext<
    'a,
    BitMapBackend<'b>,
    Cartesian2d<
        plotters::coord::combinators::LogCoord<f64>,
        plotters::coord::combinators::LogCoord<f64>,
    >,
>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_ranges_round_to_decades() {
        assert_eq!(log_range([3.0, 4000.0].into_iter()), (1.0, 10000.0));
        assert_eq!(log_range(std::iter::empty()), (1.0, 10.0));
    }
}
