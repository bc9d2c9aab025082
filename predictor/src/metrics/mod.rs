//! Evaluation metrics in the shared protocol: [`regression`] (run times and waits), for
//! probabilities [`classification`], and coverage per group of jobs ([`groups`]). Quantiles are the workspace's
//! ([`augur_numeric::quantile`]), re-exported here for the metric code that uses them.

pub mod classification;
pub mod groups;
pub mod regression;

pub use augur_numeric::{quantile, quantile_sorted};
pub use groups::{CoverageGroups, GroupCoverage, MAX_PARTITIONS};
pub use regression::{bound_metrics, coverage, mae_log, mae_log10, wait_errors, within2x};
