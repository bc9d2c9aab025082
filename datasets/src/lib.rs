//! # augur-datasets
//!
//! **One job:** turn the trace files our users have into Augur's canonical tables, with an
//! honest account of every row that could not be used. No ML lives here.
//!
//! - [`JobTable`]: the canonical job table, a polars `DataFrame` with the columns documented
//!   in [`schema`]. Every job-trace reader ([`TraceFormat`]) produces it.
//! - [`curves`]: training-curve readers (MLPerf eval curves, Pollux/Sia profiles).
//! - [`dag`]: DAG-structured job readers (TPC-H on Spark, WfCommons workflows).
//! - [`cluster`]: cluster descriptions (openb node list, Gavel throughputs, node faults, summaries).
//! - [`ReadReport`]: rows read, kept and dropped, with file, line, field and reason for each
//!   drop; [`ReadOptions::strict`] stops at the first.
//! - [`split`]: the time-ordered train/test split that every predictor is evaluated on.
//! - [`synthetic`]: a **synthetic** SWF generator (made-up jobs) for load benchmarks only.
//!
//! Readers stream: they parse one row at a time into a [`JobRecord`] and hand it to a sink, so
//! a summary of a file of any size runs in bounded memory ([`read_jobs`]); [`load_jobs`]
//! collects the rows into a [`JobTable`].
//!
//! ```no_run
//! use augur_datasets::{load_jobs, ReadOptions, TraceFormat};
//! let (table, report) = load_jobs("philly.csv".as_ref(), Some(TraceFormat::Philly), &ReadOptions::default())?;
//! println!("{} jobs kept, {} dropped", table.len(), report.rows_dropped());
//! # Ok::<(), augur_datasets::DatasetError>(())
//! ```

pub mod bundled;
pub mod cluster;
pub mod curves;
pub mod dag;
mod error;
mod format;
mod input;
pub mod jobs;
mod json_stream;
mod other;
mod report;
mod row_issue;
pub mod schema;
pub mod split;
pub mod summary;
pub mod synthetic;
mod zone;

pub use error::DatasetError;
pub use format::{detect_format, TraceFormat};
pub use jobs::{load_jobs, load_jobs_many, read_jobs};
pub use other::summarize_file;
pub use report::{FileSummary, ReadOptions, ReadReport, RowIssue};
pub use schema::{JobRecord, JobStatus, JobTable, TimeOrigin};
pub use split::TimeSplit;
pub use zone::{TraceZone, UnknownZone};
