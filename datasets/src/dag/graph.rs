//! Graph algorithms on a DAG given as parent lists: a topological order and the critical path.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};

/// Why a parents/durations description is not a usable DAG.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DagShapeError {
    /// `durations` and `parents` differ in length.
    #[error("{stages} stages but {durations} durations")]
    LengthMismatch {
        /// Stages (length of `parents`).
        stages: usize,
        /// Durations given.
        durations: usize,
    },
    /// A parent index is out of range.
    #[error("stage {stage} has parent {parent}, which does not exist")]
    UnknownParent {
        /// The stage.
        stage: usize,
        /// The bad parent index.
        parent: usize,
    },
    /// The graph has a cycle through this stage.
    #[error("stage {stage} is on a dependency cycle")]
    Cycle {
        /// A stage on the cycle.
        stage: usize,
    },
    /// A duration is negative or not finite.
    #[error("stage {stage} has an unusable duration {value}")]
    BadDuration {
        /// The stage.
        stage: usize,
        /// The duration.
        value: f64,
    },
}

/// Stage indices in an order where every stage comes after its parents (ties by index).
pub fn topological_order(parents: &[Vec<usize>]) -> Result<Vec<usize>, DagShapeError> {
    let n = parents.len();
    let mut indegree = vec![0usize; n];
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (stage, ps) in parents.iter().enumerate() {
        for &p in ps {
            if p >= n {
                return Err(DagShapeError::UnknownParent { stage, parent: p });
            }
            if let (Some(c), Some(d)) = (children.get_mut(p), indegree.get_mut(stage)) {
                c.push(stage);
                *d += 1;
            }
        }
    }
    let mut ready: BinaryHeap<Reverse<usize>> = indegree
        .iter()
        .enumerate()
        .filter(|(_, &d)| d == 0)
        .map(|(i, _)| Reverse(i))
        .collect();
    let mut order = Vec::with_capacity(n);
    while let Some(Reverse(i)) = ready.pop() {
        order.push(i);
        for &c in children.get(i).map(Vec::as_slice).unwrap_or(&[]) {
            if let Some(d) = indegree.get_mut(c) {
                *d -= 1;
                if *d == 0 {
                    ready.push(Reverse(c));
                }
            }
        }
    }
    if order.len() < n {
        // Walk up from any unplaced stage through unplaced parents until a stage repeats: that
        // stage is on a cycle.
        let placed: BTreeSet<usize> = order.iter().copied().collect();
        let mut at = (0..n).find(|i| !placed.contains(i)).unwrap_or(0);
        let mut seen = BTreeSet::new();
        while seen.insert(at) {
            match parents
                .get(at)
                .and_then(|ps| ps.iter().copied().find(|p| !placed.contains(p)))
            {
                Some(p) => at = p,
                None => break,
            }
        }
        return Err(DagShapeError::Cycle { stage: at });
    }
    Ok(order)
}

/// Length of the longest (critical) path through a DAG: the makespan with unlimited
/// resources. `parents[i]` lists the stages `i` waits for, `durations[i]` is its duration.
/// 0 for an empty DAG.
pub fn critical_path(parents: &[Vec<usize>], durations: &[f64]) -> Result<f64, DagShapeError> {
    if parents.len() != durations.len() {
        return Err(DagShapeError::LengthMismatch {
            stages: parents.len(),
            durations: durations.len(),
        });
    }
    if let Some((stage, &value)) = durations
        .iter()
        .enumerate()
        .find(|(_, d)| !d.is_finite() || **d < 0.0)
    {
        return Err(DagShapeError::BadDuration { stage, value });
    }
    let order = topological_order(parents)?;
    let mut finish = vec![0.0f64; parents.len()];
    let mut longest = 0.0f64;
    for i in order {
        let start = parents
            .get(i)
            .map(|ps| {
                ps.iter()
                    .filter_map(|&p| finish.get(p).copied())
                    .fold(0.0, f64::max)
            })
            .unwrap_or(0.0);
        let end = start + durations.get(i).copied().unwrap_or(0.0);
        if let Some(f) = finish.get_mut(i) {
            *f = end;
        }
        longest = longest.max(end);
    }
    Ok(longest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cycles_are_named() {
        // 0 → 1 → 2 → 1 (cycle 1↔2), 3 independent
        let parents = vec![vec![], vec![0, 2], vec![1], vec![]];
        match topological_order(&parents) {
            Err(DagShapeError::Cycle { stage }) => assert!(stage == 1 || stage == 2),
            other => panic!("expected a cycle, got {other:?}"),
        }
        assert_eq!(
            topological_order(&[vec![5]]),
            Err(DagShapeError::UnknownParent {
                stage: 0,
                parent: 5
            })
        );
        assert_eq!(
            topological_order(&[vec![0]]),
            Err(DagShapeError::Cycle { stage: 0 })
        );
    }
}
