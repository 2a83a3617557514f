//! [`SavedModelError`]: everything that can go wrong with a SavedModel directory. Faults of
//! the layers below (chunked files, wire messages, Riegeli records, tensor bundles, the file
//! system) are wrapped as they are; faults found here name the file and say what is wrong.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use unbound_bundle::BundleError;
use unbound_chunked::ChunkedError;
use unbound_io::IoError;
use unbound_records::RecordsError;
use unbound_wire::{DecodeError, WireError};

use crate::format::MAX_PROTO_SIZE;

/// Everything that can go wrong reading, checking, fingerprinting, splitting or writing a
/// SavedModel directory.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SavedModelError {
    /// A chunked file (`.cpb`) is damaged, or a split or merge failed.
    #[error(transparent)]
    Chunked(#[from] ChunkedError),
    /// A wire-level message could not be read, navigated or written.
    #[error(transparent)]
    Wire(#[from] WireError),
    /// A Riegeli container is damaged or unreadable.
    #[error(transparent)]
    Records(#[from] RecordsError),
    /// The tensor bundle in `variables/` (or a checkpoint) is damaged or unreadable.
    #[error(transparent)]
    Bundle(#[from] BundleError),
    /// A filesystem operation failed.
    #[error(transparent)]
    Io(#[from] IoError),
    /// Bytes that do not decode as protobuf. `source_name` says which file or part of it.
    #[error("{source_name}: malformed protobuf {error}")]
    Malformed {
        /// The file (and the part of it) the bytes came from.
        source_name: String,
        /// The decoding fault.
        error: DecodeError,
    },
    /// The path given as a SavedModel directory is not a directory.
    #[error("{}: not a SavedModel directory", dir.display())]
    NotADirectory {
        /// The path given.
        dir: PathBuf,
    },
    /// The directory holds none of `saved_model.cpb`, `.pb` and `.pbtxt`.
    #[error(
        "{}: no saved_model.cpb, saved_model.pb or saved_model.pbtxt in this directory",
        dir.display()
    )]
    NoModelFile {
        /// The directory given.
        dir: PathBuf,
    },
    /// Neither `saved_model.cpb` nor `saved_model.pb` to fingerprint (TensorFlow does not
    /// fingerprint `.pbtxt` models).
    #[error("neither {0}.cpb nor {0}.pb exists", dir.join("saved_model").display())]
    NotFingerprintable {
        /// The directory given.
        dir: PathBuf,
    },
    /// A `saved_model.pbtxt` (or other text-format file) does not parse.
    #[error("{}: text format: {fault}", path.display())]
    TextFormat {
        /// The text file.
        path: PathBuf,
        /// The parser's message.
        fault: String,
    },
    /// Merging would make a `saved_model.pb` larger than protobuf can parse.
    #[error(
        "{}: the merged SavedModel would be {size} bytes, over protobuf's limit of \
         {MAX_PROTO_SIZE}: keep it in the chunked format",
        dir.display()
    )]
    TooLargeToMerge {
        /// The source directory.
        dir: PathBuf,
        /// Size of the merged model in bytes.
        size: u64,
    },
    /// A split would leave a message chunk (the root, chunk 0, included) larger than protobuf
    /// can parse, so the `.cpb` could not be read back; nothing is written.
    #[error(
        "{}: chunk {chunk} would be a {size}-byte message, past protobuf's limit of \
         {MAX_PROTO_SIZE}: no reader could parse it",
        path.display()
    )]
    UnparsableChunk {
        /// The `.cpb` that would have been written.
        path: PathBuf,
        /// The chunk's position in the file.
        chunk: usize,
        /// Its size in bytes.
        size: u64,
    },
    /// The model's messages do not fit the SavedModel schema (a MetaGraphDef that does not
    /// decode, a scalar where a message belongs, ...).
    #[error("{source_name}: {fault}")]
    InvalidModel {
        /// The model file (or the part of it).
        source_name: String,
        /// What is wrong.
        fault: String,
    },
    /// The model holds something TensorFlow's fingerprinting refuses (or crashes on).
    #[error("{}: cannot fingerprint: {fault}", path.display())]
    Fingerprint {
        /// The model file.
        path: PathBuf,
        /// What is wrong.
        fault: String,
    },
    /// `fingerprint.pb` does not decode.
    #[error("{}: not a FingerprintDef: {error}", path.display())]
    BadFingerprintFile {
        /// The `fingerprint.pb` file.
        path: PathBuf,
        /// The decoding fault.
        error: prost::DecodeError,
    },
    /// Nesting beyond what we accept from a file.
    #[error("{source_name}: nesting deeper than {limit} levels")]
    TooDeep {
        /// The file (or message) the nesting came from.
        source_name: String,
        /// The limit that was exceeded.
        limit: usize,
    },
    /// A message type or field our own schema should have is missing (a programming error,
    /// reported rather than panicking).
    #[error("{message}: {fault}")]
    Schema {
        /// Full name of the message type.
        message: String,
        /// What is missing.
        fault: String,
    },
    /// A message type is not in the descriptor pool.
    #[error("unknown message type {0:?} (not in the descriptor pool)")]
    UnknownType(String),
    /// The output path exists already; outputs are never overwritten.
    #[error("{}: output already exists; choose a new path", path.display())]
    OutputExists {
        /// The output path.
        path: PathBuf,
    },
    /// A FIFO, socket or device inside a SavedModel directory, or a symbolic link to one or to
    /// nothing (it would block or stream forever).
    #[error(
        "{}: not a regular file; a SavedModel directory holds only files and directories",
        path.display()
    )]
    NotRegularFile {
        /// The offending path.
        path: PathBuf,
    },
    /// A symbolic link inside a SavedModel directory that leads back to a directory holding
    /// it: copying it would never end.
    #[error(
        "{}: a symbolic link to {}, a directory that holds it (a loop)",
        path.display(),
        target.display()
    )]
    SymlinkLoop {
        /// The link.
        path: PathBuf,
        /// The directory it leads to.
        target: PathBuf,
    },
    /// `unbound vars` was given a path that is neither a SavedModel directory nor a
    /// checkpoint prefix.
    #[error(
        "{}: neither a SavedModel directory nor a checkpoint prefix (no {} or {})",
        path.display(),
        unbound_bundle::index_path(&unbound_bundle::saved_model_prefix(path)).display(),
        unbound_bundle::index_path(path).display()
    )]
    NotAModelOrCheckpoint {
        /// The path given.
        path: PathBuf,
    },
    /// `split` or `merge` refused a directory that `verify` rejects: every problem found,
    /// each naming its file (one per line).
    #[error(
        "{}: refused: the SavedModel does not verify ({} problem{}):{}",
        dir.display(),
        faults.len(),
        if faults.len() == 1 { "" } else { "s" },
        faults.iter().map(|f| format!("\n  {f}")).collect::<String>()
    )]
    Unverified {
        /// The SavedModel directory.
        dir: PathBuf,
        /// What `verify` found.
        faults: Vec<Fault>,
    },
    /// The output directory would be inside the directory being copied into it (its own
    /// temporary would be copied into itself).
    #[error(
        "{}: the output is inside the SavedModel directory {} it copies; choose a path outside it",
        out.display(),
        dir.display()
    )]
    OutputInsideInput {
        /// The output path.
        out: PathBuf,
        /// The source directory.
        dir: PathBuf,
    },
    /// The checkpoint's index is gone while a data shard remains: the variables exist but
    /// cannot be read (never "no variables").
    #[error(
        "{}: missing, but the data shard {} is there: the checkpoint is damaged",
        index.display(),
        shard.display()
    )]
    IndexMissing {
        /// The missing `variables.index`.
        index: PathBuf,
        /// A data shard found beside it.
        shard: PathBuf,
    },
    /// A variable was asked for, but the SavedModel has no variables.
    #[error("{}: the model has no variables (no {key})", dir.display())]
    NoVariables {
        /// The SavedModel directory.
        dir: PathBuf,
        /// The key (or object path) asked for.
        key: String,
    },
}

