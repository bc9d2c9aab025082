//! Opening trace files: plain or gzip, detected by magic bytes.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use flate2::read::MultiGzDecoder;

use crate::error::DatasetError;

/// Opens `path` for buffered reading, decompressing gzip transparently.
pub(crate) fn open(path: &Path) -> Result<Box<dyn BufRead + Send>, DatasetError> {
    let mut f = File::open(path).map_err(|e| DatasetError::io(path, e))?;
    let mut magic = [0u8; 2];
    let n = read_up_to(&mut f, &mut magic).map_err(|e| DatasetError::io(path, e))?;
    let f = File::open(path).map_err(|e| DatasetError::io(path, e))?;
    if n == 2 && magic == [0x1f, 0x8b] {
        Ok(Box::new(BufReader::with_capacity(
            1 << 16,
            MultiGzDecoder::new(BufReader::with_capacity(1 << 16, f)),
        )))
    } else {
        Ok(Box::new(BufReader::with_capacity(1 << 16, f)))
    }
}

/// Reads a whole (possibly gzipped) file into memory. For JSON inputs, which are small.
pub(crate) fn read_to_string(path: &Path) -> Result<String, DatasetError> {
    let mut s = String::new();
    open(path)?
        .read_to_string(&mut s)
        .map_err(|e| DatasetError::io(path, e))?;
    Ok(s)
}

/// Reads and parses a whole (possibly gzipped) JSON file; invalid JSON is a format error.
pub(crate) fn read_json(path: &Path) -> Result<serde_json::Value, DatasetError> {
    let text = read_to_string(path)?;
    serde_json::from_str(&text)
        .map_err(|e| DatasetError::format(path, format!("not valid JSON: {e}")))
}

/// Reads the first `n` bytes (decompressed) for format detection.
pub(crate) fn peek(path: &Path, n: usize) -> Result<Vec<u8>, DatasetError> {
    let mut r = open(path)?.take(n as u64);
    let mut buf = Vec::with_capacity(n);
    r.read_to_end(&mut buf)
        .map_err(|e| DatasetError::io(path, e))?;
    Ok(buf)
}

fn read_up_to(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match r.read(&mut buf[filled..])? {
            0 => break,
            k => filled += k,
        }
    }
    Ok(filled)
}

/// A file's name without directories and without `.gz`, for messages and ids.
pub(crate) fn display_name(path: &Path) -> String {
    path.file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

/// The file stem without `.gz` and the data extension (`cluster01.csv.gz` → `cluster01`).
pub(crate) fn stem(path: &Path) -> String {
    let name = display_name(path);
    let name = name.strip_suffix(".gz").unwrap_or(&name);
    match name.rfind('.') {
        Some(i) if i > 0 => name[..i].to_string(),
        _ => name.to_string(),
    }
}
