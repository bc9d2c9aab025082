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
            GzipStream(MultiGzDecoder::new(BufReader::with_capacity(1 << 16, f))),
        )))
    } else {
        Ok(Box::new(BufReader::with_capacity(1 << 16, f)))
    }
}

/// Gzip data that cannot be read to its end. Every reader fails on it (naming the file):
/// the part before the damage is not the trace.
#[derive(Debug, thiserror::Error)]
pub enum GzipDamage {
    /// The file ends inside the compressed data.
    #[error("truncated gzip stream: the file ends inside its compressed data (an incomplete download or copy?)")]
    Truncated,
    /// The compressed data does not decompress (or its checksum does not match).
    #[error("corrupt gzip stream ({0})")]
    Corrupt(String),
}

/// A gzip decoder whose read errors say what is wrong with the file.
struct GzipStream<R>(R);

impl<R: Read> Read for GzipStream<R> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        use std::io::ErrorKind;
        self.0.read(out).map_err(|e| {
            let damage = match e.kind() {
                ErrorKind::UnexpectedEof => GzipDamage::Truncated,
                ErrorKind::InvalidInput | ErrorKind::InvalidData => {
                    GzipDamage::Corrupt(e.to_string())
                }
                _ => return e,
            };
            std::io::Error::new(ErrorKind::InvalidData, damage)
        })
    }
}

/// Opens `path` like [`open`] for a line-based reader: a line longer than `max_line_bytes`
/// (its newline excluded) fails the read with an error naming the line and the bound,
/// instead of growing a buffer without limit. The bytes of shorter lines come through
/// unchanged.
pub(crate) fn open_lines(
    path: &Path,
    max_line_bytes: usize,
) -> Result<Box<dyn BufRead + Send>, DatasetError> {
    Ok(Box::new(BoundedLines {
        inner: open(path)?,
        max: max_line_bytes,
        run: 0,
        line: 1,
        offered: 0,
        offered_ends_line: false,
    }))
}

/// A reader that refuses lines longer than `max` bytes (see [`open_lines`]). It offers at
/// most one line at a time from the inner buffer, so it knows where each line ends.
struct BoundedLines {
    inner: Box<dyn BufRead + Send>,
    max: usize,
    /// Bytes of the current line consumed so far.
    run: usize,
    /// The current line's number (1-based).
    line: u64,
    /// Length of the slice last offered by `fill_buf`, and whether it ends with a newline.
    offered: usize,
    offered_ends_line: bool,
}

/// A line over [`ReadOptions::max_line_bytes`](crate::ReadOptions::max_line_bytes).
#[derive(Debug, thiserror::Error)]
#[error("line {line} is longer than {max} bytes (ReadOptions::max_line_bytes): not a line-based trace, or a corrupt one")]
pub struct LineTooLong {
    pub line: u64,
    pub max: usize,
}

impl LineTooLong {
    /// The line-too-long error inside `e`, if that is what it is.
    pub(crate) fn of(e: &std::io::Error) -> Option<&LineTooLong> {
        e.get_ref()
            .and_then(|inner| inner.downcast_ref::<LineTooLong>())
    }
}

impl BoundedLines {
    fn too_long(&self) -> std::io::Error {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            LineTooLong {
                line: self.line,
                max: self.max,
            },
        )
    }
}

impl Read for BoundedLines {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        let avail = self.fill_buf()?;
        let n = avail.len().min(out.len());
        out[..n].copy_from_slice(&avail[..n]);
        self.consume(n);
        Ok(n)
    }
}

impl BufRead for BoundedLines {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        if self.run > self.max {
            return Err(self.too_long());
        }
        let (max, run) = (self.max, self.run);
        let buf = self.inner.fill_buf()?;
        let (len, ends_line) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        let content = if ends_line { len - 1 } else { len };
        if run + content > max {
            self.run = max + 1;
            return Err(self.too_long());
        }
        self.offered = len;
        self.offered_ends_line = ends_line;
        Ok(&self.inner.fill_buf()?[..len])
    }

    fn consume(&mut self, amt: usize) {
        let amt = amt.min(self.offered);
        self.offered -= amt;
        if self.offered == 0 && self.offered_ends_line && amt > 0 {
            self.run = 0;
            self.line += 1;
            self.offered_ends_line = false;
        } else {
            self.run += amt;
        }
        self.inner.consume(amt);
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(text: &[u8], max: usize) -> (Vec<u8>, Option<String>) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.txt");
        std::fs::write(&path, text).unwrap();
        let mut r = open_lines(&path, max).unwrap();
        let mut out = Vec::new();
        let err = r.read_to_end(&mut out).err().map(|e| e.to_string());
        (out, err)
    }

    #[test]
    fn lines_within_the_bound_come_through_unchanged() {
        // the longest line is `1234\r`: 5 bytes (a carriage return counts, the newline not)
        let text = b"a,b\n1234\r\n\nxyz";
        assert_eq!(read_all(text, 5), (text.to_vec(), None));
        assert!(read_all(text, 4).1.is_some_and(|e| e.contains("line 2")));
        let mut lines = Vec::new();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.txt");
        std::fs::write(&path, text).unwrap();
        let mut r = open_lines(&path, 5).unwrap();
        let mut buf = Vec::new();
        while r.read_until(b'\n', &mut buf).unwrap() > 0 {
            lines.push(String::from_utf8(std::mem::take(&mut buf)).unwrap());
        }
        assert_eq!(lines, ["a,b\n", "1234\r\n", "\n", "xyz"]);
    }

    #[test]
    fn a_line_over_the_bound_fails_naming_its_number_and_the_bound() {
        // 3 MB without a newline on line 3, read through a 64 KiB buffer
        let mut text = b"ok\nfine\n".to_vec();
        text.extend(std::iter::repeat_n(b'x', 3_000_000));
        let (out, err) = read_all(&text, 1 << 20);
        let err = err.expect("an error");
        assert!(err.contains("line 3"), "{err}");
        assert!(err.contains("1048576 bytes"), "{err}");
        assert!(out.len() <= 9 + (1 << 20), "{} bytes read", out.len());
    }
}
