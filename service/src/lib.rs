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
//!
//! The service's OpenAPI document (`GET /openapi.json`) is generated with `utoipa` from the
//! handlers' `#[utoipa::path]` attributes and the request and response types'
//! `#[derive(ToSchema)]`: the document is built from the same types the handlers serialise,
//! so it cannot drift from the answers as a hand-written one did, and utoipa does this at
//! compile time with no runtime reflection and no UI bundle (the crate is used without
//! features).

pub mod cli;
pub mod model_store;
pub mod report;
pub mod serve;
pub mod trace_sources;
pub mod trainers;
