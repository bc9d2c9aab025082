//! Valid rows per reader: what each generated row holds and what the reader must make of it.

use augur_datasets::TraceFormat;

/// Raw randomness for one row; each reader maps it to plausible values.
pub(crate) type Seed = (u32, u32, u32, u32);

/// One valid row and what the reader must make of it.
pub(crate) struct ValidRow {
    /// Fields, already encoded (a quoted CSV field keeps its quotes).
    pub(crate) fields: Vec<String>,
    /// The job id the reader gives it; `None` when it comes from the line (Philly).
    pub(crate) id: Option<String>,
    pub(crate) submit: f64,
    pub(crate) duration: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Reader {
    Swf,
    SwfAlcf,
    Philly,
    Itp,
    Openb,
    Helios,
    PaiJobs,
    PaiTasks,
    Mlperf,
}

impl Reader {
    pub(crate) fn format(self) -> TraceFormat {
        match self {
            Reader::Swf => TraceFormat::Swf,
            Reader::SwfAlcf => TraceFormat::SwfAlcf,
            Reader::Philly => TraceFormat::Philly,
            Reader::Itp => TraceFormat::Itp,
            Reader::Openb => TraceFormat::OpenbPods,
            Reader::Helios => TraceFormat::Helios,
            Reader::PaiJobs | Reader::PaiTasks => TraceFormat::PaiJobs,
            Reader::Mlperf => TraceFormat::MlperfRuns,
        }
    }

    /// The fuzzed file, relative to the case's folder.
    pub(crate) fn file(self) -> &'static str {
        match self {
            Reader::Swf => "trace.swf",
            Reader::SwfAlcf => "mira.swf",
            Reader::Philly => "philly.csv",
            Reader::Itp => "cluster03.csv",
            Reader::Openb => "openb_pod_list_default.csv",
            Reader::Helios => "Venus/cluster_log.csv",
            Reader::PaiJobs => "pai_job_table.csv",
            Reader::PaiTasks => "pai_task_table.csv",
            Reader::Mlperf => "runs.csv",
        }
    }

    pub(crate) fn is_swf(self) -> bool {
        matches!(self, Reader::Swf | Reader::SwfAlcf)
    }

    pub(crate) fn header(self) -> Option<&'static str> {
        match self {
            Reader::Swf | Reader::SwfAlcf | Reader::PaiJobs | Reader::PaiTasks => None,
            Reader::Philly => Some("timestamp,duration,num_gpus,gpu_time,cluster"),
            Reader::Itp => Some("job_id,submission_time,duration,num_gpu"),
            Reader::Openb => Some("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time"),
            Reader::Helios => Some("job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue"),
            Reader::Mlperf => Some("run_id,submitter,system,benchmark,result_file,num_nodes,accelerators_per_node,accelerator_model,framework,global_batch_size,seed,run_start_ms,run_stop_ms,duration_s,run_status,n_eval_points,final_eval_accuracy"),
        }
    }

    /// The job id a row at `line` gets when the file has none.
    pub(crate) fn id_from_line(self, line: u64) -> String {
        format!("philly-{line}")
    }
}

