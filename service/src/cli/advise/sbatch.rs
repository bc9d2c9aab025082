//! The `#SBATCH` lines of a Slurm batch script read into a job profile, as `sbatch` reads
//! them: only the comment block before the first command line counts, each `#SBATCH` line
//! may carry several options, both `--opt=v` and `--opt v` (and `-p v` / `-pv` for the
//! short ones), a `#` after whitespace starts a comment. Options that do not shape the job's
//! resources (`--output`, `--mail-user`, ...) are skipped. A malformed value is an error
//! naming the file, the line and the option.

use std::path::Path;

use crate::serve::state::events::JobProfile;

/// What a batch script asks for.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BatchRequest {
    pub profile: JobProfile,
    /// `--qos`: read and shown, but the service's profile has no QOS field (its models do
    /// not read it).
    pub qos: Option<String>,
    /// Line numbers (1-based) of the `#SBATCH` lines read.
    pub lines: Vec<usize>,
}

/// A script that cannot be read as a batch request: `path:line: reason` (no line when the
/// whole file is at fault).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{path}{}: {reason}", line.map(|l| format!(":{l}")).unwrap_or_default())]
pub struct ScriptError {
    pub path: String,
    pub line: Option<usize>,
    pub reason: String,
}

/// The options as given, before they are combined (`--gres` is per node, `--ntasks` times
/// `--cpus-per-task` CPUs, ...).
#[derive(Debug, Default)]
struct Options {
    gres_gpus: Option<(Option<String>, f64)>,
    gpus: Option<(Option<String>, f64)>,
    gpus_per_node: Option<(Option<String>, f64)>,
    nodes: Option<f64>,
    ntasks: Option<f64>,
    cpus_per_task: Option<f64>,
    mem_mib: Option<f64>,
    mem_per_cpu_mib: Option<f64>,
    time: Option<Option<f64>>,
    partition: Option<String>,
    account: Option<String>,
    qos: Option<String>,
    job_name: Option<String>,
}

/// Reads the script at `path`.
pub fn read(path: &Path) -> Result<BatchRequest, ScriptError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| ScriptError {
        path: shown.clone(),
        line: None,
        reason: format!("cannot read it: {e}"),
    })?;
    parse(&shown, &text)
}

/// Reads the script `text` (named `path` in errors).
pub fn parse(path: &str, text: &str) -> Result<BatchRequest, ScriptError> {
    let err = |line: Option<usize>, reason: String| ScriptError {
        path: path.to_string(),
        line,
        reason,
    };
    let mut opts = Options::default();
    let mut lines = Vec::new();
    let mut first_command = None;
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        let trimmed = raw.trim();
        if trimmed.is_empty() {
            continue;
        }
        if !trimmed.starts_with('#') {
            // sbatch stops reading options at the first command
            first_command = Some(n);
            break;
        }
        let Some(rest) = raw.strip_prefix("#SBATCH") else {
            continue;
        };
        if !rest.is_empty() && !rest.starts_with(char::is_whitespace) {
            // `#SBATCHX` is a comment to sbatch
            continue;
        }
        lines.push(n);
        let words = split_words(rest).map_err(|r| err(Some(n), r))?;
        read_options(&words, &mut opts).map_err(|r| err(Some(n), r))?;
    }
    if lines.is_empty() {
        let before = first_command.map_or_else(String::new, |c| {
            format!(" before its first command (line {c})")
        });
        return Err(err(
            None,
            format!(
                "no #SBATCH line{before}: nothing says what the job asks for (give the profile with flags instead: --gpus, --time, ...)"
            ),
        ));
    }
    let profile = combine(&opts).map_err(|r| err(lines.last().copied(), r))?;
    Ok(BatchRequest {
        profile,
        qos: opts.qos,
        lines,
    })
}

/// The words of an `#SBATCH` line's rest: whitespace-separated, `'…'` and `"…"` quoted, a
/// word starting with `#` ends the line.
fn split_words(s: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    for c in s.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => cur.push(c),
            None if c == '\'' || c == '"' => {
                quote = Some(c);
                in_word = true;
            }
            None if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            None if c == '#' && !in_word => break,
            None => {
                cur.push(c);
                in_word = true;
            }
        }
    }
    if let Some(q) = quote {
        return Err(format!("an unclosed {q} quote"));
    }
    if in_word {
        words.push(cur);
    }
    Ok(words)
}

