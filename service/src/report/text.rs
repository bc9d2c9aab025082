//! Text formatting shared by the tables: counts, byte sizes, durations, dates, bars.

use augur_datasets::TimeOrigin;

/// `82247` → `82,247`.
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

/// `1234567` → `1.2 MB`.
pub fn bytes(n: u64) -> String {
    let n = n as f64;
    if n < 1e3 {
        format!("{n:.0} B")
    } else if n < 1e6 {
        format!("{:.1} kB", n / 1e3)
    } else if n < 1e9 {
        format!("{:.1} MB", n / 1e6)
    } else {
        format!("{:.1} GB", n / 1e9)
    }
}

/// Seconds as a short human duration: `45s`, `12.5m`, `3.2h`, `4.1d`.
pub fn duration(secs: f64) -> String {
    let a = secs.abs();
    if a < 60.0 {
        format!("{secs:.0}s")
    } else if a < 3600.0 {
        format!("{:.1}m", secs / 60.0)
    } else if a < 86400.0 {
        format!("{:.1}h", secs / 3600.0)
    } else {
        format!("{:.1}d", secs / 86400.0)
    }
}

/// A point in time of a trace: a UTC date for Unix times, `+N days` for relative ones.
pub fn instant(t: f64, origin: TimeOrigin) -> String {
    match origin {
        TimeOrigin::Unix => chrono::DateTime::from_timestamp(t as i64, 0)
            .map(|d| d.format("%Y-%m-%d %H:%M UTC").to_string())
            .unwrap_or_else(|| format!("{t}")),
        TimeOrigin::Relative => format!("t+{}", duration(t)),
    }
}

/// A bar of `width` cells for `value / max`.
pub fn bar(value: u64, max: u64, width: usize) -> String {
    if max == 0 {
        return String::new();
    }
    let cells = ((value as f64 / max as f64) * width as f64).round() as usize;
    "█".repeat(cells.max(usize::from(value > 0)))
}

/// Coverage per group of jobs as markdown table rows (after a header), flagging a group
/// more than 5 points below `nominal` (its misses would hide in the overall figure).
pub fn group_coverage(groups: &[augur_predictor::metrics::GroupCoverage], nominal: f64) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "| dimension | group | jobs | static coverage | online coverage |\n|---|---|---:|---:|---:|"
    );
    let flag = |c: f64| if c < nominal - 0.05 { " ⚠" } else { "" };
    for g in groups {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {:.1}%{} | {:.1}%{} |",
            g.dimension,
            g.group,
            thousands(g.jobs as u64),
            100.0 * g.coverage_static,
            flag(g.coverage_static),
            100.0 * g.coverage_online,
            flag(g.coverage_online)
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(thousands(82247), "82,247");
        assert_eq!(thousands(100), "100");
        assert_eq!(thousands(1_000_000), "1,000,000");
        assert_eq!(duration(30.0), "30s");
        assert_eq!(duration(5400.0), "1.5h");
        assert_eq!(instant(0.0, TimeOrigin::Unix), "1970-01-01 00:00 UTC");
        assert_eq!(bar(5, 10, 10), "█████");
        assert_eq!(bar(1, 1000, 10), "█");
    }
}
