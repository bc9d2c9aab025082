//! What a model saw of each job field: which request fields its training rows carried and
//! over what range, and which fields its history keys read. A served answer names the
//! fields its model uses and flags a request outside what the model was trained on (an
//! extrapolation, not a measured answer).

use augur_datasets::JobRecord;
use serde::{Deserialize, Serialize};

use crate::schema::{FeatureSchema, KeyKind};

/// The request fields behind the first static features, in feature order (feature `i` is
/// ln(1 + field `i`)).
pub const REQUEST_FIELDS: [&str; 5] = [
    "num_gpus",
    "num_nodes",
    "cpus",
    "memory_mib",
    "requested_time",
];

/// The value of request field `i` of [`REQUEST_FIELDS`] in `job`.
fn request_value(job: &JobRecord, i: usize) -> Option<f64> {
    match i {
        0 => job.num_gpus,
        1 => job.num_nodes,
        2 => job.cpus,
        3 => job.memory_mib,
        4 => job.requested_time,
        _ => None,
    }
}

/// The range of one request field over a model's training rows, kept as the feature values
/// (ln(1 + value) as `f32`) so that a request compares exactly as the model reads it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FieldRange {
    /// One of [`REQUEST_FIELDS`].
    pub field: String,
    pub log_min: f32,
    pub log_max: f32,
}

impl FieldRange {
    /// The range in the field's own unit, `[min, max]` (rounded to 4 significant digits).
    pub fn bounds(&self) -> (f64, f64) {
        let back = |v: f32| round4(f64::from(v).exp_m1());
        (back(self.log_min), back(self.log_max))
    }
}

/// A request field whose value lies outside what the model was trained on.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct OutOfRange {
    pub field: &'static str,
    pub value: f64,
    /// The training range `[min, max]`.
    pub min: f64,
    pub max: f64,
}

/// See the [module docs](self). Empty for a model saved before ranges were recorded (then
/// nothing is flagged).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TrainingRanges {
    /// The request fields the training rows carried (at least one value), with their ranges.
    pub fields: Vec<FieldRange>,
}

impl TrainingRanges {
    /// The ranges over rows `rows` of a feature matrix `x` of `d` columns whose first ones
    /// are the static features of a [`FeatureSchema`] (a runtime or a failure feature row).
    pub fn of_rows(x: &[f32], d: usize, rows: &[usize]) -> TrainingRanges {
        let fields = REQUEST_FIELDS
            .iter()
            .enumerate()
            .filter_map(|(i, &field)| {
                let seen = rows
                    .iter()
                    .filter_map(|&r| x.get(r * d + i).copied())
                    .filter(|v| !v.is_nan());
                let (lo, hi) = seen.fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), v| {
                    (lo.min(v), hi.max(v))
                });
                (lo <= hi).then(|| FieldRange {
                    field: field.to_string(),
                    log_min: lo,
                    log_max: hi,
                })
            })
            .collect();
        TrainingRanges { fields }
    }

    /// The request fields of `job` outside the training ranges.
    pub fn outside(&self, job: &JobRecord) -> Vec<OutOfRange> {
        self.fields
            .iter()
            .filter_map(|r| {
                let i = REQUEST_FIELDS.iter().position(|f| *f == r.field)?;
                let value = request_value(job, i)?;
                let v = (value.max(0.0) as f32).ln_1p();
                let (min, max) = r.bounds();
                (v < r.log_min || v > r.log_max).then_some(OutOfRange {
                    field: REQUEST_FIELDS[i],
                    value,
                    min,
                    max,
                })
            })
            .collect()
    }

    /// The job fields a model with `schema` (trained with these ranges) reads: the request
    /// fields its training rows carried, then the fields its history keys are made of.
    pub fn fields_used(&self, schema: &FeatureSchema) -> Vec<&'static str> {
        let mut out: Vec<&'static str> = REQUEST_FIELDS
            .iter()
            .filter(|f| self.fields.iter().any(|r| r.field == **f))
            .copied()
            .collect();
        for k in &schema.keys {
            for f in k.fields() {
                if !out.contains(f) {
                    out.push(f);
                }
            }
        }
        out
    }
}

impl KeyKind {
    /// The job fields this key is made of.
    pub fn fields(self) -> &'static [&'static str] {
        match self {
            KeyKind::All => &[],
            KeyKind::User => &["user"],
            KeyKind::Group => &["group"],
            KeyKind::JobName => &["job_name"],
            KeyKind::GroupGpus => &["group", "num_gpus"],
            KeyKind::UserGpus => &["user", "num_gpus"],
            KeyKind::UserNodes => &["user", "num_nodes"],
            KeyKind::UserRequested => &["user", "requested_time"],
            KeyKind::UserName => &["user", "job_name"],
            KeyKind::ClusterGpus => &["cluster", "num_gpus"],
            KeyKind::Gpus => &["num_gpus"],
            KeyKind::Nodes => &["num_nodes"],
            KeyKind::Requested => &["requested_time"],
            KeyKind::GpuType => &["gpu_type"],
            KeyKind::Cluster => &["cluster"],
        }
    }
}

/// `v` to 4 significant digits (a range read back from `f32` feature values).
fn round4(v: f64) -> f64 {
    if v == 0.0 || !v.is_finite() {
        return v;
    }
    let scale = 10f64.powi(3 - v.abs().log10().floor() as i32);
    (v * scale).round() / scale
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch_features;

    #[test]
    fn ranges_flag_requests_beyond_training_and_name_the_fields_used() {
        let job = |gpus: f64, user: &str| JobRecord {
            job_id: format!("{user}-{gpus}"),
            submit_time: gpus,
            num_gpus: Some(gpus),
            user: Some(user.into()),
            ..Default::default()
        };
        let jobs: Vec<JobRecord> = [1.0, 8.0, 64.0, 2.0].map(|g| job(g, "a")).to_vec();
        let schema = FeatureSchema {
            version: 1,
            keys: vec![KeyKind::All, KeyKind::UserGpus],
            ratio: false,
        };
        let x = batch_features(&jobs, &schema);
        let ranges = TrainingRanges::of_rows(&x, schema.len(), &[0, 1, 2, 3]);
        assert_eq!(ranges.fields.len(), 1, "only num_gpus was carried");
        assert_eq!(ranges.fields[0].bounds(), (1.0, 64.0));
        assert_eq!(ranges.fields_used(&schema), vec!["num_gpus", "user"]);
        assert!(ranges.outside(&job(64.0, "b")).is_empty());
        assert!(ranges.outside(&job(1.0, "b")).is_empty());
        let out = ranges.outside(&job(512.0, "b"));
        assert_eq!(
            out,
            vec![OutOfRange {
                field: "num_gpus",
                value: 512.0,
                min: 1.0,
                max: 64.0
            }]
        );
        assert_eq!(ranges.outside(&job(0.5, "b")).len(), 1);
        // a model saved without ranges flags nothing
        assert!(TrainingRanges::default().outside(&job(1e6, "b")).is_empty());
    }
}
