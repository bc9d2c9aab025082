//! The table of `augur evaluate --task queue-wait` (no report folder yet).

use std::fmt::Write as _;

use augur_predictor::{QueueWaitEvaluation, WaitEvalRow};

use super::text::group_coverage;

/// The printed table: one line per method and peer, then the risk split's groups.
pub fn table(name: &str, eval: &QueueWaitEvaluation, peers: &[WaitEvalRow]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "queue wait · {name} · time-ordered split: {} train / {} test jobs (capacity {:.0} {} inferred from the training period)",
        eval.n_train,
        eval.n_test,
        eval.capacity,
        eval.resource.name()
    );
    let _ = writeln!(
        s,
        "  {:<56} {:>9} {:>8} {:>9} {:>8} {:>9} {:>8} {:>11} {:>8} {:>11}",
        "method",
        "MAE s",
        "within60",
        "within600",
        "within2x",
        "|log10|",
        "cover95%",
        "median bnd",
        "train s",
        "predict µs"
    );
    let pct = |v: f64| {
        if v.is_finite() {
            format!("{:.1}%", 100.0 * v)
        } else {
            "-".into()
        }
    };
    let num = |v: Option<f64>, digits: usize| match v {
        Some(v) if v.is_finite() => format!("{v:.digits$}"),
        _ => "-".into(),
    };
    for row in eval.rows.iter().chain(peers) {
        let r = &row.metrics;
        let _ = writeln!(
            s,
            "  {:<56} {:>9} {:>8} {:>9} {:>8} {:>9} {:>8} {:>11} {:>8} {:>11}",
            row.method,
            num(Some(r.mae_s), 0),
            pct(r.within60),
            pct(r.within600),
            pct(r.within2x.unwrap_or(f64::NAN)),
            num(r.mae_log10, 2),
            r.coverage95
                .map_or("-".into(), |c| format!("{:.1}", 100.0 * c)),
            num(r.median_bound_s, 0),
            num(r.train_s, 2),
            num(r.predict_us, 2),
        );
    }
    for (how, m) in [
        ("static", &eval.risk_split_static),
        ("online", &eval.risk_split_online),
    ] {
        let Some(m) = m else { continue };
        let _ = writeln!(
        s,
            "  risk split, {how} ({} score, nominal low share {:.0}%, levels {:.1}% / {:.1}%): low group {} of jobs cover {:.1}% at median {:.0} s; high group cover {:.1}% at median {:.0} s; overall {:.1}% at median {:.0} s",
            m.score,
            100.0 * m.share_low_nominal,
            100.0 * m.level_low,
            100.0 * m.level_high,
            pct(m.share_low),
            100.0 * m.coverage_low,
            m.median_bound_low_s,
            100.0 * m.coverage_high,
            m.median_bound_high_s,
            100.0 * m.coverage,
            m.median_bound_s,
        );
    }
    if !eval.coverage_by_group.is_empty() {
        let _ = writeln!(
            s,
            "95% bound coverage per group of test jobs (the served bound, static and online):"
        );
        s.push_str(&group_coverage(&eval.coverage_by_group, 0.95));
    }
    let _ = writeln!(s);
    s
}
