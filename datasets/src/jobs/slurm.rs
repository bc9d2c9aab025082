//! Slurm's value syntaxes as `sacct` prints them: job ids (steps, array tasks, pending array
//! ranges, heterogeneous components), durations and time limits, TRES lists and job states.

use crate::schema::JobStatus;

/// Most tasks one pending array range may expand to. Slurm's own ceiling (`MaxArraySize`) is
/// 4,000,001; a range past this is reported rather than turned into that many jobs.
pub(crate) const MAX_ARRAY_EXPANSION: u64 = 100_000;

/// What a `JobID` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SlurmJobId {
    /// A whole job: a plain id (`123`) or one array task (`123_4`).
    Job(String),
    /// Array tasks not started yet, listed in one row (`123_[1-3,7%2]`): the array's id and the
    /// task numbers.
    PendingArray { array: String, tasks: Vec<u64> },
    /// One component of a heterogeneous job (`123+1`): the job's id and the component offset.
    HetComponent { job: String, offset: u32 },
    /// A job step (`123.batch`, `123.extern`, `123.0`, `123_4.batch`, `123+0.0`).
    Step,
}

/// Why a job id did not parse.
pub(crate) type IdError = &'static str;

fn is_digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// Parses a `JobID` (or `JobIDRaw`).
pub(crate) fn parse_job_id(raw: &str) -> Result<SlurmJobId, IdError> {
    let (job, step) = match raw.split_once('.') {
        Some((job, step)) => (job, Some(step)),
        None => (raw, None),
    };
    let id = parse_job_part(job)?;
    match step {
        Some(step) if !step.is_empty() => Ok(SlurmJobId::Step),
        Some(_) => Err("empty job step after `.`"),
        None => Ok(id),
    }
}

fn parse_job_part(job: &str) -> Result<SlurmJobId, IdError> {
    if is_digits(job) {
        return Ok(SlurmJobId::Job(job.to_string()));
    }
    if let Some((base, offset)) = job.split_once('+') {
        if !is_digits(base) {
            return Err("not a Slurm job id");
        }
        let offset = offset
            .parse::<u32>()
            .ok()
            .filter(|_| is_digits(offset))
            .ok_or("heterogeneous component offset is not a number")?;
        return Ok(SlurmJobId::HetComponent {
            job: base.to_string(),
            offset,
        });
    }
    if let Some((base, task)) = job.split_once('_') {
        if !is_digits(base) {
            return Err("not a Slurm job id");
        }
        if is_digits(task) {
            return Ok(SlurmJobId::Job(job.to_string()));
        }
        let inner = task
            .strip_prefix('[')
            .and_then(|t| t.strip_suffix(']'))
            .ok_or("array task is neither a number nor a [range]")?;
        return Ok(SlurmJobId::PendingArray {
            array: base.to_string(),
            tasks: parse_array_range(inner)?,
        });
    }
    Err("not a Slurm job id")
}

/// Task numbers of a pending array range's inside: `1-3,7`, `0-15:4`, with an optional `%N`
/// throttle (dropped).
fn parse_array_range(inner: &str) -> Result<Vec<u64>, IdError> {
    let list = inner.split_once('%').map_or(inner, |(list, _)| list);
    let mut tasks = Vec::new();
    for item in list.split(',') {
        let (range, step) = match item.split_once(':') {
            Some((range, step)) => (range, num(step).filter(|&s| s > 0).ok_or("bad array step")?),
            None => (item, 1),
        };
        let (lo, hi) = match range.split_once('-') {
            Some((lo, hi)) => (num(lo), num(hi)),
            None => (num(range), num(range)),
        };
        let (Some(lo), Some(hi)) = (lo, hi) else {
            return Err("array range is not a list of numbers and a-b ranges");
        };
        if hi < lo {
            return Err("array range ends before it starts");
        }
        // Tasks in this item, less one (so that `0-u64::MAX` cannot overflow).
        let more = (hi - lo) / step;
        if more >= MAX_ARRAY_EXPANSION - tasks.len() as u64 {
            return Err("pending array range lists more than 100000 tasks");
        }
        tasks.extend((0..=more).map(|i| lo + i * step));
    }
    Ok(tasks)
}

