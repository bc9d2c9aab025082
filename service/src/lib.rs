//! # augur
//!
//! The Augur service and command line over the Augur libraries (`augur-datasets`,
//! `augur-predictor`, `augur-autoscaler`); the `augur` binary only parses its arguments, sets
//! up logging and calls [`cli::run`].
//!
//! - [`cli`]: the offline commands (`data inspect`, `evaluate`, `train`, `models`,
//!   `simulate`) and `serve`'s command-line glue, one module per command (and per task).
//! - [`report`]: what the commands show: tables, and report folders of Markdown and PNG plots.
//! - [`serve`]: the HTTP service (event store, online predictions, retraining, the live
//!   controller loop, metrics, status page).
//! - [`trainers`] and [`model_store`]: the training settings and what the registry stores with
//!   a trained predictor, shared by the commands and the service.
//!
//! Dependencies point one way: `cli` uses `report`, `serve` and the shared modules; `serve`
//! and `report` never use `cli`.

pub mod cli;
pub mod model_store;
pub mod report;
pub mod serve;
pub mod trainers;
