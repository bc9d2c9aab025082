//! The store's archive: events compacted out of the SQLite database, kept in append-only,
//! checksummed segments under `<data_dir>/archive/`.
//!
//! The archive holds a prefix of the log: every event with `seq <= last_seq()`, in
//! contiguous segments (`events-<first>-<last>.jsonl.gz`, one gzip JSON line per event with
//! its sequence number, receive time and the event exactly as stored); the database holds the
//! events after it. `manifest.json` lists the segments with their sequence range, event
//! count, size and SHA-256; it is replaced atomically (temp file, fsync, rename) and only
//! ever grows. A segment is written and synced before the manifest names it, and the
//! manifest before the rows leave the database, so a crash leaves an event in both places
//! at worst (the database copy is dropped at the next compaction), never in neither.
//!
//! A segment that is missing or damaged is a loss: the store refuses to open naming its
//! range ([`Archive::open`] checks every segment is there with its size), and `augur store
//! repair` ([`repair`]) moves it aside, drops it from the manifest and has its range
//! recorded as lost, after which the archive may have holes that the recorded losses cover.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::losses::LostRange;
use super::{StoreError, StoredEvent};
use crate::serve::state::events::Event;

/// One segment as the manifest lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Segment {
    /// File name inside the archive folder.
    pub file: String,
    /// The range of sequence numbers it covers (events lost before compaction may be absent
    /// inside it, as recorded in the database's `losses`).
    pub first_seq: i64,
    pub last_seq: i64,
    /// Events it holds.
    pub events: i64,
    /// Size of the file in bytes.
    pub bytes: u64,
    /// SHA-256 of the file, lowercase hex.
    pub sha256: String,
}

impl Segment {
    /// `archive segment <file> (seq a..=b, n events)`.
    pub fn describe(&self) -> String {
        format!(
            "archive segment {} (seq {}..={}, {} events)",
            self.file, self.first_seq, self.last_seq, self.events
        )
    }
}

/// The manifest: the segments, oldest first.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub format: u32,
    pub segments: Vec<Segment>,
}

/// One archived event as written in a segment line.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Line {
    pub seq: i64,
    pub received_at: f64,
    /// The event's JSON exactly as the database stored it.
    pub body: String,
}

/// The archive folder beside the database `db`.
pub fn dir_of(db: &Path) -> PathBuf {
    db.parent()
        .map_or_else(|| PathBuf::from("archive"), |d| d.join("archive"))
}

fn manifest_path(dir: &Path) -> PathBuf {
    dir.join("manifest.json")
}

/// Reads the manifest in `dir` (empty when there is none).
pub fn read_manifest(dir: &Path) -> Result<Manifest, StoreError> {
    let path = manifest_path(dir);
    match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
            StoreError::io(
                &path,
                std::io::Error::new(std::io::ErrorKind::InvalidData, e),
            )
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Manifest::default()),
        Err(e) => Err(StoreError::io(&path, e)),
    }
}

/// Writes `bytes` to `path` atomically and durably: a synced temp file renamed over it, then
/// the folder synced.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let tmp = PathBuf::from(format!("{}.tmp", path.display()));
    let io = |p: &Path, e| StoreError::io(p, e);
    {
        let mut f = File::create(&tmp).map_err(|e| io(&tmp, e))?;
        f.write_all(bytes).map_err(|e| io(&tmp, e))?;
        f.sync_all().map_err(|e| io(&tmp, e))?;
    }
    std::fs::rename(&tmp, path).map_err(|e| io(path, e))?;
    if let Some(dir) = path.parent() {
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| io(dir, e))?;
    }
    Ok(())
}

