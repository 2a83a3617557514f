//! [`inspect`]: what a chunked file (`.cpb`) holds, without merging it: its chunk list, the
//! chunked-message tree of its metadata, and its Riegeli chunks. The report serializes
//! (serde) to the JSON `unbound inspect --json` prints.

use std::path::Path;

use serde::Serialize;
use unbound_proto::tensorflow::proto_splitter::{
    chunk_info::Type as ChunkType,
    field_index::{map_key::Type as KeyType, Kind},
    ChunkedMessage, FieldIndex,
};

use crate::error::Result;
use crate::merger::FileChunks;

/// What [`inspect`] reports about a `.cpb` file. Fields serialize in this (name) order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InspectReport {
    /// `ChunkMetadata.chunks`: the chunks the metadata lists, in order.
    pub chunks: Vec<ChunkEntry>,
    /// Every fault [`crate::check_chunks`] finds, as `verify` prints it (chunk data whose
    /// hash, framing or compression is broken, record sizes that differ from the metadata):
    /// a file with any is corrupt and `unbound inspect` exits 1 after printing the report.
    /// Empty for a sound file, and then left out of the JSON.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub faults: Vec<String>,
    /// The file, as given.
    pub file: String,
    /// Its size in bytes.
    pub file_size: u64,
    /// `ChunkMetadata.message`: the tree saying which chunk holds which field.
    pub message: MessageTree,
    /// The Riegeli chunks of the file (containers of records), in file order.
    pub riegeli_chunks: Vec<RiegeliChunk>,
    /// `ChunkMetadata.version`.
    pub version: ChunkVersion,
}

/// `ChunkMetadata.version` (a `VersionDef`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChunkVersion {
    /// `bad_consumers`.
    pub bad_consumers: Vec<i32>,
    /// `join_version` (TensorFlow writes 0).
    pub join_version: i32,
    /// `splitter_version` (TensorFlow writes 1).
    pub splitter_version: i32,
}

/// One `ChunkInfo` of the metadata.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChunkEntry {
    /// Its index in `ChunkMetadata.chunks` (what the tree's `chunk_index` refers to).
    pub index: usize,
    /// The record position of the chunk's record.
    pub offset: u64,
    /// The chunk's size in bytes.
    pub size: u64,
    /// `"MESSAGE"` or `"BYTES"`; `"INVALID"` for a value the schema does not know.
    #[serde(rename = "type")]
    pub chunk_type: String,
}

/// A `ChunkedMessage`: the chunk holding this message (if any) and its chunked fields.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MessageTree {
    /// The chunk holding this message's own fields; `None` when it has none.
    pub chunk_index: Option<u64>,
    /// The fields held by other chunks, in metadata order.
    pub chunked_fields: Vec<ChunkedFieldTree>,
}

/// A `ChunkedField`: where in the parent message a chunked part belongs, and that part.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChunkedFieldTree {
    /// The path from the parent message: field numbers, list indices and map keys (`None`
    /// for a `FieldIndex` with no kind set; `null` in JSON). An empty path merges the part
    /// into the parent.
    pub field_tag: Vec<Option<FieldTag>>,
    /// The part.
    pub message: MessageTree,
}

/// One step of a field path. Serializes as `{"field": N}`, `{"index": I}` or
/// `{"map_key": KEY}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FieldTag {
    /// A field number.
    Field(u32),
    /// An index into a repeated field.
    Index(u64),
    /// A map key; `None` (`null`) when its type is not set.
    MapKey(Option<MapKey>),
}

/// A map key of a field path. Serializes as `{"s": ...}`, `{"boolean": ...}`, `{"ui32": ...}`,
/// `{"ui64": ...}`, `{"i32": ...}` or `{"i64": ...}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MapKey {
    /// A string key.
    S(String),
    /// A bool key.
    Boolean(bool),
    /// A uint32 key.
    Ui32(u32),
    /// A uint64 key.
    Ui64(u64),
    /// An int32 key.
    I32(i32),
    /// An int64 key.
    I64(i64),
}

