//! Reading JSON traces record by record in bounded memory. The document is parsed as it
//! streams from the (possibly gzipped) file, never held whole as text: the reader walks into
//! the containers it names and is handed every element below them as a parsed value. Any
//! span between two consecutive elements' starts (one record, or whitespace, or a key) may be
//! at most [`ReadOptions::max_record_bytes`] long and the whole decompressed document at most
//! [`ReadOptions::max_json_bytes`]; going over either fails the read naming the file, the
//! byte offset and the bound (a single multi-gigabyte line, a gzip bomb of spaces).

use std::cell::Cell;
use std::fmt;
use std::io::{BufRead, Read};
use std::path::Path;
use std::rc::Rc;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::error::DatasetError;
use crate::input;
use crate::report::ReadOptions;

/// One step from a container to an element of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum JsonKey {
    /// An object's member, by name.
    Member(String),
    /// An array's element, by 0-based position.
    Index(usize),
}

impl JsonKey {
    /// The member's name (`None` for an array element).
    pub(crate) fn member(&self) -> Option<&str> {
        match self {
            JsonKey::Member(k) => Some(k),
            JsonKey::Index(_) => None,
        }
    }
}

impl fmt::Display for JsonKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JsonKey::Member(k) => write!(f, "{k}"),
            JsonKey::Index(i) => write!(f, "[{i}]"),
        }
    }
}

/// Which bound the document went over.
#[derive(Debug, Clone, Copy)]
enum Over {
    Record { start: u64, max: u64 },
    Document { max: u64 },
}

/// Bytes handed to the parser so far, where the current record started, and the bounds.
struct Budget {
    pos: Cell<u64>,
    record_start: Cell<u64>,
    max_record: u64,
    max_document: u64,
    over: Cell<Option<Over>>,
}

impl Budget {
    /// A new record starts at the current position.
    fn mark(&self) {
        self.record_start.set(self.pos.get());
    }
}

/// The decompressed input, metered against the [`Budget`].
struct Metered {
    inner: Box<dyn BufRead + Send>,
    budget: Rc<Budget>,
}

impl Read for Metered {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        let b = &self.budget;
        let avail = self.inner.fill_buf()?;
        let n = avail.len().min(out.len());
        out[..n].copy_from_slice(&avail[..n]);
        self.inner.consume(n);
        let pos = b.pos.get() + n as u64;
        b.pos.set(pos);
        let start = b.record_start.get();
        let over = if pos > b.max_document {
            Some(Over::Document {
                max: b.max_document,
            })
        } else if pos - start > b.max_record {
            Some(Over::Record {
                start,
                max: b.max_record,
            })
        } else {
            None
        };
        match over {
            Some(o) => {
                b.over.set(Some(o));
                Err(std::io::Error::other("over the JSON reader's bound"))
            }
            None => Ok(n),
        }
    }
}

/// What to walk into, and what to hand each value below it to.
type Descend<'a> = &'a dyn Fn(&[JsonKey]) -> bool;
type OnValue<'a> = &'a mut dyn FnMut(&[JsonKey], Value) -> Result<(), DatasetError>;

struct Walk<'a> {
    descend: Descend<'a>,
    on_value: OnValue<'a>,
    keys: Vec<JsonKey>,
    budget: Rc<Budget>,
    /// The error `on_value` returned, carried out past serde.
    failed: Option<DatasetError>,
}

impl Walk<'_> {
    fn deliver<E: serde::de::Error>(&mut self, v: Value) -> Result<(), E> {
        match (self.on_value)(&self.keys, v) {
            Ok(()) => Ok(()),
            Err(e) => {
                self.failed = Some(e);
                Err(E::custom("the reader stopped"))
            }
        }
    }
}

