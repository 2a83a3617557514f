//! The one error type of this crate.
//!
//! Every variant names the file (the reader's name, or the writer's name) and,
//! where it applies, the byte offset in the file where the fault was found, so
//! that a message like `model.cpb: header hash mismatch in block header at
//! offset 65536` tells the user exactly what is wrong and where.

use std::fmt;

/// Which hashed structure failed its HighwayHash check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HashedPart {
    /// The 24-byte block header found at every multiple of 64 KiB.
    BlockHeader,
    /// The 40-byte chunk header.
    ChunkHeader,
    /// The data of a chunk.
    ChunkData,
}

impl fmt::Display for HashedPart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            HashedPart::BlockHeader => "header hash mismatch in block header",
            HashedPart::ChunkHeader => "header hash mismatch in chunk header",
            HashedPart::ChunkData => "chunk data hash mismatch for chunk",
        })
    }
}

/// Which of the [`crate::DecodeLimits`] a chunk would pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecodeLimitKind {
    /// [`crate::DecodeLimits::max_chunk`]: the chunk alone is larger.
    Chunk,
    /// The memory budget for all decoded data held at once ([`crate::DecodeLimits::budget`]).
    Held,
}

impl fmt::Display for DecodeLimitKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DecodeLimitKind::Chunk => "would pass the largest size a chunk may decode to in memory",
            DecodeLimitKind::Held => {
                "with what is already held would pass the memory budget for decoded data (raise \
                 it with `unbound --memory-limit BYTES` or the UNBOUND_MEMORY_LIMIT environment \
                 variable)"
            }
        })
    }
}

/// An error reading or writing a Riegeli/records file.
///
/// Variants are coarse categories callers can match on; the text carries the
/// details. `file()` and `offset()` give the location uniformly.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecordsError {
    /// Reading, mapping or writing the underlying file failed.
    #[error("{file}: I/O error: {source}")]
    Io {
        /// The file name.
        file: String,
        /// The operating-system error.
        #[source]
        source: std::io::Error,
    },

    /// The file is not one that can be read (a FIFO, a device, a directory).
    #[error(transparent)]
    File(unbound_io::IoError),

    /// The file does not start with the fixed Riegeli/records signature.
    #[error("{file}: not a Riegeli file: {detail}")]
    NotRiegeli {
        /// The file name.
        file: String,
        /// What was found instead.
        detail: String,
    },

    /// A block header, chunk header or chunk data failed its hash check.
    #[error("{file}: {part} at offset {offset}")]
    HashMismatch {
        /// The file name.
        file: String,
        /// Which structure was damaged.
        part: HashedPart,
        /// Offset of the block (for block headers) or of the chunk beginning.
        offset: u64,
    },

    /// The file ends before a structure it announces.
    #[error("{file}: truncated: {detail}")]
    Truncated {
        /// The file name.
        file: String,
        /// Offset of the structure that does not fit.
        offset: u64,
        /// What was expected and how much the file has.
        detail: String,
    },

    /// The structure of the file is inconsistent (bad sizes, counts, block
    /// header distances, malformed chunk contents).
    #[error("{file}: corrupt chunk at offset {offset}: {detail}")]
    Corrupt {
        /// The file name.
        file: String,
        /// Offset of the chunk (or block) at fault.
        offset: u64,
        /// What is wrong.
        detail: String,
    },

    /// A compressed buffer could not be decompressed, or decompressed to a
    /// size different from the one declared.
    #[error("{file}: decompression failed for chunk at offset {offset}: {detail}")]
    Decompression {
        /// The file name.
        file: String,
        /// Offset of the chunk.
        offset: u64,
        /// What the decompressor reported.
        detail: String,
    },

    /// The file uses a feature this crate does not implement (an unknown
    /// compression type or chunk type holding records).
    #[error("{file}: unsupported at offset {offset}: {detail}")]
    Unsupported {
        /// The file name.
        file: String,
        /// Offset of the chunk.
        offset: u64,
        /// What is unsupported.
        detail: String,
    },

    /// No record exists at or after the requested numeric position.
    #[error("{file}: record position {pos} is past the end")]
    PastEnd {
        /// The file name.
        file: String,
        /// The requested position.
        pos: u64,
    },

    /// The file holds no records at all (from `last_record`).
    #[error("{file}: the file holds no records")]
    NoRecords {
        /// The file name.
        file: String,
    },

    /// Decoding a chunk whole would hold more decoded data in memory than the reader's
    /// [`crate::DecodeLimits`] allow (a decompression bomb, or a chunk larger than the caller
    /// agreed to hold). Nothing was allocated for it. The streaming reads
    /// ([`crate::RecordReader::copy_record_to`], [`crate::RecordReader::check_chunk`]) are not
    /// limited this way.
    #[error(
        "{file}: the chunk at offset {offset} declares {declared} decoded bytes; holding them {reason} (limit {limit} bytes)"
    )]
    DecodeLimit {
        /// The file name.
        file: String,
        /// Offset of the chunk.
        offset: u64,
        /// The decoded size the chunk declares.
        declared: u64,
        /// Decoded bytes this reader already held when the chunk was asked for.
        held: u64,
        /// The limit that would be passed.
        limit: u64,
        /// Which limit: one chunk's size, or all the decoded data held at once.
        reason: DecodeLimitKind,
    },

    /// A record or chunk is too large for the chosen encoding (writer side).
    #[error("{file}: {detail}")]
    TooLarge {
        /// The output name.
        file: String,
        /// What exceeded which limit.
        detail: String,
    },
}

