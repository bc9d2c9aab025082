//! What the commands show: the printed tables and the report folders (Markdown beside PNG
//! plots) of `augur evaluate` and `augur simulate`, one module per task. A report module
//! takes the data it draws (an evaluation, peer rows, simulation results) and never calls
//! back into a command.

pub mod convergence;
pub mod dag;
pub mod failure;
pub mod plot;
pub mod queue_wait;
pub mod runtime;
pub mod simulate;
pub mod text;

use std::path::Path;

/// A plain folder-name part for a dataset, trace path or policy name: its file name with
/// anything but ASCII letters, digits, `-`, `_` (and `.` when `keep_dots`) replaced by `_`;
/// `trace` when nothing (or only dots) is left.
pub fn folder_slug(name: &str, keep_dots: bool) -> String {
    let base = Path::new(name)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| name.to_string());
    let s: String = base
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_') || (keep_dots && c == '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() || s.chars().all(|c| c == '.') {
        "trace".into()
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_are_plain_folder_names() {
        assert_eq!(folder_slug("mira", true), "mira");
        assert_eq!(folder_slug("/data/my trace.csv", true), "my_trace.csv");
        assert_eq!(folder_slug("..", true), "trace");
        // simulate's flavour replaces dots too
        assert_eq!(folder_slug("/data/my trace.csv", false), "my_trace_csv");
        assert_eq!(folder_slug("", false), "trace");
    }
}
