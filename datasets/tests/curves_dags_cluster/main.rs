//! The non-job readers (training curves, DAGs, cluster descriptions) on the real bundled files,
//! with facts checked against the files independently (python3), plus bad input.

use std::path::{Path, PathBuf};

use augur_datasets::bundled::bundled_file;
use augur_datasets::{ReadOptions, ReadReport};

mod cluster;
mod curves;
mod dags;
mod detection;

pub(crate) fn data(rel: &str) -> PathBuf {
    bundled_file(rel).expect("bundled data folder")
}

pub(crate) fn opts() -> ReadOptions {
    ReadOptions::default()
}

pub(crate) fn strict() -> ReadOptions {
    ReadOptions {
        strict: true,
        ..Default::default()
    }
}

/// Every row read was kept and nothing was dropped.
pub(crate) fn assert_clean(report: &ReadReport) {
    assert_eq!(
        report.rows_dropped(),
        0,
        "unexpected drops: {:?}",
        report.issues
    );
    assert_eq!(report.rows_read, report.rows_kept, "{report:?}");
}

pub(crate) fn files_in(dir: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(data(dir))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy().to_string();
            n != "SOURCE.txt"
        })
        .collect();
    v.sort();
    v
}

pub(crate) fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol
}

/// Writes `text` as `name` in `dir`.
pub(crate) fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}
