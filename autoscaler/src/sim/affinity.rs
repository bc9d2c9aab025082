//! Per-job GPU-type affinity from measured throughputs ([`affinity_from_gavel`]): each job
//! gets a model class of Gavel's throughput table and runs on each GPU type at that model's
//! measured throughput relative to the reference type.

use std::collections::BTreeMap;

use augur_datasets::cluster::GavelThroughput;
use augur_datasets::JobRecord;
use augur_numeric::SplitMix64;
use serde::Serialize;

use crate::cluster::{AffinityClass, TypeAffinity};
use crate::error::SimError;
use crate::scaling::family::gavel_family;

/// A model class as the report states it: its speeds and how many jobs got it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClassUse {
    pub name: String,
    /// Speed on each GPU type (cluster order) relative to the reference type.
    pub speeds: Vec<f64>,
    /// Jobs mapped to it by name.
    pub by_name: usize,
    /// Jobs that drew it.
    pub drawn: usize,
}

/// What [`affinity_from_gavel`] did, for the report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AffinityReport {
    pub source: String,
    pub reference: String,
    pub gpu_types: Vec<String>,
    /// How jobs without a recognised model name got a class.
    pub mix: String,
    pub seed: u64,
    pub classes: Vec<ClassUse>,
}

/// The family of a Gavel job type: its name before ` (batch size …)`.
fn family(job_type: &str) -> &str {
    job_type.split(" (").next().unwrap_or(job_type).trim()
}

/// Builds the affinity of `records` (class by row) on a cluster of `gpu_types` (Gavel's names,
/// cluster order; durations measured on `gpu_types[0]`) from Gavel's isolated throughputs at
/// scale factor 1. The classes are Gavel's job types measured with a non-zero throughput on
/// every type. A job whose name contains a model's keyword draws among that family's batch
/// sizes; any other job draws uniformly among all classes (as Gavel's own simulator draws job
/// types), with `seed`.
pub fn affinity_from_gavel(
    isolated: &[GavelThroughput],
    gpu_types: &[String],
    records: &[JobRecord],
    seed: u64,
) -> Result<(TypeAffinity, AffinityReport), SimError> {
    let Some(reference) = gpu_types.first() else {
        return Err(SimError::Config("affinity: no GPU types".into()));
    };
    let mut by_type: BTreeMap<&str, Vec<Option<f64>>> = BTreeMap::new();
    for t in isolated.iter().filter(|t| t.scale_factor == 1) {
        if let Some(k) = gpu_types.iter().position(|g| *g == t.gpu) {
            let row = by_type
                .entry(t.job_type.as_str())
                .or_insert_with(|| vec![None; gpu_types.len()]);
            if let Some(slot) = row.get_mut(k) {
                *slot = Some(t.steps_per_s).filter(|x| x.is_finite() && *x > 0.0);
            }
        }
    }
    let classes: Vec<AffinityClass> = by_type
        .into_iter()
        .filter_map(|(name, thr)| {
            let thr: Vec<f64> = thr.into_iter().collect::<Option<Vec<f64>>>()?;
            let base = *thr.first()?;
            Some(AffinityClass {
                name: name.to_string(),
                speeds: thr.iter().map(|x| x / base).collect(),
            })
        })
        .collect();
    if classes.is_empty() || classes.len() >= usize::from(u16::MAX) {
        return Err(SimError::Config(format!(
            "affinity: Gavel has no job type measured on every one of {}",
            gpu_types.join(", ")
        )));
    }
    let mut uses: Vec<ClassUse> = classes
        .iter()
        .map(|c| ClassUse {
            name: c.name.clone(),
            speeds: c.speeds.clone(),
            by_name: 0,
            drawn: 0,
        })
        .collect();
    let families: BTreeMap<&str, Vec<u16>> =
        classes
            .iter()
            .enumerate()
            .fold(BTreeMap::new(), |mut m, (k, c)| {
                m.entry(family(&c.name)).or_default().push(k as u16);
                m
            });
    let all: Vec<u16> = (0..classes.len() as u16).collect();
    let mut rng = SplitMix64(seed ^ 0x6761_7665_6c00_0000);
    let mut job_class = Vec::with_capacity(records.len());
    for r in records {
        let named = r
            .job_name
            .as_deref()
            .and_then(gavel_family)
            .and_then(|fam| families.get(fam));
        let pool = named.unwrap_or(&all);
        let pick = (rng.unit() * pool.len() as f64) as usize;
        let k = pool
            .get(pick.min(pool.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0);
        if let Some(u) = uses.get_mut(usize::from(k)) {
            if named.is_some() {
                u.by_name += 1;
            } else {
                u.drawn += 1;
            }
        }
        job_class.push(k);
    }
    let report = AffinityReport {
        source:
            "Gavel isolated throughputs (scheduler/simulation_throughputs.json), scale factor 1"
                .into(),
        reference: reference.clone(),
        gpu_types: gpu_types.to_vec(),
        mix: "uniform over Gavel's job types (as Gavel's simulator draws them), seeded".into(),
        seed,
        classes: uses,
    };
    Ok((TypeAffinity { classes, job_class }, report))
}