impl SavedModelError {
    /// An I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io(IoError::os(path, source))
    }

    /// An invalid part of the model in `source_name`.
    pub fn invalid(source_name: impl Into<String>, fault: impl Into<String>) -> Self {
        Self::InvalidModel {
            source_name: source_name.into(),
            fault: fault.into(),
        }
    }

    /// Bytes from `source_name` that do not decode.
    pub fn malformed(source_name: impl Into<String>, error: DecodeError) -> Self {
        Self::Malformed {
            source_name: source_name.into(),
            error,
        }
    }

    /// The file this error names, when it names exactly one path.
    pub fn path(&self) -> Option<&Path> {
        match self {
            Self::Io(e) => Some(e.path()),
            Self::NotADirectory { dir: p }
            | Self::NoModelFile { dir: p }
            | Self::NotFingerprintable { dir: p }
            | Self::TextFormat { path: p, .. }
            | Self::TooLargeToMerge { dir: p, .. }
            | Self::UnparsableChunk { path: p, .. }
            | Self::Fingerprint { path: p, .. }
            | Self::BadFingerprintFile { path: p, .. }
            | Self::OutputExists { path: p }
            | Self::NotRegularFile { path: p }
            | Self::SymlinkLoop { path: p, .. }
            | Self::NotAModelOrCheckpoint { path: p }
            | Self::NoVariables { dir: p, .. }
            | Self::Unverified { dir: p, .. }
            | Self::IndexMissing { index: p, .. }
            | Self::OutputInsideInput { out: p, .. } => Some(p),
            _ => None,
        }
    }
}

/// One problem `verify` found in a SavedModel directory: the file at fault and what is wrong
/// with it. Defined beside the error that carries a list of them
/// ([`SavedModelError::Unverified`]), so that the errors need nothing from `verify`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Fault {
    /// The file at fault.
    pub file: PathBuf,
    /// What is wrong with it.
    pub fault: String,
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.file.display(), self.fault)
    }
}

/// Result alias for this crate.
pub type Result<T, E = SavedModelError> = std::result::Result<T, E>;