fn num(s: &str) -> Option<u64> {
    if is_digits(s) {
        s.parse().ok()
    } else {
        None
    }
}

/// A Slurm duration in seconds: `D-HH:MM:SS`, `D-HH:MM`, `D-HH`, `HH:MM:SS`, `MM:SS` or `MM`
/// (minutes), as `sbatch -t` takes them and `sacct` prints `Elapsed` and `Timelimit`. The
/// leading part is unbounded; the ones after it must be below 24 (hours) or 60.
pub(crate) fn parse_duration(raw: &str) -> Option<f64> {
    let (days, rest) = match raw.split_once('-') {
        Some((d, rest)) => (Some(num(d)?), rest),
        None => (None, raw),
    };
    let parts: Vec<u64> = rest.split(':').map(num).collect::<Option<_>>()?;
    let (h, m, s) = match (days, parts.as_slice()) {
        (Some(_), [h]) => (*h, 0, 0),
        (Some(_), [h, m]) => (*h, *m, 0),
        (Some(_), [h, m, s]) | (None, [h, m, s]) => (*h, *m, *s),
        (None, [m]) => (0, *m, 0),
        (None, [m, s]) => (0, *m, *s),
        _ => return None,
    };
    let bounded = |v: u64, max: u64, leading: bool| leading || v < max;
    let leading_hours = days.is_none() && parts.len() == 3;
    let leading_minutes = days.is_none() && parts.len() < 3;
    if !bounded(h, 24, leading_hours) || !bounded(m, 60, leading_minutes) || s >= 60 {
        return None;
    }
    let total = days.unwrap_or(0) as f64 * 86_400.0 + h as f64 * 3600.0 + m as f64 * 60.0;
    Some(total + s as f64)
}

/// A `Timelimit` value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum TimeLimit {
    /// `UNLIMITED`: no limit.
    Unlimited,
    /// `Partition_Limit`: the partition's limit, which the file does not give.
    PartitionLimit,
    /// A limit in seconds.
    Seconds(f64),
}

/// Parses a `Timelimit`; `None` when it is none of Slurm's forms.
pub(crate) fn parse_time_limit(raw: &str) -> Option<TimeLimit> {
    if raw.eq_ignore_ascii_case("UNLIMITED") || raw.eq_ignore_ascii_case("INFINITE") {
        return Some(TimeLimit::Unlimited);
    }
    if raw.eq_ignore_ascii_case("Partition_Limit") {
        return Some(TimeLimit::PartitionLimit);
    }
    parse_duration(raw).map(TimeLimit::Seconds)
}

/// What a TRES list (`billing=2,cpu=2,gres/gpu:a100=4,gres/gpu=4,mem=8G,node=1`) says about
/// the resources the reader keeps.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Tres {
    /// `gres/gpu=N`, else the sum of the typed `gres/gpu:TYPE=N` counts; 0 when neither.
    pub gpus: f64,
    /// The typed GPU entries' types, in order, without repeats.
    pub gpu_types: Vec<String>,
    /// `mem=` in MiB.
    pub mem_mib: Option<f64>,
    /// `cpu=`.
    pub cpus: Option<f64>,
    /// `node=`.
    pub nodes: Option<f64>,
}

/// Parses a TRES list; the error says what is wrong (without the value).
pub(crate) fn parse_tres(raw: &str) -> Result<Tres, &'static str> {
    let mut t = Tres::default();
    let mut untyped_gpus = None;
    let mut typed_gpus = 0.0;
    for entry in raw.split(',').filter(|e| !e.is_empty()) {
        let (name, value) = entry
            .split_once('=')
            .ok_or("a TRES entry has no `=` (expected name=count,...)")?;
        let count = || -> Result<f64, &'static str> {
            value
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && *v >= 0.0)
                .ok_or("a TRES count is not a non-negative number")
        };
        match name {
            "gres/gpu" => untyped_gpus = Some(count()?),
            "mem" => t.mem_mib = Some(parse_mem_mib(value).ok_or("the TRES `mem` is not a size")?),
            "cpu" => t.cpus = Some(count()?),
            "node" => t.nodes = Some(count()?),
            _ => {
                if let Some(kind) = name.strip_prefix("gres/gpu:") {
                    typed_gpus += count()?;
                    if !kind.is_empty() && !t.gpu_types.iter().any(|k| k == kind) {
                        t.gpu_types.push(kind.to_string());
                    }
                }
            }
        }
    }
    t.gpus = untyped_gpus.unwrap_or(typed_gpus);
    Ok(t)
}

