//! What the service ingests: job lifecycle events, training-metric points and cluster
//! snapshots, as JSON tagged by `type`. Each is checked field by field ([`Event::validate`])
//! before it is stored; an invalid one is refused with a 422 naming the field.

use augur_datasets::JobStatus;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::event_time::{optional_time, time};
pub use super::profile::JobProfile;
use crate::serve::http::error::{field_and_message, FieldError};

mod checks;

/// Longest accepted string (ids, names).
pub const MAX_STRING: usize = 256;
/// Most stages in one DAG, metric points in one event, nodes in one snapshot.
pub const MAX_ITEMS: usize = 10_000;

/// One stage of a DAG-structured job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DagStage {
    #[schema(min_length = 1, max_length = 256)]
    pub id: String,
    /// Ids of the stages that must finish before this one starts.
    #[serde(default)]
    pub depends_on: Vec<String>,
    /// The stage's own resources, when they differ from the job's.
    #[serde(default)]
    pub profile: Option<JobProfile>,
    /// A known run time of the stage, seconds (e.g. from a previous run).
    #[serde(default)]
    #[schema(minimum = 0, maximum = 1e12)]
    pub estimate_seconds: Option<f64>,
    /// Parallel tasks in the stage (a Spark stage's tasks; 1 for a workflow task): a
    /// feature of the DAG model, which answers only when every stage gives it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 100000000)]
    pub tasks: Option<u32>,
    /// Kind of work: the operator or workflow task category (`mProject`, `bwa_mem`, ...),
    /// a DAG-model feature (its words are the stage's tokens).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(min_length = 1, max_length = 256)]
    pub kind: Option<String>,
    /// Total size of the stage's input files, bytes (a DAG-model feature).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0, maximum = 1e18)]
    pub input_bytes: Option<f64>,
    /// Cores each task runs on (a DAG-model feature).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0, maximum = 100000)]
    pub cores: Option<f64>,
}

/// A job made of stages with dependencies. The job-level fields besides `stages` are
/// features of the DAG model (see [`DagStage::tasks`] for when it answers).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Dag {
    #[schema(min_items = 1, max_items = 10000)]
    pub stages: Vec<DagStage>,
    /// Executors the job runs with (Spark-style jobs, as the TPC-H training jobs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 1000000)]
    pub executors: Option<u32>,
    /// Data scale factor, whole GB (TPC-H's `100g` is 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 100000000)]
    pub scale_gb: Option<u32>,
    /// Workflow name (`montage`, `airrflow`, ...): workflow-style jobs, as the WfCommons
    /// training instances.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(min_length = 1, max_length = 256)]
    pub workflow: Option<String>,
    /// The workflow system that runs it (`pegasus`, `nextflow`, `makeflow`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(min_length = 1, max_length = 256)]
    pub workflow_system: Option<String>,
}

/// Final state of a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum FinishStatus {
    Completed,
    Failed,
    Killed,
    Unknown,
}

impl From<FinishStatus> for JobStatus {
    fn from(s: FinishStatus) -> JobStatus {
        match s {
            FinishStatus::Completed => JobStatus::Completed,
            FinishStatus::Failed => JobStatus::Failed,
            FinishStatus::Killed => JobStatus::Killed,
            FinishStatus::Unknown => JobStatus::Unknown,
        }
    }
}

/// A training metric of a job at a step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MetricPoint {
    pub step: u64,
    #[serde(default)]
    pub loss: Option<f64>,
    #[serde(default)]
    pub accuracy: Option<f64>,
    /// When it was measured, seconds (same clock as the job events; epoch seconds or an
    /// RFC 3339 string).
    #[serde(default, deserialize_with = "optional_time")]
    pub at: Option<f64>,
}

/// An observation of the whole cluster.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ClusterSnapshot {
    /// Epoch seconds or an RFC 3339 string.
    #[serde(deserialize_with = "time")]
    pub at: f64,
    #[schema(minimum = 0, maximum = 1e12)]
    pub total_gpus: f64,
    #[schema(minimum = 0, maximum = 1e12)]
    pub busy_gpus: f64,
    #[serde(default)]
    pub queued_jobs: Option<u64>,
    #[serde(default)]
    pub running_jobs: Option<u64>,
    #[serde(default)]
    pub nodes: Option<u64>,
}

