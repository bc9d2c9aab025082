//! Calibration of the predictors' outputs: turning a model's score into a probability
//! ([`platt`]: Platt scaling and isotonic regression).

pub mod binned_conformal;
pub mod platt;
