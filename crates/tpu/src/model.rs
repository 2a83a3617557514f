//! The SavedModel as a lossless wire message, and the few edits this crate makes to it:
//! reading and setting a MetaGraphDef's tags and stripped op list, decoding its graph's nodes
//! and functions one by one, and splicing changed or new nodes and functions back in.
//!
//! Nothing is decoded wholesale: each node and function is decoded from its own slice of the
//! input (prost's `Bytes` decoding slices, so a constant's `tensor_content` stays a view of the
//! mapped file), and what the rewrite did not change is written back from the original bytes.
//! A copy of a MetaGraphDef (for a second tag-set) shares every unchanged byte with the first.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use prost::Message;
use prost_reflect::FieldDescriptor;
use unbound_proto::fields::tensorflow::{
    function_def_library, graph_def, meta_graph_def, saved_model,
};
use unbound_proto::tensorflow::{FunctionDef, MetaGraphDef, NodeDef, OpList};
use unbound_records::WriterOptions;
use unbound_savedmodel::dir::{message_descriptor, read_saved_model};
use unbound_savedmodel::split::MetaGraphSplitting;
use unbound_savedmodel::verify::verified_model;
use unbound_savedmodel::write::{write_model_dir, SplitReport, WriteOptions};
use unbound_savedmodel::{SavedModel, SavedModelError};
use unbound_wire::{Payload, WireField, WireMessage, WireValue};

use crate::error::{Result, TpuError};

const INFO: u32 = meta_graph_def::META_INFO_DEF;
const TAGS: u32 = meta_graph_def::meta_info_def::TAGS;
const STRIPPED_OP_LIST: u32 = meta_graph_def::meta_info_def::STRIPPED_OP_LIST;

/// A SavedModel read from a directory, kept at the wire level.
pub struct Model {
    /// The directory it was read from.
    pub dir: PathBuf,
    /// Its MetaGraphDefs, in order, as wire messages.
    pub meta_graphs: Vec<WireMessage>,
    /// The SavedModel's other fields (schema version, unknown fields), in order.
    rest: Vec<WireField>,
}

impl Model {
    /// Reads the SavedModel in `dir` (`.cpb`, `.pb` or `.pbtxt`), for a report (listing its
    /// tag-sets or functions). A model to be written again is opened with [`Self::open_verified`].
    pub fn open(dir: &Path) -> Result<Self> {
        Self::from_message(dir, read_saved_model(dir)?.message)
    }

    /// Reads the SavedModel in `dir` only when `verify` finds nothing wrong anywhere in the
    /// directory ([`unbound_savedmodel::verify::verified_model`]): the rule of every command
    /// that writes a model (`split`, `merge`, `optimize`, `tags`, `export-tpu`), so a damaged
    /// model (strings that are not UTF-8, a broken `variables/`) is refused rather than written
    /// out as broken. The model is read once, by the verification.
    pub fn open_verified(dir: &Path) -> Result<Self> {
        let opened = SavedModel::open(dir)?;
        Self::from_message(dir, verified_model(&opened)?)
    }

    /// The model `message` read from `dir`, split into its MetaGraphDefs and the rest.
    fn from_message(dir: &Path, message: WireMessage) -> Result<Self> {
        let meta_desc = message_descriptor("tensorflow.MetaGraphDef")?;
        let mut meta_graphs = Vec::new();
        let mut rest = Vec::new();
        for field in message.fields {
            if field.number != saved_model::META_GRAPHS {
                rest.push(field);
                continue;
            }
            let index = meta_graphs.len();
            let meta = match field.value {
                WireValue::Message(mut m) => {
                    m.descriptor = Some(meta_desc.clone());
                    m
                }
                WireValue::Bytes(payload) => {
                    let bytes = payload.bytes().map_err(SavedModelError::from)?;
                    WireMessage::parse(&bytes, Some(meta_desc.clone())).map_err(|e| {
                        decode_error(dir, &format!("meta_graphs[{index}]"), e.to_string())
                    })?
                }
                _ => {
                    return Err(decode_error(
                        dir,
                        &format!("meta_graphs[{index}]"),
                        "a scalar where a MetaGraphDef was expected".to_string(),
                    ))
                }
            };
            meta_graphs.push(meta);
        }
        Ok(Self {
            dir: dir.to_path_buf(),
            meta_graphs,
            rest,
        })
    }

    /// The tags of every MetaGraphDef, in order.
    pub fn tag_sets(&self) -> Result<Vec<Vec<String>>> {
        (0..self.meta_graphs.len()).map(|i| self.tags(i)).collect()
    }