/// One Riegeli chunk of the file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RiegeliChunk {
    /// The compression of simple, transposed and metadata chunks (`"None"`, `"Zstd"`, ...);
    /// `None` (`null`) for other chunk types.
    pub compression: Option<String>,
    /// Size of the chunk data as stored.
    pub data_size: u64,
    /// Sum of its record sizes after decoding.
    pub decoded_size: u64,
    /// File position where the chunk begins (its first record's position).
    pub offset: u64,
    /// Number of records in it.
    pub records: u64,
    /// The Riegeli chunk type (`"Simple"`, `"Signature"`, ...).
    #[serde(rename = "type")]
    pub chunk_type: String,
}

/// Reads the chunk metadata and Riegeli chunk list of the `.cpb` file at `path` (no chunk is
/// merged). Every chunk's data is checked too ([`crate::check_chunks`], streamed, so memory
/// stays small): what is corrupt is listed in [`InspectReport::faults`]. Fails when the
/// metadata cannot be read or does not fit the file's records.
pub fn inspect(path: &Path) -> Result<InspectReport> {
    let (chunks, metadata) = FileChunks::open(path)?;
    let reader = chunks.reader();
    let faults = crate::check_chunks(reader)
        .faults
        .iter()
        .map(ToString::to_string)
        .collect();
    let riegeli_chunks = reader
        .chunks()
        .map(|c| {
            c.map(|c| RiegeliChunk {
                compression: c.compression.map(|x| format!("{x:?}")),
                data_size: c.data_size,
                decoded_size: c.decoded_data_size,
                offset: c.begin,
                records: c.num_records,
                chunk_type: format!("{:?}", c.chunk_type),
            })
        })
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let chunk_list = metadata
        .chunks
        .iter()
        .enumerate()
        .map(|(index, c)| ChunkEntry {
            index,
            offset: c.offset,
            size: c.size,
            chunk_type: ChunkType::try_from(c.r#type)
                .map(|t| t.as_str_name())
                .unwrap_or("INVALID")
                .to_string(),
        })
        .collect();
    let version = metadata.version.clone().unwrap_or_default();
    Ok(InspectReport {
        chunks: chunk_list,
        faults,
        file: path.display().to_string(),
        file_size: reader.len(),
        message: MessageTree::from(&metadata.message.clone().unwrap_or_default()),
        riegeli_chunks,
        version: ChunkVersion {
            bad_consumers: version.bad_consumers,
            join_version: version.join_version,
            splitter_version: version.splitter_version,
        },
    })
}

impl From<&ChunkedMessage> for MessageTree {
    fn from(m: &ChunkedMessage) -> Self {
        MessageTree {
            chunk_index: m.chunk_index,
            chunked_fields: m
                .chunked_fields
                .iter()
                .map(|cf| ChunkedFieldTree {
                    field_tag: cf.field_tag.iter().map(FieldTag::from_proto).collect(),
                    message: MessageTree::from(&cf.message.clone().unwrap_or_default()),
                })
                .collect(),
        }
    }
}

impl FieldTag {
    /// The tag of a `FieldIndex`; `None` when its kind is not set.
    pub fn from_proto(t: &FieldIndex) -> Option<FieldTag> {
        Some(match &t.kind {
            Some(Kind::Field(f)) => FieldTag::Field(*f),
            Some(Kind::Index(i)) => FieldTag::Index(*i),
            Some(Kind::MapKey(k)) => FieldTag::MapKey(k.r#type.as_ref().map(|k| match k {
                KeyType::S(s) => MapKey::S(s.clone()),
                KeyType::Boolean(b) => MapKey::Boolean(*b),
                KeyType::Ui32(v) => MapKey::Ui32(*v),
                KeyType::Ui64(v) => MapKey::Ui64(*v),
                KeyType::I32(v) => MapKey::I32(*v),
                KeyType::I64(v) => MapKey::I64(*v),
            })),
            None => return None,
        })
    }
}