/// SHA-256 of `bytes` in lowercase hex.
/// Lowercase hex of a digest.
pub(crate) fn sha256_hex_of(digest: &[u8]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Gzips `lines` (already ordered) into a segment file in `dir`; returns its manifest entry.
pub(crate) fn write_segment(dir: &Path, lines: &[Line]) -> Result<Option<Segment>, StoreError> {
    let (Some(first), Some(last)) = (lines.first(), lines.last()) else {
        return Ok(None);
    };
    std::fs::create_dir_all(dir).map_err(|e| StoreError::io(dir, e))?;
    let file = format!("events-{:012}-{:012}.jsonl.gz", first.seq, last.seq);
    let path = dir.join(&file);
    let mut gz = GzEncoder::new(Vec::new(), flate2::Compression::fast());
    for l in lines {
        let text = serde_json::to_string(l).map_err(|e| {
            StoreError::io(
                &path,
                std::io::Error::new(std::io::ErrorKind::InvalidData, e),
            )
        })?;
        gz.write_all(text.as_bytes())
            .and_then(|()| gz.write_all(b"\n"))
            .map_err(|e| StoreError::io(&path, e))?;
    }
    let bytes = gz.finish().map_err(|e| StoreError::io(&path, e))?;
    write_atomic(&path, &bytes)?;
    Ok(Some(Segment {
        file,
        first_seq: first.seq,
        last_seq: last.seq,
        events: lines.len() as i64,
        bytes: bytes.len() as u64,
        sha256: sha256_hex(&bytes),
    }))
}

/// Reads every event of `seg` (checking its checksum first).
pub fn read_segment(dir: &Path, seg: &Segment) -> Result<Vec<StoredEvent>, StoreError> {
    let path = dir.join(&seg.file);
    let bad = |why: String| {
        StoreError::io(
            &path,
            std::io::Error::new(std::io::ErrorKind::InvalidData, why),
        )
    };
    let mut bytes = Vec::new();
    File::open(&path)
        .and_then(|mut f| f.read_to_end(&mut bytes))
        .map_err(|e| StoreError::io(&path, e))?;
    let sum = sha256_hex(&bytes);
    if sum != seg.sha256 {
        return Err(bad(format!(
            "archive segment checksum mismatch (manifest {}, file {sum}): the segment is damaged",
            seg.sha256
        )));
    }
    let mut out = Vec::with_capacity(usize::try_from(seg.events).unwrap_or(0));
    for (n, line) in BufReader::new(GzDecoder::new(&bytes[..]))
        .lines()
        .enumerate()
    {
        let line = line.map_err(|e| bad(format!("line {}: {e}", n + 1)))?;
        let l: Line =
            serde_json::from_str(&line).map_err(|e| bad(format!("line {}: {e}", n + 1)))?;
        let event = Event::from_stored(&l.body)
            .map_err(|e| bad(format!("line {} (seq {}): {e}", n + 1, l.seq)))?;
        out.push(StoredEvent {
            seq: l.seq,
            received_at: l.received_at,
            event,
        });
    }
    Ok(out)
}

/// The archive of an open store: its manifest and the last segment read (replays and
/// `GET /v1/events` read segments in order, so one decoded segment serves many pages).
#[derive(Debug)]
pub struct Archive {
    dir: PathBuf,
    manifest: Manifest,
    cache: Mutex<Option<(usize, std::sync::Arc<Vec<StoredEvent>>)>>,
}

impl Archive {
    /// Opens the archive folder `dir` (empty when it does not exist); refused when a
    /// segment the manifest lists is missing or not of its listed size, naming its range.
    pub fn open(dir: &Path) -> Result<Archive, StoreError> {
        let manifest = read_manifest(dir)?;
        let problems: Vec<String> = manifest
            .segments
            .iter()
            .filter_map(|seg| {
                let why = match std::fs::metadata(dir.join(&seg.file)) {
                    Ok(m) if m.len() == seg.bytes => return None,
                    Ok(m) => format!("is {} bytes, the manifest says {}", m.len(), seg.bytes),
                    Err(e) => format!("cannot be read: {e}"),
                };
                Some(format!("{} {why}", seg.describe()))
            })
            .collect();
        if !problems.is_empty() {
            return Err(StoreError::ArchiveDamaged {
                dir: dir.to_path_buf(),
                problems,
            });
        }
        Ok(Archive {
            manifest,
            dir: dir.to_path_buf(),
            cache: Mutex::new(None),
        })
    }

    /// The folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The highest sequence number archived (0 when none).
    pub fn last_seq(&self) -> i64 {
        self.manifest.segments.last().map_or(0, |s| s.last_seq)
    }

    /// The segments, oldest first.
    pub fn segments(&self) -> &[Segment] {
        &self.manifest.segments
    }

    /// Adds a segment already written and synced: the manifest naming it is written first.
    pub(crate) fn push(&mut self, seg: Segment) -> Result<(), StoreError> {
        let mut next = self.manifest.clone();
        next.format = 1;
        next.segments.push(seg);
        let bytes = serde_json::to_vec_pretty(&next).map_err(|e| {
            StoreError::io(
                &self.dir,
                std::io::Error::new(std::io::ErrorKind::InvalidData, e),
            )
        })?;
        write_atomic(&manifest_path(&self.dir), &bytes)?;
        self.manifest = next;
        Ok(())
    }

    /// Up to `limit` archived events with `seq > after`, in order.
    pub fn read_after(&self, after: i64, limit: usize) -> Result<Vec<StoredEvent>, StoreError> {
        let mut out = Vec::new();
        let start = self
            .manifest
            .segments
            .partition_point(|s| s.last_seq <= after);
        for i in start..self.manifest.segments.len() {
            if out.len() >= limit {
                break;
            }
            let events = self.segment(i)?;
            let from = events.partition_point(|e| e.seq <= after);
            let take = (limit - out.len()).min(events.len() - from);
            out.extend_from_slice(&events[from..from + take]);
        }
        Ok(out)
    }

    fn segment(&self, i: usize) -> Result<std::sync::Arc<Vec<StoredEvent>>, StoreError> {
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((j, events)) = cache.as_ref() {
            if *j == i {
                return Ok(events.clone());
            }
        }
        let Some(seg) = self.manifest.segments.get(i) else {
            return Ok(std::sync::Arc::new(Vec::new()));
        };
        let events = std::sync::Arc::new(read_segment(&self.dir, seg)?);
        *cache = Some((i, events.clone()));
        Ok(events)
    }
}

/// `ranges` of sequence numbers without the archived prefix `1..=archived` (the events the
/// database no longer holds because they are in the archive).
pub fn outside(ranges: &[(i64, i64)], archived: i64) -> Vec<(i64, i64)> {
    ranges
        .iter()
        .filter(|(_, b)| *b > archived)
        .map(|&(a, b)| (a.max(archived + 1), b))
        .collect()
}

/// What the verification of the archive found.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ArchiveReport {
    /// Segments listed in the manifest.
    pub segments: usize,
    /// Events they hold.
    pub events: i64,
    /// The highest sequence number archived.
    pub last_seq: i64,
    /// Problems: a checksum mismatch, an unreadable line, a gap or overlap between segments
    /// or with the database.
    pub problems: Vec<String>,
}

