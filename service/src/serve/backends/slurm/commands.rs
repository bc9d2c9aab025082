//! The Slurm client commands the backend polls (`squeue`, `sacct`, `sinfo`, `scontrol`), run
//! with a timeout, and the parsing of what they print.
//!
//! Every command runs with `TZ=UTC` and `SLURM_TIME_FORMAT=standard`, so the times Slurm
//! prints are UTC wall times (`2026-11-23T07:13:18`) whatever the site's zone: no guess about
//! the controller's zone is needed. `SLURM_CONF` and the rest of the environment pass through.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use augur_datasets::jobs::sacct::RECOMMENDED_FIELDS;
use chrono::NaiveDateTime;

/// Longest a single Slurm command may run before it is killed and counted as failed.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a Slurm command gave nothing usable.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    #[error(
        "cannot run `{program}`: {source} (are the Slurm client tools installed and on PATH?)"
    )]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error("`{program}` did not answer within {secs} s (killed)")]
    Timeout { program: String, secs: u64 },
    #[error("`{program}` exited with {status}: {stderr}")]
    Failed {
        program: String,
        status: std::process::ExitStatus,
        stderr: String,
    },
    #[error("`{program}` printed an unexpected line `{line}`: {reason}")]
    Parse {
        program: String,
        line: String,
        reason: String,
    },
    #[error("cannot keep `sacct` output in {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// Runs `program args` (UTC times, standard format) and returns its standard output. The
/// command runs on the blocking pool; past [`COMMAND_TIMEOUT`] it is killed.
pub async fn run(program: &str, args: &[&str]) -> Result<String, CommandError> {
    let program = program.to_string();
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let name = program.clone();
    tokio::task::spawn_blocking(move || run_blocking(&program, &args, COMMAND_TIMEOUT))
        .await
        .map_err(|e| CommandError::Spawn {
            program: name,
            source: std::io::Error::other(e.to_string()),
        })?
}

fn run_blocking(program: &str, args: &[String], timeout: Duration) -> Result<String, CommandError> {
    use std::io::Read;
    use std::process::{Command, Stdio};
    let mut child = Command::new(program)
        .args(args)
        .env("TZ", "UTC")
        .env("SLURM_TIME_FORMAT", "standard")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| CommandError::Spawn {
            program: program.to_string(),
            source,
        })?;
    // drain both pipes while waiting, so a large output cannot block the command
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut buf);
            }
            buf
        })
    };
    let out = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let err = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(CommandError::Timeout {
                    program: program.to_string(),
                    secs: timeout.as_secs(),
                });
            }
            Err(source) => {
                return Err(CommandError::Spawn {
                    program: program.to_string(),
                    source,
                })
            }
        }
    };
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    if !status.success() {
        return Err(CommandError::Failed {
            program: program.to_string(),
            status,
            stderr: String::from_utf8_lossy(&stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&stdout).into_owned())
}

/// The cluster's name (`ClusterName` of `scontrol show config`). Blocking (the backend is
/// built before the service's data folder is opened, off the async workers).
pub fn cluster_name_blocking() -> Result<String, CommandError> {
    let args = ["show".to_string(), "config".to_string()];
    let text = run_blocking("scontrol", &args, COMMAND_TIMEOUT)?;
    parse_cluster_name(&text).ok_or_else(|| CommandError::Parse {
        program: "scontrol show config".into(),
        line: String::new(),
        reason: "no `ClusterName = ...` line".into(),
    })
}

fn parse_cluster_name(text: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once('=')?;
        (k.trim() == "ClusterName")
            .then(|| v.trim().to_string())
            .filter(|v| !v.is_empty())
    })
}

/// The `squeue` output format: the job name last, since it may hold a `|`. `%r` is the
/// reason a job is in its state (a pending job's `Priority`, `Resources`, ...); `%h` whether
/// its nodes may be shared (`NO`: it asks for whole nodes, `--exclusive`).
const SQUEUE_FORMAT: &str = "%i|%V|%S|%T|%u|%a|%P|%D|%C|%l|%b|%r|%h|%j";
/// Fields in a line of [`SQUEUE_FORMAT`].
const SQUEUE_FIELDS: usize = 14;

