//! Pruning chunk metadata to some paths, for partial reads (what TensorFlow's fingerprinting
//! does before `Merger::ReadPartial`).

use unbound_proto::tensorflow::proto_splitter::{
    field_index::Kind as TagKind, ChunkedMessage, FieldIndex,
};

/// Keeps the chunked fields of `root` that lead into or lie under one of `keep` (tag paths of
/// fields and indices, e.g. `[field 2, index 0, field 5]` for `meta_graphs[0].signature_def`),
/// and chunked fields with an empty tag (parts of the root itself). The root chunk is kept.
pub fn prune(root: &ChunkedMessage, keep: &[Vec<FieldIndex>]) -> ChunkedMessage {
    ChunkedMessage {
        chunk_index: root.chunk_index,
        chunked_fields: root
            .chunked_fields
            .iter()
            .filter(|cf| {
                cf.field_tag.is_empty()
                    || keep
                        .iter()
                        .any(|k| is_prefix(k, &cf.field_tag) || is_prefix(&cf.field_tag, k))
            })
            .cloned()
            .collect(),
    }
}

fn is_prefix(a: &[FieldIndex], b: &[FieldIndex]) -> bool {
    a.len() <= b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

/// Shorthand for building tag paths: `Field(n)` / `Index(i)`.
pub fn tag_field(n: u32) -> FieldIndex {
    FieldIndex {
        kind: Some(TagKind::Field(n)),
    }
}

/// A list-index tag.
pub fn tag_index(i: u64) -> FieldIndex {
    FieldIndex {
        kind: Some(TagKind::Index(i)),
    }
}
