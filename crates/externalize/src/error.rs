//! The one error type of the crate.

use std::path::PathBuf;

use unbound_bundle::BundleError;
use unbound_savedmodel::SavedModelError;

/// What went wrong externalizing (or inlining) a model.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExternalizeError {
    /// Reading, verifying or writing the SavedModel directory failed.
    #[error(transparent)]
    SavedModel(#[from] SavedModelError),
    /// Reading or writing a tensor bundle (the variables) failed.
    #[error(transparent)]
    Bundle(#[from] BundleError),
    /// The model holds something this rewrite cannot handle; `source` names the model and
    /// where in it.
    #[error("{source_name}: {fault}")]
    Invalid {
        /// The model and the part of it (MetaGraphDef, function, node).
        source_name: String,
        /// What is wrong.
        fault: String,
    },
    /// The model written would still be past protobuf's 2 GiB limit.
    #[error(
        "{path}: the externalized saved_model.pb would be {size} bytes, past protobuf's limit of \
         {limit} bytes{hint}"
    )]
    TooLarge {
        /// The output directory.
        path: PathBuf,
        /// Size of the model proto after externalizing.
        size: u64,
        /// The limit (2 GiB - 1).
        limit: u64,
        /// How the size might come down.
        hint: String,
    },
}

impl ExternalizeError {
    /// An [`ExternalizeError::Invalid`].
    pub(crate) fn invalid(source_name: impl Into<String>, fault: impl Into<String>) -> Self {
        Self::Invalid {
            source_name: source_name.into(),
            fault: fault.into(),
        }
    }
}

/// The crate's result type.
pub type Result<T, E = ExternalizeError> = std::result::Result<T, E>;

/// A fault parsing the model's bytes, as the wire layer reports one.
pub(crate) fn malformed(error: unbound_wire::DecodeError) -> unbound_wire::WireError {
    unbound_wire::WireError::Malformed {
        source_name: "the model".into(),
        error,
    }
}
