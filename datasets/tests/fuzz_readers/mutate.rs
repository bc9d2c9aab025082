//! Mutated files: the mutations, the file-case strategy and building a file's bytes.

use proptest::prelude::*;

use crate::rows::{pai_task_row, valid_row, Reader, Seed, ValidRow, UNIX_START};

/// Position `at` within `len` items (`len` > 0).
pub(crate) fn pick(at: usize, len: usize) -> usize {
    at % len
}

#[derive(Debug, Clone)]
pub(crate) enum Mutation {
    Delete(usize),
    Duplicate(usize),
    Replace(usize, String),
    /// Inserts a byte that is never valid UTF-8 on its own.
    InvalidUtf8(usize, u8),
}

pub(crate) fn garbage() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(vec![
            "", " ", "NaN", "nan", "inf", "-inf", "1e400", "-1e400", "1e308", "-1", "-0.5",
            "99999999999999999999999999", "None", "null", "N/A", "0x1F", "1,5", "12abc",
            "2017-13-45 99:00:00", "--1", "+", ".", "é", "€",
        ])
        .prop_map(String::from),
        2 => any::<f64>().prop_map(|v| v.to_string()),
        2 => any::<i64>().prop_map(|v| v.to_string()),
        3 => "[a-zA-Z0-9 .:+_/é€-]{0,16}",
        1 => (1000usize..200_000).prop_map(|n| "9".repeat(n)),
        1 => (1000usize..200_000).prop_map(|n| "x".repeat(n)),
    ]
}

pub(crate) fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        1 => any::<usize>().prop_map(Mutation::Delete),
        1 => any::<usize>().prop_map(Mutation::Duplicate),
        3 => (any::<usize>(), garbage()).prop_map(|(i, g)| Mutation::Replace(i, g)),
        1 => (any::<usize>(), prop::sample::select(vec![0x80u8, 0xc3, 0xe9, 0xfe, 0xff]))
            .prop_map(|(i, b)| Mutation::InvalidUtf8(i, b)),
    ]
}

/// One mutated file.
#[derive(Debug, Clone)]
pub(crate) struct FileCase {
    pub(crate) seeds: Vec<Seed>,
    /// (row, mutation): several may hit one row.
    pub(crate) mutations: Vec<(usize, Mutation)>,
    pub(crate) crlf: bool,
    pub(crate) trailing_newline: bool,
    /// Blank lines (and, for SWF, comment lines) inserted before these rows.
    pub(crate) noise: Vec<(usize, bool)>,
    /// Cut the file inside its last row, keeping this share of the row's bytes.
    pub(crate) truncate: Option<usize>,
    /// SWF: the header has `UnixStartTime` / a Latin-1 comment line.
    pub(crate) unix_start: bool,
    pub(crate) latin1_comment: bool,
}

pub(crate) fn file_case() -> impl Strategy<Value = FileCase> {
    (
        prop::collection::vec(any::<Seed>(), 1..40),
        prop::collection::vec((any::<usize>(), mutation()), 0..6),
        any::<bool>(),
        any::<bool>(),
        prop::collection::vec((any::<usize>(), any::<bool>()), 0..4),
        prop::option::weighted(0.2, any::<usize>()),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(seeds, mutations, crlf, trailing_newline, noise, truncate, unix_start, latin1)| {
                FileCase {
                    seeds,
                    mutations,
                    crlf,
                    trailing_newline,
                    noise,
                    truncate,
                    unix_start,
                    latin1_comment: latin1,
                }
            },
        )
}

/// A data row as written: its line number and whether it is still the valid row.
pub(crate) struct WrittenRow {
    pub(crate) line: u64,
    pub(crate) mutated: bool,
    /// False when mutations left nothing but separators and spaces: not a row to the reader.
    pub(crate) present: bool,
    pub(crate) expect: ValidRow,
}

/// The bytes of a file and the rows in it.
pub(crate) struct Built {
    pub(crate) bytes: Vec<u8>,
    pub(crate) rows: Vec<WrittenRow>,
}

