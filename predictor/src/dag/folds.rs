//! Grouped folds: whole groups of jobs (a TPC-H query over all its scales and executor
//! counts, a WfCommons instance) are dealt to cross-validation folds.

use std::collections::BTreeMap;

use augur_numeric::SplitMix64;

/// Assigns each distinct group to one of `folds` folds: groups sorted, shuffled with
/// `seed` (SplitMix64 Fisher–Yates, [`SplitMix64::shuffle_mod`]), then dealt round-robin.
pub fn group_folds(groups: &[String], folds: usize, seed: u64) -> BTreeMap<String, usize> {
    let mut distinct: Vec<&String> = groups.iter().collect();
    distinct.sort();
    distinct.dedup();
    SplitMix64(seed).shuffle_mod(&mut distinct);
    distinct
        .into_iter()
        .enumerate()
        .map(|(k, g)| (g.clone(), k % folds.max(1)))
        .collect()
}