    /// The tags of MetaGraphDef `index`.
    pub fn tags(&self, index: usize) -> Result<Vec<String>> {
        let part = format!("meta_graphs[{index}].meta_info_def.tags");
        let mut tags = Vec::new();
        for info in submessages(&self.meta_graphs[index], INFO) {
            let info = self.parse(info, &part)?;
            for field in info.fields.iter().filter(|f| f.number == TAGS && is_len(f)) {
                let bytes = self.payload(&field.value, &part)?;
                let tag = String::from_utf8(bytes.to_vec())
                    .map_err(|_| decode_error(&self.dir, &part, "a tag is not UTF-8".into()))?;
                tags.push(tag);
            }
        }
        Ok(tags)
    }

    /// Replaces the tags of `meta` (a MetaGraphDef wire message).
    pub fn set_tags(meta: &mut WireMessage, tags: &[String]) -> Result<()> {
        let info = meta_info_mut(meta)?;
        info.fields.retain(|f| f.number != TAGS);
        for tag in tags {
            info.fields.push(WireField {
                number: TAGS,
                value: WireValue::Bytes(Payload::Inline(Bytes::from(tag.clone().into_bytes()))),
            });
        }
        Ok(())
    }

    /// Replaces the stripped op list of `meta`.
    pub fn set_stripped_op_list(meta: &mut WireMessage, ops: &OpList) -> Result<()> {
        let info = meta_info_mut(meta)?;
        let at = info
            .fields
            .iter()
            .position(|f| f.number == STRIPPED_OP_LIST)
            .unwrap_or(info.fields.len());
        info.fields.retain(|f| f.number != STRIPPED_OP_LIST);
        info.fields.insert(
            at.min(info.fields.len()),
            WireField {
                number: STRIPPED_OP_LIST,
                value: WireValue::Bytes(Payload::Inline(Bytes::from(ops.encode_to_vec()))),
            },
        );
        Ok(())
    }

    /// MetaGraphDef `index` decoded without its graph (signatures, object graph, meta info,
    /// collections, saver, assets), plus its graph's nodes and functions decoded one by one.
    pub fn decode(&self, index: usize) -> Result<DecodedMeta> {
        let meta = &self.meta_graphs[index];
        let mut rest = WireMessage::new(meta.descriptor.clone());
        rest.fields = meta
            .fields
            .iter()
            .filter(|f| f.number != meta_graph_def::GRAPH_DEF)
            .cloned()
            .collect();
        let part = format!("meta_graphs[{index}]");
        let bytes = rest.to_vec().map_err(SavedModelError::from)?;
        let info =
            unbound_wire::decode_lenient::<MetaGraphDef>(bytes, unbound_proto::descriptor_pool())
                .map_err(|e| decode_error(&self.dir, &part, e.to_string()))?;
        let mut nodes = Vec::new();
        let mut functions = Vec::new();
        for graph in submessages(meta, meta_graph_def::GRAPH_DEF) {
            let graph = self.parse(graph, &format!("{part}.graph_def"))?;
            // An occurrence of another wire type is an unknown field to protobuf C++.
            for field in graph.fields.iter().filter(|f| is_len(f)) {
                match field.number {
                    graph_def::NODE => {
                        let p = format!("{part}.graph_def.node[{}]", nodes.len());
                        nodes.push(
                            unbound_wire::decode_lenient::<NodeDef>(
                                self.payload(&field.value, &p)?,
                                unbound_proto::descriptor_pool(),
                            )
                            .map_err(|e| decode_error(&self.dir, &p, e.to_string()))?,
                        );
                    }
                    graph_def::LIBRARY => {
                        let library = self.parse(&field.value, &format!("{part}.library"))?;
                        for f in library
                            .fields
                            .iter()
                            .filter(|f| f.number == function_def_library::FUNCTION && is_len(f))
                        {
                            let p =
                                format!("{part}.graph_def.library.function[{}]", functions.len());
                            functions.push(
                                unbound_wire::decode_lenient::<FunctionDef>(
                                    self.payload(&f.value, &p)?,
                                    unbound_proto::descriptor_pool(),
                                )
                                .map_err(|e| decode_error(&self.dir, &p, e.to_string()))?,
                            );
                        }
                    }
                    _ => {}
                }
            }
        }
        Ok(DecodedMeta {
            info,
            graph: Graph::new(nodes, functions),
        })
    }

