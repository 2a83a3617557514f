//! The graph chunks of a `.cpb` that `show` leaves out of its merge (issue 29: memory follows
//! the command).
//!
//! `show` reports a graph as a few numbers and sets (node count, ops, functions, load order),
//! which a scan computes node by node ([`super::graph`]). Merged, the chunks holding a graph of
//! millions of nodes were held whole while the report was made: 1.5 GB for the 3M-node `.cpb`.
//! So the merge for `show` leaves the chunks of a graph and of its library where they are: the
//! [`Merger`](unbound_chunked::Merger) places, where a chunk's fields would go, one field
//! numbered [`UNMERGED`] holding a lazy reference to the chunk, and the graph's scan reads
//! each chunk where it stands, scans it and lets it go: memory holds a chunk or two at a time.
//!
//! The report must be the one the merged graph gives, and a merge is not only appending: a
//! chunk merged into the graph's `library` first merges every `library` the graph holds into
//! the first (`singular_message_mut`), those inside chunks merged before it included. So the
//! chunks of one graph are left only when the metadata shows a merge the scan can follow
//! ([`leavable`]): all of them, of any size (a graph chunk merged would put its library where
//! the scan does not expect it), nothing merged into them or below them but chunks of the
//! graph's `library`, and those after every chunk of the graph (TensorFlow's merge order puts
//! them there: shorter paths first). The scan then takes the functions of every `library` in
//! the graph's order, then those of the library's chunks (`graph.rs`), as the merge places
//! them. Any other layout is merged whole, as before.

use std::collections::HashSet;

use bytes::Bytes;
use prost_reflect::{Kind, MessageDescriptor};
use unbound_chunked::tags::sort_for_merge;
use unbound_chunked::{ChunkSource, FileChunks, Result};
use unbound_proto::fields::tensorflow::graph_def;
use unbound_proto::tensorflow::proto_splitter::field_index::Kind as TagKind;
use unbound_proto::tensorflow::proto_splitter::{ChunkedMessage, FieldIndex};
use unbound_wire::{Payload, WireField, WireMessage, WireValue};

/// The field number of a chunk left unmerged. Zero is no field number protobuf allows, so it
/// never comes from a file; it only ever appears in a message merged by [`LeavingGraphChunks`].
pub(crate) const UNMERGED: u32 = 0;

/// The message types whose chunks are left unmerged: a graph and its function library, the
/// two `show` scans rather than reads.
fn left_unmerged(desc: &MessageDescriptor) -> bool {
    matches!(
        desc.full_name(),
        "tensorflow.GraphDef" | "tensorflow.FunctionDefLibrary"
    )
}

/// One chunked field of a metadata tree, in the order the Merger applies it.
struct Applied {
    /// Its field tags from the root.
    path: Vec<FieldIndex>,
    chunk: Option<u64>,
    /// Whether chunked fields are nested in it (applied right after it).
    nested: bool,
}

/// The chunked fields of `cm` (below `prefix`) in the order the Merger applies them: each
/// followed by those nested in it. `None` when the tags do not sort (the Merger reports it).
fn applied_in_order(
    cm: &ChunkedMessage,
    prefix: &[FieldIndex],
    out: &mut Vec<Applied>,
) -> Option<()> {
    for cf in sort_for_merge(&cm.chunked_fields).ok()? {
        let path: Vec<FieldIndex> = prefix.iter().chain(&cf.field_tag).cloned().collect();
        let child = cf.message.as_ref();
        out.push(Applied {
            path: path.clone(),
            chunk: child.and_then(|c| c.chunk_index),
            nested: child.is_some_and(|c| !c.chunked_fields.is_empty()),
        });
        if let Some(child) = child {
            applied_in_order(child, &path, out)?;
        }
    }
    Some(())
}

