//! A kind's online state as bytes, for the snapshots of the online state
//! ([`crate::serve::state::snapshot`]): the encoding every kind uses and why a saved state
//! cannot be made or used.

use augur_predictor::{ModelKind, PredictorError};
use serde::de::DeserializeOwned;
use serde::Serialize;

/// Why a saved state could not be made or used.
#[derive(Debug, thiserror::Error)]
pub enum SavedError {
    #[error("cannot encode the online state: {0}")]
    Encode(#[from] bincode::error::EncodeError),
    /// The bytes do not decode (a damaged or foreign body).
    #[error("cannot decode the online state: {0}")]
    Decode(#[from] bincode::error::DecodeError),
    #[error("the online state's body has {extra} bytes after its end")]
    Trailing { extra: usize },
    /// A part kept as JSON text does not read back.
    #[error("a part of the online state cannot be read: {0}")]
    Json(#[from] serde_json::Error),
    /// The saved state has a predictor's state where no model of that kind is served now,
    /// or lacks one for a model served now.
    #[error("the saved state {saved} a {kind} state, and a {kind} model is {served}")]
    Presence {
        kind: ModelKind,
        saved: &'static str,
        served: &'static str,
    },
    /// The saved state has the state of a kind this build does not serve.
    #[error("the saved state has a state of `{name}`, a kind this build does not serve")]
    UnknownKind { name: String },
    /// A predictor's saved state does not fit the model served now.
    #[error(transparent)]
    Mismatch(#[from] PredictorError),
    /// The saved state evicted runs by another retention window.
    #[error("the saved state holds runs for a retention window of {saved:?} s, the service now {now:?} s")]
    Retention {
        saved: Option<f64>,
        now: Option<f64>,
    },
}

impl SavedError {
    /// Whether the bytes are bad (else they are sound but were made for other models or
    /// settings).
    pub fn is_damage(&self) -> bool {
        matches!(
            self,
            SavedError::Decode(_) | SavedError::Trailing { .. } | SavedError::Json(_)
        )
    }
}

/// Encodes an online state for a snapshot (bincode, as the rest of the body).
pub fn encode_state<S: Serialize>(state: &S) -> Result<Vec<u8>, SavedError> {
    Ok(bincode::serde::encode_to_vec(
        state,
        bincode::config::standard(),
    )?)
}

/// Decodes an online state from [`encode_state`]'s bytes.
pub fn decode_state<S: DeserializeOwned>(bytes: &[u8]) -> Result<S, SavedError> {
    let (state, used): (S, usize) =
        bincode::serde::decode_from_slice(bytes, bincode::config::standard())?;
    if used != bytes.len() {
        return Err(SavedError::Trailing {
            extra: bytes.len() - used,
        });
    }
    Ok(state)
}
