//! `augur eta`: asks a running service (`GET /v1/eta`) when queued jobs will start and end,
//! and prints one line per job: Augur's predicted start (median and 95% bound), the
//! scheduler's own estimate beside it (Slurm's `squeue --start`, under `--backend slurm`) and
//! the predicted end. With `--why`, under each job: why it waits (Augur's reading of the
//! queue and, under `--backend slurm`, Slurm's reason).
//!
//! The request is plain HTTP/1.1 over TCP (the service serves plain HTTP; put a TLS proxy in
//! front of it on a shared network and run `augur eta` where the service listens).

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use anyhow::{bail, Context};

use crate::cli::EtaArgs;
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
    if args.why {
        query.push("why=true".into());
    }
    let path = if query.is_empty() {
        "/v1/eta".to_string()
    } else {
        format!("/v1/eta?{}", query.join("&"))
    };
    let (status, body) = get(&args.url, &path, args.token.as_deref())?;
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
        if let Some(why) = &j.why {
            let _ = writeln!(s, "    why: {}", why.reading);
            if scheduler {
                let reason = why.scheduler_reason.as_deref().unwrap_or("-");
                let _ = writeln!(s, "    Slurm's reason: {reason}");
            }
        }
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
    let rel = crate::serve::state::why::span(t - now);
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

/// `GET url+path` (plain HTTP): the status and the body.
fn get(url: &str, path: &str, token: Option<&str>) -> anyhow::Result<(u16, String)> {
    let Some(rest) = url.strip_prefix("http://") else {
        bail!("--url `{url}`: give the service's http:// address (e.g. http://127.0.0.1:8080)");
    };
    let host = rest.trim_end_matches('/');
    if host.is_empty() || host.contains('/') {
        bail!("--url `{url}`: give the service's address without a path");
    }
    let with_port = if host
        .rsplit(':')
        .next()
        .is_some_and(|p| p.parse::<u16>().is_ok())
    {
        host.to_string()
    } else {
        format!("{host}:80")
    };
    let addr = with_port
        .to_socket_addrs()
        .with_context(|| format!("--url `{url}`: cannot resolve {with_port}"))?
        .next()
        .with_context(|| format!("--url `{url}`: {with_port} has no address"))?;
    let mut stream =
        TcpStream::connect_timeout(&addr, Duration::from_secs(5)).with_context(|| {
            format!("cannot reach the service at {url} (is `augur serve` running?)")
        })?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nAccept: application/json\r\n{auth}Connection: close\r\n\r\n"
    )?;
    let mut raw = Vec::new();
    stream
        .read_to_end(&mut raw)
        .with_context(|| format!("reading the answer of {url}{path}"))?;
    parse_response(&raw).with_context(|| format!("the answer of {url}{path}"))
}

/// Status and body of an HTTP/1.1 response (identity or chunked body).
fn parse_response(raw: &[u8]) -> anyhow::Result<(u16, String)> {
    let text = String::from_utf8_lossy(raw);
    let Some((head, body)) = text.split_once("\r\n\r\n") else {
        bail!("no HTTP header");
    };
    let status = head
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse::<u16>().ok())
        .context("no HTTP status line")?;
    let chunked = head.lines().any(|l| {
        let l = l.to_ascii_lowercase();
        l.starts_with("transfer-encoding:") && l.contains("chunked")
    });
    if !chunked {
        return Ok((status, body.to_string()));
    }
    let mut out = String::new();
    let mut rest = body;
    loop {
        let (size, after) = rest.split_once("\r\n").context("a truncated chunk")?;
        let size = usize::from_str_radix(size.split(';').next().unwrap_or("").trim(), 16)
            .context("a bad chunk size")?;
        if size == 0 {
            return Ok((status, out));
        }
        let chunk = after.get(..size).context("a truncated chunk")?;
        out.push_str(chunk);
        rest = after.get(size + 2..).unwrap_or("");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn responses_and_times_read_and_print() {
        let (s, b) = parse_response(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}").unwrap();
        assert_eq!((s, b.as_str()), (200, "{}"));
        let raw = b"HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
        let (s, b) = parse_response(raw).unwrap();
        assert_eq!((s, b.as_str()), (404, "abcde"));
        assert!(parse_response(b"garbage").is_err());
        assert_eq!(when(Some(3_725.0), 0.0), "01:02:05 (in 1h02m)");
        assert_eq!(when(None, 0.0), "-");
        assert_eq!(encode("a b/c,1"), "a%20b%2Fc,1");
    }
}
