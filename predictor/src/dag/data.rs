//! The bundled DAG datasets: TPC-H at every executor count, and WfCommons instances, each
//! job with the group it is held out with.

use std::path::Path;

use crate::PredictorError;
use augur_datasets::bundled::bundled_file;
use augur_datasets::dag::{read_tpch_dags, read_wfcommons, DagJob};
use augur_datasets::{DatasetError, ReadOptions};

/// A bundled or given DAG dataset: jobs and the group each is held out with.
#[derive(Debug, Clone)]
pub struct DagDataset {
    pub name: String,
    pub jobs: Vec<DagJob>,
    /// Group of each job: the TPC-H query, or the WfCommons instance.
    pub groups: Vec<String>,
}

/// TPC-H DAGs at every executor count each was measured with (one job per (scale, query,
/// executors)); group = query.
pub fn load_tpch(path: &Path) -> Result<DagDataset, PredictorError> {
    let (dags, _) = read_tpch_dags(path, &ReadOptions::default())?;
    let mut jobs = Vec::new();
    for dag in &dags {
        for e in dag.executor_counts() {
            if let Some(mut j) = dag.at_executors(e) {
                // keep only this executor count's facts (the waves of every count are
                // in `dags`; a copy per job would multiply them)
                for s in &mut j.stages {
                    s.waves.clear();
                    s.task_durations_s.clear();
                }
                jobs.push(j);
            }
        }
    }
    let groups = jobs.iter().map(|j| j.name.clone()).collect();
    Ok(DagDataset {
        name: "dag-tpch".into(),
        jobs,
        groups,
    })
}

/// Every WfCommons instance (`.json` / `.json.gz`) in `dir`, sorted by file name; group =
/// the instance.
pub fn load_wfcommons(dir: &Path) -> Result<DagDataset, PredictorError> {
    let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(dir)
        .map_err(|source| DatasetError::Io {
            path: dir.to_path_buf(),
            source,
        })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let n = p
                .file_name()
                .map(|n| n.to_string_lossy().to_string())
                .unwrap_or_default();
            n.ends_with(".json") || n.ends_with(".json.gz")
        })
        .collect();
    files.sort();
    let mut jobs = Vec::with_capacity(files.len());
    for f in &files {
        let (job, _) = read_wfcommons(f, &ReadOptions::default())?;
        jobs.push(job);
    }
    let groups = jobs.iter().map(|j| j.id.clone()).collect();
    Ok(DagDataset {
        name: "dag-wfcommons".into(),
        jobs,
        groups,
    })
}

/// Both bundled DAG sets as one training set (`dag-tpch` then `dag-wfcommons`, read by the
/// loaders `augur evaluate --task dag` uses), each group named `<set>/<group>` so no two
/// sets share a group.
pub fn load_bundled_dag_sets() -> Result<DagDataset, PredictorError> {
    let sets = [
        load_tpch(&bundled_file("dag-tpch/tpch_dags.json.gz")?)?,
        load_wfcommons(&bundled_file("dag-wfcommons")?)?,
    ];
    let mut all = DagDataset {
        name: sets
            .iter()
            .map(|s| s.name.as_str())
            .collect::<Vec<_>>()
            .join("+"),
        jobs: Vec::new(),
        groups: Vec::new(),
    };
    for set in sets {
        all.groups
            .extend(set.groups.iter().map(|g| format!("{}/{g}", set.name)));
        all.jobs.extend(set.jobs);
    }
    Ok(all)
}
