//! The profile of a job as the API receives it ([`JobProfile`]) and its trace-record form
//! (what the feature code reads). Its field checks are with the events'
//! ([`super::events`]) and the plausible ranges' ([`super::bounds`]).

use augur_datasets::JobRecord;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// What is known about a job when it is submitted (every field optional; the more there
/// is, the better the predictions).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct JobProfile {
    /// GPUs requested (fractional where GPUs are shared).
    #[schema(minimum = 0, maximum = 1e12)]
    pub num_gpus: Option<f64>,
    #[schema(minimum = 0, maximum = 1e12)]
    pub num_nodes: Option<f64>,
    #[schema(max_length = 256)]
    pub gpu_type: Option<String>,
    #[schema(minimum = 0, maximum = 1e12)]
    pub cpus: Option<f64>,
    #[schema(minimum = 0, maximum = 1e12)]
    pub memory_mib: Option<f64>,
    /// Requested wall-time limit, seconds.
    #[schema(minimum = 0, maximum = 1e12)]
    pub requested_time: Option<f64>,
    #[schema(max_length = 256)]
    pub user: Option<String>,
    /// Virtual cluster / group / account.
    #[schema(max_length = 256)]
    pub group: Option<String>,
    #[schema(max_length = 256)]
    pub job_name: Option<String>,
    #[schema(max_length = 256)]
    pub cluster: Option<String>,
    #[schema(max_length = 256)]
    pub queue: Option<String>,
}

impl JobProfile {
    /// The job as a trace record submitted at `submit` (what the feature code reads).
    pub fn to_record(&self, job_id: &str, submit: f64) -> JobRecord {
        JobRecord {
            job_id: job_id.to_string(),
            submit_time: submit,
            num_gpus: self.num_gpus,
            num_nodes: self.num_nodes,
            gpu_type: self.gpu_type.clone(),
            cpus: self.cpus,
            memory_mib: self.memory_mib,
            requested_time: self.requested_time,
            user: self.user.clone(),
            group: self.group.clone(),
            job_name: self.job_name.clone(),
            cluster: self.cluster.clone(),
            queue: self.queue.clone(),
            source: "ingest".to_string(),
            ..Default::default()
        }
    }

    /// The profile of a trace record (the inverse of [`JobProfile::to_record`]).
    pub fn of_record(job: &JobRecord) -> JobProfile {
        JobProfile {
            num_gpus: job.num_gpus,
            num_nodes: job.num_nodes,
            gpu_type: job.gpu_type.clone(),
            cpus: job.cpus,
            memory_mib: job.memory_mib,
            requested_time: job.requested_time,
            user: job.user.clone(),
            group: job.group.clone(),
            job_name: job.job_name.clone(),
            cluster: job.cluster.clone(),
            queue: job.queue.clone(),
        }
    }
}
