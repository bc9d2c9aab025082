//! `augur advise`: what to ask for. Reads a job's request from a Slurm batch script's
//! `#SBATCH` lines ([`sbatch`]) or from flags (flags override the script, as `sbatch`'s do),
//! asks a running service (`POST /v1/advise`, through [`super::client`]; the live queue
//! decides the waits) and prints its options as a table (or `--json`): predicted start
//! (median, 95% bound), run time (80% interval), finish, GPU-hours and what each run time
//! rests on, the earliest finish and the cheapest option near it marked.
//!
//! Bad input (a script with no `#SBATCH` line, a malformed value, a field the service
//! refuses with a 422) is a [`BadInput`]: the command exits 2 naming the file:line, the flag
//! or the field.

pub mod sbatch;

use anyhow::Context;
use serde_json::{json, Value};

use crate::cli::{client, AdviseArgs};
use crate::serve::advice::Advice;
use crate::serve::state::events::JobProfile;

/// Input the command cannot use (exit status 2): the message names the file:line, flag or
/// field at fault.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BadInput(pub String);

fn bad(msg: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(BadInput(msg.into()))
}

/// `augur advise`.
pub fn run(args: &AdviseArgs) -> anyhow::Result<()> {
    let body = request_body(args)?;
    let (status, text) = client::request(
        &args.url,
        "POST",
        "/v1/advise",
        args.token.as_deref(),
        Some(&body.to_string()),
    )?;
    if status == 422 {
        return Err(bad(refused(args, &text)));
    }
    if status != 200 {
        anyhow::bail!("{}/v1/advise answered {status}: {}", args.url, text.trim());
    }
    if args.json {
        println!("{text}");
        return Ok(());
    }
    let advice: Advice = serde_json::from_str(&text).with_context(|| {
        format!(
            "{}/v1/advise answered something that is not advice",
            args.url
        )
    })?;
    print!("{}", table(&advice));
    Ok(())
}

/// The JSON body of `POST /v1/advise` for the script and flags of `args`.
pub fn request_body(args: &AdviseArgs) -> anyhow::Result<Value> {
    let from_script = match &args.script {
        Some(path) => Some(sbatch::read(path).map_err(|e| bad(e.to_string()))?),
        None => None,
    };
    let mut profile = from_script
        .as_ref()
        .map(|r| r.profile.clone())
        .unwrap_or_default();
    apply_flags(args, &mut profile)?;
    if profile.user.is_none() && profile != JobProfile::default() {
        // the submitter, as sbatch would submit it
        profile.user = std::env::var("USER").ok().filter(|u| !u.is_empty());
    }
    let mut job = serde_json::Map::new();
    if let Some(id) = &args.job_id {
        job.insert("job_id".into(), json!(id));
    }
    if profile != JobProfile::default() {
        job.insert("profile".into(), serde_json::to_value(&profile)?);
    } else if args.job_id.is_none() {
        return Err(bad(
            "give a batch script (augur advise job.sbatch), profile flags (--gpus, --time, --partition, ...) or --job-id",
        ));
    }
    let mut body = json!({ "job": job });
    if args.min_gpus.is_some() || args.max_gpus.is_some() {
        body["gpus"] = json!({ "min": args.min_gpus, "max": args.max_gpus });
    }
    if !args.gpu_types.is_empty() {
        body["gpu_types"] = json!(args.gpu_types);
    }
    if !args.queues.is_empty() {
        body["queues"] = json!(args.queues);
    }
    Ok(body)
}

/// The profile flags over what the script said; a malformed value names its flag.
fn apply_flags(args: &AdviseArgs, p: &mut JobProfile) -> anyhow::Result<()> {
    let flag = |name: &str, v: &str, e: String| bad(format!("{name} `{v}`: {e}"));
    if let Some(v) = &args.gpus {
        let (t, n) = sbatch::typed_count(v).map_err(|e| flag("--gpus", v, e))?;
        p.num_gpus = Some(n);
        if t.is_some() {
            p.gpu_type = t;
        }
    }
    if let Some(v) = &args.gpu_type {
        p.gpu_type = Some(v.clone());
    }
    if let Some(v) = &args.nodes {
        p.num_nodes = Some(sbatch::count(v).map_err(|e| flag("--nodes", v, e))?);
    }
    if let Some(v) = &args.cpus {
        p.cpus = Some(sbatch::count(v).map_err(|e| flag("--cpus", v, e))?);
    }
    if let Some(v) = &args.mem {
        p.memory_mib = Some(sbatch::memory_mib(v).map_err(|e| flag("--mem", v, e))?);
    }
    if let Some(v) = &args.time {
        p.requested_time = sbatch::time_limit(v).map_err(|e| flag("--time", v, e))?;
    }
    let text = |dst: &mut Option<String>, v: &Option<String>| {
        if let Some(v) = v {
            *dst = Some(v.clone());
        }
    };
    text(&mut p.queue, &args.partition);
    text(&mut p.group, &args.account);
    text(&mut p.user, &args.user);
    text(&mut p.job_name, &args.job_name);
    Ok(())
}