/// Verifies every segment of the archive in `dir`: checksum, readable lines, sequence
/// numbers increasing inside the segment's range and every number of it present unless
/// `losses` records it; segments contiguous from seq 1; the database's first event
/// (`db_min_seq`, 0 when it holds none) right after the archive.
pub fn verify(dir: &Path, db_min_seq: i64, losses: &[LostRange]) -> ArchiveReport {
    let mut report = ArchiveReport::default();
    let manifest = match read_manifest(dir) {
        Ok(m) => m,
        Err(e) => {
            report.problems.push(format!("archive manifest: {e}"));
            return report;
        }
    };
    let lost = |s: i64| losses.iter().any(|l| l.first_seq <= s && s <= l.last_seq);
    let mut expect = 1;
    for seg in &manifest.segments {
        report.segments += 1;
        // a hole is sound where a repair recorded its events as lost
        let hole_recorded = seg.first_seq > expect && (expect..seg.first_seq).all(lost);
        if seg.first_seq != expect && !hole_recorded {
            report.problems.push(format!(
                "archive segment {} starts at seq {} but the one before ends at {}",
                seg.file,
                seg.first_seq,
                expect - 1
            ));
        }
        expect = seg.last_seq + 1;
        let events = match read_segment(dir, seg) {
            Ok(ev) => ev,
            Err(e) => {
                report.problems.push(format!(
                    "{} cannot be read: {e} (`augur store repair` records its range as lost)",
                    seg.describe()
                ));
                continue;
            }
        };
        report.events += events.len() as i64;
        if events.len() as i64 != seg.events {
            report.problems.push(format!(
                "archive segment {} holds {} events, the manifest says {}",
                seg.file,
                events.len(),
                seg.events
            ));
        }
        let mut next = seg.first_seq;
        for e in &events {
            if e.seq < next || e.seq > seg.last_seq {
                report.problems.push(format!(
                    "archive segment {}: seq {} out of order or outside {}..={}",
                    seg.file, e.seq, seg.first_seq, seg.last_seq
                ));
                break;
            }
            if let Some(s) = (next..e.seq).find(|s| !lost(*s)) {
                report.problems.push(format!(
                    "archive segment {}: acknowledged event seq {s} is missing",
                    seg.file
                ));
            }
            next = e.seq + 1;
        }
    }
    report.last_seq = expect - 1;
    if db_min_seq > 0 && db_min_seq <= report.last_seq {
        // an interrupted compaction: the rows are in both places, the archive's copy counts
        tracing::info!(
            db_min_seq,
            archived = report.last_seq,
            "events still in the database are archived too (an interrupted compaction); the next compaction drops them"
        );
    } else if db_min_seq > expect && !(expect..db_min_seq).all(lost) {
        report.problems.push(format!(
            "the archive ends at seq {} but the database starts at seq {db_min_seq}",
            expect - 1
        ));
    }
    report
}