    /// A copy of MetaGraphDef `index` whose graph has `graph`'s changes spliced in. Unchanged
    /// nodes and functions keep their original bytes.
    pub fn with_graph(&self, index: usize, graph: &Graph) -> Result<WireMessage> {
        let mut meta = self.meta_graphs[index].clone();
        let graph_desc = message_descriptor("tensorflow.GraphDef")?;
        let library_desc = message_descriptor("tensorflow.FunctionDefLibrary")?;
        // Coalesce the graph into one expanded message.
        let graph_fd = meta_desc_field(meta_graph_def::GRAPH_DEF)?;
        let wire_graph = meta
            .singular_message_mut(&graph_fd)
            .map_err(SavedModelError::from)?;
        wire_graph.descriptor = Some(graph_desc.clone());
        let mut node_index = 0;
        let mut fields = Vec::with_capacity(wire_graph.fields.len());
        for field in std::mem::take(&mut wire_graph.fields) {
            if field.number != graph_def::NODE || !is_len(&field) {
                fields.push(field);
                continue;
            }
            let i = node_index;
            node_index += 1;
            if graph.removed_nodes.contains(&i) {
                continue;
            }
            if graph.changed_nodes.contains(&i) {
                fields.push(encoded(graph_def::NODE, &graph.nodes[i]));
            } else {
                fields.push(field);
            }
        }
        for node in &graph.nodes[graph.original_nodes..] {
            fields.push(encoded(graph_def::NODE, node));
        }
        wire_graph.fields = fields;
        let library_fd = graph_desc
            .get_field(graph_def::LIBRARY)
            .ok_or_else(|| schema_error("tensorflow.GraphDef", "library"))?;
        let library = wire_graph
            .singular_message_mut(&library_fd)
            .map_err(SavedModelError::from)?;
        library.descriptor = Some(library_desc);
        let mut function_index = 0;
        for field in library.fields.iter_mut() {
            if field.number != function_def_library::FUNCTION || !is_len(field) {
                continue;
            }
            if graph.changed_functions.contains(&function_index) {
                *field = encoded(
                    function_def_library::FUNCTION,
                    &graph.functions[function_index],
                );
            }
            function_index += 1;
        }
        for function in &graph.functions[graph.original_functions..] {
            library
                .fields
                .push(encoded(function_def_library::FUNCTION, function));
        }
        Ok(meta)
    }

    /// Writes the model, with `meta_graphs` as its MetaGraphDefs, to `out` (which must not
    /// exist): split into `saved_model.cpb` when it reaches `max_size`, every other file of the
    /// source directory carried over, a fresh fingerprint, atomically.
    ///
    /// Every MetaGraphDef's graph is split, not only the first one's as TensorFlow's algorithm
    /// does ([`MetaGraphSplitting::Every`]): a model that holds one large graph under two
    /// tag-sets (`{serve}` and `{serve, tpu}`, or a duplicated tag-set) then has both copies cut
    /// into chunks alike, and the root chunk keeps a graph (or what is left of one) only while
    /// it stays under `max_size`, so each MetaGraphDef may be past 2 GiB (a chunk protobuf could
    /// still not parse is refused before writing). A model of one MetaGraphDef is split
    /// exactly as TensorFlow splits it.
    ///
    /// Consumes the model: once the written message is dropped nothing refers to the mapped
    /// input any more (callers drop their decoded graphs first), so its pages are not held
    /// while the output is read back for the fingerprint.
    pub fn write(
        self,
        meta_graphs: Vec<WireMessage>,
        out: &Path,
        max_size: u64,
        options: WriterOptions,
    ) -> Result<SplitReport> {
        let Model {
            dir,
            rest,
            meta_graphs: originals,
        } = self;
        drop(originals);
        let desc = message_descriptor("tensorflow.SavedModel")?;
        let mut message = WireMessage::new(Some(desc));
        message.fields = rest;
        for meta in meta_graphs {
            message.fields.push(WireField {
                number: saved_model::META_GRAPHS,
                value: WireValue::Message(meta),
            });
        }
        Ok(write_model_dir(
            &dir,
            out,
            message,
            &WriteOptions::default()
                .with_max_size(max_size)
                .with_writer(options)
                .with_splitting(MetaGraphSplitting::Every),
        )?)
    }

    /// A field's bytes (reading a lazy record).
    fn payload(&self, value: &WireValue, part: &str) -> Result<Bytes> {
        match value {
            WireValue::Bytes(p) => Ok(p.bytes().map_err(SavedModelError::from)?),
            WireValue::Message(m) => Ok(Bytes::from(m.to_vec().map_err(SavedModelError::from)?)),
            _ => Err(decode_error(
                &self.dir,
                part,
                "a scalar where a message was expected".into(),
            )),
        }
    }

    /// A field's value as a wire message, one level parsed.
    fn parse(&self, value: &WireValue, part: &str) -> Result<WireMessage> {
        match value {
            WireValue::Message(m) => Ok(m.clone()),
            other => {
                let bytes = self.payload(other, part)?;
                WireMessage::parse(&bytes, None)
                    .map_err(|e| decode_error(&self.dir, part, e.to_string()))
            }
        }
    }
}

