//! Errors of resharding: each names the file or the variable and the fault.

use std::path::PathBuf;

/// Everything that can go wrong planning or running a reshard.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReshardError {
    /// Reading the source or writing the target bundle failed (the error names the file and
    /// the key).
    #[error(transparent)]
    Bundle(#[from] unbound_bundle::BundleError),
    /// A mesh or layout is not valid, or a shape does not divide over it.
    #[error(transparent)]
    Layout(#[from] unbound_dtensor::DTensorError),
    /// A `--layout` rule, `--mesh` or `--default` that cannot be used.
    #[error("{0}")]
    Usage(String),
    /// A variable the plan cannot place (its key and why).
    #[error("variable {key}: {fault}")]
    Variable {
        /// The checkpoint key.
        key: String,
        /// What is wrong.
        fault: String,
    },
    /// The output exists already.
    #[error("{}: exists already; remove it or choose another prefix", path.display())]
    Exists {
        /// The existing file.
        path: PathBuf,
    },
    /// Writing the output failed.
    #[error(transparent)]
    Io(#[from] unbound_io::IoError),
}

/// Result of resharding.
pub type Result<T, E = ReshardError> = std::result::Result<T, E>;
