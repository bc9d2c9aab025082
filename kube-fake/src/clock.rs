//! A settable clock for the backend under test ([`VClock`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A settable clock (Unix seconds) for the backend.
#[derive(Clone, Default)]
pub struct VClock(Arc<AtomicU64>);

impl VClock {
    pub fn new(t: f64) -> VClock {
        let c = VClock::default();
        c.set(t);
        c
    }
    pub fn set(&self, t: f64) {
        self.0.store(t.to_bits(), Ordering::SeqCst);
    }
    pub fn now(&self) -> f64 {
        f64::from_bits(self.0.load(Ordering::SeqCst))
    }
    /// The clock as the backend takes it (`augur_autoscaler::kubernetes::Clock`).
    pub fn clock(&self) -> Arc<dyn Fn() -> f64 + Send + Sync> {
        let c = self.clone();
        Arc::new(move || c.now())
    }
}
