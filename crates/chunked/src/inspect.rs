//! [`inspect`]: what a chunked file (`.cpb`) holds, without merging it: its chunk list, the
//! chunked-message tree of its metadata, and its Riegeli chunks. The report serializes
//! (serde) to the JSON `unbound inspect --json` prints.

use std::path::Path;

use prost_reflect::{FieldDescriptor, Kind as FieldKind, MessageDescriptor};
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
    /// The same path with field names from the schema of the message type
    /// (`meta_graphs[0].graph_def.node[3].attr["value"].tensor.tensor_content`); a field the
    /// schema does not know, and everything under it, keeps its number. Empty for a part
    /// merged into the parent.
    pub path: String,
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
    inspect_as(path, None)
}

/// [`inspect`] with field paths named from the schema of `root`, the type of the file's
/// message (`tensorflow.SavedModel` for a `saved_model.cpb`); with `None`, paths keep their
/// numbers.
pub fn inspect_as(path: &Path, root: Option<&MessageDescriptor>) -> Result<InspectReport> {
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
        message: MessageTree::new(&metadata.message.clone().unwrap_or_default(), root),
        riegeli_chunks,
        version: ChunkVersion {
            bad_consumers: version.bad_consumers,
            join_version: version.join_version,
            splitter_version: version.splitter_version,
        },
    })
}

impl MessageTree {
    /// The tree of `m`, a message of type `desc` when known.
    fn new(m: &ChunkedMessage, desc: Option<&MessageDescriptor>) -> Self {
        MessageTree {
            chunk_index: m.chunk_index,
            chunked_fields: m
                .chunked_fields
                .iter()
                .map(|cf| {
                    let field_tag: Vec<Option<FieldTag>> =
                        cf.field_tag.iter().map(FieldTag::from_proto).collect();
                    let (path, sub) = named_path(&field_tag, desc);
                    ChunkedFieldTree {
                        field_tag,
                        path,
                        message: MessageTree::new(
                            &cf.message.clone().unwrap_or_default(),
                            sub.as_ref(),
                        ),
                    }
                })
                .collect(),
        }
    }
}

impl From<&ChunkedMessage> for MessageTree {
    fn from(m: &ChunkedMessage) -> Self {
        MessageTree::new(m, None)
    }
}

/// A map key as text: a string quoted, anything else as it is.
fn key_text(k: &Option<MapKey>) -> String {
    match k {
        Some(MapKey::S(s)) => format!("[{s:?}]"),
        Some(MapKey::Boolean(b)) => format!("[{b}]"),
        Some(MapKey::Ui32(v)) => format!("[{v}]"),
        Some(MapKey::Ui64(v)) => format!("[{v}]"),
        Some(MapKey::I32(v)) => format!("[{v}]"),
        Some(MapKey::I64(v)) => format!("[{v}]"),
        None => "[?]".into(),
    }
}

/// The path `tags` into a message of type `desc` with field names (numbers where the
/// schema, or its absence, gives none), and the type of the message it leads to.
pub fn named_path(
    tags: &[Option<FieldTag>],
    desc: Option<&MessageDescriptor>,
) -> (String, Option<MessageDescriptor>) {
    let mut out = String::new();
    let mut message = desc.cloned();
    // The field just named, while an index or key may still follow it.
    let mut field: Option<FieldDescriptor> = None;
    for tag in tags {
        match tag {
            Some(FieldTag::Field(n)) => {
                if !out.is_empty() {
                    out.push('.');
                }
                field = message.as_ref().and_then(|m| m.get_field(*n));
                match &field {
                    Some(f) => {
                        out += f.name();
                        message = match f.kind() {
                            FieldKind::Message(m) if !f.is_list() && !f.is_map() => Some(m),
                            _ => None,
                        };
                    }
                    None => {
                        out += &n.to_string();
                        message = None;
                    }
                }
            }
            Some(FieldTag::Index(i)) => {
                out += &format!("[{i}]");
                message = match field.take() {
                    Some(f) if f.is_list() => match f.kind() {
                        FieldKind::Message(m) => Some(m),
                        _ => None,
                    },
                    _ => None,
                };
            }
            Some(FieldTag::MapKey(k)) => {
                out += &key_text(k);
                // Only a map's entry has a value field (a key after another field, in a
                // hostile file, leads nowhere the schema knows).
                message = match field.take().map(|f| (f.is_map(), f.kind())) {
                    Some((true, FieldKind::Message(entry))) => {
                        match entry.map_entry_value_field().kind() {
                            FieldKind::Message(v) => Some(v),
                            _ => None,
                        }
                    }
                    _ => None,
                };
            }
            None => {
                out += if out.is_empty() { "?" } else { ".?" };
                message = None;
                field = None;
            }
        }
    }
    (out, message)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_named_from_the_schema_and_keep_numbers_past_it() {
        let desc = unbound_proto::descriptor_pool()
            .get_message_by_name("tensorflow.SavedModel")
            .unwrap();
        let tags = vec![
            Some(FieldTag::Field(2)),
            Some(FieldTag::Index(0)),
            Some(FieldTag::Field(2)),
            Some(FieldTag::Field(1)),
            Some(FieldTag::Index(3)),
            Some(FieldTag::Field(5)),
            Some(FieldTag::MapKey(Some(MapKey::S("value".into())))),
            Some(FieldTag::Field(8)),
            Some(FieldTag::Field(4)),
        ];
        let (path, _) = named_path(&tags, Some(&desc));
        assert_eq!(
            path,
            r#"meta_graphs[0].graph_def.node[3].attr["value"].tensor.tensor_content"#
        );
        let (path, sub) = named_path(&tags[..3], Some(&desc));
        assert_eq!(path, "meta_graphs[0].graph_def");
        assert_eq!(sub.unwrap().full_name(), "tensorflow.GraphDef");
        // Without a schema, or past a number it does not know: numbers.
        assert_eq!(named_path(&tags[..2], None).0, "2[0]");
        let unknown = [Some(FieldTag::Field(99)), Some(FieldTag::Field(1)), None];
        assert_eq!(named_path(&unknown, Some(&desc)).0, "99.1.?");
        // Keys and indices where the schema has none: no panic, numbers from there on.
        let odd = [
            Some(FieldTag::Field(2)),
            Some(FieldTag::MapKey(Some(MapKey::S("k".into())))),
            Some(FieldTag::Field(2)),
            Some(FieldTag::Index(1)),
            Some(FieldTag::Field(1)),
        ];
        assert_eq!(
            named_path(&odd, Some(&desc)).0,
            r#"meta_graphs["k"].2[1].1"#
        );
        let odd = [Some(FieldTag::Field(1)), Some(FieldTag::MapKey(None))];
        assert_eq!(
            named_path(&odd, Some(&desc)).0,
            "saved_model_schema_version[?]"
        );
    }
}
