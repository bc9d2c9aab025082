//! The training progress bar: a spinner while features are replayed, then one tick per
//! boosted tree (`[####-----] 412/1500 trees`). Drawn on stderr, hidden when it is not a
//! terminal.

use indicatif::{ProgressBar, ProgressStyle};

/// A progress bar for one training run.
pub struct TrainingBar {
    bar: ProgressBar,
    name: String,
    counting: bool,
}

impl TrainingBar {
    /// Starts the bar for training on `name` with `jobs` jobs.
    pub fn start(name: &str, jobs: usize) -> TrainingBar {
        let bar = ProgressBar::new_spinner();
        bar.set_style(
            ProgressStyle::with_template("{spinner} {msg} [{elapsed}]")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        bar.enable_steady_tick(std::time::Duration::from_millis(120));
        bar.set_message(format!(
            "{name}: feature replay over {} jobs",
            crate::report::text::thousands(jobs as u64)
        ));
        TrainingBar {
            bar,
            name: name.to_string(),
            counting: false,
        }
    }

    /// Records that `done` of at most `total` trees are fitted (the GBDT progress callback).
    pub fn trees(&mut self, done: usize, total: usize) {
        if !self.counting {
            self.counting = true;
            self.bar.set_style(
                ProgressStyle::with_template(
                    "{spinner} {msg} [{bar:30}] {pos}/{len} trees [{elapsed}, ≤{eta} left]",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("█▉▊▋▌▍▎▏ "),
            );
            self.bar.set_message(format!("{}: training", self.name));
        }
        self.bar.set_length(total as u64);
        self.bar.set_position(done as u64);
    }

    /// Removes the bar.
    pub fn finish(self) {
        self.bar.finish_and_clear();
    }
}