/// The options `sbatch` takes a value for that shape the job, long name first; each short
/// form (`-p`) maps to its long one.
const SHORT: &[(&str, &str)] = &[
    ("-p", "--partition"),
    ("-A", "--account"),
    ("-J", "--job-name"),
    ("-N", "--nodes"),
    ("-n", "--ntasks"),
    ("-c", "--cpus-per-task"),
    ("-t", "--time"),
    ("-G", "--gpus"),
    ("-q", "--qos"),
];

/// The long options read (each takes a value).
const READ: &[&str] = &[
    "--gres",
    "--gpus",
    "--gpus-per-node",
    "--nodes",
    "--ntasks",
    "--cpus-per-task",
    "--mem",
    "--mem-per-cpu",
    "--time",
    "--partition",
    "--account",
    "--qos",
    "--job-name",
];

/// Reads the options of one line's words into `opts`.
fn read_options(words: &[String], opts: &mut Options) -> Result<(), String> {
    let mut i = 0;
    while i < words.len() {
        let w = &words[i];
        i += 1;
        let (name, inline): (String, Option<String>) = if let Some(long) = w.strip_prefix("--") {
            match long.split_once('=') {
                Some((n, v)) => (format!("--{n}"), Some(v.to_string())),
                None => (w.clone(), None),
            }
        } else if w.starts_with('-') && w.len() >= 2 {
            let (flag, rest) = w.split_at(2);
            let rest = rest.strip_prefix('=').unwrap_or(rest);
            let value = (!rest.is_empty()).then(|| rest.to_string());
            match SHORT.iter().find(|(s, _)| *s == flag) {
                Some((_, long)) => ((*long).to_string(), value),
                None => {
                    i += skipped_value(words.get(i), value.is_some());
                    continue;
                }
            }
        } else {
            return Err(format!(
                "`{w}` is not an option (an #SBATCH line holds options such as --gpus=4)"
            ));
        };
        let takes_value = READ.contains(&name.as_str());
        if !takes_value {
            i += skipped_value(words.get(i), inline.is_some());
            continue;
        }
        let value = match inline {
            Some(v) => v,
            None => {
                let v = words
                    .get(i)
                    .filter(|v| !v.starts_with('-'))
                    .ok_or_else(|| format!("{name} needs a value"))?;
                i += 1;
                v.clone()
            }
        };
        set(opts, &name, &value).map_err(|reason| format!("{name} `{value}`: {reason}"))?;
    }
    Ok(())
}

/// How many words an option that is not read takes after it: its value when it has none
/// attached and the next word is not an option (`--output out.txt`), else none.
fn skipped_value(next: Option<&String>, attached: bool) -> usize {
    usize::from(!attached && next.is_some_and(|w| !w.starts_with('-')))
}

fn set(opts: &mut Options, name: &str, v: &str) -> Result<(), String> {
    match name {
        "--gres" => opts.gres_gpus = gres_gpus(v)?.or(opts.gres_gpus.take()),
        "--gpus" => opts.gpus = Some(typed_count(v)?),
        "--gpus-per-node" => opts.gpus_per_node = Some(typed_count(v)?),
        "--nodes" => opts.nodes = Some(node_count(v)?),
        "--ntasks" => opts.ntasks = Some(count(v)?),
        "--cpus-per-task" => opts.cpus_per_task = Some(count(v)?),
        "--mem" => opts.mem_mib = Some(memory_mib(v)?),
        "--mem-per-cpu" => opts.mem_per_cpu_mib = Some(memory_mib(v)?),
        "--time" => opts.time = Some(time_limit(v)?),
        "--partition" => opts.partition = Some(first_of_list(v)?),
        "--account" => opts.account = Some(text(v)?),
        "--qos" => opts.qos = Some(text(v)?),
        "--job-name" => opts.job_name = Some(text(v)?),
        _ => {}
    }
    Ok(())
}

