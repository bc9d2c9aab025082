//! `augur models list|show|promote|rollback`: the model registry from the command line.

use std::path::Path;

use anyhow::{bail, Context};
use augur_predictor::registry::{Promotion, Selector};
use augur_predictor::{ArtifactMeta, ModelRegistry, RuntimePredictor};
use serde::Serialize;

use crate::cli::{
    ModelsCommand, ModelsListArgs, ModelsPromoteArgs, ModelsRollbackArgs, ModelsShowArgs,
};
use crate::report::text::{bytes, thousands};

/// Runs the `augur models` subcommand `cmd`.
pub fn run(cmd: &ModelsCommand) -> anyhow::Result<()> {
    match cmd {
        ModelsCommand::List(a) => list(a),
        ModelsCommand::Show(a) => show(a),
        ModelsCommand::Promote(a) => promote(a),
        ModelsCommand::Rollback(a) => rollback(a),
    }
}

/// Opens an existing registry (never creates one for a read).
fn open_existing(dir: &Path) -> anyhow::Result<Option<ModelRegistry>> {
    if !dir.exists() {
        return Ok(None);
    }
    Ok(Some(ModelRegistry::open(dir).with_context(|| {
        format!("opening the model registry {}", dir.display())
    })?))
}

#[derive(Serialize)]
struct KindListing {
    kind: String,
    promoted: Option<Promotion>,
    versions: Vec<ListedVersion>,
}