/// One pending or running job as `squeue` shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct QueuedJob {
    /// Slurm's job id (`123`, an array task `123_4`).
    pub id: String,
    pub submit: f64,
    /// A running job's start; a pending job's expected start (the scheduler's estimate, what
    /// `squeue --start` prints), when it has one.
    pub start: Option<f64>,
    pub running: bool,
    pub user: String,
    pub account: String,
    pub partition: String,
    pub nodes: Option<f64>,
    pub cpus: Option<f64>,
    /// Time limit, seconds (`None`: unlimited or unknown).
    pub time_limit: Option<f64>,
    pub gpus: f64,
    /// The GPU type the job asks for (`--gres=gpu:v100:2`), lower-case, when it names one.
    pub gpu_type: Option<String>,
    /// Why it is in its state (Slurm's `Reason`: `Priority`, `Resources`, `None` while it
    /// runs, ...).
    pub reason: String,
    /// It asks for whole nodes (`--exclusive`: `%h` is `NO`).
    pub whole_nodes: bool,
    pub name: String,
}

/// The pending and running jobs (one line per array task).
pub async fn squeue() -> Result<Vec<QueuedJob>, CommandError> {
    let text = run(
        "squeue",
        &[
            "-h",
            "-a",
            "-r",
            "-t",
            "PENDING,RUNNING,CONFIGURING,COMPLETING,SUSPENDED",
            "-o",
            SQUEUE_FORMAT,
        ],
    )
    .await?;
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            parse_squeue_line(l).map_err(|reason| CommandError::Parse {
                program: "squeue".into(),
                line: l.to_string(),
                reason,
            })
        })
        .collect()
}

fn parse_squeue_line(line: &str) -> Result<QueuedJob, String> {
    let f: Vec<&str> = line.splitn(SQUEUE_FIELDS, '|').collect();
    if f.len() < SQUEUE_FIELDS {
        return Err(format!("{} fields, want {SQUEUE_FIELDS}", f.len()));
    }
    let submit = parse_time(f[1]).ok_or_else(|| format!("submit time `{}`", f[1]))?;
    let state = f[3].trim();
    Ok(QueuedJob {
        id: f[0].trim().to_string(),
        submit,
        start: parse_time(f[2]),
        running: state != "PENDING",
        user: f[4].trim().to_string(),
        account: f[5].trim().to_string(),
        partition: f[6].trim().to_string(),
        nodes: f[7].trim().parse().ok(),
        cpus: f[8].trim().parse().ok(),
        time_limit: parse_duration(f[9]),
        gpus: parse_gpus(f[10]) * f[7].trim().parse::<f64>().unwrap_or(1.0),
        gpu_type: parse_gpu_type(f[10]),
        reason: f[11].trim().to_string(),
        whole_nodes: f[12].trim() == "NO",
        name: f[13].to_string(),
    })
}

/// A UTC wall time as Slurm prints it; `None` for `N/A`, `Unknown`, `None` and the like.
pub fn parse_time(s: &str) -> Option<f64> {
    let s = s.trim();
    let t = NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S").ok()?;
    Some(t.and_utc().timestamp() as f64)
}

/// Slurm's `[days-]hours:minutes:seconds` (or `minutes:seconds`, `minutes`) as seconds;
/// `None` for `UNLIMITED`, `N/A`, `Partition_Limit`.
pub fn parse_duration(s: &str) -> Option<f64> {
    let s = s.trim();
    let (days, rest) = match s.split_once('-') {
        Some((d, r)) => (d.parse::<f64>().ok()?, r),
        None => (0.0, s),
    };
    let parts: Vec<f64> = rest
        .split(':')
        .map(|p| p.parse::<f64>().ok())
        .collect::<Option<_>>()?;
    let secs = match parts.as_slice() {
        [m] if days == 0.0 => m * 60.0,
        [h] => h * 3600.0,
        [m, s] if days == 0.0 => m * 60.0 + s,
        [h, m] => h * 3600.0 + m * 60.0,
        [h, m, s] => h * 3600.0 + m * 60.0 + s,
        _ => return None,
    };
    Some(days * 86_400.0 + secs)
}

/// GPUs per node in a gres/TRES list (`gres/gpu:tesla:2`, `gres:gpu:1`, `gpu:2`,
/// `gres/gpu=2`); 0 without a GPU entry.
pub fn parse_gpus(s: &str) -> f64 {
    s.split(',')
        .filter_map(|entry| {
            let entry = entry.trim();
            let at = entry.find("gpu")?;
            let rest = &entry[at + 3..];
            if rest.is_empty() {
                return Some(1.0);
            }
            // the count is the last `:`/`=`-separated token; a `(...)` suffix is the index list
            let rest = rest.split('(').next().unwrap_or(rest);
            let last = rest.rsplit([':', '=']).next().unwrap_or("");
            Some(last.parse::<f64>().unwrap_or(1.0))
        })
        .sum()
}

