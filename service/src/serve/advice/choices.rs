//! What the cluster offers a job, as the service knows it: the GPU counts around the request
//! (or within the range asked for, up to the largest the cluster has), the GPU types and the
//! queues its ingested jobs named (the user's own queues first), and the user's past runs of
//! the same job. A type or queue asked for that the cluster never named is refused, naming
//! the field.

use std::collections::BTreeMap;

use augur_autoscaler::scaling::reshape::{PastRun, Shape};
use augur_predictor::ModelKind;

use super::{AdviceError, AdviceRequest};
use crate::serve::state::bounds::MAX_GPUS;
use crate::serve::state::events::{FinishStatus, JobProfile};
use crate::serve::state::online::{JobInfo, Online};

/// Most options one answer may hold (GPU counts × types × queues).
pub const MAX_OPTIONS: usize = 256;

/// One alternative: the request with these changed.
#[derive(Debug, Clone, PartialEq)]
pub struct Choice {
    pub gpus: Option<f64>,
    pub gpu_type: Option<String>,
    pub queue: Option<String>,
}

/// The alternatives to weigh, the request's own first, and what was left out and why.
#[derive(Debug)]
pub struct Choices {
    pub list: Vec<Choice>,
    pub notes: Vec<String>,
}

/// Every job the state holds (latest and earlier runs).
fn all_jobs(o: &Online) -> impl Iterator<Item = &JobInfo> {
    o.jobs.values().chain(o.earlier_runs.values().flatten())
}

/// The GPU types the cluster's jobs named, lower-case key → the spelling seen.
pub fn cluster_types(o: &Online) -> BTreeMap<String, String> {
    names(o, |p| p.gpu_type.as_deref(), None)
}

/// The queues the cluster's jobs named (only `user`'s when given), lower-case key → the
/// spelling seen.
pub fn cluster_queues(o: &Online, user: Option<&str>) -> BTreeMap<String, String> {
    names(o, |p| p.queue.as_deref(), user)
}

fn names(
    o: &Online,
    field: impl Fn(&JobProfile) -> Option<&str>,
    user: Option<&str>,
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for p in all_jobs(o).filter_map(|j| j.profile.as_ref()) {
        if user.is_some_and(|u| p.user.as_deref() != Some(u)) {
            continue;
        }
        if let Some(v) = field(p).filter(|v| !v.is_empty()) {
            out.entry(v.to_lowercase()).or_insert_with(|| v.to_string());
        }
    }
    out
}

/// The largest GPU count a job may ask of this cluster, and whether the cluster said so
/// (a cluster snapshot's total) rather than it being the largest seen (ingested jobs, the
/// served models' training rows).
pub fn largest_gpus(o: &Online, profile: &JobProfile) -> (f64, bool) {
    if let Some(total) = o.largest_gpus.filter(|g| *g >= 1.0) {
        return (total, true);
    }
    let seen = all_jobs(o)
        .filter_map(|j| j.profile.as_ref()?.num_gpus)
        .fold(0.0_f64, f64::max);
    let trained = [ModelKind::Runtime, ModelKind::QueueWait]
        .into_iter()
        .filter_map(|k| o.models.get(k)?.profile_use())
        .flat_map(|(ranges, _)| ranges.fields.iter())
        .filter(|f| f.field == "num_gpus")
        .map(|f| f.bounds().1)
        .fold(0.0_f64, f64::max);
    let asked = profile.num_gpus.unwrap_or(0.0);
    (seen.max(trained).max(asked).max(1.0), false)
}

/// The user's finished runs of the same job name (same user), not `job_id` itself: what
/// the scaling model reads first.
pub fn past_runs(o: &Online, job_id: Option<&str>, profile: &JobProfile) -> Vec<PastRun> {
    let (Some(user), Some(name)) = (profile.user.as_deref(), profile.job_name.as_deref()) else {
        return Vec::new();
    };
    all_jobs(o)
        .filter(|j| Some(j.job_id.as_str()) != job_id)
        .filter(|j| j.status == Some(FinishStatus::Completed))
        .filter_map(|j| {
            let p = j.profile.as_ref()?;
            if p.user.as_deref() != Some(user) || p.job_name.as_deref() != Some(name) {
                return None;
            }
            let runtime_s = j.duration.filter(|d| d.is_finite() && *d > 0.0)?;
            let gpus = p.num_gpus.filter(|g| g.is_finite() && *g > 0.0)?;
            Some(PastRun {
                shape: Shape {
                    gpus,
                    gpu_type: p.gpu_type.clone(),
                },
                runtime_s,
            })
        })
        .collect()
}

