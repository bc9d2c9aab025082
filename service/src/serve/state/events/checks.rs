//! The checks of what is ingested, field by field: each refusal is a 422 naming the field
//! at fault ([`Event::validate`], [`Event::check_within`], and the profile's and the DAG's
//! own checks).

use std::collections::{HashMap, HashSet};

use super::{Dag, DagStage, Event, JobProfile, MAX_ITEMS, MAX_STRING};
use crate::serve::http::error::ApiError;
use crate::serve::state::bounds;
use crate::serve::state::event_time::TimeWindow;

impl Event {
    /// Refuses a time outside `window`, naming the field and the bound it crosses;
    /// `prefix` as in [`Event::validate`].
    pub fn check_within(&self, prefix: &str, window: &TimeWindow) -> Result<(), ApiError> {
        let f = |name: &str| {
            if prefix.is_empty() {
                name.to_string()
            } else {
                format!("{prefix}.{name}")
            }
        };
        let check = |field: String, t: f64| {
            let w = window;
            if t > w.latest {
                return Err(ApiError::invalid(
                    field,
                    format!(
                        "{t} is {:.0} s after {} ({})",
                        t - w.latest,
                        w.latest,
                        w.latest_why
                    ),
                ));
            }
            if t < w.earliest {
                return Err(ApiError::invalid(
                    field,
                    format!("{t} is before {} ({})", w.earliest, w.earliest_why),
                ));
            }
            Ok(())
        };
        match self {
            Event::MetricPoints { points, .. } => {
                for (i, p) in points.iter().enumerate() {
                    if let Some(t) = p.at {
                        check(f(&format!("points[{i}].at")), t)?;
                    }
                }
            }
            other => {
                if let Some(t) = other.at() {
                    check(f("at"), t)?;
                }
            }
        }
        Ok(())
    }

    /// Checks every field; `prefix` is the event's path in the request (`""` or `events[3]`).
    pub fn validate(&self, prefix: &str) -> Result<(), ApiError> {
        let f = |name: &str| {
            if prefix.is_empty() {
                name.to_string()
            } else {
                format!("{prefix}.{name}")
            }
        };
        match self {
            Event::JobSubmitted {
                job_id,
                at,
                profile,
                dag,
            } => {
                check_id(&f("job_id"), job_id)?;
                check_time(&f("at"), *at)?;
                profile.validate(&f("profile"))?;
                if dag.is_none() || profile != &JobProfile::default() {
                    bounds::check_profile(profile, &f("profile"))?;
                }
                if let Some(d) = dag {
                    d.validate(&f("dag"))?;
                }
            }
            Event::JobStarted { job_id, at } => {
                check_id(&f("job_id"), job_id)?;
                check_time(&f("at"), *at)?;
            }
            Event::JobFinished {
                job_id,
                at,
                duration,
                ..
            } => {
                check_id(&f("job_id"), job_id)?;
                check_time(&f("at"), *at)?;
                check_nonneg(&f("duration"), *duration)?;
                // zero is a job that ended before it ran
                if duration.is_some_and(|d| d > 0.0) {
                    bounds::check_seconds(&f("duration"), *duration)?;
                }
            }
            Event::JobTyped {
                job_id,
                at,
                gpu_type,
            } => {
                check_id(&f("job_id"), job_id)?;
                check_time(&f("at"), *at)?;
                check_id(&f("gpu_type"), gpu_type)?;
            }
            Event::MetricPoints { job_id, points } => {
                check_id(&f("job_id"), job_id)?;
                if points.is_empty() || points.len() > MAX_ITEMS {
                    return Err(ApiError::invalid(
                        f("points"),
                        format!("must hold 1 to {MAX_ITEMS} points"),
                    ));
                }
                for (i, p) in points.iter().enumerate() {
                    let pf = f(&format!("points[{i}]"));
                    check_finite(&format!("{pf}.loss"), p.loss)?;
                    check_finite(&format!("{pf}.accuracy"), p.accuracy)?;
                    if let Some(t) = p.at {
                        check_time(&format!("{pf}.at"), t)?;
                    }
                    if p.loss.is_none() && p.accuracy.is_none() {
                        return Err(ApiError::invalid(pf, "needs `loss` or `accuracy`"));
                    }
                }
            }
            Event::ClusterSnapshot(s) => {
                check_time(&f("at"), s.at)?;
                check_nonneg(&f("total_gpus"), Some(s.total_gpus))?;
                check_nonneg(&f("busy_gpus"), Some(s.busy_gpus))?;
                if s.busy_gpus > s.total_gpus {
                    return Err(ApiError::invalid(
                        f("busy_gpus"),
                        format!(
                            "{} busy GPUs exceed total_gpus {}",
                            s.busy_gpus, s.total_gpus
                        ),
                    ));
                }
            }
        }
        Ok(())
    }
}