pub(crate) fn encode(reader: Reader, fields: &[String]) -> Vec<u8> {
    if reader.is_swf() {
        fields.join("  ").into_bytes()
    } else {
        fields.join(",").into_bytes()
    }
}

pub(crate) fn apply(reader: Reader, fields: &mut Vec<String>, bytes: &mut Vec<u8>, m: &Mutation) {
    match m {
        Mutation::Delete(_) | Mutation::Duplicate(_) | Mutation::Replace(..)
            if fields.is_empty() => {}
        Mutation::Delete(i) => {
            fields.remove(pick(*i, fields.len()));
        }
        Mutation::Duplicate(i) => {
            let k = pick(*i, fields.len());
            fields.insert(k, fields[k].clone());
        }
        Mutation::Replace(i, g) => {
            let k = pick(*i, fields.len());
            // Never touch the quoted framework field's quotes: replace it whole.
            fields[k] = g.clone();
        }
        Mutation::InvalidUtf8(..) => {}
    }
    *bytes = encode(reader, fields);
    if let Mutation::InvalidUtf8(i, b) = m {
        let at = pick(*i, bytes.len() + 1);
        bytes.insert(at, *b);
    }
}

pub(crate) fn build(reader: Reader, case: &FileCase) -> Built {
    let eol: &[u8] = if case.crlf { b"\r\n" } else { b"\n" };
    let mut lines: Vec<Vec<u8>> = Vec::new();
    if reader.is_swf() {
        lines.push(b"; Version: 2.2".to_vec());
        if case.latin1_comment {
            // ISO-8859-1 text in a header comment, as in some archive logs.
            lines.push(b"; Installation: Universit\xe9 de Montr\xe9al".to_vec());
        }
        if case.unix_start {
            lines.push(format!("; UnixStartTime: {UNIX_START}").into_bytes());
        }
        lines.push(b";".to_vec());
    } else if let Some(h) = reader.header() {
        lines.push(h.as_bytes().to_vec());
    }
    let n = case.seeds.len();
    let mut mutated = vec![false; n];
    let mut data: Vec<(Vec<String>, Vec<u8>)> = Vec::with_capacity(n);
    for (i, seed) in case.seeds.iter().enumerate() {
        let row = valid_row(reader, i, *seed, case.unix_start);
        let fields = if reader == Reader::PaiTasks {
            pai_task_row(i, *seed)
        } else {
            row.fields.clone()
        };
        let bytes = encode(reader, &fields);
        data.push((fields, bytes));
    }
    for (at, m) in &case.mutations {
        let k = pick(*at, n);
        let (fields, bytes) = &mut data[k];
        apply(reader, fields, bytes, m);
        mutated[k] = true;
    }
    if let Some(share) = case.truncate {
        let last = n - 1;
        let len = data[last].1.len();
        let keep = pick(share, len.max(1)) + 1;
        data[last].1.truncate(keep);
        mutated[last] = true;
    }
    let mut rows = Vec::with_capacity(n);
    for (i, ((_, bytes), seed)) in data.into_iter().zip(&case.seeds).enumerate() {
        for (at, comment) in &case.noise {
            if pick(*at, n) == i {
                let noise = if *comment && reader.is_swf() {
                    b"; a comment between rows".to_vec()
                } else if *comment {
                    b"   ".to_vec()
                } else {
                    Vec::new()
                };
                lines.push(noise);
            }
        }
        let sep: &[u8] = if reader.is_swf() { b" \t" } else { b" \t," };
        let present = !bytes.iter().all(|b| sep.contains(b));
        lines.push(bytes);
        rows.push(WrittenRow {
            line: lines.len() as u64,
            mutated: mutated[i],
            present,
            expect: valid_row(reader, i, *seed, case.unix_start),
        });
    }
    let mut bytes = lines.join(eol);
    if case.trailing_newline && case.truncate.is_none() {
        bytes.extend_from_slice(eol);
    }
    Built { bytes, rows }
}
