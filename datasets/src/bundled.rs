//! The real traces bundled with Augur under `datasets/data/` (each folder keeps its
//! `SOURCE.txt` and license), addressable by name: `--dataset philly`.
//!
//! The data folder is found, in order, at `$AUGUR_DATA_DIR`, `./datasets/data` under the
//! current directory, or the `data/` folder of this crate's source tree.

use std::path::{Path, PathBuf};

use crate::error::DatasetError;
use crate::format::TraceFormat;
use crate::jobs::load_jobs_many;
use crate::report::{ReadOptions, ReadReport};
use crate::schema::JobTable;

/// A job trace bundled in the repository.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dataset {
    /// Microsoft Philly, 82k DL jobs, Sep–Dec 2017.
    Philly,
    /// Microsoft ITP clusters 01–07 together (the cluster is a column).
    Itp,
    /// ALCF Mira SWF log (field 6 = requested wall time).
    Mira,
    /// NASA iPSC/860 1993, standard SWF.
    Nasa,
    /// Alibaba openb 2023 GPU pods.
    Openb,
    /// MLPerf Training v1.0 runs.
    Mlperf,
}

impl Dataset {
    /// All bundled job traces.
    pub const ALL: [Dataset; 6] = [
        Dataset::Philly,
        Dataset::Itp,
        Dataset::Mira,
        Dataset::Nasa,
        Dataset::Openb,
        Dataset::Mlperf,
    ];

    /// The name used with `--dataset`.
    pub fn name(self) -> &'static str {
        match self {
            Dataset::Philly => "philly",
            Dataset::Itp => "itp",
            Dataset::Mira => "mira",
            Dataset::Nasa => "nasa",
            Dataset::Openb => "openb",
            Dataset::Mlperf => "mlperf",
        }
    }

    /// Looks a dataset up by name.
    pub fn parse(name: &str) -> Result<Dataset, DatasetError> {
        Dataset::ALL
            .into_iter()
            .find(|d| d.name() == name)
            .ok_or_else(|| DatasetError::UnknownDataset {
                name: name.to_string(),
                known: Dataset::ALL.map(|d| d.name()).join(", "),
            })
    }

    /// The reader for its files.
    pub fn format(self) -> TraceFormat {
        match self {
            Dataset::Philly => TraceFormat::Philly,
            Dataset::Itp => TraceFormat::Itp,
            Dataset::Mira => TraceFormat::SwfAlcf,
            Dataset::Nasa => TraceFormat::Swf,
            Dataset::Openb => TraceFormat::OpenbPods,
            Dataset::Mlperf => TraceFormat::MlperfRuns,
        }
    }

    /// Paths of its files, relative to the data folder.
    pub fn relative_files(self) -> Vec<String> {
        match self {
            Dataset::Philly => vec!["philly/philly.csv.gz".into()],
            Dataset::Itp => (1..=7)
                .map(|i| format!("itp/cluster{i:02}.csv.gz"))
                .collect(),
            Dataset::Mira => vec!["swf/mira.swf.gz".into()],
            Dataset::Nasa => vec!["swf/nasa-ipsc-1993.swf.gz".into()],
            Dataset::Openb => vec!["openb/openb_pod_list_default.csv.gz".into()],
            Dataset::Mlperf => vec!["mlperf-v1.0/runs.csv.gz".into()],
        }
    }

    /// Absolute paths of its files.
    pub fn files(self) -> Result<Vec<PathBuf>, DatasetError> {
        let dir = data_dir()?;
        Ok(self
            .relative_files()
            .into_iter()
            .map(|f| dir.join(f))
            .collect())
    }

    /// Loads it into one [`JobTable`].
    pub fn load(self, opts: &ReadOptions) -> Result<(JobTable, ReadReport), DatasetError> {
        let files = self.files()?;
        let refs: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
        load_jobs_many(&refs, Some(self.format()), opts)
    }
}

/// The folder holding the bundled traces.
pub fn data_dir() -> Result<PathBuf, DatasetError> {
    let mut tried = Vec::new();
    if let Some(dir) = std::env::var_os("AUGUR_DATA_DIR") {
        let dir = PathBuf::from(dir);
        if dir.is_dir() {
            return Ok(dir);
        }
        tried.push(dir);
    }
    let candidates = [
        PathBuf::from("datasets/data"),
        Path::new(env!("CARGO_MANIFEST_DIR")).join("data"),
    ];
    for dir in candidates {
        if dir.join("philly").is_dir() {
            return Ok(dir);
        }
        tried.push(dir);
    }
    Err(DatasetError::Io {
        path: tried.first().cloned().unwrap_or_default(),
        source: std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!(
                "bundled data folder not found (tried {}); set AUGUR_DATA_DIR to the repository's datasets/data",
                tried
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ),
    })
}

/// Path of a bundled file given relative to the data folder (`"dag-tpch/tpch_dags.json.gz"`).
pub fn bundled_file(relative: &str) -> Result<PathBuf, DatasetError> {
    Ok(data_dir()?.join(relative))
}
