//! What `augur serve` exposes on /metrics, read from the service's source: the metric names
//! of its registry and of its metrics module's doc table, and the metric names a PromQL
//! expression uses.

use std::collections::BTreeSet;
use std::path::Path;

use crate::render::{read, repo_dir};

/// Every `.rs` file under `dir`, concatenated.
pub fn sources(dir: &Path) -> String {
    let mut out = String::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|e| e == "rs") {
                out.push_str(&read(&p));
            }
        }
    }
    out
}

/// The source file of `augur serve`'s metrics registry (found by its `augur` prefix, a
/// registry's or a sub-registry's, wherever the service keeps it), its tests left out.
pub fn metrics_source() -> String {
    let mut stack = vec![repo_dir().join("service/src")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|e| e == "rs") {
                let text = read(&p);
                if text.contains("Registry::with_prefix(\"augur\")")
                    || text.contains("sub_registry_with_prefix(\"augur\")")
                {
                    let code = text.split("#[cfg(test)]").next().unwrap_or_default();
                    return code.to_string();
                }
            }
        }
    }
    panic!("no registry with the prefix \"augur\" under service/src")
}

/// Metric names in the metrics module's doc table.
pub fn documented_metrics(src: &str) -> BTreeSet<String> {
    src.lines()
        .filter(|l| l.starts_with("//! |"))
        .flat_map(|l| {
            l.split('`')
                .skip(1)
                .step_by(2)
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .filter(|n| n.starts_with("augur_"))
        .collect()
}

/// The string literal `s` starts with (after whitespace), and the rest after it.
pub fn string_literal(s: &str) -> (String, &str) {
    let s = s.trim_start().strip_prefix('"').expect("a string literal");
    let mut out = String::new();
    let mut chars = s.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => out.extend(chars.next().map(|(_, c)| c)),
            '"' => return (out, &s[i + 1..]),
            c => out.push(c),
        }
    }
    panic!("unterminated string literal")
}

/// Metric names as scraped, from the metrics module's registrations: either
/// `registry.register("name", "help", var.clone())` with `let var = …` declaring its type, or
/// `registered(&mut registry, "name", "help", <metric constructor>)`: `augur_<name>`,
/// counters with `_total` (the OpenMetrics suffix).
pub fn registered_metrics(src: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for call in src.split("registry.register(").skip(1) {
        if !call.trim_start().starts_with('"') {
            continue; // the helper below forwarding its arguments
        }
        let (name, rest) = string_literal(call);
        let (_help, rest) = string_literal(rest.trim_start().strip_prefix(',').unwrap());
        let var: String = rest
            .trim_start()
            .strip_prefix(',')
            .unwrap()
            .trim_start()
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        let declared = src
            .lines()
            .find(|l| l.trim().starts_with(&format!("let {var} =")))
            .unwrap_or_else(|| panic!("no `let {var} =` for metric {name}"));
        let suffix = if declared.contains("Counter") {
            "_total"
        } else {
            ""
        };
        out.insert(format!("augur_{name}{suffix}"));
    }
    for call in src.split("registered(").skip(1) {
        // `&mut registry, "name", "help", constructor)`
        let Some((_, args)) = call.split_once(',') else {
            continue;
        };
        if !args.trim_start().starts_with('"') {
            continue;
        }
        let (name, rest) = string_literal(args);
        let (_help, rest) = string_literal(rest.trim_start().strip_prefix(',').unwrap());
        let constructor = rest.split("),").next().unwrap_or(rest);
        let suffix = if constructor.contains("Counter") {
            "_total"
        } else {
            ""
        };
        out.insert(format!("augur_{name}{suffix}"));
    }
    assert!(!out.is_empty(), "no metric registration found");
    out
}

/// `augur_*` metric names in a PromQL expression, without the histogram suffixes.
pub fn metric_names(expr: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = expr;
    while let Some(i) = rest.find("augur_") {
        let name: String = rest[i..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        rest = &rest[i + name.len()..];
        let base = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| name.strip_suffix(s))
            .unwrap_or(&name)
            .to_string();
        names.push(base);
    }
    names
}