/// What to say of a 422: the field the service names, with the flag or script it came
/// from.
fn refused(args: &AdviseArgs, body: &str) -> String {
    let v: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let field = v["error"]["field"].as_str().unwrap_or("");
    let message = v["error"]["message"].as_str().unwrap_or(body.trim());
    let script = args.script.as_ref().map(|p| p.display().to_string());
    let from = |flag: &str, given: bool| -> String {
        match (&script, given) {
            (Some(s), false) => format!("{s} (its #SBATCH lines)"),
            _ => flag.to_string(),
        }
    };
    let source = match field.split('[').next().unwrap_or(field) {
        "gpus.min" => "--min-gpus".to_string(),
        "gpus.max" => "--max-gpus".to_string(),
        "gpus" => "--min-gpus / --max-gpus".to_string(),
        "gpu_types" => "--gpu-types".to_string(),
        "queues" => "--queues".to_string(),
        "job.job_id" => "--job-id".to_string(),
        "job.profile.num_gpus" => from("--gpus", args.gpus.is_some()),
        "job.profile.gpu_type" => from("--gpu-type", args.gpu_type.is_some()),
        "job.profile.queue" => from("--partition", args.partition.is_some()),
        "job.profile.requested_time" => from("--time", args.time.is_some()),
        "job.profile.num_nodes" => from("--nodes", args.nodes.is_some()),
        "job.profile.cpus" => from("--cpus", args.cpus.is_some()),
        _ => script.unwrap_or_else(|| "the request".to_string()),
    };
    format!("the service refused `{field}` ({source}): {message}")
}

/// `45m`, `3h05m`, `2d04h`.
fn dur(s: f64) -> String {
    if !s.is_finite() {
        return "-".into();
    }
    let d = s.max(0.0) as u64;
    if d < 60 {
        format!("{d}s")
    } else if d < 3600 {
        format!("{}m", d / 60)
    } else if d < 86_400 {
        format!("{}h{:02}m", d / 3600, d % 3600 / 60)
    } else {
        format!("{}d{:02}h", d / 86_400, d % 86_400 / 3600)
    }
}

/// The printed table: one line per option, the request first; times from now.
pub fn table(a: &Advice) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "  {:<28} {:>9} {:>9} {:>24} {:>9} {:>8}  basis",
        "option", "start", "start 95%", "run time (80%)", "finish", "GPU-h"
    );
    for o in &a.options {
        let mark = match (o.earliest_finish, o.cheapest_near_earliest) {
            (true, true) => "*$",
            (true, false) => "* ",
            (false, true) => "$ ",
            (false, false) => "  ",
        };
        let mut what = Vec::new();
        if let Some(g) = o.gpus {
            what.push(format!("{g} GPU{}", if g == 1.0 { "" } else { "s" }));
        }
        what.extend(o.gpu_type.clone());
        what.extend(o.queue.as_ref().map(|q| format!("@{q}")));
        if o.is_request {
            what.push("(request)".into());
        }
        let runtime = format!(
            "{} [{}–{}]{}",
            dur(o.runtime.seconds),
            dur(o.runtime.lower),
            dur(o.runtime.upper),
            if o.runtime.capped_by_requested_time {
                "≤"
            } else {
                ""
            }
        );
        let basis = if o.is_request {
            o.ratio.basis.detail.clone()
        } else {
            format!(
                "×{:.2} [{:.2}–{:.2}] {}",
                o.ratio.ratio, o.ratio.low, o.ratio.high, o.ratio.basis.detail
            )
        };
        let _ = writeln!(
            s,
            "{mark}{:<28} {:>9} {:>9} {:>24} {:>9} {:>8}  {basis}",
            what.join(" "),
            dur(o.start - a.now),
            dur(o.start_upper - a.now),
            runtime,
            dur(o.finish - a.now),
            o.gpu_hours.map_or("-".into(), |h| format!("{h:.1}")),
        );
    }
    let _ = writeln!(
        s,
        "times from now; * earliest finish, $ fewest GPU-hours finishing within {:.0}% of it; ≤ cut at the time limit",
        a.tolerance * 100.0
    );
    if let Some(h) = a.headline() {
        let _ = writeln!(s, "advice: {h}");
    }
    for u in &a.unavailable {
        let _ = writeln!(s, "unavailable: {u}");
    }
    for n in &a.notes {
        let _ = writeln!(s, "note: {n}");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn args(argv: &[&str]) -> AdviseArgs {
        match crate::cli::Cli::try_parse_from(argv).unwrap().command {
            crate::cli::Command::Advise(a) => a,
            _ => unreachable!(),
        }
    }

    #[test]
    fn flags_make_the_request_and_name_themselves_when_malformed() {
        let a = args(&[
            "augur",
            "advise",
            "--gpus",
            "v100:4",
            "--time",
            "2:00:00",
            "--partition",
            "gpu",
            "--user",
            "alice",
            "--job-name",
            "bert",
            "--min-gpus",
            "1",
            "--max-gpus",
            "16",
            "--gpu-types",
            "v100,a100",
            "--queues",
            "gpu,long",
        ]);
        let body = request_body(&a).unwrap();
        assert_eq!(body["job"]["profile"]["num_gpus"], json!(4.0));
        assert_eq!(body["job"]["profile"]["gpu_type"], json!("v100"));
        assert_eq!(body["job"]["profile"]["requested_time"], json!(7200.0));
        assert_eq!(body["job"]["profile"]["queue"], json!("gpu"));
        assert_eq!(body["gpus"], json!({"min": 1, "max": 16}));
        assert_eq!(body["gpu_types"], json!(["v100", "a100"]));
        assert_eq!(body["queues"], json!(["gpu", "long"]));
        let e = request_body(&args(&["augur", "advise", "--time", "soon"])).unwrap_err();
        assert!(e.is::<BadInput>());
        assert!(e.to_string().starts_with("--time `soon`"), "{e}");
        let e = request_body(&args(&["augur", "advise"])).unwrap_err();
        assert!(
            e.is::<BadInput>() && e.to_string().contains("--gpus"),
            "{e}"
        );
        let refusal = r#"{"error":{"code":"invalid_field","field":"queues[1]","message":"the cluster has no queue `long`"}}"#;
        assert_eq!(
            refused(&a, refusal),
            "the service refused `queues[1]` (--queues): the cluster has no queue `long`"
        );
    }
}
