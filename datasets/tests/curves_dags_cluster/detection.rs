//! Format detection and `augur data inspect` summaries of every bundled non-job file.

use std::path::PathBuf;

use augur_datasets::bundled::data_dir;
use augur_datasets::{detect_format, summarize_file, TraceFormat};

use crate::{assert_clean, data, files_in, opts};

/// Every bundled non-job file (and MLPerf runs) with the format it must be detected as.
fn bundled_non_job_files() -> Vec<(PathBuf, TraceFormat)> {
    let mut out = vec![
        (data("mlperf-v1.0/runs.csv.gz"), TraceFormat::MlperfRuns),
        (
            data("mlperf-v1.0/eval_curves.csv.gz"),
            TraceFormat::MlperfCurves,
        ),
        (data("dag-tpch/tpch_dags.json.gz"), TraceFormat::TpchDags),
        (
            data("node-faults/fault_trace.json.gz"),
            TraceFormat::NodeFaults,
        ),
        (
            data("node-faults/fault_statistics.json"),
            TraceFormat::FaultStatistics,
        ),
        (
            data("openb/openb_node_list_gpu_node.csv"),
            TraceFormat::OpenbNodes,
        ),
    ];
    for f in files_in("dag-wfcommons") {
        out.push((f, TraceFormat::WfCommons));
    }
    for f in files_in("gavel-throughputs") {
        out.push((f, TraceFormat::GavelThroughputs));
    }
    for f in files_in("cluster-summaries") {
        out.push((f, TraceFormat::ClusterSummary));
    }
    for f in files_in("pollux-curves") {
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        let fmt = if name.contains("__validation") {
            TraceFormat::PolluxValidation
        } else if name.contains("__placements") {
            TraceFormat::PolluxPlacements
        } else {
            TraceFormat::PolluxScalability
        };
        out.push((f, fmt));
    }
    out
}

#[test]
fn detect_format_on_every_bundled_non_job_file() {
    let files = bundled_non_job_files();
    assert_eq!(files.len(), 6 + 19 + 2 + 2 + 134);
    let mut wrong = Vec::new();
    for (path, expected) in &files {
        match detect_format(path) {
            Ok(f) if f == *expected => {}
            other => wrong.push(format!(
                "{}: expected {expected}, got {other:?}",
                path.display()
            )),
        }
    }
    assert!(
        wrong.is_empty(),
        "{} misdetected:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

#[test]
fn summaries_of_every_bundled_non_job_file() {
    assert!(data_dir().is_ok());
    for (path, format) in bundled_non_job_files() {
        let s = summarize_file(&path, format, &opts())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(s.format, format);
        assert_clean(&s.report);
        assert!(s.report.rows_read > 0, "{}", path.display());
        assert!(s.facts.len() >= 3, "{}: {:?}", path.display(), s.facts);
    }
    let fact = |rel: &str, format: TraceFormat, name: &str| -> String {
        let s = summarize_file(&data(rel), format, &opts()).unwrap();
        s.facts
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| panic!("no fact {name}: {:?}", s.facts))
    };
    assert_eq!(
        fact("mlperf-v1.0/runs.csv.gz", TraceFormat::MlperfRuns, "runs"),
        "1239"
    );
    assert_eq!(
        fact(
            "mlperf-v1.0/eval_curves.csv.gz",
            TraceFormat::MlperfCurves,
            "points"
        ),
        "54988"
    );
    assert_eq!(
        fact("dag-tpch/tpch_dags.json.gz", TraceFormat::TpchDags, "DAGs"),
        "154"
    );
    assert_eq!(
        fact(
            "node-faults/fault_trace.json.gz",
            TraceFormat::NodeFaults,
            "fault episodes"
        ),
        "584"
    );
    assert_eq!(
        fact(
            "node-faults/fault_statistics.json",
            TraceFormat::FaultStatistics,
            "faults"
        ),
        "584"
    );
    assert_eq!(
        fact(
            "openb/openb_node_list_gpu_node.csv",
            TraceFormat::OpenbNodes,
            "GPUs"
        ),
        "6212"
    );
    assert_eq!(
        fact(
            "gavel-throughputs/scheduler__simulation_throughputs.json.gz",
            TraceFormat::GavelThroughputs,
            "co-located pairs"
        ),
        "10338"
    );
    // Job traces other than MLPerf runs are not summarised here.
    assert!(summarize_file(&data("philly/philly.csv.gz"), TraceFormat::Philly, &opts()).is_err());
}
