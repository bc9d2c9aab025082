//! The real traces bundled with Augur under `datasets/data/` (each folder keeps its
//! `SOURCE.txt` and license), addressable by name: `--dataset philly`.
//!
//! The data folder is found, in order, at `$AUGUR_DATASETS_DIR` (or its older name
//! `$AUGUR_DATA_DIR`), the install path `/usr/share/augur/datasets` (where the container
//! image puts it), `../share/augur/datasets` from the executable's folder, `datasets/data`
//! under the current directory or one of its two parents, or the `data/` folder of this
//! crate's source tree.

use std::path::{Path, PathBuf};

use crate::error::DatasetError;
use crate::format::TraceFormat;
use crate::jobs::load_jobs_many;
use crate::report::{ReadOptions, ReadReport};
use crate::schema::JobTable;
use crate::zone::TraceZone;

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
    /// Graham (Alliance Canada), 133k real Slurm jobs as `sacct -P` text, May–June 2021; local
    /// times of America/Toronto.
    Graham,
}

impl Dataset {
    /// All bundled job traces.
    pub const ALL: [Dataset; 7] = [
        Dataset::Philly,
        Dataset::Itp,
        Dataset::Mira,
        Dataset::Nasa,
        Dataset::Openb,
        Dataset::Mlperf,
        Dataset::Graham,
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
            Dataset::Graham => "graham",
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
            Dataset::Graham => TraceFormat::Sacct,
        }
    }

    /// The zone its zone-less local times were written in, for the traces that have such
    /// times (sacct prints the cluster's local time); `None` where the reader needs none.
    pub fn timezone(self) -> Option<TraceZone> {
        match self {
            Dataset::Graham => Some(TraceZone::Named(chrono_tz::America::Toronto)),
            _ => None,
        }
    }

    /// `opts` with the dataset's own zone ([`Dataset::timezone`]) in place of the caller's:
    /// where a bundled trace was recorded is a fact of the trace, not a choice.
    pub fn read_options(self, opts: &ReadOptions) -> ReadOptions {
        let mut opts = opts.clone();
        if let Some(zone) = self.timezone() {
            opts.timezone = zone;
        }
        opts
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
            Dataset::Graham => vec!["slurm-graham/graham.sacct.gz".into()],
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

    /// Loads it into one [`JobTable`], reading local times in its own zone.
    pub fn load(self, opts: &ReadOptions) -> Result<(JobTable, ReadReport), DatasetError> {
        let files = self.files()?;
        let refs: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
        load_jobs_many(&refs, Some(self.format()), &self.read_options(opts))
    }
}

/// Environment variable naming the bundled data folder (searched first).
pub const DATASETS_DIR_ENV: &str = "AUGUR_DATASETS_DIR";

/// The older name of [`DATASETS_DIR_ENV`], still honoured right after it.
pub const LEGACY_DATA_DIR_ENV: &str = "AUGUR_DATA_DIR";

/// Where an installed Augur keeps the bundled data (the container image copies
/// `datasets/data/` here).
pub const INSTALL_DIR: &str = "/usr/share/augur/datasets";

/// The data folder relative to the folder of the running executable (a `bin/` + `share/`
/// install under any prefix, e.g. `/usr/local/bin/augur` + `/usr/local/share/augur/datasets`).
pub const BESIDE_EXECUTABLE: &str = "../share/augur/datasets";

/// Where a candidate folder for the bundled data came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataDirSource {
    /// `$AUGUR_DATASETS_DIR`.
    DatasetsDirEnv,
    /// `$AUGUR_DATA_DIR` (older name).
    LegacyEnv,
    /// [`INSTALL_DIR`].
    Install,
    /// [`BESIDE_EXECUTABLE`], from the running executable's folder.
    BesideExecutable,
    /// `datasets/data` under the current directory or one of its two parents (a checkout of
    /// the repository, or a crate's folder in it).
    WorkingDirectory,
    /// The `data/` folder of this crate's source tree (compile-time path).
    SourceTree,
}