/// The profile the options describe: GPUs from `--gpus`, else `--gpus-per-node` or
/// `--gres` (both per node) times the nodes; CPUs `--ntasks` × `--cpus-per-task`; memory
/// `--mem` (per node) times the nodes, else `--mem-per-cpu` times the CPUs.
fn combine(o: &Options) -> Result<JobProfile, String> {
    let nodes = o.nodes.unwrap_or(1.0);
    let (gpu_type, gpus) = match (&o.gpus, &o.gpus_per_node, &o.gres_gpus) {
        (Some((t, n)), _, _) => (t.clone(), Some(*n)),
        (None, Some((t, n)), _) | (None, None, Some((t, n))) => (t.clone(), Some(n * nodes)),
        (None, None, None) => (None, None),
    };
    let cpus = match (o.ntasks, o.cpus_per_task) {
        (None, None) => None,
        (t, c) => Some(t.unwrap_or(1.0) * c.unwrap_or(1.0)),
    };
    let memory_mib = match (o.mem_mib, o.mem_per_cpu_mib) {
        (Some(m), _) => Some(m * nodes),
        (None, Some(m)) => Some(m * cpus.unwrap_or(1.0)),
        (None, None) => None,
    };
    Ok(JobProfile {
        num_gpus: gpus,
        num_nodes: o.nodes,
        gpu_type,
        cpus,
        memory_mib: memory_mib.filter(|m| *m > 0.0),
        requested_time: o.time.flatten(),
        user: None,
        group: o.account.clone(),
        job_name: o.job_name.clone(),
        cluster: None,
        queue: o.partition.clone(),
    })
}

fn text(v: &str) -> Result<String, String> {
    if v.is_empty() || v.len() > 256 {
        return Err("must be 1 to 256 characters".into());
    }
    Ok(v.to_string())
}

/// The first of a comma-separated list (`-p gpu,long`: Slurm picks the one that starts
/// first; the advice asks about the first and lists the others with `--queues`).
fn first_of_list(v: &str) -> Result<String, String> {
    text(v.split(',').next().unwrap_or(""))
}

/// A positive whole count.
pub fn count(v: &str) -> Result<f64, String> {
    match v.parse::<u64>() {
        Ok(n) if (1..=100_000_000).contains(&n) => Ok(n as f64),
        _ => Err("not a count (a whole number of at least 1)".into()),
    }
}

/// `N` or `MIN-MAX` nodes: the minimum (what Slurm allocates at least).
fn node_count(v: &str) -> Result<f64, String> {
    count(v.split('-').next().unwrap_or(v))
}

/// `[type:]N` (`--gpus`, `--gpus-per-node`).
pub fn typed_count(v: &str) -> Result<(Option<String>, f64), String> {
    match v.rsplit_once(':') {
        Some((t, n)) if !t.is_empty() && !t.contains(':') => Ok((Some(t.to_string()), count(n)?)),
        Some(_) => Err("not `[type:]N` (e.g. 4 or a100:4)".into()),
        None => Ok((None, count(v)?)),
    }
}

/// The GPUs of a `--gres` list (`gpu`, `gpu:2`, `gpu:v100:2`, `gpu:v100`, beside other
/// resources: `gpu:2,mps:100`); none when it asks for no GPU.
fn gres_gpus(v: &str) -> Result<Option<(Option<String>, f64)>, String> {
    for item in v.split(',') {
        let item = item.strip_prefix("gres/").unwrap_or(item);
        let parts: Vec<&str> = item.split(':').collect();
        if parts.first() != Some(&"gpu") {
            continue;
        }
        return match parts.as_slice() {
            [_] => Ok(Some((None, 1.0))),
            [_, x] if x.chars().all(|c| c.is_ascii_digit()) => Ok(Some((None, count(x)?))),
            [_, t] if !t.is_empty() => Ok(Some((Some((*t).to_string()), 1.0))),
            [_, t, n] if !t.is_empty() => Ok(Some((Some((*t).to_string()), count(n)?))),
            _ => Err("not `gpu[:type][:N]` (e.g. gpu:4 or gpu:v100:2)".into()),
        };
    }
    Ok(None)
}

/// `--mem`: a number with an optional unit suffix `K`, `M` (the default), `G` or `T`, as
/// MiB.
pub fn memory_mib(v: &str) -> Result<f64, String> {
    let bad = || "not a size (a whole number with an optional K, M, G or T suffix)".to_string();
    let (num, unit) = match v.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => (&v[..i], c.to_ascii_uppercase()),
        _ => (v, 'M'),
    };
    let n: u64 = num.parse().map_err(|_| bad())?;
    let mib = match unit {
        'K' => n as f64 / 1024.0,
        'M' => n as f64,
        'G' => n as f64 * 1024.0,
        'T' => n as f64 * 1024.0 * 1024.0,
        _ => return Err(bad()),
    };
    Ok(mib)
}