/// The GPU counts to weigh: within `[min, max]` when asked (powers of two, the ends and the
/// request's own), else a quarter, half, the same, twice and four times the request; all
/// within `[1, largest]` (fractional requests keep their own count).
fn gpu_counts(
    req: &AdviceRequest,
    asked: Option<f64>,
    (largest, told): (f64, bool),
    notes: &mut Vec<String>,
) -> Result<Vec<Option<f64>>, AdviceError> {
    let mut counts: Vec<f64> = Vec::new();
    match &req.gpus {
        Some(range) => {
            let min = range.min.unwrap_or(1);
            let max = range.max.unwrap_or_else(|| (largest as u32).max(min));
            for (field, v) in [("gpus.min", min), ("gpus.max", max)] {
                if v == 0 {
                    return Err(AdviceError::invalid(field, "must be at least 1 GPU"));
                }
                if f64::from(v) > MAX_GPUS {
                    return Err(AdviceError::invalid(
                        field,
                        format!("{v} GPUs is more than {MAX_GPUS}, the most one job may have"),
                    ));
                }
            }
            if min > max {
                return Err(AdviceError::invalid(
                    "gpus",
                    format!("min ({min}) is more than max ({max})"),
                ));
            }
            if told && f64::from(min) > largest {
                return Err(AdviceError::invalid(
                    "gpus.min",
                    format!("{min} GPUs is more than the cluster has ({largest})"),
                ));
            }
            let top = f64::from(max).min(largest.max(f64::from(min)));
            if top < f64::from(max) {
                notes.push(format!(
                    "GPU counts above {top} left out: the cluster's largest is {top} ({})",
                    if told {
                        "its snapshot's total"
                    } else {
                        "the most seen in its jobs and the models' training data"
                    }
                ));
            }
            let mut p = 1.0;
            while p <= top {
                if p >= f64::from(min) {
                    counts.push(p);
                }
                p *= 2.0;
            }
            counts.extend([f64::from(min), top]);
            if let Some(n) = asked.filter(|n| *n >= f64::from(min) && *n <= top) {
                counts.push(n);
            }
        }
        None => match asked {
            Some(n) if n >= 1.0 => {
                counts.extend(
                    [n / 4.0, n / 2.0, n, n * 2.0, n * 4.0]
                        .into_iter()
                        .map(f64::round)
                        .filter(|c| *c >= 1.0 && *c <= largest.max(n)),
                );
            }
            // a fractional or no GPU request: its own only
            _ => return Ok(vec![asked]),
        },
    }
    counts.sort_by(f64::total_cmp);
    counts.dedup();
    Ok(counts.into_iter().map(Some).collect())
}