impl JobProfile {
    /// Checks every field; `prefix` is the profile's path in the request.
    pub fn validate(&self, prefix: &str) -> Result<(), ApiError> {
        let f = |name: &str| format!("{prefix}.{name}");
        check_nonneg(&f("num_gpus"), self.num_gpus)?;
        check_nonneg(&f("num_nodes"), self.num_nodes)?;
        check_nonneg(&f("cpus"), self.cpus)?;
        check_nonneg(&f("memory_mib"), self.memory_mib)?;
        check_nonneg(&f("requested_time"), self.requested_time)?;
        for (name, v) in [
            ("gpu_type", &self.gpu_type),
            ("user", &self.user),
            ("group", &self.group),
            ("job_name", &self.job_name),
            ("cluster", &self.cluster),
            ("queue", &self.queue),
        ] {
            if let Some(s) = v {
                check_string(&f(name), s)?;
            }
        }
        Ok(())
    }
}

impl Dag {
    /// Stage ids unique, dependencies known, no cycle, sizes bounded.
    pub fn validate(&self, prefix: &str) -> Result<(), ApiError> {
        let f = |name: &str| format!("{prefix}.{name}");
        if self.stages.is_empty() || self.stages.len() > MAX_ITEMS {
            return Err(ApiError::invalid(
                f("stages"),
                format!("must hold 1 to {MAX_ITEMS} stages"),
            ));
        }
        let mut index = HashMap::new();
        for (i, s) in self.stages.iter().enumerate() {
            let sf = f(&format!("stages[{i}]"));
            check_id(&format!("{sf}.id"), &s.id)?;
            if index.insert(s.id.as_str(), i).is_some() {
                return Err(ApiError::invalid(
                    format!("{sf}.id"),
                    format!("stage id `{}` appears twice", s.id),
                ));
            }
            check_nonneg(&format!("{sf}.estimate_seconds"), s.estimate_seconds)?;
            s.validate_features(&sf)?;
            if let Some(p) = &s.profile {
                p.validate(&format!("{sf}.profile"))?;
            }
        }
        for (i, s) in self.stages.iter().enumerate() {
            let mut seen = HashSet::new();
            for (k, d) in s.depends_on.iter().enumerate() {
                let df = f(&format!("stages[{i}].depends_on[{k}]"));
                if !index.contains_key(d.as_str()) {
                    return Err(ApiError::invalid(df, format!("no stage has id `{d}`")));
                }
                if !seen.insert(d) {
                    return Err(ApiError::invalid(df, format!("`{d}` is listed twice")));
                }
            }
        }
        if self.topological_order().is_none() {
            return Err(ApiError::invalid(
                f("stages"),
                "the dependencies form a cycle",
            ));
        }
        check_count(&f("executors"), self.executors, 1_000_000)?;
        check_count(&f("scale_gb"), self.scale_gb, 100_000_000)?;
        for (name, v) in [
            ("workflow", &self.workflow),
            ("workflow_system", &self.workflow_system),
        ] {
            if let Some(v) = v {
                check_id(&f(name), v)?;
            }
        }
        Ok(())
    }

    /// Each stage's index by its id.
    pub fn stage_index(&self) -> HashMap<&str, usize> {
        self.stages
            .iter()
            .enumerate()
            .map(|(i, s)| (s.id.as_str(), i))
            .collect()
    }

