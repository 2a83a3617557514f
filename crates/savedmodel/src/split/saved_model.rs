//! `SavedModelSplitter`.

use prost_reflect::MessageDescriptor;
use unbound_chunked::{Chunk, ChunkSink, PathElem, SplitOutput};

use crate::Result;
use unbound_wire::{navigate::message_type, WireMessage};

use super::{field, split_graph_def, SplitContext};

/// Splits a `tensorflow.SavedModel`: when it is at least the maximum, the GraphDef of its first
/// MetaGraph is split; if the model is still at least the maximum, that whole GraphDef becomes a
/// chunk inserted at index 1.
pub fn split_saved_model(
    mut model: WireMessage,
    desc: &MessageDescriptor,
    ctx: &mut SplitContext,
) -> Result<SplitOutput> {
    let mut sink = ChunkSink::new(desc.clone(), true);
    if model.encoded_len() >= ctx.max_size {
        let meta_graphs_fd = field(desc, "meta_graphs")?;
        let meta_desc = message_type(&meta_graphs_fd)?;
        let graph_fd = field(&meta_desc, "graph_def")?;
        let graph_desc = message_type(&graph_fd)?;
        if !model.message_positions(meta_graphs_fd.number()).is_empty() {
            let path = [
                PathElem::from("meta_graphs"),
                PathElem::Index(0),
                PathElem::from("graph_def"),
            ];
            {
                let meta = model.repeated_message_mut(&meta_graphs_fd, 0)?;
                if !meta.message_positions(graph_fd.number()).is_empty() {
                    let graph = meta.singular_message_mut(&graph_fd)?;
                    let mut root = sink.root();
                    let mut scope = root.child(&path);
                    split_graph_def(graph, &graph_desc, &mut scope, ctx)?;
                }
            }
            if model.encoded_len() >= ctx.max_size {
                let meta = model.repeated_message_mut(&meta_graphs_fd, 0)?;
                if !meta.message_positions(graph_fd.number()).is_empty() {
                    let mut graph = std::mem::take(meta.singular_message_mut(&graph_fd)?);
                    meta.fields.retain(|f| f.number != graph_fd.number());
                    graph.descriptor = Some(graph_desc);
                    sink.add_chunk(Chunk::Message(graph), &path, Some(1))?;
                }
            }
        }
    }
    Ok(sink.finish(model))
}

/// Splits a standalone `tensorflow.GraphDef` (a frozen graph) the same way.
pub fn split_graph_def_root(
    mut graph: WireMessage,
    desc: &MessageDescriptor,
    ctx: &mut SplitContext,
) -> Result<SplitOutput> {
    let mut sink = ChunkSink::new(desc.clone(), true);
    {
        let mut scope = sink.root();
        split_graph_def(&mut graph, desc, &mut scope, ctx)?;
    }
    Ok(sink.finish(graph))
}

/// Splits a message of any type with the algorithm `unbound proto split` uses for it:
/// TensorFlow's SavedModel and GraphDef splitters for `tensorflow.SavedModel` and
/// `tensorflow.GraphDef`, unbound's generic algorithm ([`unbound_chunked::generic`]) for every
/// other type.
pub fn split_message(
    mut message: WireMessage,
    desc: &MessageDescriptor,
    ctx: &mut SplitContext,
) -> Result<SplitOutput> {
    match desc.full_name() {
        "tensorflow.SavedModel" => split_saved_model(message, desc, ctx),
        "tensorflow.GraphDef" => split_graph_def_root(message, desc, ctx),
        _ => {
            let mut sink = ChunkSink::new(desc.clone(), true);
            unbound_chunked::generic::split_generic(
                &mut message,
                desc,
                &mut sink.root(),
                ctx.max_size,
            )?;
            Ok(sink.finish(message))
        }
    }
}