/// Moves every segment of the archive in `dir` that cannot be read whole (missing, damaged)
/// aside (`<file>.damaged-<stamp>`, when there is a file) and out of the manifest; returns
/// their ranges, to be recorded as lost (`augur store repair`).
pub fn repair(dir: &Path, stamp: u64) -> Result<Vec<LostRange>, StoreError> {
    let manifest = read_manifest(dir)?;
    let mut kept = Vec::new();
    let mut lost = Vec::new();
    for seg in manifest.segments {
        match read_segment(dir, &seg) {
            Ok(_) => kept.push(seg),
            Err(e) => {
                let path = dir.join(&seg.file);
                if path.exists() {
                    let aside = dir.join(format!("{}.damaged-{stamp}", seg.file));
                    std::fs::rename(&path, &aside).map_err(|e| StoreError::io(&path, e))?;
                }
                lost.push(LostRange {
                    first_seq: seg.first_seq,
                    last_seq: seg.last_seq,
                    reason: format!("{} lost at repair: {e}", seg.describe()),
                });
            }
        }
    }
    if !lost.is_empty() {
        let next = Manifest {
            format: manifest.format.max(1),
            segments: kept,
        };
        let bytes = serde_json::to_vec_pretty(&next).map_err(|e| {
            StoreError::io(dir, std::io::Error::new(std::io::ErrorKind::InvalidData, e))
        })?;
        write_atomic(&manifest_path(dir), &bytes)?;
    }
    Ok(lost)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(seq: i64) -> Line {
        Line {
            seq,
            received_at: 1.0,
            body: format!(r#"{{"type":"job_started","job_id":"j{seq}","at":{seq}.0}}"#),
        }
    }

    #[test]
    fn segments_read_back_and_a_flipped_byte_is_detected() {
        let dir = tempfile::tempdir().unwrap();
        let mut archive = Archive::open(dir.path()).unwrap();
        let a: Vec<Line> = (1..=5).map(line).collect();
        let b: Vec<Line> = (6..=9).map(line).collect();
        for lines in [a, b] {
            let seg = write_segment(dir.path(), &lines).unwrap().unwrap();
            archive.push(seg).unwrap();
        }
        let archive = Archive::open(dir.path()).unwrap();
        assert_eq!(archive.last_seq(), 9);
        let page = archive.read_after(3, 4).unwrap();
        assert_eq!(page.iter().map(|e| e.seq).collect::<Vec<_>>(), [4, 5, 6, 7]);
        assert!(verify(dir.path(), 10, &[]).problems.is_empty());
        // a database that does not start right after the archive is a gap
        let gap = verify(dir.path(), 12, &[]);
        assert_eq!(gap.problems.len(), 1, "{:?}", gap.problems);
        // one flipped byte in a segment fails its checksum
        let seg = &archive.segments()[1];
        let path = dir.path().join(&seg.file);
        let mut bytes = std::fs::read(&path).unwrap();
        let mid = bytes.len() / 2;
        bytes[mid] ^= 0x20;
        std::fs::write(&path, bytes).unwrap();
        let report = verify(dir.path(), 10, &[]);
        assert!(
            report
                .problems
                .iter()
                .any(|p| p.contains("checksum mismatch")),
            "{:?}",
            report.problems
        );
        assert!(Archive::open(dir.path())
            .unwrap()
            .read_after(5, 10)
            .is_err());
    }
}
