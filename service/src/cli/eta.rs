//! `augur eta`: asks a running service (`GET /v1/eta`) when queued jobs will start and end,
//! and prints one line per job: Augur's predicted start (median and 95% bound), the
//! scheduler's own estimate beside it (Slurm's `squeue --start`, under `--backend slurm`) and
//! the predicted end.
//!
//! The request goes through the commands' HTTP client ([`super::client`]).

use anyhow::{bail, Context};

use crate::cli::{client, EtaArgs};
use crate::serve::http::api::eta::{EtaView, JobEta};

/// `augur eta`.
pub fn run(args: &EtaArgs) -> anyhow::Result<()> {
    let mut query = Vec::new();
    if let Some(u) = &args.user {
        query.push(format!("user={}", encode(u)));
    }
    if !args.jobs.is_empty() {
        query.push(format!("job={}", encode(&args.jobs.join(","))));
    }
    let path = if query.is_empty() {
        "/v1/eta".to_string()
    } else {
        format!("/v1/eta?{}", query.join("&"))
    };
    let (status, body) = client::request(&args.url, "GET", &path, args.token.as_deref(), None)?;
    if status != 200 {
        bail!("{}{path} answered {status}: {}", args.url, body.trim());
    }
    if args.json {
        println!("{body}");
        return Ok(());
    }
    let view: EtaView = serde_json::from_str(&body).with_context(|| {
        format!(
            "{}{path} answered something that is not an ETA list",
            args.url
        )
    })?;
    print!("{}", table(&view));
    Ok(())
}

/// The printed table: one line per queued job, times as `HH:MM:SS UTC (in 5m)`.
fn table(view: &EtaView) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    if view.jobs.is_empty() {
        let _ = writeln!(s, "no queued job matches");
        return s;
    }
    let scheduler = view.backend == "slurm";
    let _ = write!(
        s,
        "{:<14} {:<10} {:<24} {:<24}",
        "job", "user", "start (median)", "start (95% bound)"
    );
    if scheduler {
        let _ = write!(s, " {:<24}", "Slurm's estimate");
    }
    let _ = writeln!(s, " {:<24}", "end (predicted)");
    for j in &view.jobs {
        let _ = write!(
            s,
            "{:<14} {:<10} {:<24} {:<24}",
            shown_id(j),
            j.user.as_deref().unwrap_or("-"),
            when(j.start, view.now),
            when(j.start_upper, view.now)
        );
        if scheduler {
            let _ = write!(s, " {:<24}", when(j.scheduler_start, view.now));
        }
        let _ = writeln!(s, " {:<24}", when(j.end, view.now));
    }
    s
}

fn shown_id(j: &JobEta) -> &str {
    j.slurm_job_id.as_deref().unwrap_or(&j.job_id)
}

/// `HH:MM:SS UTC (in 1h05m)`, the date too when not today; `-` for none.
fn when(t: Option<f64>, now: f64) -> String {
    let Some(t) = t.filter(|t| t.is_finite()) else {
        return "-".into();
    };
    let Some(at) = chrono::DateTime::from_timestamp(t as i64, 0) else {
        return "-".into();
    };
    let same_day = chrono::DateTime::from_timestamp(now as i64, 0)
        .is_some_and(|n| n.date_naive() == at.date_naive());
    let clock = if same_day {
        at.format("%H:%M:%S").to_string()
    } else {
        at.format("%Y-%m-%d %H:%M").to_string()
    };
    let d = (t - now).max(0.0) as u64;
    let rel = if d < 60 {
        format!("{d}s")
    } else if d < 3600 {
        format!("{}m", d / 60)
    } else if d < 86_400 {
        format!("{}h{:02}m", d / 3600, d % 3600 / 60)
    } else {
        format!("{}d{:02}h", d / 86_400, d % 86_400 / 3600)
    };
    format!("{clock} (in {rel})")
}

/// Percent-encodes a query value.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b',' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_and_queries_print() {
        assert_eq!(when(Some(3_725.0), 0.0), "01:02:05 (in 1h02m)");
        assert_eq!(when(None, 0.0), "-");
        assert_eq!(encode("a b/c,1"), "a%20b%2Fc,1");
    }
}