impl DataDirSource {
    fn describe(self) -> &'static str {
        match self {
            DataDirSource::DatasetsDirEnv => "$AUGUR_DATASETS_DIR",
            DataDirSource::LegacyEnv => "$AUGUR_DATA_DIR",
            DataDirSource::Install => "install path",
            DataDirSource::BesideExecutable => "next to the executable",
            DataDirSource::WorkingDirectory => "current directory",
            DataDirSource::SourceTree => "source tree",
        }
    }

    /// A folder named by the user is taken as it is; a guessed one must hold the bundled
    /// traces (its `philly/` folder), so an unrelated folder of that name is skipped.
    fn accepts(self, dir: &Path) -> bool {
        match self {
            DataDirSource::DatasetsDirEnv | DataDirSource::LegacyEnv => dir.is_dir(),
            _ => dir.join("philly").is_dir(),
        }
    }
}

/// The folders the bundled data is looked for in, in order: `$AUGUR_DATASETS_DIR`,
/// `$AUGUR_DATA_DIR`, [`INSTALL_DIR`], [`BESIDE_EXECUTABLE`] from `executable`'s folder,
/// `datasets/data` under the current directory and its two parents, this crate's source tree
/// (a compile-time path: stale when the build came from another checkout). `env` reads an
/// environment variable (unset and empty are the same).
pub fn data_dir_candidates(
    env: impl Fn(&str) -> Option<std::ffi::OsString>,
    executable: Option<&Path>,
) -> Vec<(DataDirSource, PathBuf)> {
    let mut out = Vec::new();
    for (name, source) in [
        (DATASETS_DIR_ENV, DataDirSource::DatasetsDirEnv),
        (LEGACY_DATA_DIR_ENV, DataDirSource::LegacyEnv),
    ] {
        if let Some(dir) = env(name).filter(|d| !d.is_empty()) {
            out.push((source, PathBuf::from(dir)));
        }
    }
    out.push((DataDirSource::Install, PathBuf::from(INSTALL_DIR)));
    if let Some(bin_dir) = executable.and_then(Path::parent) {
        out.push((
            DataDirSource::BesideExecutable,
            bin_dir.join(BESIDE_EXECUTABLE),
        ));
    }
    // a checkout's root or one of its crates' folders (where `cargo test` runs a crate's tests)
    for up in ["", "../", "../../"] {
        out.push((
            DataDirSource::WorkingDirectory,
            PathBuf::from(format!("{up}datasets/data")),
        ));
    }
    out.push((
        DataDirSource::SourceTree,
        Path::new(env!("CARGO_MANIFEST_DIR")).join("data"),
    ));
    out
}

/// The first of `candidates` that holds the bundled data, else an error naming every place
/// tried.
pub fn find_data_dir(candidates: &[(DataDirSource, PathBuf)]) -> Result<PathBuf, DatasetError> {
    if let Some((_, dir)) = candidates.iter().find(|(s, d)| s.accepts(d)) {
        return Ok(dir.clone());
    }
    let tried = candidates
        .iter()
        .map(|(s, d)| format!("{} ({})", d.display(), s.describe()))
        .collect::<Vec<_>>()
        .join(", ");
    Err(DatasetError::BundledDataNotFound { tried })
}

/// The folder holding the bundled traces, searched as [`data_dir_candidates`] lists.
pub fn data_dir() -> Result<PathBuf, DatasetError> {
    let exe = std::env::current_exe().ok();
    find_data_dir(&data_dir_candidates(
        |name| std::env::var_os(name),
        exe.as_deref(),
    ))
}