/// An ingested event. Times are seconds on one clock (Unix time, or a trace's own clock),
/// given as numbers or as RFC 3339 strings (stored as epoch seconds).
///
/// Deserialised by hand ([`TryFrom<serde_json::Value>`]) so that an error inside an event
/// still names its field (serde's internally tagged enums lose the path).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    try_from = "serde_json::Value"
)]
// submits dominate the traffic, so boxing their profile would only add an allocation
#[allow(clippy::large_enum_variant)]
pub enum Event {
    /// A job was submitted.
    JobSubmitted {
        #[schema(min_length = 1, max_length = 256)]
        job_id: String,
        at: f64,
        #[serde(default)]
        profile: JobProfile,
        #[serde(default)]
        dag: Option<Dag>,
    },
    /// A job started running.
    JobStarted {
        #[schema(min_length = 1, max_length = 256)]
        job_id: String,
        at: f64,
    },
    /// A job ended. `duration` (seconds of running) defaults to `at − start`.
    JobFinished {
        #[schema(min_length = 1, max_length = 256)]
        job_id: String,
        at: f64,
        status: FinishStatus,
        #[serde(default)]
        #[schema(minimum = 0, maximum = 1e12)]
        duration: Option<f64>,
    },
    /// The GPU type a job will run on was named after its submit (a controller steered it,
    /// a queue assigned a flavor): its run time is predicted for that type from then on.
    JobTyped {
        #[schema(min_length = 1, max_length = 256)]
        job_id: String,
        at: f64,
        #[schema(min_length = 1, max_length = 256)]
        gpu_type: String,
    },
    /// Training-metric points of a running job (loss/accuracy by step).
    MetricPoints {
        #[schema(min_length = 1, max_length = 256)]
        job_id: String,
        #[schema(min_items = 1, max_items = 10000)]
        points: Vec<MetricPoint>,
    },
    /// A snapshot of the cluster.
    ClusterSnapshot(ClusterSnapshot),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SubmittedBody {
    job_id: String,
    #[serde(deserialize_with = "time")]
    at: f64,
    #[serde(default)]
    profile: JobProfile,
    #[serde(default)]
    dag: Option<Dag>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StartedBody {
    job_id: String,
    #[serde(deserialize_with = "time")]
    at: f64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FinishedBody {
    job_id: String,
    #[serde(deserialize_with = "time")]
    at: f64,
    status: FinishStatus,
    #[serde(default)]
    duration: Option<f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TypedBody {
    job_id: String,
    #[serde(deserialize_with = "time")]
    at: f64,
    gpu_type: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PointsBody {
    job_id: String,
    points: Vec<MetricPoint>,
}

/// The event types, as the `type` tag spells them.
pub const EVENT_TYPES: [&str; 6] = [
    "job_submitted",
    "job_started",
    "job_finished",
    "job_typed",
    "metric_points",
    "cluster_snapshot",
];

fn body<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> Result<T, FieldError> {
    serde_path_to_error::deserialize(v).map_err(|e| {
        let path = e.path().to_string();
        let (field, message) = field_and_message(&path, &e.into_inner().to_string());
        FieldError { field, message }
    })
}

impl TryFrom<serde_json::Value> for Event {
    type Error = FieldError;

    fn try_from(v: serde_json::Value) -> Result<Event, FieldError> {
        let serde_json::Value::Object(mut map) = v else {
            return Err(FieldError {
                field: String::new(),
                message: format!(
                    "an event is an object with a `type` ({})",
                    EVENT_TYPES.join(", ")
                ),
            });
        };
        let type_error = |message: String| FieldError {
            field: "type".into(),
            message,
        };
        let ty = match map.remove("type") {
            Some(serde_json::Value::String(t)) => t,
            _ => {
                return Err(type_error(format!(
                    "missing or not a string; one of {}",
                    EVENT_TYPES.join(", ")
                )))
            }
        };
        let rest = serde_json::Value::Object(map);
        let tagged = match ty.as_str() {
            "job_submitted" => Tagged::JobSubmitted(body(rest)?),
            "job_started" => Tagged::JobStarted(body(rest)?),
            "job_finished" => Tagged::JobFinished(body(rest)?),
            "job_typed" => Tagged::JobTyped(body(rest)?),
            "metric_points" => Tagged::MetricPoints(body(rest)?),
            "cluster_snapshot" => Tagged::ClusterSnapshot(body(rest)?),
            other => {
                return Err(type_error(format!(
                    "unknown event type `{other}`; one of {}",
                    EVENT_TYPES.join(", ")
                )))
            }
        };
        Ok(tagged.into())
    }
}

/// An event as its `type` tag and that type's body. API input is read into it from a
/// `serde_json::Value`, type by type, so errors name their field ([`TryFrom`] above);
/// what the store wrote is decoded into it straight from the JSON ([`Event::from_stored`]).
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
// as for `Event`: submits dominate, and each value becomes an `Event` at once
#[allow(clippy::large_enum_variant)]
enum Tagged {
    JobSubmitted(SubmittedBody),
    JobStarted(StartedBody),
    JobFinished(FinishedBody),
    JobTyped(TypedBody),
    MetricPoints(PointsBody),
    ClusterSnapshot(ClusterSnapshot),
}

impl From<Tagged> for Event {
    fn from(t: Tagged) -> Event {
        match t {
            Tagged::JobSubmitted(b) => Event::JobSubmitted {
                job_id: b.job_id,
                at: b.at,
                profile: b.profile,
                dag: b.dag,
            },
            Tagged::JobStarted(b) => Event::JobStarted {
                job_id: b.job_id,
                at: b.at,
            },
            Tagged::JobFinished(b) => Event::JobFinished {
                job_id: b.job_id,
                at: b.at,
                status: b.status,
                duration: b.duration,
            },
            Tagged::JobTyped(b) => Event::JobTyped {
                job_id: b.job_id,
                at: b.at,
                gpu_type: b.gpu_type,
            },
            Tagged::MetricPoints(b) => Event::MetricPoints {
                job_id: b.job_id,
                points: b.points,
            },
            Tagged::ClusterSnapshot(s) => Event::ClusterSnapshot(s),
        }
    }
}

impl Event {
    /// Decodes an event the store wrote, straight from its JSON (without the
    /// `serde_json::Value` tree and field paths API input is checked with). A body that
    /// does not decode is decoded again as API input is, for the error naming the field.
    pub fn from_stored(body: &str) -> Result<Event, serde_json::Error> {
        match serde_json::from_str::<Tagged>(body) {
            Ok(t) => Ok(t.into()),
            Err(_) => serde_json::from_str(body),
        }
    }
}

/// A batch of events, stored atomically (all or none).
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EventBatch {
    #[schema(min_items = 1)]
    pub events: Vec<Event>,
}

impl Event {
    /// The `type` tag.
    pub fn kind(&self) -> &'static str {
        match self {
            Event::JobSubmitted { .. } => "job_submitted",
            Event::JobStarted { .. } => "job_started",
            Event::JobFinished { .. } => "job_finished",
            Event::JobTyped { .. } => "job_typed",
            Event::MetricPoints { .. } => "metric_points",
            Event::ClusterSnapshot(_) => "cluster_snapshot",
        }
    }

    /// The job it is about, if any.
    pub fn job_id(&self) -> Option<&str> {
        match self {
            Event::JobSubmitted { job_id, .. }
            | Event::JobStarted { job_id, .. }
            | Event::JobFinished { job_id, .. }
            | Event::JobTyped { job_id, .. }
            | Event::MetricPoints { job_id, .. } => Some(job_id),
            Event::ClusterSnapshot(_) => None,
        }
    }

    /// Its time, when it has one.
    pub fn at(&self) -> Option<f64> {
        match self {
            Event::JobSubmitted { at, .. }
            | Event::JobStarted { at, .. }
            | Event::JobFinished { at, .. }
            | Event::JobTyped { at, .. } => Some(*at),
            Event::MetricPoints { points, .. } => {
                points.iter().filter_map(|p| p.at).reduce(f64::max)
            }
            Event::ClusterSnapshot(s) => Some(s.at),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::http::error::parse_json;

    fn field_of(json: &str) -> String {
        let r: Result<EventBatch, _> = parse_json(json.as_bytes());
        let e = match r {
            Err(e) => e,
            Ok(b) => {
                let mut err = None;
                for (i, ev) in b.events.iter().enumerate() {
                    if let Err(e) = ev.validate(&format!("events[{i}]")) {
                        err = Some(e);
                        break;
                    }
                }
                err.expect("expected an error")
            }
        };
        assert_eq!(e.status.as_u16(), 422, "{e:?}");
        e.field.unwrap_or_default()
    }

    #[test]
    fn invalid_fields_are_named() {
        assert_eq!(
            field_of(
                r#"{"events":[{"type":"job_started","job_id":"a","at":1},{"type":"job_started","job_id":"","at":1}]}"#
            ),
            "events[1].job_id"
        );
        assert_eq!(
            field_of(
                r#"{"events":[{"type":"job_submitted","job_id":"a","at":1,"profile":{"num_gpus":-1}}]}"#
            ),
            "events[0].profile.num_gpus"
        );
        assert_eq!(
            field_of(
                r#"{"events":[{"type":"job_submitted","job_id":"a","at":1,"profile":{"num_gpus":"two"}}]}"#
            ),
            "events[0].profile.num_gpus"
        );
        assert_eq!(
            field_of(r#"{"events":[{"type":"job_finished","job_id":"a","at":1}]}"#),
            "events[0].status"
        );
        assert_eq!(
            field_of(r#"{"events":[{"type":"job_exploded","job_id":"a","at":1}]}"#),
            "events[0].type"
        );
        assert_eq!(
            field_of(r#"{"events":[{"type":"job_started","job_id":"a","at":1,"extra":2}]}"#),
            "events[0].extra"
        );
        assert_eq!(
            field_of(
                r#"{"events":[{"type":"job_finished","job_id":"a","at":1,"status":"exploded"}]}"#
            ),
            "events[0].status"
        );
        assert_eq!(
            field_of(
                r#"{"events":[{"type":"metric_points","job_id":"a","points":[{"step":1,"loss":0.5},{"step":2}]}]}"#
            ),
            "events[0].points[1]"
        );
        assert_eq!(
            field_of(
                r#"{"events":[{"type":"cluster_snapshot","at":1,"total_gpus":8,"busy_gpus":9}]}"#
            ),
            "events[0].busy_gpus"
        );
        assert_eq!(
            field_of(
                r#"{"events":[{"type":"job_submitted","job_id":"a","at":1,"dag":{"stages":[{"id":"x","depends_on":["y"]},{"id":"y","depends_on":["x"]}]}}]}"#
            ),
            "events[0].dag.stages"
        );
        assert_eq!(
            field_of(
                r#"{"events":[{"type":"job_submitted","job_id":"a","at":1,"dag":{"stages":[{"id":"x","depends_on":["z"]}]}}]}"#
            ),
            "events[0].dag.stages[0].depends_on[0]"
        );
    }

    #[test]
    fn events_round_trip_as_tagged_json() {
        let e = Event::JobFinished {
            job_id: "j1".into(),
            at: 10.0,
            status: FinishStatus::Failed,
            duration: Some(4.0),
        };
        let json = serde_json::to_string(&e).unwrap();
        assert!(json.contains(r#""type":"job_finished""#), "{json}");
        let back: Event = serde_json::from_str(&json).unwrap();
        assert_eq!(back, e);
    }

    #[test]
    fn stored_events_decode_as_api_input_does() {
        let batch = r#"{"events":[
            {"type":"job_submitted","job_id":"a","at":1.5,"profile":{"num_gpus":8,"user":"u","gpu_type":"V100"},
             "dag":{"stages":[{"id":"s1"},{"id":"s2","depends_on":["s1"],"estimate_seconds":30}]}},
            {"type":"job_submitted","job_id":"b","at":2},
            {"type":"job_started","job_id":"a","at":3},
            {"type":"job_finished","job_id":"a","at":9,"status":"failed","duration":6},
            {"type":"job_finished","job_id":"b","at":9,"status":"completed"},
            {"type":"job_typed","job_id":"a","at":2.5,"gpu_type":"Tesla-V100-SXM2-32GB"},
            {"type":"metric_points","job_id":"a","points":[{"step":1,"loss":2.5,"at":4},{"step":2,"accuracy":0.5}]},
            {"type":"cluster_snapshot","at":5,"total_gpus":64,"busy_gpus":12}
        ]}"#;
        let batch: EventBatch = parse_json(batch.as_bytes()).unwrap();
        for e in &batch.events {
            let stored = serde_json::to_string(e).unwrap();
            assert_eq!(&Event::from_stored(&stored).unwrap(), e, "{stored}");
            // by the quick path, not the fallback
            assert!(serde_json::from_str::<Tagged>(&stored).is_ok(), "{stored}");
        }
        // what API input refuses is refused, with the input path's message
        for bad in [
            r#"{"type":"job_started","job_id":"a","at":3,"extra":1}"#,
            r#"{"type":"job_exploded","job_id":"a","at":3}"#,
            r#"{"type":"job_started","at":3}"#,
        ] {
            let slow = serde_json::from_str::<Event>(bad).unwrap_err().to_string();
            assert_eq!(
                Event::from_stored(bad).unwrap_err().to_string(),
                slow,
                "{bad}"
            );
        }
        // a time the API took as RFC 3339 decodes as it does there
        let t = r#"{"type":"job_started","job_id":"a","at":"2026-11-25T00:00:00Z"}"#;
        assert_eq!(
            Event::from_stored(t).unwrap(),
            serde_json::from_str::<Event>(t).unwrap()
        );
    }
}