/// The chunks of `tree` (the metadata of a message of type `root`) the scan can take where
/// they stand (see the module's documentation): for each path `P` of a graph some chunk
/// merges at, those at `P` and at `P` + `library` when every chunked field below `P` is one of
/// those, none has fields nested in it, and each at `P` + `library` comes after every one at
/// `P`; for each path of a library with no chunked field below it, those at it.
pub(crate) fn leavable(tree: &ChunkedMessage, root: &MessageDescriptor) -> HashSet<u64> {
    let mut applied = Vec::new();
    if applied_in_order(tree, &[], &mut applied).is_none() {
        return HashSet::new();
    }
    let library = FieldIndex {
        kind: Some(TagKind::Field(graph_def::LIBRARY)),
    };
    let mut leave = HashSet::new();
    let paths: HashSet<&[FieldIndex]> = applied.iter().map(|a| a.path.as_slice()).collect();
    for path in paths {
        let below = |a: &&Applied| a.path.len() > path.len() && a.path.starts_with(path);
        let at = |a: &&Applied| a.path == path;
        let last_at = applied.iter().rposition(|a| at(&a));
        let mut under = applied.iter().enumerate().filter(|(_, a)| below(a));
        let follows = match type_at(root, path).as_deref() {
            Some("tensorflow.GraphDef") => under.all(|(i, a)| {
                a.path.len() == path.len() + 1
                    && a.path[path.len()] == library
                    && !a.nested
                    && last_at.is_none_or(|last| i > last)
            }),
            Some("tensorflow.FunctionDefLibrary") => under.next().is_none(),
            _ => false,
        };
        if follows && applied.iter().filter(at).all(|a| !a.nested) {
            leave.extend(
                applied
                    .iter()
                    .filter(|a| at(a) || below(a))
                    .filter_map(|a| a.chunk),
            );
        }
    }
    leave
}

/// The message type at `path` (field tags from a message of type `root`): each field a
/// message field, an index after a repeated one, a map key after a map of messages; `None`
/// when the path leads elsewhere (a scalar, a map of scalars, a tag of the wrong kind).
fn type_at(root: &MessageDescriptor, path: &[FieldIndex]) -> Option<String> {
    let mut desc = root.clone();
    let mut tags = path.iter().peekable();
    while let Some(tag) = tags.next() {
        match &tag.kind {
            Some(TagKind::Field(number)) => {
                let field = desc.get_field(*number)?;
                let Kind::Message(sub) = field.kind() else {
                    return None;
                };
                desc = if field.is_map() {
                    // The entry's value, under its key.
                    tags.next()
                        .filter(|key| matches!(key.kind, Some(TagKind::MapKey(_))))?;
                    let Kind::Message(value) = sub.map_entry_value_field().kind() else {
                        return None;
                    };
                    value
                } else {
                    sub
                };
            }
            // An element of the repeated field just stepped into: the same type.
            Some(TagKind::Index(_)) => {}
            _ => return None,
        }
    }
    Some(desc.full_name().to_string())
}

/// `chunks`, merged as usual except that each chunk of `leave` merged into a `GraphDef` or a
/// `FunctionDefLibrary` becomes one [`UNMERGED`] field holding the chunk as a lazy payload.
pub(crate) struct LeavingGraphChunks<'a> {
    pub(crate) chunks: &'a FileChunks,
    pub(crate) leave: HashSet<u64>,
}

