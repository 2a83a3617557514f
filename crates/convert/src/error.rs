//! Errors of a conversion: each names the file or the tensor and the fault.

use std::path::PathBuf;

/// Everything that can go wrong converting.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConvertError {
    /// Reading the source checkpoint or writing the target one failed (the error names the
    /// file and the key).
    #[error(transparent)]
    Bundle(#[from] unbound_bundle::BundleError),
    /// Reading or writing a file failed.
    #[error(transparent)]
    Io(#[from] unbound_io::IoError),
    /// A safetensors header that cannot be used (reshard's header checks).
    #[error(transparent)]
    Reshard(#[from] unbound_reshard::ReshardError),
    /// An option that cannot be used (`--max-shard-size`, `--names`, a source of no known
    /// kind).
    #[error("{0}")]
    Usage(String),
    /// A safetensors file that cannot be converted: its path and the fault.
    #[error("{}: {fault}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        fault: String,
    },
    /// Tensors the target format cannot hold: every such key, with why. Nothing is written.
    #[error("{}", tensors.iter().map(|(k, f)| format!("tensor {k}: {f}")).collect::<Vec<_>>().join("; "))]
    Unconvertible {
        /// (checkpoint key or name, fault) for every tensor refused.
        tensors: Vec<(String, String)>,
    },
    /// The output exists already.
    #[error("{}: exists already; remove it or choose another destination", path.display())]
    Exists {
        /// The existing file or directory.
        path: PathBuf,
    },
}

impl ConvertError {
    /// A fault in file `path`.
    pub(crate) fn file(path: impl Into<PathBuf>, fault: impl std::fmt::Display) -> Self {
        Self::File {
            path: path.into(),
            fault: fault.to_string(),
        }
    }

    /// An I/O error on `path`.
    pub(crate) fn os(path: &std::path::Path, e: std::io::Error) -> Self {
        Self::Io(unbound_io::IoError::os(path, e))
    }
}

/// Result of converting.
pub type Result<T, E = ConvertError> = std::result::Result<T, E>;