/// `--time` in Slurm's formats (`M`, `M:S`, `H:M:S`, `D-H`, `D-H:M`, `D-H:M:S`) as seconds;
/// `UNLIMITED` / `INFINITE` as none.
pub fn time_limit(v: &str) -> Result<Option<f64>, String> {
    if v.eq_ignore_ascii_case("unlimited") || v.eq_ignore_ascii_case("infinite") {
        return Ok(None);
    }
    let bad = || "not a Slurm time (M, M:S, H:M:S, D-H, D-H:M or D-H:M:S)".to_string();
    let num = |s: &str| -> Result<f64, String> {
        if s.is_empty() || !s.chars().all(|c| c.is_ascii_digit()) || s.len() > 9 {
            return Err(bad());
        }
        s.parse::<f64>().map_err(|_| bad())
    };
    let secs = match v.split_once('-') {
        Some((d, rest)) => {
            let days = num(d)?;
            let parts: Vec<&str> = rest.split(':').collect();
            let hms = match parts.as_slice() {
                [h] => num(h)? * 3600.0,
                [h, m] => num(h)? * 3600.0 + num(m)? * 60.0,
                [h, m, s] => num(h)? * 3600.0 + num(m)? * 60.0 + num(s)?,
                _ => return Err(bad()),
            };
            days * 86_400.0 + hms
        }
        None => {
            let parts: Vec<&str> = v.split(':').collect();
            match parts.as_slice() {
                [m] => num(m)? * 60.0,
                [m, s] => num(m)? * 60.0 + num(s)?,
                [h, m, s] => num(h)? * 3600.0 + num(m)? * 60.0 + num(s)?,
                _ => return Err(bad()),
            }
        }
    };
    if secs <= 0.0 {
        return Err("a time limit of 0: give a positive time".into());
    }
    Ok(Some(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(script: &str) -> JobProfile {
        parse("job.sbatch", script).unwrap().profile
    }

    #[test]
    fn every_option_form_reads() {
        let p = profile(
            "#!/bin/bash\n#SBATCH --gres=gpu:v100:2\n#SBATCH --nodes 2\n#SBATCH -p gpu\n#SBATCH -Adef-alice\n#SBATCH --ntasks=4 --cpus-per-task 8  # comment\n#SBATCH --mem=64G\n#SBATCH --time=1-12:30\n#SBATCH --job-name=\"bert large\"\n#SBATCH --output=out.txt\n#SBATCH --qos normal\n\nsrun python train.py\n#SBATCH --gpus=99\n",
        );
        assert_eq!(p.num_gpus, Some(4.0), "--gres is per node: 2 × 2 nodes");
        assert_eq!(p.gpu_type.as_deref(), Some("v100"));
        assert_eq!(p.num_nodes, Some(2.0));
        assert_eq!(p.queue.as_deref(), Some("gpu"));
        assert_eq!(p.group.as_deref(), Some("def-alice"));
        assert_eq!(p.cpus, Some(32.0));
        assert_eq!(p.memory_mib, Some(2.0 * 64.0 * 1024.0));
        assert_eq!(
            p.requested_time,
            Some(86_400.0 + 12.0 * 3600.0 + 30.0 * 60.0)
        );
        assert_eq!(p.job_name.as_deref(), Some("bert large"));
        let r = parse("j", "#SBATCH --qos=high\n#SBATCH -J x\n").unwrap();
        assert_eq!(r.qos.as_deref(), Some("high"));
        assert_eq!(r.lines, vec![1, 2]);
        // --gpus wins over --gres and is the job's total; `--opt v` and `-X v`
        let p =
            profile("#SBATCH --gpus a100:8\n#SBATCH --gres gpu:1\n#SBATCH -t 90\n#SBATCH -J=x\n");
        assert_eq!(
            (p.num_gpus, p.gpu_type.as_deref()),
            (Some(8.0), Some("a100"))
        );
        assert_eq!(p.requested_time, Some(5400.0));
        assert_eq!(profile("#SBATCH --gpus=3\n").num_gpus, Some(3.0));
        assert_eq!(profile("#SBATCH --gres=gpu\n").num_gpus, Some(1.0));
        assert_eq!(
            profile("#SBATCH --gres=gpu:k80\n").gpu_type.as_deref(),
            Some("k80")
        );
        assert_eq!(
            profile("#SBATCH --gres=mps:100,gpu:2\n").num_gpus,
            Some(2.0)
        );
        assert_eq!(
            profile("#SBATCH --gpus-per-node=t4:2 -N 3\n").num_gpus,
            Some(6.0)
        );
        assert_eq!(
            profile("#SBATCH --partition=short,long\n").queue.as_deref(),
            Some("short")
        );
        assert_eq!(
            profile("#SBATCH --mem-per-cpu=2G -n 4\n").memory_mib,
            Some(8192.0)
        );
        assert_eq!(profile("#SBATCH -o log -p x\n").queue.as_deref(), Some("x"));
    }

    #[test]
    fn slurm_times_and_sizes_read() {
        let t = |v: &str| time_limit(v).unwrap();
        assert_eq!(t("30"), Some(1800.0));
        assert_eq!(t("30:15"), Some(1815.0));
        assert_eq!(t("2:00:01"), Some(7201.0));
        assert_eq!(t("1-2"), Some(93_600.0));
        assert_eq!(t("1-2:30"), Some(95_400.0));
        assert_eq!(t("1-2:30:05"), Some(95_405.0));
        assert_eq!(t("UNLIMITED"), None);
        for bad in ["", "1:2:3:4", "x", "1-", "-1", "1-2:3:4:5", "0", "1.5"] {
            assert!(time_limit(bad).is_err(), "{bad}");
        }
        assert_eq!(memory_mib("512").unwrap(), 512.0);
        assert_eq!(memory_mib("2048K").unwrap(), 2.0);
        assert_eq!(memory_mib("4g").unwrap(), 4096.0);
        assert_eq!(memory_mib("1T").unwrap(), 1_048_576.0);
        assert!(memory_mib("4X").is_err());
        assert!(memory_mib("G").is_err());
    }

    #[test]
    fn bad_lines_are_named_by_line_number() {
        let e = parse(
            "job.sbatch",
            "#!/bin/bash\n#SBATCH --gpus=4\n#SBATCH --time=soon\n",
        )
        .unwrap_err();
        assert_eq!(e.line, Some(3));
        assert!(
            e.to_string().starts_with("job.sbatch:3: --time `soon`"),
            "{e}"
        );
        let e = parse("j.sh", "#SBATCH --gres=gpu:v100:0\n").unwrap_err();
        assert_eq!(e.line, Some(1));
        assert!(e.to_string().contains("--gres"), "{e}");
        let e = parse("j.sh", "#SBATCH --mem=lots\n").unwrap_err();
        assert!(e.to_string().starts_with("j.sh:1: --mem `lots`"), "{e}");
        let e = parse("j.sh", "\n#SBATCH --nodes\n").unwrap_err();
        assert_eq!(e.to_string(), "j.sh:2: --nodes needs a value");
        let e = parse("j.sh", "#SBATCH gpus=4\n").unwrap_err();
        assert_eq!(e.line, Some(1));
        let e = parse("j.sh", "#SBATCH -J 'open\n").unwrap_err();
        assert!(e.to_string().contains("unclosed"), "{e}");
    }

    #[test]
    fn a_script_without_sbatch_lines_before_its_commands_is_refused() {
        let e = parse("run.sh", "#!/bin/bash\necho hi\n#SBATCH --gpus=2\n").unwrap_err();
        assert_eq!(e.line, None);
        assert!(
            e.to_string()
                .starts_with("run.sh: no #SBATCH line before its first command (line 2)"),
            "{e}"
        );
        let e = parse("empty.sh", "").unwrap_err();
        assert!(
            e.to_string().starts_with("empty.sh: no #SBATCH line"),
            "{e}"
        );
        // `#SBATCHX` and `# SBATCH` are comments to sbatch
        assert!(parse("c.sh", "#SBATCHX --gpus=1\n# SBATCH --gpus=1\n").is_err());
    }
}
