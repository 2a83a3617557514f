//! [`IoError`]: a filesystem fault, with the path it concerns.

use std::path::{Path, PathBuf};

/// A filesystem operation that failed, naming the path.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IoError {
    /// The operating system refused or failed an operation on `path`.
    #[error("{}: {source}", path.display())]
    Os {
        /// The file involved.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// `path` exists but is not a regular file (a FIFO, a device, a socket or a directory),
    /// so reading it could block forever or never end.
    #[error("{}: not a regular file (a {kind})", path.display())]
    NotRegularFile {
        /// The file involved.
        path: PathBuf,
        /// What it is instead.
        kind: &'static str,
    },
    /// `path` is larger than the caller reads whole: refused before anything is read.
    #[error("{}: {len} bytes, more than the {max} bytes read from such a file", path.display())]
    TooLarge {
        /// The file involved.
        path: PathBuf,
        /// Its length.
        len: u64,
        /// The most the caller reads.
        max: u64,
    },
}

impl IoError {
    /// Wraps an operating-system error with the path it concerns.
    pub fn os(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Os {
            path: path.into(),
            source,
        }
    }

    /// The path the error concerns.
    pub fn path(&self) -> &Path {
        match self {
            Self::Os { path, .. }
            | Self::NotRegularFile { path, .. }
            | Self::TooLarge { path, .. } => path,
        }
    }
}

/// Adapts `std::io::Error`s to [`IoError`]s naming `path`: `.map_err(io_err(path))`.
pub fn io_err(path: &Path) -> impl Fn(std::io::Error) -> IoError + '_ {
    move |e| IoError::os(path, e)
}