#[derive(Serialize)]
struct ListedVersion {
    version: u32,
    path: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    meta: Option<ArtifactMeta>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

fn list(args: &ModelsListArgs) -> anyhow::Result<()> {
    let dir = &args.registry.registry;
    let out = match open_existing(dir)? {
        Some(reg) => listings(&reg, args.verify)?,
        None => Vec::new(),
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    if out.is_empty() {
        println!(
            "no models in {} yet (save one with `augur train`)",
            dir.display()
        );
        return Ok(());
    }
    for k in &out {
        print_kind(dir, k);
    }
    Ok(())
}

/// Every kind's versions in `reg` (each verified against its payload when `verify`).
fn listings(reg: &ModelRegistry, verify: bool) -> anyhow::Result<Vec<KindListing>> {
    let mut out = Vec::new();
    for kind in reg.kinds()? {
        let promoted = reg.promotion(&kind).unwrap_or(None);
        let versions = reg
            .versions(&kind)?
            .into_iter()
            .map(|mut e| {
                if verify && e.meta.is_ok() {
                    if let Err(err) = reg.verify(&kind, e.version) {
                        e.meta = Err(err);
                    }
                }
                let (meta, error) = match e.meta {
                    Ok(m) => (Some(m), None),
                    Err(err) => (None, Some(err.to_string())),
                };
                ListedVersion {
                    version: e.version,
                    path: e.dir.display().to_string(),
                    meta,
                    error,
                }
            })
            .collect();
        out.push(KindListing {
            kind,
            promoted,
            versions,
        });
    }
    Ok(out)
}

/// One kind's table: the runtime kind with fixed metric columns, the others with their own
/// metrics listed.
fn print_kind(dir: &Path, k: &KindListing) {
    let serving = k
        .promoted
        .as_ref()
        .map(|p| p.version)
        .or(k.versions.last().map(|v| v.version));
    println!(
        "{} models · {}{}",
        k.kind,
        dir.join(&k.kind).display(),
        match &k.promoted {
            Some(p) => format!(" · promoted v{}", p.version),
            None => " · none promoted: the latest is served".to_string(),
        }
    );
    let runtime_kind = k.kind == "runtime";
    if runtime_kind {
        println!(
            "  {:<8} {:<17} {:<10} {:>9} {:>8} {:>9} {:>8} {:>7} {:>9}",
            "version",
            "created (UTC)",
            "dataset",
            "jobs",
            "mae_log",
            "within2x",
            "cover80",
            "schema",
            "size"
        );
    } else {
        println!(
            "  {:<8} {:<17} {:<10} {:>9} {:>7} {:>9}  metrics (held-out)",
            "version", "created (UTC)", "dataset", "jobs", "schema", "size"
        );
    }
    for v in &k.versions {
        let mark = if Some(v.version) == serving {
            "  ← serving"
        } else {
            ""
        };
        let Some(m) = &v.meta else {
            println!(
                "  {:<8} unusable: {}{mark}",
                format!("v{}", v.version),
                v.error.as_deref().unwrap_or("?")
            );
            continue;
        };
        print_version(v.version, m, runtime_kind, mark);
    }
    println!();
}

/// One saved version's line (`mark` says whether it is served).
fn print_version(version: u32, m: &ArtifactMeta, runtime_kind: bool, mark: &str) {
    let metric = |key: &str, scale: f64, prec: usize| {
        m.metrics
            .get(key)
            .map(|x| format!("{:.*}", prec, x * scale))
            .unwrap_or_else(|| "-".into())
    };
    let created = chrono::DateTime::parse_from_rfc3339(&m.created_at)
        .map(|t| {
            t.with_timezone(&chrono::Utc)
                .format("%Y-%m-%d %H:%M")
                .to_string()
        })
        .unwrap_or_else(|_| m.created_at.clone());
    let dataset = Path::new(&m.dataset)
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_else(|| m.dataset.clone());
    if !runtime_kind {
        let listed: Vec<String> = m
            .metrics
            .iter()
            .map(|(key, x)| format!("{key}={}", significant(*x)))
            .collect();
        println!(
            "  {:<8} {:<17} {:<10} {:>9} {:>7} {:>9}  {}{mark}",
            format!("v{version}"),
            created,
            dataset,
            thousands(m.training_rows as u64),
            m.feature_schema_version,
            bytes(m.payload_bytes),
            listed.join(", "),
        );
        return;
    }
    println!(
        "  {:<8} {:<17} {:<10} {:>9} {:>8} {:>8}% {:>7}% {:>7} {:>9}{mark}",
        format!("v{version}"),
        created,
        dataset,
        thousands(m.training_rows as u64),
        metric("mae_log", 1.0, 3),
        metric("within2x", 100.0, 1),
        metric("coverage80", 100.0, 1),
        m.feature_schema_version,
        bytes(m.payload_bytes),
    );
}

/// A metric value with about 3 significant digits (counts without decimals).
fn significant(x: f64) -> String {
    if !x.is_finite() {
        return "-".into();
    }
    let a = x.abs();
    if a >= 100.0 || x.fract() == 0.0 {
        format!("{x:.0}")
    } else if a >= 1.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    }
}

fn show(args: &ModelsShowArgs) -> anyhow::Result<()> {
    let selector: Selector = args.which.parse().map_err(anyhow::Error::msg)?;
    let dir = &args.registry.registry;
    let Some(reg) = open_existing(dir)? else {
        bail!("no model registry at {}", dir.display());
    };
    let (predictor, meta) = reg
        .load::<RuntimePredictor>(selector)
        .with_context(|| format!("loading the {selector} runtime model"))?;
    let path = reg.version_dir(&meta.kind, meta.version);
    if args.json {
        let out = serde_json::json!({
            "path": path.display().to_string(),
            "verified": true,
            "meta": meta,
            "features": predictor.schema.names(),
            "interval_log": predictor.interval_log,
            "coverage": predictor.coverage,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    println!("{} v{} · {}", meta.kind, meta.version, path.display());
    println!(
        "  verified: sha256 {} ({}, {}), artifact format {}, feature schema {}",
        meta.payload_sha256,
        meta.payload_file,
        bytes(meta.payload_bytes),
        meta.format_version,
        meta.feature_schema_version
    );
    println!(
        "  trained on {} · {} jobs · saved {} by augur {}",
        meta.dataset,
        thousands(meta.training_rows as u64),
        meta.created_at,
        meta.augur_version
    );
    for (k, v) in &meta.notes {
        println!("  {k}: {v}");
    }
    println!("  metrics:");
    let width = meta.metrics.keys().map(|k| k.len()).max().unwrap_or(0);
    for (k, v) in &meta.metrics {
        if v.fract() == 0.0 && v.abs() < 1e15 {
            println!("    {k:<width$}  {v:.0}");
        } else {
            println!("    {k:<width$}  {v:.4}");
        }
    }
    let names = predictor.schema.names();
    println!(
        "  {} features; {:.0}% interval: ×{:.2} … ×{:.2} around the point prediction",
        names.len(),
        predictor.coverage * 100.0,
        predictor.interval_log.0.exp(),
        predictor.interval_log.1.exp()
    );
    Ok(())
}

fn describe(kind: &str, p: &Promotion) -> String {
    let history = if p.history.is_empty() {
        "none".to_string()
    } else {
        p.history
            .iter()
            .map(|v| format!("v{v}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "{kind}: serving v{} (promoted before: {history})",
        p.version
    )
}

fn promote(args: &ModelsPromoteArgs) -> anyhow::Result<()> {
    let dir = &args.registry.registry;
    let Some(reg) = open_existing(dir)? else {
        bail!("no model registry at {}", dir.display());
    };
    let selector: Selector = args.which.parse().map_err(anyhow::Error::msg)?;
    let version = match selector {
        Selector::Version(v) => v,
        Selector::Latest => reg.resolve(&args.kind, selector)?,
        other => bail!("promote a version (v1, v2, ...) or `latest`, not `{other}`"),
    };
    let p = reg
        .promote(&args.kind, version)
        .with_context(|| format!("promoting {} v{version}", args.kind))?;
    println!("{}", describe(&args.kind, &p));
    Ok(())
}

fn rollback(args: &ModelsRollbackArgs) -> anyhow::Result<()> {
    let dir = &args.registry.registry;
    let Some(reg) = open_existing(dir)? else {
        bail!("no model registry at {}", dir.display());
    };
    let p = reg
        .rollback(&args.kind)
        .with_context(|| format!("rolling back {}", args.kind))?;
    println!("{}", describe(&args.kind, &p));
    Ok(())
}
