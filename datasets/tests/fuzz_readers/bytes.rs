//! Arbitrary bytes: random bytes, edited valid files and gzip streams, and their property.

use std::io::Write;
use std::path::Path;

use augur_datasets::{load_jobs, DatasetError};
use proptest::prelude::*;

use crate::mutate::{build, file_case, pick, FileCase};
use crate::rows::{Reader, Seed};
use crate::run::{check_report, opts, read, write_files};

#[derive(Debug, Clone)]
pub(crate) enum Edit {
    Flip(usize, u8),
    Insert(usize, u8),
    Remove(usize),
}

/// How the arbitrary input is made.
#[derive(Debug, Clone)]
pub(crate) enum Bytes {
    Random(Vec<u8>),
    /// A valid file with byte-level edits.
    Edited(FileCase, Vec<Edit>),
    /// A gzip stream of a (possibly edited) valid file, cut or corrupted.
    Gzip(FileCase, Vec<Edit>, Option<usize>),
}

pub(crate) fn bytes_input() -> impl Strategy<Value = Bytes> {
    let edit = prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Edit::Flip(i, b)),
        (
            any::<usize>(),
            prop_oneof![
                Just(b'"'),
                Just(b','),
                Just(b'\n'),
                Just(b'\r'),
                Just(b';'),
                any::<u8>()
            ]
        )
            .prop_map(|(i, b)| Edit::Insert(i, b)),
        any::<usize>().prop_map(Edit::Remove),
    ];
    let edits = prop::collection::vec(edit, 0..12);
    prop_oneof![
        1 => prop::collection::vec(any::<u8>(), 0..2048).prop_map(Bytes::Random),
        3 => (file_case(), edits.clone()).prop_map(|(c, e)| Bytes::Edited(c, e)),
        2 => (file_case(), edits, prop::option::of(any::<usize>()))
            .prop_map(|(c, e, cut)| Bytes::Gzip(c, e, cut)),
    ]
}

pub(crate) fn edited(mut bytes: Vec<u8>, edits: &[Edit]) -> Vec<u8> {
    for e in edits {
        match e {
            Edit::Flip(i, b) if !bytes.is_empty() => {
                let k = pick(*i, bytes.len());
                bytes[k] ^= b | 1;
            }
            Edit::Insert(i, b) => bytes.insert(pick(*i, bytes.len() + 1), *b),
            Edit::Remove(i) if !bytes.is_empty() => {
                bytes.remove(pick(*i, bytes.len()));
            }
            _ => {}
        }
    }
    bytes
}

pub(crate) fn make_bytes(reader: Reader, input: &Bytes) -> (Vec<u8>, Vec<Seed>) {
    match input {
        Bytes::Random(b) => (b.clone(), vec![(1, 2, 3, 4)]),
        Bytes::Edited(case, edits) => {
            (edited(build(reader, case).bytes, edits), case.seeds.clone())
        }
        Bytes::Gzip(case, edits, cut) => {
            let plain = edited(build(reader, case).bytes, edits);
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            gz.write_all(&plain).unwrap();
            let mut gz = gz.finish().unwrap();
            match cut {
                // Cut anywhere after the magic bytes (a truncated download).
                Some(at) => gz.truncate(2 + pick(*at, gz.len() - 1)),
                // Or corrupt the deflate stream after the 10-byte header.
                None if gz.len() > 12 => {
                    let k = 10 + gz.len() / 2 % (gz.len() - 10);
                    gz[k] ^= 0x5a;
                }
                None => {}
            }
            (gz, case.seeds.clone())
        }
    }
}

/// Lines in the (decompressed, where it decompresses) input: the bound for issue lines.
pub(crate) fn line_bound(bytes: &[u8]) -> u64 {
    let mut plain = Vec::new();
    let text: &[u8] = if bytes.starts_with(&[0x1f, 0x8b]) {
        use std::io::Read;
        // Decompress what can be; a corrupt stream ends where it breaks.
        let mut d = flate2::read::MultiGzDecoder::new(bytes);
        let mut buf = [0u8; 4096];
        while let Ok(k) = d.read(&mut buf) {
            if k == 0 {
                break;
            }
            plain.extend_from_slice(&buf[..k]);
        }
        &plain
    } else {
        bytes
    };
    // `\r` alone also ends a CSV record.
    1 + text.iter().filter(|&&b| b == b'\n' || b == b'\r').count() as u64
}

pub(crate) fn check_bytes(
    reader: Reader,
    input: &Bytes,
    max_detailed: usize,
) -> Result<(), TestCaseError> {
    let (bytes, seeds) = make_bytes(reader, input);
    let files = write_files(reader, &bytes, &seeds);
    let out = read(&files.path, reader, &opts(false, max_detailed));
    let strict = read(&files.path, reader, &opts(true, max_detailed));
    match out.result {
        Ok(report) => {
            check_report(reader, &files.path, &report, &out.records, max_detailed)?;
            let fuzzed = Path::new(reader.file())
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let bound = line_bound(&bytes);
            for issue in report.issues.iter().filter(|i| i.file == fuzzed) {
                prop_assert!(issue.line <= bound, "{} (file has {} lines)", issue, bound);
            }
            match (report.rows_dropped(), strict.result) {
                (0, Ok(r)) => prop_assert_eq!(r.rows_kept, report.rows_kept),
                (_, Err(DatasetError::StrictRow(issue))) if report.rows_dropped() > 0 => {
                    if let Some(first) = report.issues.first() {
                        prop_assert_eq!(&issue, first);
                    }
                }
                (dropped, other) => {
                    return Err(TestCaseError::fail(format!(
                        "strict mode after {dropped} drops: {other:?}"
                    )))
                }
            }
            let (table, _) = load_jobs(&files.path, Some(reader.format()), &opts(false, 0))
                .map_err(|e| TestCaseError::fail(format!("load_jobs: {e}")))?;
            prop_assert_eq!(table.len(), out.records.len());
        }
        Err(DatasetError::Format { .. }) => {
            // A file the reader cannot take as a whole (header): strict mode fails too.
            prop_assert!(strict.result.is_err());
        }
        Err(DatasetError::Io { .. }) if bytes.starts_with(&[0x1f, 0x8b]) => {
            // A gzip stream broken before the part a reader peeks at (PAI's header check).
            prop_assert!(strict.result.is_err());
        }
        Err(e) => return Err(TestCaseError::fail(format!("unexpected error: {e}"))),
    }
    Ok(())
}