/// A MetaGraphDef decoded for rewriting: everything but the graph as prost types, the graph
/// as its nodes and functions.
pub struct DecodedMeta {
    /// The MetaGraphDef without `graph_def`.
    pub info: MetaGraphDef,
    /// Its graph's nodes and functions.
    pub graph: Graph,
}

/// A graph's nodes and library functions, with a record of what a rewrite changed: nodes and
/// functions past the original counts are new; the others are written back from their
/// original bytes unless marked changed (or, for nodes, removed).
#[derive(Debug, Clone, Default)]
pub struct Graph {
    /// The top-level nodes.
    pub nodes: Vec<NodeDef>,
    /// The library's functions.
    pub functions: Vec<FunctionDef>,
    original_nodes: usize,
    original_functions: usize,
    changed_nodes: BTreeSet<usize>,
    removed_nodes: BTreeSet<usize>,
    changed_functions: BTreeSet<usize>,
}

impl Graph {
    /// A graph of these nodes and functions, nothing changed yet.
    pub fn new(nodes: Vec<NodeDef>, functions: Vec<FunctionDef>) -> Self {
        Self {
            original_nodes: nodes.len(),
            original_functions: functions.len(),
            nodes,
            functions,
            ..Self::default()
        }
    }

    /// Marks node `index` changed.
    pub fn touch_node(&mut self, index: usize) {
        if index < self.original_nodes {
            self.changed_nodes.insert(index);
        }
    }

    /// Marks node `index` removed (it stays in `nodes`, and is not written).
    pub fn remove_node(&mut self, index: usize) {
        if index < self.original_nodes {
            self.removed_nodes.insert(index);
        } else {
            self.nodes[index].name.clear();
        }
    }

    /// Whether node `index` is removed.
    pub fn is_removed(&self, index: usize) -> bool {
        self.removed_nodes.contains(&index)
            || (index >= self.original_nodes && self.nodes[index].name.is_empty())
    }

    /// Marks function `index` changed.
    pub fn touch_function(&mut self, index: usize) {
        if index < self.original_functions {
            self.changed_functions.insert(index);
        }
    }

    /// The nodes that are written (not removed).
    pub fn live_nodes(&self) -> impl Iterator<Item = &NodeDef> {
        self.nodes
            .iter()
            .enumerate()
            .filter(|(i, _)| !self.is_removed(*i))
            .map(|(_, n)| n)
    }

    /// How many nodes were added, changed and removed, and functions added and changed.
    pub fn change_counts(&self) -> (usize, usize, usize, usize, usize) {
        (
            self.nodes.len() - self.original_nodes,
            self.changed_nodes.len(),
            self.removed_nodes.len(),
            self.functions.len() - self.original_functions,
            self.changed_functions.len(),
        )
    }
}

/// The expanded `meta_info_def` of a MetaGraphDef wire message, created if absent.
fn meta_info_mut(meta: &mut WireMessage) -> Result<&mut WireMessage> {
    let fd = meta_desc_field(INFO)?;
    let info = meta
        .singular_message_mut(&fd)
        .map_err(SavedModelError::from)?;
    Ok(info)
}

/// Field `number` of the MetaGraphDef schema.
fn meta_desc_field(number: u32) -> Result<FieldDescriptor> {
    let desc = message_descriptor("tensorflow.MetaGraphDef")?;
    desc.get_field(number)
        .ok_or_else(|| schema_error("tensorflow.MetaGraphDef", &number.to_string()))
}

/// The values of every length-delimited occurrence of field `number` (an occurrence of another
/// wire type is an unknown field to protobuf C++).
fn submessages(message: &WireMessage, number: u32) -> impl Iterator<Item = &WireValue> {
    message
        .fields
        .iter()
        .filter(move |f| f.number == number && is_len(f))
        .map(|f| &f.value)
}

/// Whether `field` is length-delimited: a message field's (or string's) own wire type. An
/// occurrence of another wire type is an unknown field to protobuf C++, never an element.
fn is_len(field: &WireField) -> bool {
    matches!(field.value, WireValue::Bytes(_) | WireValue::Message(_))
}

/// `message` encoded as an occurrence of field `number`.
fn encoded(number: u32, message: &impl Message) -> WireField {
    WireField {
        number,
        value: WireValue::Bytes(Payload::Inline(Bytes::from(message.encode_to_vec()))),
    }
}

fn decode_error(dir: &Path, part: &str, fault: String) -> TpuError {
    TpuError::Decode {
        dir: dir.to_path_buf(),
        part: part.to_string(),
        fault,
    }
}

fn schema_error(message: &str, field: &str) -> TpuError {
    TpuError::Model(SavedModelError::from(unbound_wire::WireError::Schema {
        message: message.to_string(),
        fault: format!("no field {field}"),
    }))
}