impl ChunkSource for LeavingGraphChunks<'_> {
    fn name(&self) -> &str {
        self.chunks.name()
    }
    fn len(&self) -> usize {
        self.chunks.len()
    }
    fn bytes(&self, index: u64) -> Result<Bytes> {
        self.chunks.bytes(index)
    }
    fn check_len(&self, index: u64, len: u64) -> Result<()> {
        self.chunks.check_len(index, len)
    }
    fn declared_size(&self, index: u64) -> Option<u64> {
        self.chunks.declared_size(index)
    }
    fn payload(&self, index: u64) -> Result<Payload> {
        self.chunks.payload(index)
    }
    fn streamed(&self, index: u64, desc: &MessageDescriptor) -> Option<Result<WireMessage>> {
        if self.leave.contains(&index) && left_unmerged(desc) {
            // Nothing of the chunk is read until the scan reads it (`read_later`).
            let payload = self.chunks.read_later(index);
            return Some(payload.map(|payload| WireMessage {
                fields: vec![WireField {
                    number: UNMERGED,
                    value: WireValue::Bytes(payload),
                }],
                descriptor: None,
            }));
        }
        self.chunks.streamed(index, desc)
    }
    fn built(&self, index: u64) -> Option<&WireMessage> {
        self.chunks.built(index)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::UNMERGED;
    use crate::dir::SavedModel;
    use crate::show::read::read_model_leaving;
    use crate::show::{show_parts, SavedModelInfo};
    use bytes::Bytes;
    use prost::Message;
    use std::collections::BTreeMap;
    use std::path::Path;
    use unbound_proto::fields::tensorflow::{graph_def, meta_graph_def};
    use unbound_proto::tensorflow::meta_graph_def::MetaInfoDef;
    use unbound_proto::tensorflow::proto_splitter::{chunk_info, ChunkInfo, ChunkMetadata};
    use unbound_proto::tensorflow::{
        attr_value, AttrValue, FunctionDef, FunctionDefLibrary, GraphDef, MetaGraphDef,
        NameAttrList, NodeDef, OpDef, SavedModel as SavedModelProto, VersionDef,
    };
    use unbound_records::Compression;
    use unbound_test_support::chunks::{chunked_field_at, field_tag, index_tag, write_cpb_with};
    use unbound_test_support::models::op_node;
    use unbound_wire::{WireMessage, WireValue};

    fn call(name: &str, op: &str, function: &str) -> NodeDef {
        NodeDef {
            name: name.into(),
            op: op.into(),
            attr: BTreeMap::from([(
                "f".to_string(),
                AttrValue {
                    value: Some(attr_value::Value::Func(NameAttrList {
                        name: function.into(),
                        ..Default::default()
                    })),
                },
            )]),
            ..Default::default()
        }
    }

    fn function(name: &str, nodes: Vec<NodeDef>) -> FunctionDef {
        FunctionDef {
            signature: Some(OpDef {
                name: name.into(),
                ..Default::default()
            }),
            node_def: nodes,
            ..Default::default()
        }
    }

    fn library(functions: Vec<FunctionDef>) -> FunctionDefLibrary {
        FunctionDefLibrary {
            function: functions,
            ..Default::default()
        }
    }

    fn versions(producer: i32) -> Option<VersionDef> {
        Some(VersionDef {
            producer,
            ..Default::default()
        })
    }

    /// How [`write_model`] lays the model out.
    #[derive(Clone, Copy, Debug, PartialEq)]
    pub(crate) enum Layout {
        /// Chunks of the graph and of its library, all left unmerged.
        Interleaved,
        /// The same, the graph in the base chunk without a library.
        BaseWithoutLibrary,
        /// The same and a chunk of the graph's `versions`: the graph's chunks merged.
        VersionsChunk,
        /// [`Layout::Interleaved`], a node name in the last graph chunk not UTF-8.
        BadNameInChunk,
    }

    /// A `.cpb` in `dir` whose graph is its base's nodes and chunks merged into the graph and
    /// into its library, interleaved: functions and `versions` come from several of them, so
    /// the report depends on the order the Merger places their fields in.
    pub(crate) fn write_model(
        dir: &Path,
        compression: Compression,
        layout: Layout,
        edit: impl FnOnce(&mut ChunkMetadata),
    ) {
        let base = SavedModelProto {
            saved_model_schema_version: 1,
            meta_graphs: vec![MetaGraphDef {
                meta_info_def: Some(MetaInfoDef {
                    tags: vec!["serve".into()],
                    ..Default::default()
                }),
                graph_def: Some(GraphDef {
                    node: vec![op_node("a", "AddV2", &[])],
                    library: (layout != Layout::BaseWithoutLibrary)
                        .then(|| library(vec![function("f0", vec![op_node("x", "Mul", &[])])])),
                    versions: versions(7),
                    ..Default::default()
                }),
                ..Default::default()
            }],
        };
        let graph_chunk = GraphDef {
            node: vec![
                op_node("b", "Sub", &[]),
                call("c", "StatefulPartitionedCall", "f2"),
            ],
            library: Some(library(vec![function(
                "f1",
                vec![op_node("y", "Relu", &[])],
            )])),
            versions: versions(9),
            ..Default::default()
        };
        let library_chunk = library(vec![function(
            "f2",
            vec![call("z", "PartitionedCall", "f1")],
        )]);
        let last_graph_chunk = GraphDef {
            node: vec![op_node("d", "Tanh", &[])],
            library: Some(library(vec![function("f3", vec![])])),
            ..Default::default()
        };
        let mut chunks: Vec<Bytes> = [
            base.encode_to_vec(),
            graph_chunk.encode_to_vec(),
            library_chunk.encode_to_vec(),
            {
                let mut bytes = last_graph_chunk.encode_to_vec();
                if layout == Layout::BadNameInChunk {
                    // Node "d"'s name: `0a 01 64` ("d") inside the node.
                    let at = bytes
                        .windows(3)
                        .position(|w| w == [0x0a, 0x01, b'd'])
                        .expect("the node's name");
                    bytes[at + 2] = 0xff;
                }
                bytes
            },
        ]
        .into_iter()
        .map(Bytes::from)
        .collect();
        if layout == Layout::VersionsChunk {
            chunks.push(Bytes::from(versions(11).unwrap().encode_to_vec()));
        }
        let graph_tags = vec![
            field_tag(2),
            index_tag(0),
            field_tag(meta_graph_def::GRAPH_DEF),
        ];
        let below = |number| {
            let mut tags = graph_tags.clone();
            tags.push(field_tag(number));
            tags
        };
        let mut chunked_fields = vec![
            chunked_field_at(graph_tags.clone(), 1),
            chunked_field_at(below(graph_def::LIBRARY), 2),
            chunked_field_at(graph_tags.clone(), 3),
        ];
        if layout == Layout::VersionsChunk {
            chunked_fields.push(chunked_field_at(below(graph_def::VERSIONS), 4));
        }
        let metadata = ChunkMetadata {
            chunks: chunks
                .iter()
                .map(|c| ChunkInfo {
                    r#type: chunk_info::Type::Message as i32,
                    size: c.len() as u64,
                    offset: 0,
                })
                .collect(),
            message: Some(unbound_proto::tensorflow::proto_splitter::ChunkedMessage {
                chunk_index: Some(0),
                chunked_fields,
            }),
            ..Default::default()
        };
        let file = write_cpb_with(&chunks, metadata, compression, 1, edit);
        std::fs::write(dir.join("saved_model.cpb"), file).unwrap();
    }

    fn show_leaving(dir: &Path, leave: bool) -> crate::Result<SavedModelInfo> {
        let model = SavedModel::open(dir)?;
        show_parts(dir, read_model_leaving(&model, leave)?, None)
    }

    /// The fields numbered [`UNMERGED`] in the graph of the first meta graph, and in its
    /// libraries.
    fn unmerged_fields(dir: &Path) -> (usize, usize) {
        let model = SavedModel::open(dir).unwrap();
        let parts = read_model_leaving(&model, true).unwrap();
        let graph = parts.meta_graphs[0]
            .fields
            .iter()
            .find_map(|f| match (f.number, &f.value) {
                (meta_graph_def::GRAPH_DEF, WireValue::Message(g)) => Some(g.clone()),
                _ => None,
            })
            .expect("a graph merged into");
        let count = |m: &WireMessage| m.fields.iter().filter(|f| f.number == UNMERGED).count();
        let in_libraries = graph
            .fields
            .iter()
            .filter_map(|f| match (f.number, &f.value) {
                (graph_def::LIBRARY, WireValue::Message(l)) => Some(count(l)),
                _ => None,
            })
            .sum();
        (count(&graph), in_libraries)
    }

    #[test]
    fn a_graph_scanned_chunk_by_chunk_reports_what_the_merged_graph_reports() {
        // Layout, chunks left unmerged (in the graph, in its libraries), functions, producer.
        type Expected = (Layout, (usize, usize), &'static [&'static str], i64);
        let cases: [Expected; 3] = [
            (Layout::Interleaved, (2, 1), &["f0", "f1", "f3", "f2"], 9),
            (Layout::BaseWithoutLibrary, (2, 1), &["f1", "f3", "f2"], 9),
            // The graph's chunks merged (a chunk merges into its `versions`), the library's
            // still left: nothing merges into it.
            (Layout::VersionsChunk, (0, 1), &["f0", "f1", "f3", "f2"], 11),
        ];
        for (layout, left_fields, functions, producer) in cases {
            for compression in [Compression::None, Compression::Zstd { level: 1 }] {
                let dir = tempfile::tempdir().unwrap();
                write_model(dir.path(), compression, layout, |_| {});
                assert_eq!(unmerged_fields(dir.path()), left_fields, "{layout:?}");

                let left = show_leaving(dir.path(), true).unwrap();
                let merged = show_leaving(dir.path(), false).unwrap();
                assert_eq!(
                    serde_json::to_string(&left).unwrap(),
                    serde_json::to_string(&merged).unwrap(),
                    "{layout:?} {compression:?}"
                );
                // What the Merger's placement gives: the chunk of the library after every
                // function the graph's libraries hold (its merge gathers them into the first).
                let mg = &left.meta_graphs[0];
                assert_eq!(mg.graph_nodes, 4, "{layout:?}");
                assert_eq!(mg.graph_producer, producer, "{layout:?}");
                assert_eq!(mg.library_functions, functions, "{layout:?}");
                assert_eq!(
                    mg.ops,
                    [
                        "AddV2",
                        "PartitionedCall",
                        "Relu",
                        "StatefulPartitionedCall",
                        "Sub",
                        "Tanh"
                    ],
                    "{layout:?}"
                );
            }
        }
    }

    #[test]
    fn a_chunk_left_unmerged_is_checked_when_it_is_read() {
        let dir = tempfile::tempdir().unwrap();
        // Chunk 1 declares a byte more than its record holds.
        write_model(
            dir.path(),
            Compression::Zstd { level: 1 },
            Layout::Interleaved,
            |m: &mut ChunkMetadata| m.chunks[1].size += 1,
        );
        let error = show_leaving(dir.path(), true).unwrap_err().to_string();
        let whole = show_leaving(dir.path(), false).unwrap_err().to_string();
        assert!(error.contains("chunk 1"), "{error}");
        assert_eq!(error, whole);
    }
}
