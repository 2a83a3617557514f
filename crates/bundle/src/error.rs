//! Errors of the tensor bundle reader and writer. Each names the file and, where there is one,
//! the tensor key, and says what was wrong.

use std::path::PathBuf;

/// Everything that can go wrong reading or writing a tensor bundle.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BundleError {
    /// A file could not be opened, mapped, read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A path that is not a regular file (a FIFO, a device, a directory) where a file was
    /// expected.
    #[error(transparent)]
    File(unbound_io::IoError),
    /// The index file is damaged (footer, blocks, block checksums, entries).
    #[error("{}: {fault}", file.display())]
    Index {
        /// The `.index` file.
        file: PathBuf,
        /// What was wrong.
        fault: String,
    },
    /// One tensor's entry or data is damaged or inconsistent (size, offset, checksum, ...).
    #[error("{}: tensor {key}: {fault}", file.display())]
    Tensor {
        /// The file holding the fault: the data shard, or the index for a bad entry.
        file: PathBuf,
        /// The tensor key, printable (slice keys decoded).
        key: String,
        /// What was wrong.
        fault: String,
    },
    /// No tensor under this key.
    #[error("{}: no tensor {key} in this bundle", file.display())]
    NotFound {
        /// The `.index` file.
        file: PathBuf,
        /// The key asked for.
        key: String,
    },
    /// No variable under this key or object path (what `unbound vars KEY` was asked for).
    #[error("{}: no variable {key} in this bundle", file.display())]
    NoVariable {
        /// The `.index` file.
        file: PathBuf,
        /// The key asked for (resolved from an object path when one matched).
        key: String,
    },
    /// A request the data cannot satisfy (for example raw bytes of a string tensor).
    #[error("tensor {key}: {what}")]
    Unsupported {
        /// The tensor key.
        key: String,
        /// What is not possible.
        what: String,
    },
    /// Bad input to the writer (duplicate key, data that does not match dtype and shape, ...).
    #[error("bundle writer: {0}")]
    Invalid(String),
}

impl From<unbound_io::IoError> for BundleError {
    fn from(error: unbound_io::IoError) -> Self {
        match error {
            unbound_io::IoError::Os { path, source } => Self::Io { path, source },
            other => Self::File(other),
        }
    }
}

impl BundleError {
    /// An I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }

    /// A fault in the index file.
    pub fn index(file: impl Into<PathBuf>, fault: impl Into<String>) -> Self {
        Self::Index {
            file: file.into(),
            fault: fault.into(),
        }
    }

    /// A fault in one tensor's entry or data.
    pub fn tensor(file: impl Into<PathBuf>, key: &[u8], fault: impl Into<String>) -> Self {
        Self::Tensor {
            file: file.into(),
            key: crate::display_key(key),
            fault: fault.into(),
        }
    }
}

/// A fault in one tensor's values, layout or header, found by a function that does not know
/// which file or key they came from (callers name them, wrapping it in a [`BundleError`]).
/// Prints as the fault; dereferences to its text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Fault(pub String);

impl std::ops::Deref for Fault {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl From<Fault> for String {
    fn from(f: Fault) -> String {
        f.0
    }
}

/// Result of bundle operations.
pub type Result<T, E = BundleError> = std::result::Result<T, E>;