/// Streams the JSON document in `path`. Containers at the paths where `descend` says yes
/// (the root is `[]`) are walked into: `on_value` gets the container first, empty (so its
/// shape can be checked and a copy of the tree rebuilt), then each element in file order
/// (walked into in turn, or parsed whole). A scalar where `descend` says yes is handed as is.
pub(crate) fn walk(
    path: &Path,
    opts: &ReadOptions,
    descend: Descend,
    on_value: OnValue,
) -> Result<(), DatasetError> {
    let budget = Rc::new(Budget {
        pos: Cell::new(0),
        record_start: Cell::new(0),
        max_record: opts.max_record_bytes as u64,
        max_document: opts.max_json_bytes,
        over: Cell::new(None),
    });
    let reader = Metered {
        inner: input::open(path)?,
        budget: Rc::clone(&budget),
    };
    let mut walk = Walk {
        descend,
        on_value,
        keys: Vec::new(),
        budget: Rc::clone(&budget),
        failed: None,
    };
    let mut de = serde_json::Deserializer::from_reader(reader);
    let res = Node { walk: &mut walk }
        .deserialize(&mut de)
        .and_then(|()| {
            budget.mark();
            de.end()
        });
    let Err(e) = res else { return Ok(()) };
    if let Some(failed) = walk.failed.take() {
        return Err(failed);
    }
    let at = if walk.keys.is_empty() {
        String::new()
    } else {
        let keys: Vec<String> = walk.keys.iter().map(JsonKey::to_string).collect();
        format!(" (in {})", keys.join("/"))
    };
    match budget.over.get() {
        Some(Over::Record { start, max }) => Err(DatasetError::format(
            path,
            format!(
                "the JSON record starting at byte {start}{at} is longer than {max} bytes \
                 (ReadOptions::max_record_bytes): not this format, or a corrupt file"
            ),
        )),
        Some(Over::Document { max }) => Err(DatasetError::format(
            path,
            format!(
                "more than {max} bytes of JSON once decompressed (ReadOptions::max_json_bytes), \
                 stopped at byte {}{at}: refused as a likely decompression bomb",
                budget.pos.get()
            ),
        )),
        None if e.is_io() => Err(DatasetError::io(path, std::io::Error::from(e))),
        None => Err(DatasetError::format(path, format!("not valid JSON: {e}"))),
    }
}

/// Reads the whole document into one value, walking into the containers where `descend` says
/// yes: the same value `serde_json` would give, with every record bounded as [`walk`] bounds it.
pub(crate) fn read_value(
    path: &Path,
    opts: &ReadOptions,
    descend: Descend,
) -> Result<Value, DatasetError> {
    let mut root = Value::Null;
    walk(path, opts, descend, &mut |keys, v| {
        place(&mut root, keys, v);
        Ok(())
    })?;
    Ok(root)
}

/// Puts `v` at `keys` below `root`. [`walk`] hands every container before its elements, so
/// the parents exist; a later member of the same name replaces an earlier one, as in
/// `serde_json`.
fn place(root: &mut Value, keys: &[JsonKey], v: Value) {
    let Some((last, parents)) = keys.split_last() else {
        *root = v;
        return;
    };
    let mut at = root;
    for k in parents {
        let next = match (at, k) {
            (Value::Object(m), JsonKey::Member(name)) => m.get_mut(name),
            (Value::Array(a), JsonKey::Index(i)) => a.get_mut(*i),
            _ => None,
        };
        match next {
            Some(n) => at = n,
            None => return,
        }
    }
    match (at, last) {
        (Value::Object(m), JsonKey::Member(name)) => {
            m.insert(name.clone(), v);
        }
        (Value::Array(a), JsonKey::Index(_)) => a.push(v),
        _ => {}
    }
}

/// One value of the document: walked into, or parsed whole.
struct Node<'w, 'a> {
    walk: &'w mut Walk<'a>,
}

impl<'de> DeserializeSeed<'de> for Node<'_, '_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        if (self.walk.descend)(&self.walk.keys) {
            d.deserialize_any(self)
        } else {
            let v = Value::deserialize(d)?;
            self.walk.deliver(v)
        }
    }
}

