//! The time-ordered train/test split shared by every predictor.
//!
//! Jobs are sorted by submit time (ties keep input order); the first `train_fraction`
//! (0.8 by default) train, the rest test. A tail slice of the training part may be held out
//! for calibration. Durations are clamped to at least [`MIN_DURATION_S`] before taking logs.

/// Durations shorter than this are clamped up to it before any log-space metric.
pub const MIN_DURATION_S: f64 = 1.0;

/// The share of jobs (in submit order) that train.
pub const DEFAULT_TRAIN_FRACTION: f64 = 0.8;

/// Indices of the jobs of a table in submit order, cut into train and test.
#[derive(Debug, Clone, PartialEq)]
pub struct TimeSplit {
    order: Vec<usize>,
    n_train: usize,
}

impl TimeSplit {
    /// Splits jobs with these submit times; non-finite submit times sort last.
    pub fn new(submit_times: &[f64], train_fraction: f64) -> TimeSplit {
        let mut order: Vec<usize> = (0..submit_times.len()).collect();
        order.sort_by(|&a, &b| {
            let (x, y) = (submit_times[a], submit_times[b]);
            x.partial_cmp(&y)
                .unwrap_or_else(|| x.is_nan().cmp(&y.is_nan()))
                .then(a.cmp(&b))
        });
        let frac = train_fraction.clamp(0.0, 1.0);
        let n_train = ((order.len() as f64) * frac).floor() as usize;
        TimeSplit { order, n_train }
    }

    /// The default 80/20 split.
    pub fn default_for(submit_times: &[f64]) -> TimeSplit {
        TimeSplit::new(submit_times, DEFAULT_TRAIN_FRACTION)
    }

    /// All indices in submit order.
    pub fn order(&self) -> &[usize] {
        &self.order
    }

    /// Training indices, in submit order.
    pub fn train(&self) -> &[usize] {
        &self.order[..self.n_train]
    }

    /// Test indices, in submit order.
    pub fn test(&self) -> &[usize] {
        &self.order[self.n_train..]
    }

    /// The training part cut into (fit, calibration): the last `calib_fraction` of training
    /// jobs (in submit order) calibrate.
    pub fn train_calibration(&self, calib_fraction: f64) -> (&[usize], &[usize]) {
        let train = self.train();
        let n_cal = ((train.len() as f64) * calib_fraction.clamp(0.0, 1.0)).floor() as usize;
        train.split_at(train.len() - n_cal)
    }
}

/// `max(d, MIN_DURATION_S)`: the clamp every log-space metric applies.
pub fn clamp_duration(d: f64) -> f64 {
    d.max(MIN_DURATION_S)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_is_time_ordered_and_stable() {
        let submit = [
            50.0,
            10.0,
            30.0,
            10.0,
            40.0,
            f64::NAN,
            20.0,
            60.0,
            70.0,
            80.0,
        ];
        let s = TimeSplit::new(&submit, 0.8);
        assert_eq!(s.order(), &[1, 3, 6, 2, 4, 0, 7, 8, 9, 5]);
        assert_eq!(s.train().len(), 8);
        assert_eq!(s.test(), &[9, 5]);
        let (fit, cal) = s.train_calibration(0.25);
        assert_eq!(fit, &[1, 3, 6, 2, 4, 0]);
        assert_eq!(cal, &[7, 8]);
        // every training job was submitted no later than every test job
        let last_train = s
            .train()
            .iter()
            .map(|&i| submit[i])
            .fold(f64::MIN, f64::max);
        assert!(s
            .test()
            .iter()
            .all(|&i| submit[i].is_nan() || submit[i] >= last_train));
    }

    #[test]
    fn clamp() {
        assert_eq!(clamp_duration(0.0), 1.0);
        assert_eq!(clamp_duration(12.5), 12.5);
    }
}