/// The GPU type a gres/TRES list names (`gres/gpu:v100:2` → `v100`), lower-case; `None`
/// without a GPU entry, for an untyped one (`gpu:2`, `gres/gpu=2`) or for several types.
pub fn parse_gpu_type(s: &str) -> Option<String> {
    let mut types = s.split(',').filter_map(|entry| {
        let entry = entry.trim();
        let rest = &entry[entry.find("gpu")? + 3..];
        let rest = rest.split('(').next().unwrap_or(rest);
        // `:type:count`, `:type` (count 1); an untyped entry has only a count or nothing
        let parts: Vec<&str> = rest.split(':').filter(|p| !p.is_empty()).collect();
        let ty = match parts.as_slice() {
            [t, _] | [t] if t.parse::<f64>().is_err() && !t.contains('=') => Some(*t),
            _ => None,
        };
        Some(ty.map(str::to_lowercase))
    });
    let first = types.next()??;
    types
        .all(|t| t.as_deref() == Some(first.as_str()))
        .then_some(first)
}

/// The cluster's capacity as `sinfo` shows it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Capacity {
    pub nodes: u64,
    pub cpus: f64,
    pub gpus: f64,
    /// GPUs by type (lower-case), when every node's GPUs name their type.
    pub gpus_by_type: Option<BTreeMap<String, f64>>,
}

/// Nodes, CPUs and GPUs of the cluster (each node once, whatever its partitions).
pub async fn sinfo() -> Result<Capacity, CommandError> {
    let text = run("sinfo", &["-h", "-N", "-o", "%N|%c|%G"]).await?;
    Ok(parse_sinfo(&text))
}

fn parse_sinfo(text: &str) -> Capacity {
    let mut seen = std::collections::BTreeSet::new();
    let mut cap = Capacity::default();
    let mut typed = Some(BTreeMap::new());
    for line in text.lines() {
        let f: Vec<&str> = line.split('|').collect();
        if f.len() < 3 || !seen.insert(f[0].trim().to_string()) {
            continue;
        }
        cap.nodes += 1;
        cap.cpus += f[1].trim().parse::<f64>().unwrap_or(0.0);
        let gpus = parse_gpus(f[2]);
        cap.gpus += gpus;
        if gpus > 0.0 {
            typed = typed.and_then(|mut m: BTreeMap<String, f64>| {
                *m.entry(parse_gpu_type(f[2])?).or_insert(0.0) += gpus;
                Some(m)
            });
        }
    }
    cap.gpus_by_type = typed.filter(|m| !m.is_empty());
    cap
}

