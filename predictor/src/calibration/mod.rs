//! Every calibration the predictors use, in one place: split-conformal offsets and the
//! online [`ConformalWindow`] (runtime intervals), the [`AdaptiveBound`] (a one-sided bound
//! following its outcomes) and the [`RiskSplitBound`] with its online [`RiskSplitState`]
//! (queue-wait bounds), Platt scaling and isotonic regression of a classifier's score
//! ([`Calibrator`], failure probabilities), and conformal margins per bin of the prediction
//! ([`BinnedConformal`], the convergence band).

pub mod adaptive;
pub mod binned_conformal;
pub mod conformal;
pub mod platt;
pub mod risk_split;

pub use adaptive::{replay_delayed, AdaptiveBound, Outcome, MAX_SHIFT};
pub use binned_conformal::BinnedConformal;
pub use conformal::{
    conformal_offset, conformal_offsets, drift_level, ConformalWindow, ResidualMemory, ACI_GAMMA,
    ONLINE_WINDOW,
};
pub use platt::Calibrator;
pub use risk_split::{
    high_level, RiskGroup, RiskScore, RiskSplitBound, RiskSplitState, RiskSplitSummary,
};
