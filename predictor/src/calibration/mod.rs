//! Every calibration the predictors use, in one place: split-conformal offsets and the
//! online [`ConformalWindow`] (runtime intervals), the [`AdaptiveBound`] (a one-sided bound
//! following its outcomes) and the [`RiskSplitBound`] with its online [`RiskSplitState`]
//! (queue-wait bounds).

pub mod adaptive;
pub mod conformal;
pub mod risk_split;

pub use adaptive::AdaptiveBound;
pub use conformal::{
    conformal_offset, conformal_offsets, ConformalWindow, ACI_GAMMA, ONLINE_WINDOW,
};
pub use risk_split::{
    high_level, RiskGroup, RiskScore, RiskSplitBound, RiskSplitState, RiskSplitSummary,
};
