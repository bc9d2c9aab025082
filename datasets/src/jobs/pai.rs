//! Placeholder: reader being written.

use std::path::Path;

use crate::error::DatasetError;
use crate::report::{ReadOptions, ReadReport};
use crate::schema::JobRecord;

/// Reads the file.
pub fn read(
    path: &Path,
    _opts: &ReadOptions,
    _sink: &mut dyn FnMut(JobRecord),
) -> Result<ReadReport, DatasetError> {
    Err(DatasetError::format(path, "reader not implemented yet"))
}
