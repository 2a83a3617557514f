//! What can be wrong in a `.cpb`'s records and chunk metadata, as data: [`ChunkFault`] (what
//! [`crate::check_layout`] and [`crate::check_chunks`] report, and what
//! [`crate::ChunkedError::Layout`] carries) and [`TagFault`] (a field tag that does not decode).
//!
//! They sit below every module that finds or carries them (the checks, the tags, the Merger,
//! the error) and import none of them.

use std::fmt;

use unbound_records::ChunkType;

/// One way a `.cpb` file's records or chunk metadata are wrong. `Display` gives the text
/// `verify` prints after the file name.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ChunkFault {
    /// The chunk headers cannot be followed to the end of the file: chunks after `offset`
    /// were not checked.
    BrokenSequence {
        /// Where the sequence breaks.
        offset: Option<u64>,
        /// What is wrong there.
        detail: String,
    },
    /// A Riegeli chunk that holds records cannot be read (data hash, framing, record sizes,
    /// decompression).
    Riegeli {
        /// Where the chunk begins.
        offset: u64,
        /// Its type.
        chunk_type: ChunkType,
        /// How many records its header declares.
        num_records: u64,
        /// What is wrong.
        detail: String,
    },
    /// The last record, which must be the `ChunkMetadata`, cannot be read.
    MetadataUnreadable {
        /// Why.
        detail: String,
    },
    /// The last record is not a `ChunkMetadata`.
    NotChunkMetadata {
        /// Its position.
        position: u64,
        /// The protobuf decoding fault.
        detail: String,
    },
    /// A `ChunkInfo` type that is neither MESSAGE nor BYTES.
    InvalidType {
        /// Index of the `ChunkInfo`.
        chunk: usize,
        /// The type found.
        chunk_type: i32,
    },
    /// A `ChunkInfo` position at or after the metadata record.
    NotBeforeMetadata {
        /// Index of the `ChunkInfo`.
        chunk: usize,
        /// Its record position.
        position: u64,
        /// The metadata record's position.
        metadata_position: u64,
    },
    /// No (readable) record begins at a `ChunkInfo`'s position.
    NoRecord {
        /// Index of the `ChunkInfo`.
        chunk: usize,
        /// Its record position.
        position: u64,
    },
    /// A `ChunkInfo` position that is not after the previous one's (chunks are records in
    /// chunk order, one each).
    OutOfOrder {
        /// Index of the `ChunkInfo`.
        chunk: usize,
        /// Its record position.
        position: u64,
        /// The position of the `ChunkInfo` before it.
        previous: u64,
    },
    /// A `ChunkInfo` size that differs from its record's.
    SizeMismatch {
        /// Index of the `ChunkInfo`.
        chunk: usize,
        /// Its record position.
        position: u64,
        /// The size in the metadata.
        declared: u64,
        /// The record's size.
        actual: u64,
    },
    /// Records before the metadata that no `ChunkInfo` names.
    Unreferenced {
        /// The first such record's position.
        first: u64,
        /// How many there are.
        count: u64,
    },
    /// A chunk index in the `ChunkedMessage` tree past the `ChunkInfo` list.
    IndexOutOfRange {
        /// The index.
        index: u64,
        /// How many chunks there are.
        chunks: usize,
    },
    /// A field tag of the tree that does not decode.
    BadFieldTag {
        /// The tag, as debug text.
        tag: String,
        /// What is wrong with it.
        fault: TagFault,
    },
    /// The tree nests deeper than [`MAX_NESTING`](crate::merger::MAX_NESTING).
    TooDeep {
        /// The limit.
        limit: usize,
    },
}

impl fmt::Display for ChunkFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChunkFault::BrokenSequence { detail, .. } => {
                write!(f, "the chunk sequence is broken: {detail}")
            }
            ChunkFault::Riegeli {
                offset,
                chunk_type,
                num_records,
                detail,
            } => write!(
                f,
                "Riegeli chunk at offset {offset} ({chunk_type:?}, {num_records} records): {detail}"
            ),
            ChunkFault::MetadataUnreadable { detail } => write!(
                f,
                "the chunk metadata (the last record) cannot be read: {detail}"
            ),
            ChunkFault::NotChunkMetadata { position, detail } => write!(
                f,
                "the last record (position {position}) is not a ChunkMetadata: {detail}"
            ),
            ChunkFault::InvalidType { chunk, chunk_type } => {
                write!(f, "chunk {chunk}: invalid chunk type {chunk_type}")
            }
            ChunkFault::NotBeforeMetadata {
                chunk,
                position,
                metadata_position,
            } => write!(
                f,
                "chunk {chunk} is at record position {position}, not before the metadata record at {metadata_position}"
            ),
            ChunkFault::NoRecord { chunk, position } => {
                write!(f, "chunk {chunk}: no readable record at position {position}")
            }
            ChunkFault::OutOfOrder {
                chunk,
                position,
                previous,
            } => write!(
                f,
                "chunk {chunk}: record position {position} is not after the previous chunk's ({previous})"
            ),
            ChunkFault::SizeMismatch {
                chunk,
                position,
                declared,
                actual,
            } => write!(
                f,
                "chunk {chunk}: size {declared} in the metadata, but the record at position {position} holds {actual} bytes"
            ),
            ChunkFault::Unreferenced { first, count } => write!(
                f,
                "{count} record(s) before the metadata are not named by any chunk (the first at position {first})"
            ),
            ChunkFault::IndexOutOfRange { index, chunks } => {
                write!(f, "chunk index {index} is out of range for {chunks} chunks")
            }
            ChunkFault::BadFieldTag { tag, fault } => write!(f, "bad field tag {tag}: {fault}"),
            ChunkFault::TooDeep { limit } => {
                write!(f, "chunk metadata nested deeper than {limit} levels")
            }
        }
    }
}

/// A field-tag list of chunk metadata that does not describe a path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TagFault {
    /// A list index where a field number must come.
    #[error("tag {0}: index does not follow a field")]
    IndexWithoutField(usize),
    /// A map key where a field number must come.
    #[error("tag {0}: map key does not follow a field")]
    KeyWithoutField(usize),
    /// A `FieldIndex` with none of its kinds set.
    #[error("tag {0}: FieldIndex with no kind set")]
    NoKind(usize),
    /// A `MapKey` with none of its types set.
    #[error("tag {0}: map key with no type set")]
    KeyWithoutType(usize),
    /// Two chunked fields at one depth disagree on what the tag there is (TensorFlow's merge
    /// comparator refuses them).
    #[error("field tag mismatch: a field index and a map key or list index at the same depth")]
    KindMismatch,
}
