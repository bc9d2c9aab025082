//! `augur store check|repair`: the event store's integrity report and its explicit repair.

use anyhow::{bail, Context};

use super::args::{StoreArgs, StoreCommand};
use crate::serve::store;

/// Runs `augur store …`.
pub fn run(cmd: &StoreCommand) -> anyhow::Result<()> {
    match cmd {
        StoreCommand::Check(args) => check(args),
        StoreCommand::Repair(args) => repair(args),
    }
}

fn db_path(args: &StoreArgs) -> std::path::PathBuf {
    args.data_dir.join("events.sqlite")
}

fn check(args: &StoreArgs) -> anyhow::Result<()> {
    let path = db_path(args);
    let report = store::check(&path).with_context(|| format!("checking {}", path.display()))?;
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        println!(
            "{}: {} events, highest seq {}, high-water mark {}",
            path.display(),
            report.events,
            report.max_seq,
            report
                .high_water
                .map_or_else(|| "missing".to_string(), |v| v.to_string())
        );
        for l in &report.recorded_losses {
            println!(
                "  recorded loss (accepted by an earlier repair): seq {}..={} ({})",
                l.first_seq, l.last_seq, l.reason
            );
        }
        if let Some(a) = &report.archive {
            println!(
                "  archive: {} segments, {} events, seq 1..={} (checksums and continuity checked)",
                a.segments, a.events, a.last_seq
            );
        }
        for p in report.problems() {
            println!("  DAMAGE: {p}");
        }
        if report.is_sound() {
            println!("sound: every acknowledged event is in the log");
        }
    }
    if !report.is_sound() {
        bail!(
            "the event store is damaged; `augur store repair --data-dir {}` keeps every intact event and records what was lost",
            args.data_dir.display()
        );
    }
    Ok(())
}

fn repair(args: &StoreArgs) -> anyhow::Result<()> {
    let path = db_path(args);
    let report = store::repair(&path).with_context(|| format!("repairing {}", path.display()))?;
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
        return Ok(());
    }
    println!(
        "{}: kept {} intact events; the next event gets seq {}",
        path.display(),
        report.kept,
        report.next_seq
    );
    for l in &report.lost {
        println!(
            "  LOST: seq {}..={} ({} events): {}",
            l.first_seq,
            l.last_seq,
            l.last_seq - l.first_seq + 1,
            l.reason
        );
    }
    if let Some(p) = &report.damaged_copy {
        println!("  the damaged files were moved to {}*", p.display());
    }
    Ok(())
}