/// `YYYY-MM-DD HH:MM:SS` (UTC) of Unix seconds, without a date library (civil-from-days).
pub(crate) fn datetime(t: i64) -> String {
    let (days, secs) = (t.div_euclid(86_400), t.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}

/// The SWF header's `UnixStartTime`, when the generated file has one.
pub(crate) const UNIX_START: f64 = 1_500_000_000.0;

pub(crate) fn valid_row(
    reader: Reader,
    i: usize,
    (a, b, c, d): Seed,
    unix_start: bool,
) -> ValidRow {
    let submit = u64::from(a % 10_000_000);
    let wait = u64::from(b % 7200);
    let run = 1 + u64::from(c % 500_000);
    let gpus = 1u64 << (d % 6);
    let s = |v: u64| v.to_string();
    match reader {
        Reader::Swf | Reader::SwfAlcf => {
            let procs = 1u64 << (d % 10);
            let status = ["1", "0", "5", "1", "-1"][(d % 5) as usize];
            let req = run + u64::from(b % 3600);
            let (f6, f9) = if reader == Reader::SwfAlcf {
                (s(req), "-1".into())
            } else {
                ("-1".into(), s(req))
            };
            let fields = vec![
                s(i as u64 + 1),
                s(submit),
                s(wait),
                s(run),
                s(procs),
                f6,
                "-1".into(),
                s(procs),
                f9,
                "-1".into(),
                status.into(),
                s(u64::from(a % 97)),
                s(u64::from(b % 13)),
                s(u64::from(c % 41)),
                s(u64::from(d % 3)),
                "-1".into(),
                "-1".into(),
                "-1".into(),
            ];
            let offset = if unix_start && reader == Reader::Swf {
                UNIX_START
            } else {
                0.0
            };
            ValidRow {
                fields,
                id: Some(s(i as u64 + 1)),
                submit: submit as f64 + offset,
                duration: Some(run as f64),
            }
        }
        Reader::Philly => {
            let t = 1_506_816_000 + submit as i64;
            ValidRow {
                fields: vec![
                    datetime(t),
                    format!("{run}.0"),
                    s(gpus),
                    format!("{}.0", run * gpus),
                    format!("{:06x}", a % 0xff_ffff),
                ],
                id: None,
                submit: t as f64,
                duration: Some(run as f64),
            }
        }
        Reader::Itp => ValidRow {
            fields: vec![format!("itp-{i}-{a:08x}"), s(submit), s(run), s(gpus)],
            id: Some(format!("itp-{i}-{a:08x}")),
            submit: submit as f64,
            duration: Some(run as f64),
        },
        Reader::Openb => {
            let pending = d % 7 == 0;
            let (gpu_milli, phase) = match d % 4 {
                0 => (1000, "Succeeded"),
                1 => (460, "Running"),
                2 => (1000, "Failed"),
                _ => (250, "Running"),
            };
            let phase = if pending { "Pending" } else { phase };
            let scheduled = submit + wait;
            let deleted = scheduled + run;
            ValidRow {
                fields: vec![
                    format!("pod-{i}"),
                    s(1000 * u64::from(1 + b % 32)),
                    s(1024 * u64::from(1 + c % 64)),
                    s(u64::from(d % 3)),
                    s(gpu_milli),
                    ["", "V100M16|V100M32", "nan"][(a % 3) as usize].into(),
                    ["LS", "BE", "Burstable"][(c % 3) as usize].into(),
                    phase.into(),
                    s(submit),
                    s(deleted),
                    if pending { String::new() } else { s(scheduled) },
                ],
                id: Some(format!("pod-{i}")),
                submit: submit as f64,
                duration: (!pending).then_some(run as f64),
            }
        }
        Reader::Helios => {
            let t = 1_593_561_600 + submit as i64;
            let start = t + wait as i64;
            let end = start + run as i64;
            let state = [
                "COMPLETED",
                "FAILED",
                "CANCELLED by 1001",
                "TIMEOUT",
                "RUNNING",
            ][(d % 5) as usize];
            ValidRow {
                fields: vec![
                    s(10_000 + i as u64),
                    format!("u{}", a % 50),
                    format!("vc{}", b % 9),
                    s(gpus),
                    s(4 * gpus),
                    s(1 + gpus / 8),
                    state.into(),
                    datetime(t),
                    datetime(start),
                    datetime(end),
                    s(run),
                    s(wait),
                ],
                id: Some(s(10_000 + i as u64)),
                submit: t as f64,
                duration: Some(run as f64),
            }
        }
        Reader::PaiJobs | Reader::PaiTasks => {
            // The job row; `pai_task_row` gives its one task.
            let end = submit + wait + run;
            ValidRow {
                fields: vec![
                    format!("j{i}"),
                    format!("inst{i}"),
                    format!("usr{}", a % 20),
                    "Terminated".into(),
                    s(submit + 1),
                    s(end + 1),
                ],
                id: Some(format!("inst{i}")),
                submit: (submit + 1) as f64,
                duration: Some(run as f64),
            }
        }
        Reader::Mlperf => {
            let start_ms = 1_621_000_000_000 + u64::from(a) * 7;
            let dur_s = run % 20_000 + 1;
            let stop_ms = start_ms + dur_s * 1000;
            ValidRow {
                fields: vec![
                    s(i as u64),
                    ["Dell", "NVIDIA", "Google"][(b % 3) as usize].into(),
                    format!("sys{}", c % 11),
                    ["bert", "resnet", "unet3d"][(d % 3) as usize].into(),
                    format!("result_{i}.txt"),
                    s(1 + u64::from(b % 8)),
                    s(gpus),
                    "GPU-X".into(),
                    "\"fw 1 , fw 2\"".into(),
                    s(64 * gpus),
                    s(u64::from(c)),
                    s(start_ms),
                    s(stop_ms),
                    s(dur_s),
                    ["success", "aborted", "success"][(d % 3) as usize].into(),
                    "3".into(),
                    "0.75".into(),
                ],
                id: Some(s(i as u64)),
                submit: start_ms as f64 / 1000.0,
                duration: Some(dur_s as f64),
            }
        }
    }
}

/// The task-table row of PAI job `i` (one task per job, starting `wait` after the submission).
pub(crate) fn pai_task_row(i: usize, (a, b, c, d): Seed) -> Vec<String> {
    let submit = u64::from(a % 10_000_000) + 1;
    let start = submit + u64::from(b % 7200);
    let end = start + 1 + u64::from(c % 500_000);
    vec![
        format!("j{i}"),
        "worker".into(),
        (1 + d % 4).to_string(),
        "Terminated".into(),
        start.to_string(),
        end.to_string(),
        (100 * (1 + d % 8)).to_string(),
        "29.296875".into(),
        ["0", "50", "100"][(d % 3) as usize].into(),
        ["T4", "V100", ""][(a % 3) as usize].into(),
    ]
}
