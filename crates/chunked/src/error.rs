//! Errors of the chunked-proto layer. Each names the file (or in-memory source), where in it
//! the fault lies, and what was wrong.

use std::path::PathBuf;

use unbound_io::IoError;
use unbound_wire::{DecodeError, WireError};

use crate::fault::ChunkFault;

/// Everything that can go wrong while splitting, merging, reading or writing chunked protos.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ChunkedError {
    /// Protobuf bytes that do not decode. `source_name` says which chunk of which file.
    #[error("{source_name}: malformed protobuf {error}")]
    Wire {
        /// The file and chunk the bytes came from.
        source_name: String,
        /// The decoding fault.
        error: DecodeError,
    },
    /// The Riegeli container is damaged or unreadable.
    #[error(transparent)]
    Records(#[from] unbound_records::RecordsError),
    /// The chunk metadata is inconsistent (index out of range, a tag that does not fit, ...).
    #[error("{source_name}: bad chunk metadata: {fault}")]
    Metadata {
        /// The file the metadata came from.
        source_name: String,
        /// What was wrong.
        fault: String,
    },
    /// The chunk metadata does not fit the file's records (see [`crate::check_layout`]):
    /// merging would build a different message than the one written.
    #[error("{source_name}: bad chunk metadata: {}", list_faults(faults))]
    Layout {
        /// The file.
        source_name: String,
        /// What is wrong (never empty).
        faults: Vec<ChunkFault>,
    },
    /// Merging would read more chunk bytes than the caller allows
    /// ([`crate::Merger::set_max_chunk_bytes`]), for example more than a `.pb` can hold.
    #[error("{source_name}: the chunks to merge hold more than {limit} bytes (chunk {chunk} would bring them to {total})")]
    TooLarge {
        /// The file.
        source_name: String,
        /// The chunk that would pass the limit.
        chunk: u64,
        /// The chunk bytes read with it.
        total: u64,
        /// The limit.
        limit: u64,
    },
    /// A message chunk streamed instead of decoded whole (`streamed.rs`) does not parse.
    #[error("{source_name}: malformed protobuf: {fault}")]
    Streamed {
        /// The file and chunk.
        source_name: String,
        /// What was wrong, and where.
        fault: String,
    },
    /// Reading a chunk would hold more decoded data than the memory budget allows.
    #[error(
        "{source_name}: holding its fields would pass the memory budget for decoded data ({held} bytes past the limit of {limit}; raise it with `unbound --memory-limit BYTES` or the UNBOUND_MEMORY_LIMIT environment variable)"
    )]
    MemoryBudget {
        /// The file and chunk.
        source_name: String,
        /// Bytes it would hold.
        held: u64,
        /// The budget.
        limit: u64,
    },
    /// A field path does not fit the message schema.
    #[error("field path does not fit {message}: {fault}")]
    Schema {
        /// Full name of the message type being walked.
        message: String,
        /// What was wrong.
        fault: String,
    },
    /// A BYTES chunk that should hold a textual scalar does not parse.
    #[error("{source_name}: chunk {chunk} for field {field} is not a valid {expected}: {value:?}")]
    TextScalar {
        /// File the chunk came from.
        source_name: String,
        /// Chunk index.
        chunk: u64,
        /// Full field name.
        field: String,
        /// What kind of text was expected.
        expected: String,
        /// The (abbreviated) chunk text.
        value: String,
    },
    /// Nesting beyond what we accept from a file.
    #[error("{source_name}: nesting deeper than {limit} levels")]
    TooDeep {
        /// File the nesting came from.
        source_name: String,
        /// The limit that was exceeded.
        limit: usize,
    },
    /// The message type is not in the descriptor pool.
    #[error("unknown message type {0:?} (not in the descriptor pool)")]
    UnknownType(String),
    /// A filesystem operation failed.
    #[error(transparent)]
    Io(#[from] IoError),
    /// A wire-level message could not be read, navigated or written.
    #[error(transparent)]
    Message(#[from] WireError),
    /// Neither PREFIX.pb nor PREFIX.cpb exists.
    #[error("neither {0}.cpb nor {0}.pb exists")]
    NotFound(String),
}

impl ChunkedError {
    /// Wraps an I/O error with the path it concerns.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io(IoError::os(path, source))
    }

    /// A metadata fault in `source_name`.
    pub fn metadata(source_name: impl Into<String>, fault: impl Into<String>) -> Self {
        Self::Metadata {
            source_name: source_name.into(),
            fault: fault.into(),
        }
    }
}

/// The first faults, joined for an error message.
fn list_faults(faults: &[ChunkFault]) -> String {
    const SHOWN: usize = 8;
    let mut text = faults
        .iter()
        .take(SHOWN)
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ");
    if faults.len() > SHOWN {
        text.push_str(&format!("; and {} more", faults.len() - SHOWN));
    }
    text
}

/// Result alias for this crate.
pub type Result<T, E = ChunkedError> = std::result::Result<T, E>;
