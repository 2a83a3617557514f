//! Splitting every MetaGraphDef's graph: an opt-in layout beyond TensorFlow's algorithm, for
//! SavedModels that hold the same large graph under several tag-sets (a `{serve}` and a
//! `{serve, tpu}` MetaGraphDef, as `unbound export-tpu` writes them).
//!
//! TensorFlow's `SavedModelSplitter` splits only `meta_graphs[0].graph_def`; any later
//! MetaGraphDef stays whole in the root chunk, which then holds a second copy of the graph
//! (compressed as one record, and unreadable past protobuf's 2 GiB limit). Here each
//! MetaGraphDef's graph in turn goes through the same GraphDef splitting
//! ([`split_graph_def`]) while the model is still at least the maximum, and then, while it
//! still is, each remaining graph moves whole into a chunk of its own, the last MetaGraphDef's
//! first (so the first one's graph, which fingerprints hash, stays in the root chunk when it
//! can, as in TensorFlow's layout). For a model of one MetaGraphDef this is exactly
//! [`super::split_saved_model`] (same chunks, same bytes).
//!
//! TensorFlow's Merger reads the result like any other `.cpb`: it follows each chunked
//! field's path, whatever MetaGraphDef it names.

use bytes::Bytes;
use prost_reflect::MessageDescriptor;
use unbound_chunked::{Chunk, ChunkSink, PathElem, SplitOutput};
use unbound_wire::{navigate::message_type, Payload, WireMessage, WireValue};

use super::{field, split_graph_def, split_saved_model, SplitContext};
use crate::Result;

/// Which MetaGraphDefs' graphs a SavedModel split splits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MetaGraphSplitting {
    /// Only the first MetaGraphDef's graph, as TensorFlow does ([`split_saved_model`]): the
    /// default, byte-identical to TensorFlow's output.
    #[default]
    First,
    /// Every MetaGraphDef's graph ([`split_every_meta_graph`]).
    Every,
}

/// Splits a `tensorflow.SavedModel` as `splitting` says.
pub fn split_saved_model_with(
    model: WireMessage,
    desc: &MessageDescriptor,
    ctx: &mut SplitContext,
    splitting: MetaGraphSplitting,
) -> Result<SplitOutput> {
    let sources = parsed_from(&model);
    let split = match splitting {
        MetaGraphSplitting::First => split_saved_model(model, desc, ctx),
        MetaGraphSplitting::Every => split_every_meta_graph(model, desc, ctx),
    }?;
    Ok(split.within(sources))
}

/// Most buffers [`parsed_from`] returns (each field of a chunk is looked up in each).
const MAX_SOURCES: usize = 4;

/// The largest buffers `model`'s top-level fields are held in (its meta graphs, as parsed
/// from a file): whatever the split leaves of them as it was is written and hashed from
/// there, not copied ([`SplitOutput::sources`]).
fn parsed_from(model: &WireMessage) -> Vec<Bytes> {
    let mut held: Vec<Bytes> = model
        .fields
        .iter()
        .filter_map(|f| match &f.value {
            WireValue::Bytes(Payload::Inline(b)) => Some(b.clone()),
            _ => None,
        })
        .collect();
    held.sort_by_key(|b| std::cmp::Reverse(b.len()));
    held.truncate(MAX_SOURCES);
    held
}

/// Splits a `tensorflow.SavedModel` with every MetaGraphDef's `graph_def` split as TensorFlow
/// splits the first one's (see the module documentation for the order).
pub fn split_every_meta_graph(
    mut model: WireMessage,
    desc: &MessageDescriptor,
    ctx: &mut SplitContext,
) -> Result<SplitOutput> {
    let mut sink = ChunkSink::new(desc.clone(), true);
    let meta_graphs_fd = field(desc, "meta_graphs")?;
    let meta_desc = message_type(&meta_graphs_fd)?;
    let graph_fd = field(&meta_desc, "graph_def")?;
    let graph_desc = message_type(&graph_fd)?;
    let count = model.message_positions(meta_graphs_fd.number()).len();
    let graph_path = |index: usize| {
        [
            PathElem::from("meta_graphs"),
            PathElem::Index(index as u64),
            PathElem::from("graph_def"),
        ]
    };
    for index in 0..count {
        if model.encoded_len() < ctx.max_size {
            break;
        }
        let meta = model.repeated_message_mut(&meta_graphs_fd, index as u64)?;
        if meta.message_positions(graph_fd.number()).is_empty() {
            continue;
        }
        let graph = meta.singular_message_mut(&graph_fd)?;
        let mut root = sink.root();
        let mut scope = root.child(&graph_path(index));
        split_graph_def(graph, &graph_desc, &mut scope, ctx)?;
    }
    // Last MetaGraphDef first: the first one's graph, which fingerprinting reads (TensorFlow's
    // `CreateFingerprintDef` hashes `meta_graphs[0]`) and loaders usually want, stays in the
    // root chunk as long as the others' can make room for it, as with TensorFlow's layout.
    let mut moved = 0;
    for index in (0..count).rev() {
        if model.encoded_len() < ctx.max_size {
            break;
        }
        let meta = model.repeated_message_mut(&meta_graphs_fd, index as u64)?;
        if meta.message_positions(graph_fd.number()).is_empty() {
            continue;
        }
        let mut graph = std::mem::take(meta.singular_message_mut(&graph_fd)?);
        meta.fields.retain(|f| f.number != graph_fd.number());
        graph.descriptor = Some(graph_desc.clone());
        // Right after the root, as TensorFlow places the first graph's chunk; each later move
        // (of an earlier MetaGraphDef) comes after the ones before it.
        moved += 1;
        sink.add_chunk(Chunk::Message(graph), &graph_path(index), Some(moved))?;
    }
    Ok(sink.finish(model))
}

/// The first message chunk of `split` (the root included) larger than `limit` bytes: its
/// position in the file and its size. With `limit` = [`crate::format::MAX_PROTO_SIZE`], a chunk
/// protobuf cannot parse (bytes chunks are not parsed, so their size is not checked). `None`
/// when there is none.
pub fn message_chunk_over(split: &SplitOutput, limit: u64) -> Option<(usize, u64)> {
    split
        .chunks
        .iter()
        .enumerate()
        .filter(|(_, c)| matches!(c, Chunk::Message(_) | Chunk::SerializedMessage(_)))
        .map(|(i, c)| (i, c.len()))
        .find(|&(_, len)| len > limit)
}
