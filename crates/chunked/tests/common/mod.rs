//! Helpers shared by this crate's integration tests (they need `unbound-chunked` itself, which
//! `unbound-test-support` cannot depend on).

use bytes::Bytes;
use unbound_chunked::{Chunk, SplitOutput};
use unbound_proto::tensorflow::proto_splitter::{ChunkInfo, ChunkMetadata};

/// The serialized chunks of `split` and the metadata describing them, with every record
/// position 0 (the caller writes the records and fills the positions in).
pub fn chunks_and_metadata(split: SplitOutput) -> (Vec<Bytes>, ChunkMetadata) {
    let mut chunks = Vec::new();
    let mut infos = Vec::new();
    for c in &split.chunks {
        let (b, t) = match c {
            Chunk::Message(m) => (Bytes::from(m.to_vec().unwrap()), 1),
            Chunk::SerializedMessage(p) => (p.bytes().unwrap(), 1),
            Chunk::Bytes(p) => (p.bytes().unwrap(), 2),
        };
        infos.push(ChunkInfo {
            r#type: t,
            size: b.len() as u64,
            offset: 0,
        });
        chunks.push(b);
    }
    let metadata = ChunkMetadata {
        version: Some(unbound_chunked::write::version_def()),
        chunks: infos,
        message: Some(split.message),
    };
    (chunks, metadata)
}
