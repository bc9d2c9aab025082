//! `augur store check|repair`: the event store's integrity report and its explicit repair.

use anyhow::{bail, Context};

use super::args::{StoreArgs, StoreCommand};
use crate::serve::{state::identity, state::snapshot, state::store};

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

/// The last event of the snapshot of the online state in the data folder (0: none): the log
/// once held every event up to it.
fn witnessed(args: &StoreArgs) -> i64 {
    snapshot::witnessed_seq(&snapshot::Snapshots::new(&args.data_dir).path()).unwrap_or(0)
}

fn check(args: &StoreArgs) -> anyhow::Result<()> {
    // the folder's identity first: an unreadable one stops every start too
    if let Err(e) = identity::read(&args.data_dir) {
        println!("  DAMAGE: {e}");
        bail!("the data folder's identity cannot be read");
    }
    let path = db_path(args);
    let report = store::check(&path, witnessed(args))
        .with_context(|| format!("checking {}", path.display()))?;
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

/// Restores an empty or unreadable `identity.json` from the snapshot of the online state
/// (its header names the backend and cluster it was built for); an error naming what to do
/// when there is none.
fn repair_identity(args: &StoreArgs) -> anyhow::Result<()> {
    let Err(e) = identity::read(&args.data_dir) else {
        return Ok(());
    };
    let snapshot = snapshot::Snapshots::new(&args.data_dir).path();
    let Some(header) = snapshot::read_header(&snapshot) else {
        bail!("{e}\nno sound snapshot of the online state ({}) names the folder's backend and cluster: write the identity by hand", snapshot.display());
    };
    identity::DataIdentity::new(&header.backend, &header.cluster).write(&args.data_dir)?;
    println!(
        "{}: restored from the snapshot of the online state: backend `{}`, cluster `{}`",
        args.data_dir.join(identity::IDENTITY_FILE).display(),
        header.backend,
        header.cluster
    );
    Ok(())
}

fn repair(args: &StoreArgs) -> anyhow::Result<()> {
    repair_identity(args)?;
    let path = db_path(args);
    let report = store::repair(&path, witnessed(args))
        .with_context(|| format!("repairing {}", path.display()))?;
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