impl<'de> Visitor<'de> for Node<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        self.walk.deliver(Value::Object(Map::new()))?;
        loop {
            self.walk.budget.mark();
            let Some(key) = map.next_key::<String>()? else {
                break;
            };
            self.walk.keys.push(JsonKey::Member(key));
            map.next_value_seed(Node {
                walk: &mut *self.walk,
            })?;
            self.walk.keys.pop();
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.walk.deliver(Value::Array(Vec::new()))?;
        for i in 0.. {
            self.walk.budget.mark();
            self.walk.keys.push(JsonKey::Index(i));
            let more = seq
                .next_element_seed(Node {
                    walk: &mut *self.walk,
                })?
                .is_some();
            self.walk.keys.pop();
            if !more {
                break;
            }
        }
        Ok(())
    }

    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<(), E> {
        self.walk.deliver(Value::Bool(v))
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<(), E> {
        self.walk.deliver(Value::from(v))
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<(), E> {
        self.walk.deliver(Value::from(v))
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<(), E> {
        match serde_json::Number::from_f64(v) {
            Some(n) => self.walk.deliver(Value::Number(n)),
            None => Err(E::custom("a number that is not finite")),
        }
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<(), E> {
        self.walk.deliver(Value::String(v.to_string()))
    }

    fn visit_string<E: serde::de::Error>(self, v: String) -> Result<(), E> {
        self.walk.deliver(Value::String(v))
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<(), E> {
        self.walk.deliver(Value::Null)
    }

    fn visit_none<E: serde::de::Error>(self) -> Result<(), E> {
        self.walk.deliver(Value::Null)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(max_record_bytes: usize, max_json_bytes: u64) -> ReadOptions {
        ReadOptions {
            max_record_bytes,
            max_json_bytes,
            ..ReadOptions::default()
        }
    }

    fn file(text: &[u8]) -> tempfile::NamedTempFile {
        let f = tempfile::Builder::new().suffix(".json").tempfile().unwrap();
        std::fs::write(f.path(), text).unwrap();
        f
    }

    #[test]
    fn a_walked_document_reads_as_serde_json_reads_it() {
        let text =
            br#"{"a": {"x": [1, 2.5, {"y": null}], "x": [3]}, "b": [true, "s", []], "c": {}}"#;
        let f = file(text);
        let expect: Value = serde_json::from_slice(text).unwrap();
        for depth in 0..4 {
            let got = read_value(f.path(), &opts(1 << 20, 1 << 30), &|k| k.len() < depth).unwrap();
            assert_eq!(got, expect, "walking {depth} levels deep");
        }
    }

    #[test]
    fn a_record_over_the_bound_fails_naming_file_offset_and_bound() {
        let mut text = br#"{"ok": [1, 2], "big": ""#.to_vec();
        text.extend(std::iter::repeat_n(b'x', 5000));
        text.extend(br#""}"#);
        let f = file(&text);
        let err = read_value(f.path(), &opts(1000, 1 << 30), &|k| k.is_empty())
            .unwrap_err()
            .to_string();
        let name = f.path().file_name().unwrap().to_string_lossy().to_string();
        assert!(err.contains(&name), "{err}");
        // the record is `"big": "xxx…"`: it starts after the comma that ends `"ok"` (byte
        // 13), where the parser's one byte of look-ahead may or may not have taken the comma
        let start: u64 = err
            .split("starting at byte ")
            .nth(1)
            .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no start offset in {err}"));
        assert!((13..=15).contains(&start), "{err}");
        assert!(err.contains("(in big)"), "{err}");
        assert!(err.contains("1000 bytes"), "{err}");
        // whitespace counts too: a run of spaces longer than the bound is refused
        let mut spaces = b"[1,".to_vec();
        spaces.extend(std::iter::repeat_n(b' ', 5000));
        spaces.extend(b"2]");
        let err = read_value(file(&spaces).path(), &opts(1000, 1 << 30), &|k| {
            k.is_empty()
        })
        .unwrap_err()
        .to_string();
        assert!(err.contains("byte 3"), "{err}");
    }

    #[test]
    fn a_document_over_the_total_bound_is_refused() {
        let text: String = format!("[{}1]", "1,".repeat(1000));
        let f = file(text.as_bytes());
        let err = read_value(f.path(), &opts(100, 500), &|k| k.is_empty())
            .unwrap_err()
            .to_string();
        assert!(err.contains("more than 500 bytes"), "{err}");
        assert!(read_value(f.path(), &opts(100, 5000), &|k| k.is_empty()).is_ok());
    }

    #[test]
    fn the_reader_s_own_error_comes_out_unchanged() {
        let f = file(b"[1, 2, 3]");
        let err = walk(
            f.path(),
            &ReadOptions::default(),
            &|k| k.is_empty(),
            &mut |k, _| {
                if k.first() == Some(&JsonKey::Index(1)) {
                    Err(DatasetError::format(f.path(), "element two is wrong"))
                } else {
                    Ok(())
                }
            },
        )
        .unwrap_err()
        .to_string();
        assert!(err.ends_with("element two is wrong"), "{err}");
    }
}
