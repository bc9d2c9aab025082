//! The job traces a command or the service reads: bundled datasets by name, trace files and
//! folders (walked; READMEs, licences and notes skipped), each read as the format given or
//! detected. `augur evaluate` / `train` and `augur serve --bootstrap` share it.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use augur_datasets::bundled::Dataset;
use augur_datasets::{load_jobs_many, JobRecord, ReadOptions, TraceFormat};

/// The format named by `--format`, if given.
pub fn parse_format(format: Option<&str>) -> anyhow::Result<Option<TraceFormat>> {
    format
        .map(|f| {
            TraceFormat::parse(f)
                .with_context(|| format!("unknown --format `{f}`; known: {}", TraceFormat::names()))
        })
        .transpose()
}

/// The jobs of one source, read with `opts` (a trace file, a folder of trace files of one dataset, or a
/// bundled dataset's name), with the source's name.
pub fn load_source(
    source: &str,
    format: Option<&str>,
    opts: &ReadOptions,
) -> anyhow::Result<(String, Vec<JobRecord>)> {
    let path = Path::new(source);
    let looks_like_path = source.contains(std::path::MAIN_SEPARATOR) || source.contains('.');
    if path.exists() || (looks_like_path && Dataset::parse(source).is_err()) {
        return Ok((source.to_string(), load_path(path, format, opts)?));
    }
    let ds = Dataset::parse(source).with_context(|| {
        format!("`{source}` is neither a trace file, a folder, nor a bundled dataset")
    })?;
    let (table, _) = ds
        .load(opts)
        .with_context(|| format!("reading the bundled {source} trace"))?;
    Ok((ds.name().to_string(), table.to_records()?))
}

/// The jobs of a trace file, or of the trace files under a folder (read together as one
/// dataset).
pub fn load_path(
    path: &Path,
    format: Option<&str>,
    opts: &ReadOptions,
) -> anyhow::Result<Vec<JobRecord>> {
    let format = parse_format(format)?;
    let files = trace_files(path)?;
    if files.is_empty() {
        bail!("{}: the folder holds no trace file", path.display());
    }
    let refs: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    let (table, _) = load_jobs_many(&refs, format, opts)?;
    Ok(table.to_records()?)
}

/// The jobs of every source, each with its name.
pub fn load_sources(
    sources: &[String],
    format: Option<&str>,
    opts: &ReadOptions,
) -> anyhow::Result<Vec<(String, Vec<JobRecord>)>> {
    sources
        .iter()
        .map(|s| load_source(s, format, opts))
        .collect()
}

/// `path` itself, or the trace files under the folder `path` (sorted; READMEs, licences,
/// notes and hidden files skipped).
pub fn trace_files(path: &Path) -> anyhow::Result<Vec<PathBuf>> {
    if !path.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut found = Vec::new();
    walk(path, &mut found).with_context(|| format!("listing {}", path.display()))?;
    found.sort();
    Ok(found)
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            walk(&path, out)?;
            continue;
        }
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().to_ascii_lowercase())
            .unwrap_or_default();
        let skip = name.starts_with("source")
            || name.starts_with("license")
            || name.starts_with("readme")
            || name.ends_with(".md")
            || name.ends_with(".txt")
            || name.starts_with('.');
        if !skip {
            out.push(path);
        }
    }
    Ok(())
}