/// A Slurm memory size (`500M`, `8G`, `1.50T`, `2048K`; no suffix = MiB) in MiB.
fn parse_mem_mib(raw: &str) -> Option<f64> {
    let (digits, factor) = match raw.char_indices().last()? {
        (i, 'K' | 'k') => (&raw[..i], 1.0 / 1024.0),
        (i, 'M' | 'm') => (&raw[..i], 1.0),
        (i, 'G' | 'g') => (&raw[..i], 1024.0),
        (i, 'T' | 't') => (&raw[..i], 1024.0 * 1024.0),
        (i, 'P' | 'p') => (&raw[..i], 1024.0 * 1024.0 * 1024.0),
        _ => (raw, 1.0),
    };
    let v = digits.parse::<f64>().ok()?;
    (v.is_finite() && v >= 0.0 && !digits.starts_with(['+', '-'])).then_some(v * factor)
}

/// Maps a Slurm job state (`CANCELLED by 1000` counts as `CANCELLED`); `None` for a state
/// the reader does not know.
///
/// Failed: `FAILED`, `NODE_FAIL`, `OUT_OF_MEMORY`, `BOOT_FAIL`, `SPECIAL_EXIT`. Killed:
/// `CANCELLED`, `TIMEOUT`, `PREEMPTED`, `DEADLINE` (stopped from outside: by a user, the time
/// limit, a higher-priority job or the deadline; the job itself did not fail, and its run time
/// is cut short). Not finished (unknown): `PENDING`, `RUNNING`, `SUSPENDED`, `REQUEUED`,
/// `REQUEUE_HOLD`, `REQUEUE_FED`, `RESIZING`, `REVOKED`, `CONFIGURING`, `COMPLETING`,
/// `SIGNALING`, `STAGE_OUT`, `STOPPED`.
pub(crate) fn map_state(raw: &str) -> Option<JobStatus> {
    let word = raw.split_whitespace().next().unwrap_or("");
    Some(match word.to_ascii_uppercase().as_str() {
        "COMPLETED" => JobStatus::Completed,
        "FAILED" | "NODE_FAIL" | "OUT_OF_MEMORY" | "BOOT_FAIL" | "SPECIAL_EXIT" => {
            JobStatus::Failed
        }
        "CANCELLED" | "TIMEOUT" | "PREEMPTED" | "DEADLINE" => JobStatus::Killed,
        "PENDING" | "RUNNING" | "SUSPENDED" | "REQUEUED" | "REQUEUE_HOLD" | "REQUEUE_FED"
        | "RESIZING" | "REVOKED" | "CONFIGURING" | "COMPLETING" | "SIGNALING" | "STAGE_OUT"
        | "STOPPED" => JobStatus::Unknown,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_ids_of_every_kind() {
        let job = |s: &str| SlurmJobId::Job(s.to_string());
        assert_eq!(parse_job_id("123"), Ok(job("123")));
        assert_eq!(parse_job_id("123_4"), Ok(job("123_4")));
        for step in ["123.batch", "123.extern", "123.0", "123_4.batch", "123+1.0"] {
            assert_eq!(parse_job_id(step), Ok(SlurmJobId::Step), "{step}");
        }
        assert_eq!(
            parse_job_id("9_[1-4%2]"),
            Ok(SlurmJobId::PendingArray {
                array: "9".into(),
                tasks: vec![1, 2, 3, 4]
            })
        );
        assert_eq!(
            parse_job_id("9_[0-8:4,11]"),
            Ok(SlurmJobId::PendingArray {
                array: "9".into(),
                tasks: vec![0, 4, 8, 11]
            })
        );
        assert_eq!(
            parse_job_id("12+1"),
            Ok(SlurmJobId::HetComponent {
                job: "12".into(),
                offset: 1
            })
        );
        for bad in [
            "",
            "abc",
            "12_",
            "12_[3-1]",
            "12_[a]",
            "12+",
            "12+x",
            "x+1",
            "12.",
            "9_[0-9999999]",
            "9_[1:0]",
            "-1",
        ] {
            assert!(parse_job_id(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn durations_in_every_slurm_form() {
        assert_eq!(parse_duration("00:00:02"), Some(2.0));
        assert_eq!(parse_duration("1-00:00:00"), Some(86_400.0));
        assert_eq!(
            parse_duration("2-03:04:05"),
            Some(2.0 * 86_400.0 + 11_045.0)
        );
        assert_eq!(
            parse_duration("2-03:04"),
            Some(2.0 * 86_400.0 + 3.0 * 3600.0 + 240.0)
        );
        assert_eq!(parse_duration("2-03"), Some(2.0 * 86_400.0 + 3.0 * 3600.0));
        assert_eq!(parse_duration("30"), Some(1800.0));
        assert_eq!(parse_duration("90"), Some(5400.0));
        assert_eq!(parse_duration("05:30"), Some(330.0));
        assert_eq!(parse_duration("100:00:00"), Some(360_000.0));
        for bad in [
            "",
            "1-",
            "-5",
            "1:2:3:4",
            "00:60:00",
            "1-24:00:00",
            "1-00:00:60",
            "a",
            "1.5",
        ] {
            assert_eq!(parse_duration(bad), None, "{bad:?}");
        }
        assert_eq!(parse_time_limit("UNLIMITED"), Some(TimeLimit::Unlimited));
        assert_eq!(
            parse_time_limit("Partition_Limit"),
            Some(TimeLimit::PartitionLimit)
        );
        assert_eq!(
            parse_time_limit("00:05:00"),
            Some(TimeLimit::Seconds(300.0))
        );
        assert_eq!(parse_time_limit("soon"), None);
    }

    #[test]
    fn tres_lists() {
        let t = parse_tres("billing=1,cpu=1,gres/gpu:tesla=2,gres/gpu=2,mem=500M,node=1").unwrap();
        assert_eq!(
            t,
            Tres {
                gpus: 2.0,
                gpu_types: vec!["tesla".into()],
                mem_mib: Some(500.0),
                cpus: Some(1.0),
                nodes: Some(1.0),
            }
        );
        let typed_only = parse_tres("gres/gpu:a100=4,gres/gpu:v100=2,mem=8G").unwrap();
        assert_eq!(typed_only.gpus, 6.0);
        assert_eq!(typed_only.gpu_types, vec!["a100", "v100"]);
        assert_eq!(typed_only.mem_mib, Some(8192.0));
        let none = parse_tres("billing=2,cpu=2,node=1").unwrap();
        assert_eq!((none.gpus, none.mem_mib), (0.0, None));
        assert_eq!(parse_tres("").unwrap(), Tres::default());
        assert_eq!(
            parse_tres("mem=1.50T").unwrap().mem_mib,
            Some(1.5 * 1024.0 * 1024.0)
        );
        assert_eq!(parse_tres("mem=2048K").unwrap().mem_mib, Some(2.0));
        for bad in [
            "cpu",
            "gres/gpu=x",
            "mem=lots",
            "mem=-1G",
            "cpu=-1",
            "gres/gpu=inf",
        ] {
            assert!(parse_tres(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn states() {
        assert_eq!(map_state("COMPLETED"), Some(JobStatus::Completed));
        assert_eq!(map_state("CANCELLED by 1000"), Some(JobStatus::Killed));
        assert_eq!(map_state("TIMEOUT"), Some(JobStatus::Killed));
        assert_eq!(map_state("OUT_OF_MEMORY"), Some(JobStatus::Failed));
        assert_eq!(map_state("NODE_FAIL"), Some(JobStatus::Failed));
        assert_eq!(map_state("PENDING"), Some(JobStatus::Unknown));
        assert_eq!(map_state("running"), Some(JobStatus::Unknown));
        assert_eq!(map_state("REVIVED"), None);
        assert_eq!(map_state(""), None);
    }
}
