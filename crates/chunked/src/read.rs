//! Reading a chunked or plain protobuf from disk, with TensorFlow's file preference.

use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use prost_reflect::MessageDescriptor;
use unbound_proto::tensorflow::proto_splitter::{ChunkMetadata, ChunkedMessage};
use unbound_records::RecordReader;

use crate::error::{ChunkedError, Result};
use crate::merger::{FileChunks, Merger};
use crate::write::with_suffix;
use unbound_wire::WireMessage;

/// Which file a message was read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceFormat {
    /// A plain binary protobuf (`.pb`).
    Pb,
    /// A chunked protobuf (`.cpb`).
    Cpb,
}

/// A message read from disk, with where it came from.
pub struct ReadMessage {
    /// The message. String and bytes fields filled from chunks may be lazy record references.
    pub message: WireMessage,
    /// The format of the file it came from.
    pub format: SourceFormat,
    /// The chunk metadata, for a `.cpb`.
    pub metadata: Option<ChunkMetadata>,
}

/// TensorFlow's `Merger::Read(prefix)`: `PREFIX.cpb` if it exists (it wins over `.pb`),
/// otherwise `PREFIX.pb`.
pub fn read_prefix(prefix: &Path, desc: &MessageDescriptor) -> Result<ReadMessage> {
    let cpb = with_suffix(prefix, "cpb");
    if cpb.exists() {
        return read_cpb(&cpb, desc);
    }
    let pb = with_suffix(prefix, "pb");
    if pb.exists() {
        return Ok(ReadMessage {
            message: read_pb(&pb, desc)?,
            format: SourceFormat::Pb,
            metadata: None,
        });
    }
    Err(ChunkedError::NotFound(prefix.display().to_string()))
}

/// Maps a binary protobuf file and parses its top level (nested messages stay slices of the
/// mapping until needed).
pub fn read_pb(path: &Path, desc: &MessageDescriptor) -> Result<WireMessage> {
    parse_pb(&unbound_io::map_file(path)?, path, desc)
}

/// [`read_pb`] of a file already mapped: parses the top level of `bytes`, the content of
/// `path` (which errors name), so that a caller holding the mapping does not map it again.
pub fn parse_pb(bytes: &Bytes, path: &Path, desc: &MessageDescriptor) -> Result<WireMessage> {
    WireMessage::parse(bytes, Some(desc.clone())).map_err(|error| ChunkedError::Wire {
        source_name: path.display().to_string(),
        error,
    })
}

/// Reads and merges a whole `.cpb` file.
pub fn read_cpb(path: &Path, desc: &MessageDescriptor) -> Result<ReadMessage> {
    let reader = Arc::new(RecordReader::open(path)?);
    let (chunks, metadata) = FileChunks::from_reader(reader)?;
    let root = metadata.message.clone().unwrap_or_default();
    let message = Merger::new(&chunks).merge(desc, &root)?;
    Ok(ReadMessage {
        message,
        format: SourceFormat::Cpb,
        metadata: Some(metadata),
    })
}

/// TensorFlow's `Merger::ReadPartial`: merges only what `metadata` (typically a pruned copy of
/// the file's own) describes.
pub fn read_cpb_partial(
    path: &Path,
    desc: &MessageDescriptor,
    metadata: &ChunkedMessage,
) -> Result<WireMessage> {
    let reader = Arc::new(RecordReader::open(path)?);
    let (chunks, _) = FileChunks::from_reader(reader)?;
    Merger::new(&chunks).merge(desc, metadata)
}