/// The alternatives for `profile` under `req` (see the module docs).
pub fn choices(
    o: &Online,
    profile: &JobProfile,
    req: &AdviceRequest,
) -> Result<Choices, AdviceError> {
    let mut notes = Vec::new();
    let counts = gpu_counts(req, profile.num_gpus, largest_gpus(o, profile), &mut notes)?;
    let known_types = cluster_types(o);
    let types: Vec<Option<String>> = match &req.gpu_types {
        Some(given) => given
            .iter()
            .enumerate()
            .map(|(i, t)| {
                known_types
                    .get(&t.to_lowercase())
                    .map(|seen| Some(seen.clone()))
                    .ok_or_else(|| unknown(&format!("gpu_types[{i}]"), "GPU type", t, &known_types))
            })
            .collect::<Result<_, _>>()?,
        None => known_types.values().cloned().map(Some).collect(),
    };
    let all_queues = cluster_queues(o, None);
    let queues: Vec<Option<String>> = match &req.queues {
        Some(given) => given
            .iter()
            .enumerate()
            .map(|(i, q)| {
                all_queues
                    .get(&q.to_lowercase())
                    .map(|seen| Some(seen.clone()))
                    .ok_or_else(|| unknown(&format!("queues[{i}]"), "queue", q, &all_queues))
            })
            .collect::<Result<_, _>>()?,
        None => cluster_queues(o, profile.user.as_deref())
            .into_values()
            .map(Some)
            .collect(),
    };
    let own = Choice {
        gpus: profile.num_gpus,
        gpu_type: profile.gpu_type.clone(),
        queue: profile.queue.clone(),
    };
    let with_own = |mut v: Vec<Option<String>>, mine: &Option<String>| {
        if !v.iter().any(|x| same(x, mine)) {
            v.insert(0, mine.clone());
        }
        v
    };
    let types = with_own(types, &own.gpu_type);
    let queues = with_own(queues, &own.queue);
    let n = counts.len() * types.len() * queues.len();
    if n > MAX_OPTIONS {
        return Err(AdviceError::invalid(
            "gpus",
            format!(
                "{} GPU counts × {} types × {} queues is {n} options, over {MAX_OPTIONS}: narrow `gpus`, `gpu_types` or `queues`",
                counts.len(),
                types.len(),
                queues.len()
            ),
        ));
    }
    let mut list = vec![own.clone()];
    for g in &counts {
        for t in &types {
            for q in &queues {
                let c = Choice {
                    gpus: *g,
                    gpu_type: t.clone(),
                    queue: q.clone(),
                };
                if !(c.gpus == own.gpus
                    && same(&c.gpu_type, &own.gpu_type)
                    && same(&c.queue, &own.queue))
                {
                    list.push(c);
                }
            }
        }
    }
    if known_types.is_empty() && req.gpu_types.is_none() {
        notes.push("no ingested job named a GPU type: no other type is offered".into());
    }
    Ok(Choices { list, notes })
}

/// Two optional names equal regardless of case.
pub fn same(a: &Option<String>, b: &Option<String>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => a.eq_ignore_ascii_case(b),
        (None, None) => true,
        _ => false,
    }
}

fn unknown(field: &str, what: &str, v: &str, known: &BTreeMap<String, String>) -> AdviceError {
    let seen: Vec<&str> = known.values().map(String::as_str).collect();
    let reason = if seen.is_empty() {
        format!("the cluster has no {what} `{v}`: no ingested job named any {what}")
    } else {
        format!(
            "the cluster has no {what} `{v}` (its jobs named: {})",
            seen.join(", ")
        )
    };
    AdviceError::invalid(field, reason)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::advice::GpuRange;

    fn counts(
        range: Option<(u32, u32)>,
        asked: Option<f64>,
        largest: f64,
    ) -> Result<Vec<f64>, AdviceError> {
        let req = AdviceRequest {
            gpus: range.map(|(min, max)| GpuRange {
                min: Some(min),
                max: Some(max),
            }),
            gpu_types: None,
            queues: None,
        };
        let mut notes = Vec::new();
        gpu_counts(&req, asked, (largest, true), &mut notes)
            .map(|v| v.into_iter().flatten().collect())
    }

    #[test]
    fn gpu_counts_stay_within_the_range_and_the_cluster() {
        assert_eq!(
            counts(None, Some(8.0), 64.0).unwrap(),
            vec![2.0, 4.0, 8.0, 16.0, 32.0]
        );
        assert_eq!(
            counts(None, Some(8.0), 16.0).unwrap(),
            vec![2.0, 4.0, 8.0, 16.0]
        );
        assert_eq!(counts(None, Some(1.0), 64.0).unwrap(), vec![1.0, 2.0, 4.0]);
        assert_eq!(
            counts(Some((1, 16)), Some(3.0), 64.0).unwrap(),
            vec![1.0, 2.0, 3.0, 4.0, 8.0, 16.0]
        );
        assert_eq!(
            counts(Some((3, 100)), None, 24.0).unwrap(),
            vec![3.0, 4.0, 8.0, 16.0, 24.0]
        );
        let field = |r| {
            counts(Some(r), Some(1.0), 64.0)
                .unwrap_err()
                .field()
                .to_string()
        };
        assert_eq!(field((0, 4)), "gpus.min");
        assert_eq!(field((1, 1_000_000)), "gpus.max");
        assert_eq!(field((8, 4)), "gpus");
        assert_eq!(field((128, 256)), "gpus.min");
    }
}
