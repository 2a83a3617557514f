//! Chunked (`.cpb`) file builders: the parts of a `ChunkMetadata` tree, and Riegeli files
//! written with unbound's writer one record per chunk, so tests can place chunks and damage
//! metadata at will.

use bytes::Bytes;
use prost::Message;
use unbound_proto::tensorflow::proto_splitter::field_index::{map_key, Kind, MapKey};
use unbound_proto::tensorflow::proto_splitter::{
    ChunkMetadata, ChunkedField, ChunkedMessage, FieldIndex,
};
use unbound_records::{Compression, RecordWriter, WriterOptions};

/// The field tag step "field `number`".
pub fn field_tag(number: u32) -> FieldIndex {
    FieldIndex {
        kind: Some(Kind::Field(number)),
    }
}

/// The field tag step "element `index`" of a repeated field.
pub fn index_tag(index: u64) -> FieldIndex {
    FieldIndex {
        kind: Some(Kind::Index(index)),
    }
}

/// The field tag step "the map entry whose key is `key`".
pub fn map_key_tag(key: map_key::Type) -> FieldIndex {
    FieldIndex {
        kind: Some(Kind::MapKey(MapKey { r#type: Some(key) })),
    }
}

/// A chunked field at `tags` whose message is in chunk `chunk_index` (none: a message
/// without a chunk of its own), with no nested chunked fields.
pub fn chunked_field(tags: Vec<FieldIndex>, chunk_index: Option<u64>) -> ChunkedField {
    ChunkedField {
        field_tag: tags,
        message: Some(ChunkedMessage {
            chunk_index,
            chunked_fields: vec![],
        }),
    }
}

/// [`chunked_field`] with a chunk.
pub fn chunked_field_at(tags: Vec<FieldIndex>, chunk_index: u64) -> ChunkedField {
    chunked_field(tags, Some(chunk_index))
}

/// A chunked field at `tags` holding `message` (nested chunked fields allowed).
pub fn chunked_field_with(tags: Vec<FieldIndex>, message: ChunkedMessage) -> ChunkedField {
    ChunkedField {
        field_tag: tags,
        message: Some(message),
    }
}

/// Writes `chunks` and then `metadata` (the offsets of its `ChunkInfo`s set to where the
/// chunks land, then passed to `edit`) as a `.cpb` with unbound's writer: uncompressed, one
/// record per Riegeli chunk.
pub fn write_cpb(
    chunks: &[Bytes],
    metadata: ChunkMetadata,
    edit: impl FnOnce(&mut ChunkMetadata),
) -> Vec<u8> {
    write_cpb_with(chunks, metadata, Compression::None, 1, edit)
}

/// [`write_cpb`] with a compression and a Riegeli chunk size (`1`: one record per chunk).
/// A chunk without a `ChunkInfo` is written all the same.
pub fn write_cpb_with(
    chunks: &[Bytes],
    mut metadata: ChunkMetadata,
    compression: Compression,
    chunk_size: u64,
    edit: impl FnOnce(&mut ChunkMetadata),
) -> Vec<u8> {
    let options = WriterOptions {
        compression,
        chunk_size: Some(chunk_size),
        store_incompressible: false,
    };
    let mut w = RecordWriter::new(Vec::new(), options).unwrap();
    for (i, c) in chunks.iter().enumerate() {
        let pos = w.write_record(c).unwrap();
        if let Some(info) = metadata.chunks.get_mut(i) {
            info.offset = pos;
        }
    }
    edit(&mut metadata);
    w.write_record(&metadata.encode_to_vec()).unwrap();
    w.finish().unwrap()
}

/// Writes `records` as one uncompressed Riegeli chunk per record and gives their positions.
pub fn write_records(records: &[&[u8]]) -> (Vec<u8>, Vec<u64>) {
    let options = WriterOptions {
        compression: Compression::None,
        chunk_size: Some(1),
        store_incompressible: false,
    };
    let mut w = RecordWriter::new(Vec::new(), options).unwrap();
    let positions = records.iter().map(|r| w.write_record(r).unwrap()).collect();
    (w.finish().unwrap(), positions)
}
