//! Errors of the wire layer: malformed bytes (at a byte offset), field paths that do not fit a
//! schema, and the records or files lazy values are read from.

use unbound_io::IoError;

/// A fault in protobuf wire data, at a byte offset within the buffer being decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("at byte {offset}: {fault}")]
pub struct DecodeError {
    /// Offset of the fault within the buffer being decoded.
    pub offset: usize,
    /// What was wrong.
    pub fault: String,
}

impl DecodeError {
    /// Builds a decoding fault at `offset`.
    pub fn new(offset: usize, fault: impl Into<String>) -> Self {
        Self {
            offset,
            fault: fault.into(),
        }
    }
}

/// Everything that can go wrong while reading, navigating or writing a [`crate::WireMessage`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WireError {
    /// Protobuf bytes that do not decode. `source_name` says where they came from.
    #[error("{source_name}: malformed protobuf {error}")]
    Malformed {
        /// The file (and chunk or field) the bytes came from.
        source_name: String,
        /// The decoding fault.
        error: DecodeError,
    },
    /// A field path does not fit the message schema.
    #[error("field path does not fit {message}: {fault}")]
    Schema {
        /// Full name of the message type being walked.
        message: String,
        /// What was wrong.
        fault: String,
    },
    /// A lazy record turned out longer or shorter than the chunk metadata said.
    #[error(
        "{source_name}: bad chunk metadata: record at position {position} holds {actual} bytes, \
         its chunk said {expected}"
    )]
    RecordLength {
        /// The Riegeli file.
        source_name: String,
        /// The record's position.
        position: u64,
        /// Bytes the record really holds.
        actual: u64,
        /// Bytes the chunk metadata promised.
        expected: u64,
    },
    /// The file a lazy value lives in is damaged or unreadable (its [`crate::RecordSource`]
    /// says how).
    #[error("{0}")]
    Source(crate::SourceError),
    /// Writing the serialized message failed.
    #[error(transparent)]
    Io(#[from] IoError),
}

/// Result alias for this crate.
pub type Result<T, E = WireError> = std::result::Result<T, E>;
