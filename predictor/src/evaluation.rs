//! The shape every evaluation shares: rows of one [`MethodRow`] type per task (a method's
//! name and its metrics, serialised flat, so `augur evaluate --json` prints
//! `{"method": ..., "<metric>": ..., ...}`), gathered in the task's evaluation struct
//! beside the task's extras (split sizes, per-group summaries, plot data).
//!
//! Convention: `evaluate_x(...) -> XEvaluation` with `rows: Vec<MethodRow<XMetrics>>`; the
//! evaluation never owns the trained model. [`Evaluation`] is the common read access.

use serde::{Deserialize, Serialize};

/// One row of an evaluation table: a method (baseline or model variant) and its metrics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MethodRow<M> {
    /// What was evaluated, e.g. "global median" or "augur, online conformal".
    pub method: String,
    /// The task's metrics, serialised beside `method` in the task's key order.
    #[serde(flatten)]
    pub metrics: M,
}

impl<M> MethodRow<M> {
    /// A row of `method` with `metrics`.
    pub fn new(method: impl Into<String>, metrics: M) -> MethodRow<M> {
        MethodRow {
            method: method.into(),
            metrics,
        }
    }
}

/// Read access to an evaluation's rows.
pub trait Evaluation {
    /// The task's metrics of one row.
    type Metrics;

    /// The rows, in table order.
    fn rows(&self) -> &[MethodRow<Self::Metrics>];

    /// The first row whose method starts with `prefix`.
    fn row(&self, prefix: &str) -> Option<&MethodRow<Self::Metrics>> {
        self.rows().iter().find(|r| r.method.starts_with(prefix))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    struct Metrics {
        mae: f64,
        coverage: Option<f64>,
    }

    struct Table(Vec<MethodRow<Metrics>>);

    impl Evaluation for Table {
        type Metrics = Metrics;
        fn rows(&self) -> &[MethodRow<Metrics>] {
            &self.0
        }
    }

    #[test]
    fn rows_serialise_flat_in_field_order() {
        let row = MethodRow::new(
            "global median",
            Metrics {
                mae: 1.5,
                coverage: None,
            },
        );
        let json = serde_json::to_string(&row).unwrap();
        assert_eq!(
            json,
            r#"{"method":"global median","mae":1.5,"coverage":null}"#
        );
        let back: MethodRow<Metrics> = serde_json::from_str(&json).unwrap();
        assert_eq!(back, row);
    }

    #[test]
    fn rows_are_found_by_prefix() {
        let m = |mae| Metrics {
            mae,
            coverage: Some(0.8),
        };
        let t = Table(vec![
            MethodRow::new("global median", m(1.0)),
            MethodRow::new("augur, online conformal", m(0.5)),
        ]);
        assert_eq!(t.row("augur").map(|r| r.metrics.mae), Some(0.5));
        assert!(t.row("hindsight").is_none());
    }
}