/// Runs `sacct` over `[since, now]` for every user into `file` (replaced whole), to be read
/// with the sacct reader (which folds job steps into their jobs).
pub async fn sacct_into(file: &Path, since: f64) -> Result<(), CommandError> {
    let since = chrono::DateTime::from_timestamp(since.max(0.0) as i64, 0)
        .unwrap_or_default()
        .format("%Y-%m-%dT%H:%M:%S")
        .to_string();
    let format = format!("--format={RECOMMENDED_FIELDS}");
    let text = run("sacct", &["-P", "-a", "-S", &since, "-E", "now", &format]).await?;
    let io = |source| CommandError::Io {
        path: file.display().to_string(),
        source,
    };
    let tmp = file.with_extension("tmp");
    tokio::fs::write(&tmp, text).await.map_err(io)?;
    tokio::fs::rename(&tmp, file).await.map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_time_out_fail_and_answer() {
        let err = run_blocking("sleep", &["5".into()], Duration::from_millis(200)).unwrap_err();
        assert!(matches!(err, CommandError::Timeout { .. }), "{err}");
        let err = run_blocking(
            "sh",
            &["-c".into(), "echo no >&2; exit 3".into()],
            COMMAND_TIMEOUT,
        )
        .unwrap_err();
        assert!(err.to_string().contains("no"), "{err}");
        let err = run_blocking("augur-no-such-command", &[], COMMAND_TIMEOUT).unwrap_err();
        assert!(matches!(err, CommandError::Spawn { .. }), "{err}");
        let out = run_blocking("sh", &["-c".into(), "echo $TZ".into()], COMMAND_TIMEOUT).unwrap();
        assert_eq!(out.trim(), "UTC");
    }

    #[test]
    fn squeue_lines_parse() {
        let j = parse_squeue_line(
            "42_3|2026-11-23T07:13:18|2026-11-23T07:14:00|PENDING|alice|ml|debug|2|4|1-00:00:00|gres/gpu:tesla:1|Resources|NO|train|v2",
        )
        .unwrap();
        assert_eq!(j.id, "42_3");
        assert_eq!(j.submit, 1_795_417_998.0);
        assert_eq!(j.start, Some(1_795_418_040.0));
        assert!(!j.running);
        assert_eq!(j.time_limit, Some(86_400.0));
        assert_eq!(j.gpus, 2.0); // one per node on two nodes
        assert_eq!(j.name, "train|v2");
        assert_eq!(j.reason, "Resources");
        assert_eq!(j.gpu_type.as_deref(), Some("tesla"));
        assert!(j.whole_nodes);
        let j = parse_squeue_line(
            "7|2026-11-23T07:13:18|N/A|RUNNING|bob|a|p|1|1|UNLIMITED|N/A|None|OK|x",
        )
        .unwrap();
        assert!(j.running);
        assert_eq!((j.start, j.time_limit, j.gpus), (None, None, 0.0));
        assert_eq!((j.gpu_type, j.reason.as_str()), (None, "None"));
        assert!(!j.whole_nodes);
        assert!(parse_squeue_line("7|yesterday|N/A|RUNNING|b|a|p|1|1|1:00|N/A|None|OK|x").is_err());
        assert!(parse_squeue_line("7|2026").is_err());
    }

    #[test]
    fn durations_gpus_and_capacity_parse() {
        assert_eq!(parse_duration("5"), Some(300.0));
        assert_eq!(parse_duration("1:30"), Some(90.0));
        assert_eq!(parse_duration("2:00:00"), Some(7200.0));
        assert_eq!(parse_duration("1-02"), Some(93_600.0));
        assert_eq!(parse_duration("UNLIMITED"), None);
        assert_eq!(parse_gpus("gres:gpu:tesla:2(IDX:0-1)"), 2.0);
        assert_eq!(parse_gpus("gres/gpu=3"), 3.0);
        assert_eq!(parse_gpus("gpu"), 1.0);
        assert_eq!(parse_gpus("(null)"), 0.0);
        assert_eq!(parse_gpu_type("gres/gpu:V100:2").as_deref(), Some("v100"));
        assert_eq!(
            parse_gpu_type("gres:gpu:tesla:2(IDX:0-1)").as_deref(),
            Some("tesla")
        );
        assert_eq!(parse_gpu_type("gpu:a100"), Some("a100".into()));
        assert_eq!(parse_gpu_type("gres/gpu:2"), None);
        assert_eq!(parse_gpu_type("gres/gpu=2"), None);
        assert_eq!(parse_gpu_type("gpu"), None);
        assert_eq!(parse_gpu_type("(null)"), None);
        assert_eq!(parse_gpu_type("gpu:k80:1,gpu:v100:1"), None);
        let cap = parse_sinfo("n1|2|gpu:tesla:2\nn1|2|gpu:tesla:2\nn2|8|(null)\n");
        assert_eq!(
            cap,
            Capacity {
                nodes: 2,
                cpus: 10.0,
                gpus: 2.0,
                gpus_by_type: Some(BTreeMap::from([("tesla".into(), 2.0)])),
            }
        );
        let cap = parse_sinfo("n1|2|gpu:v100:4(S:0)\nn2|2|gpu:V100:2\nn3|2|gpu:k80:8\n");
        assert_eq!(
            cap.gpus_by_type,
            Some(BTreeMap::from([("k80".into(), 8.0), ("v100".into(), 6.0)]))
        );
        // an untyped GPU node: no split by type
        assert_eq!(
            parse_sinfo("n1|2|gpu:v100:4\nn2|2|gpu:2\n").gpus_by_type,
            None
        );
        assert_eq!(
            parse_cluster_name("Foo = 1\nClusterName             = augurtest\n"),
            Some("augurtest".into())
        );
    }
}