impl From<unbound_io::IoError> for RecordsError {
    fn from(error: unbound_io::IoError) -> Self {
        match error {
            unbound_io::IoError::Os { path, source } => RecordsError::Io {
                file: path.display().to_string(),
                source,
            },
            other => RecordsError::File(other),
        }
    }
}

impl RecordsError {
    /// An I/O error met writing the file `name`: [`RecordsError::TooLarge`] when it is a
    /// writer's refusal of data too large for the format (`InvalidInput`), else
    /// [`RecordsError::Io`].
    pub(crate) fn writing(name: &str, source: std::io::Error) -> RecordsError {
        if source.kind() == std::io::ErrorKind::InvalidInput {
            return RecordsError::TooLarge {
                file: name.to_string(),
                detail: source.to_string(),
            };
        }
        RecordsError::Io {
            file: name.to_string(),
            source,
        }
    }

    /// The name of the file the error is about.
    pub fn file(&self) -> &str {
        match self {
            RecordsError::Io { file, .. }
            | RecordsError::NotRiegeli { file, .. }
            | RecordsError::HashMismatch { file, .. }
            | RecordsError::Truncated { file, .. }
            | RecordsError::Corrupt { file, .. }
            | RecordsError::Decompression { file, .. }
            | RecordsError::Unsupported { file, .. }
            | RecordsError::PastEnd { file, .. }
            | RecordsError::NoRecords { file }
            | RecordsError::DecodeLimit { file, .. }
            | RecordsError::TooLarge { file, .. } => file,
            RecordsError::File(e) => e.path().to_str().unwrap_or("<non-UTF-8 path>"),
        }
    }

    /// The byte offset in the file the error refers to, when there is one.
    pub fn offset(&self) -> Option<u64> {
        match self {
            RecordsError::HashMismatch { offset, .. }
            | RecordsError::Truncated { offset, .. }
            | RecordsError::Corrupt { offset, .. }
            | RecordsError::Decompression { offset, .. }
            | RecordsError::DecodeLimit { offset, .. }
            | RecordsError::Unsupported { offset, .. } => Some(*offset),
            RecordsError::NotRiegeli { .. } => Some(0),
            RecordsError::PastEnd { pos, .. } => Some(*pos),
            RecordsError::Io { .. }
            | RecordsError::File(_)
            | RecordsError::NoRecords { .. }
            | RecordsError::TooLarge { .. } => None,
        }
    }
}

/// A fault found while decoding chunk contents, before the file name and chunk
/// offset are attached by the reader.
#[derive(Debug)]
pub(crate) enum DecodeFault {
    /// Structural problem in the chunk data.
    Corrupt(String),
    /// The decompressor failed or produced the wrong size.
    Decompression(String),
    /// Unknown compression type or similar.
    Unsupported(String),
    /// Writing to the caller's sink failed.
    Io(std::io::Error),
}

impl DecodeFault {
    /// Attaches the file name and chunk offset.
    pub(crate) fn at(self, file: &str, offset: u64) -> RecordsError {
        let file = file.to_owned();
        match self {
            DecodeFault::Corrupt(detail) => RecordsError::Corrupt {
                file,
                offset,
                detail,
            },
            DecodeFault::Decompression(detail) => RecordsError::Decompression {
                file,
                offset,
                detail,
            },
            DecodeFault::Unsupported(detail) => RecordsError::Unsupported {
                file,
                offset,
                detail,
            },
            DecodeFault::Io(source) => RecordsError::Io { file, source },
        }
    }
}

/// Shorthand for a corrupt-data fault.
pub(crate) fn corrupt(detail: impl Into<String>) -> DecodeFault {
    DecodeFault::Corrupt(detail.into())
}