    /// Stage indices in an order where every stage comes after its dependencies; `None`
    /// when there is a cycle (or an unknown dependency).
    pub fn topological_order(&self) -> Option<Vec<usize>> {
        let index = self.stage_index();
        let n = self.stages.len();
        let mut indeg = vec![0usize; n];
        let mut children: Vec<Vec<usize>> = vec![Vec::new(); n];
        for (i, s) in self.stages.iter().enumerate() {
            for d in &s.depends_on {
                let &j = index.get(d.as_str())?;
                indeg[i] += 1;
                children[j].push(i);
            }
        }
        let mut ready: Vec<usize> = (0..n).filter(|&i| indeg[i] == 0).collect();
        let mut order = Vec::with_capacity(n);
        while let Some(i) = ready.pop() {
            order.push(i);
            for &c in &children[i] {
                indeg[c] -= 1;
                if indeg[c] == 0 {
                    ready.push(c);
                }
            }
        }
        (order.len() == n).then_some(order)
    }
}

impl DagStage {
    /// The DAG-model features of the stage at path `sf` within their ranges.
    fn validate_features(&self, sf: &str) -> Result<(), ApiError> {
        check_count(&format!("{sf}.tasks"), self.tasks, 100_000_000)?;
        if let Some(k) = &self.kind {
            check_id(&format!("{sf}.kind"), k)?;
        }
        check_range(&format!("{sf}.input_bytes"), self.input_bytes, 1e18)?;
        check_range(&format!("{sf}.cores"), self.cores, 100_000.0)
    }
}

/// A finite number from 0 to `max`.
fn check_range(field: &str, v: Option<f64>, max: f64) -> Result<(), ApiError> {
    match v {
        Some(x) if !x.is_finite() || !(0.0..=max).contains(&x) => Err(ApiError::invalid(
            field,
            format!("must be a finite number from 0 to {max}, got {x}"),
        )),
        _ => Ok(()),
    }
}

/// A count from 1 to `max`.
fn check_count(field: &str, v: Option<u32>, max: u32) -> Result<(), ApiError> {
    match v {
        Some(n) if n == 0 || n > max => Err(ApiError::invalid(
            field,
            format!("must be from 1 to {max}, got {n}"),
        )),
        _ => Ok(()),
    }
}

fn check_id(field: &str, id: &str) -> Result<(), ApiError> {
    if id.trim().is_empty() {
        return Err(ApiError::invalid(field, "must not be empty"));
    }
    check_string(field, id)
}

fn check_string(field: &str, s: &str) -> Result<(), ApiError> {
    if s.len() > MAX_STRING {
        return Err(ApiError::invalid(
            field,
            format!("longer than {MAX_STRING} bytes"),
        ));
    }
    if s.chars().any(char::is_control) {
        return Err(ApiError::invalid(field, "contains control characters"));
    }
    Ok(())
}

/// Times: finite and within ±1e12 s (beyond any real clock; keeps sums exact enough).
fn check_time(field: &str, t: f64) -> Result<(), ApiError> {
    if !t.is_finite() || t.abs() > 1e12 {
        return Err(ApiError::invalid(
            field,
            format!("must be a finite time in seconds within ±1e12, got {t}"),
        ));
    }
    Ok(())
}

fn check_nonneg(field: &str, v: Option<f64>) -> Result<(), ApiError> {
    match v {
        Some(x) if !x.is_finite() || !(0.0..=1e12).contains(&x) => Err(ApiError::invalid(
            field,
            format!("must be a finite number from 0 to 1e12, got {x}"),
        )),
        _ => Ok(()),
    }
}

fn check_finite(field: &str, v: Option<f64>) -> Result<(), ApiError> {
    match v {
        Some(x) if !x.is_finite() || x.abs() > 1e12 => Err(ApiError::invalid(
            field,
            format!("must be a finite number within ±1e12, got {x}"),
        )),
        _ => Ok(()),
    }
}
