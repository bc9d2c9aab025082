//! The sacct reader against a live Slurm: starts a single-node cluster with accounting
//! (`scripts/slurm-test-cluster.sh`, from Debian's `slurmctld slurmd slurm-client munge
//! slurmdbd mariadb-server` packages, which `scripts/test.sh` installs; runs as root), submits a job that
//! completes, one that fails, a GPU job and a two-task array, and reads what
//! `sacct --format=<RECOMMENDED_FIELDS>` says about them. About 20 seconds.

use std::time::{Duration, Instant};

use augur_datasets::jobs::sacct::RECOMMENDED_FIELDS;
use augur_datasets::{detect_format, load_jobs, JobStatus, ReadOptions, TraceFormat};

use augur_test_fixtures::slurm::Cluster;

#[test]
fn sacct_on_a_live_cluster_reads_back_the_submitted_jobs() {
    let began = Instant::now();
    let cluster = Cluster::start();
    let ok = cluster.sbatch(&["-J", "live-ok", "-n", "1", "-t", "2", "--wrap", "sleep 1"]);
    let fail = cluster.sbatch(&["-J", "live-fail", "-n", "1", "--wrap", "exit 3"]);
    let gpu = cluster.sbatch(&[
        "-J",
        "live-gpu",
        "-n",
        "1",
        "--gres=gpu:tesla:1",
        "--wrap",
        "sleep 1",
    ]);
    let array = cluster.sbatch(&["-J", "live-array", "-a", "1-2", "-n", "1", "--wrap", "true"]);
    let ids = [ok.as_str(), fail.as_str(), gpu.as_str(), array.as_str()].join(",");

    // Wait until accounting has all five jobs (the array's two tasks) ended.
    let deadline = Instant::now() + Duration::from_secs(45);
    loop {
        let states = cluster.run(
            "sacct",
            &["-P", "-n", "-X", "-j", &ids, "--format=JobID,State,End"],
        );
        let lines: Vec<&str> = states.lines().collect();
        let ended = lines.len() == 5
            && lines.iter().all(|l| {
                let f: Vec<&str> = l.split('|').collect();
                f.len() == 3
                    && !["PENDING", "RUNNING", "COMPLETING"].contains(&f[1])
                    && f[2] != "Unknown"
            });
        if ended {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "jobs did not end in 45 s:\n{states}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }

    let format = format!("--format={RECOMMENDED_FIELDS}");
    let text = cluster.run(
        "sacct",
        &["-P", "-a", "-S", "2000-01-01", "-E", "now", &format],
    );
    let path = cluster.dir.path().join("sacct.txt");
    std::fs::write(&path, &text).expect("write the capture");
    assert_eq!(detect_format(&path).unwrap(), TraceFormat::Sacct);
    let (table, report) = load_jobs(&path, None, &ReadOptions::default()).expect("reads");
    assert_eq!(report.rows_dropped(), 0, "{:?}\n{text}", report.issues);
    assert!(
        report.notes.iter().any(|n| n.contains("job-step rows")),
        "{:?}",
        report.notes
    );
    let rows = table.to_records().unwrap();
    let job = |id: &str| {
        rows.iter()
            .find(|r| r.job_id == id)
            .unwrap_or_else(|| panic!("job {id} missing from\n{text}"))
    };
    let done = job(&ok);
    assert_eq!(done.status, JobStatus::Completed);
    assert_eq!(done.requested_time, Some(120.0));
    assert!(done.duration.is_some_and(|d| d >= 1.0), "{done:?}");
    assert_eq!(done.job_name.as_deref(), Some("live-ok"));
    assert_eq!(job(&fail).status, JobStatus::Failed);
    let g = job(&gpu);
    assert_eq!(
        (g.num_gpus, g.gpu_type.as_deref()),
        (Some(1.0), Some("tesla"))
    );
    for task in ["1", "2"] {
        assert_eq!(job(&format!("{array}_{task}")).status, JobStatus::Completed);
    }
    assert_eq!(rows.len(), 5, "{text}");
    for r in &rows {
        assert!(
            r.queue_wait.is_some_and(|w| w >= 0.0) && r.end_time.is_some(),
            "{r:?}"
        );
    }
    drop(cluster);
    eprintln!(
        "live Slurm test took {:.1} s",
        began.elapsed().as_secs_f64()
    );
}