/// Path of a bundled file given relative to the data folder (`"dag-tpch/tpch_dags.json.gz"`).
pub fn bundled_file(relative: &str) -> Result<PathBuf, DatasetError> {
    Ok(data_dir()?.join(relative))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;

    fn env_of(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| {
            vars.iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| OsString::from(v))
        }
    }

    #[test]
    fn candidates_are_env_then_install_path_then_beside_the_executable_then_the_source_tree() {
        let env = env_of(&[("AUGUR_DATASETS_DIR", "/a"), ("AUGUR_DATA_DIR", "/b")]);
        let got = data_dir_candidates(env, Some(Path::new("/opt/augur/bin/augur")));
        let sources: Vec<DataDirSource> = got.iter().map(|(s, _)| *s).collect();
        assert_eq!(
            sources,
            [
                DataDirSource::DatasetsDirEnv,
                DataDirSource::LegacyEnv,
                DataDirSource::Install,
                DataDirSource::BesideExecutable,
                DataDirSource::WorkingDirectory,
                DataDirSource::WorkingDirectory,
                DataDirSource::WorkingDirectory,
                DataDirSource::SourceTree,
            ]
        );
        let paths: Vec<PathBuf> = got.into_iter().map(|(_, p)| p).collect();
        assert_eq!(paths[0], Path::new("/a"));
        assert_eq!(paths[1], Path::new("/b"));
        assert_eq!(paths[2], Path::new("/usr/share/augur/datasets"));
        assert_eq!(
            paths[3],
            Path::new("/opt/augur/bin/../share/augur/datasets")
        );
        assert_eq!(paths[4], Path::new("datasets/data"));
        assert_eq!(paths[5], Path::new("../datasets/data"));
        assert_eq!(paths[6], Path::new("../../datasets/data"));
        assert_eq!(paths[7], Path::new(env!("CARGO_MANIFEST_DIR")).join("data"));
    }

    #[test]
    fn unset_or_empty_variables_and_an_unknown_executable_add_no_candidate() {
        let env = env_of(&[("AUGUR_DATASETS_DIR", "")]);
        let sources: Vec<DataDirSource> = data_dir_candidates(env, None)
            .into_iter()
            .map(|(s, _)| s)
            .collect();
        assert_eq!(
            sources,
            [
                DataDirSource::Install,
                DataDirSource::WorkingDirectory,
                DataDirSource::WorkingDirectory,
                DataDirSource::WorkingDirectory,
                DataDirSource::SourceTree,
            ]
        );
    }

    #[test]
    fn the_first_folder_holding_the_data_wins_in_candidate_order() {
        let root = tempfile::tempdir().unwrap();
        let with_data = |name: &str| {
            let d = root.path().join(name);
            std::fs::create_dir_all(d.join("philly")).unwrap();
            d
        };
        let install = with_data("usr/share/augur/datasets");
        std::fs::create_dir_all(root.path().join("usr/local/bin")).unwrap();
        let exe = root.path().join("usr/local/bin/augur");
        let beside = with_data("usr/local/share/augur/datasets");
        let source = with_data("src/datasets/data");
        let missing = root.path().join("nowhere");
        let cands = |env: Option<&Path>, install: &Path| {
            let mut v = Vec::new();
            if let Some(e) = env {
                v.push((DataDirSource::DatasetsDirEnv, e.to_path_buf()));
            }
            v.push((DataDirSource::Install, install.to_path_buf()));
            v.push((
                DataDirSource::BesideExecutable,
                exe.parent().unwrap().join(BESIDE_EXECUTABLE),
            ));
            v.push((DataDirSource::SourceTree, source.clone()));
            v
        };
        // the variable wins, even over a folder without philly/ (the user named it)
        let named = root.path().join("mine");
        std::fs::create_dir_all(&named).unwrap();
        assert_eq!(
            find_data_dir(&cands(Some(&named), &install)).unwrap(),
            named
        );
        // a variable naming no folder is passed over, then the install path
        assert_eq!(
            find_data_dir(&cands(Some(&missing), &install)).unwrap(),
            install
        );
        // no install: next to the executable
        let found = find_data_dir(&cands(None, &missing)).unwrap();
        assert_eq!(
            found.canonicalize().unwrap(),
            beside.canonicalize().unwrap()
        );
        // a guessed folder without the traces is passed over
        std::fs::remove_dir_all(beside.join("philly")).unwrap();
        assert_eq!(find_data_dir(&cands(None, &missing)).unwrap(), source);
    }

    #[test]
    fn not_found_names_every_place_tried() {
        let cands = vec![
            (DataDirSource::DatasetsDirEnv, PathBuf::from("/no/env")),
            (DataDirSource::Install, PathBuf::from("/no/install")),
            (DataDirSource::BesideExecutable, PathBuf::from("/no/exe")),
            (DataDirSource::SourceTree, PathBuf::from("/no/src")),
        ];
        let err = find_data_dir(&cands).unwrap_err();
        assert!(matches!(err, DatasetError::BundledDataNotFound { .. }));
        let msg = err.to_string();
        for p in ["/no/env", "/no/install", "/no/exe", "/no/src"] {
            assert!(msg.contains(p), "{msg}");
        }
        assert!(msg.contains("AUGUR_DATASETS_DIR"), "{msg}");
        let at = |p: &str| msg.find(p).unwrap();
        assert!(at("/no/env") < at("/no/install") && at("/no/install") < at("/no/exe"));
    }
}
