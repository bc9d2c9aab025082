//! Convergence-predictor speed on the bundled MLPerf v1.0 curves (release, 2 cores): training
//! on the 80% split, one prediction per test prefix (4 curve-family fits + the Optimus peer
//! fit + 3 tree models), and the curve-fit ensemble alone.
//!
//! `cargo bench -p augur-predictor --bench convergence` (plain timing, no harness).

use std::time::Instant;

use augur_predictor::convergence::{
    load_bundled_mlperf, prefix_len, ConvergenceData, CurveEnsemble, PREFIXES,
};
use augur_predictor::ConvergenceTrainer;

fn percentile(v: &mut [f64], q: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * q).round() as usize]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let runs = load_bundled_mlperf()?;
    let data = ConvergenceData::split(&runs)?;
    let test: Vec<_> = data.test.iter().filter(|r| !r.points.is_empty()).collect();

    let t = Instant::now();
    let predictor = ConvergenceTrainer::default().train(&data.train)?;
    let train_s = t.elapsed().as_secs_f64();

    let mut predict_us = Vec::new();
    let mut fit_us = Vec::new();
    let mut sink = 0.0;
    for r in &test {
        for &share in &PREFIXES {
            let k = prefix_len(r.points.len(), share);
            let pts = &r.points[..k];
            let t = Instant::now();
            let p = predictor.predict(&r.context, pts)?;
            predict_us.push(t.elapsed().as_secs_f64() * 1e6);
            sink += p.remaining_s;
            let tt: Vec<f64> = pts.iter().map(|p| p.wall_time_s.max(0.0)).collect();
            let vv: Vec<f64> = pts.iter().map(|p| p.value).collect();
            let t = Instant::now();
            if let Ok(e) = CurveEnsemble::fit(&tt, &vv, p.direction) {
                sink += e.asymptote();
            }
            fit_us.push(t.elapsed().as_secs_f64() * 1e6);
        }
    }
    let n = predict_us.len();
    println!(
        "convergence · mlperf v1.0 · {} train runs, {} test prefixes",
        data.train.len(),
        n
    );
    println!(
        "  train (priors, features of every training prefix, 3 GBDTs + refits)  {train_s:.2} s"
    );
    println!(
        "  one prediction                          p50 {:.0} µs   p99 {:.0} µs",
        percentile(&mut predict_us, 0.5),
        percentile(&mut predict_us, 0.99)
    );
    println!(
        "  curve-fit ensemble alone (4 families)   p50 {:.0} µs   p99 {:.0} µs",
        percentile(&mut fit_us, 0.5),
        percentile(&mut fit_us, 0.99)
    );
    if sink.is_nan() {
        println!("(nan)");
    }
    Ok(())
}
