//! `GraphDefSplitter`.

use prost_reflect::MessageDescriptor;
use unbound_chunked::{Chunk, PathElem, Scope};

use crate::Result;
use unbound_wire::{navigate::message_type, WireMessage};

use super::nodes::{constant_splitter, function_splitter, large_message_splitter};
use super::repeated::{split_repeated, ElementSplitter};
use super::{field, SplitContext};

/// Splits `graph` (a `tensorflow.GraphDef` of type `desc`) in place, adding chunks through
/// `scope` (which is at the graph). Nodes and library functions are split, the larger section
/// first; if the graph is still above the maximum, the whole library becomes a chunk inserted
/// at index 1.
pub fn split_graph_def(
    graph: &mut WireMessage,
    desc: &MessageDescriptor,
    scope: &mut Scope<'_>,
    ctx: &mut SplitContext,
) -> Result<()> {
    let proto_size = graph.encoded_len() as i64;
    let max = ctx.max_size as i64;
    if proto_size < max {
        return Ok(());
    }
    let library_fd = field(desc, "library")?;
    let library_desc = message_type(&library_fd)?;
    let has_library = !graph.message_positions(library_fd.number()).is_empty();
    let mut library_size = if has_library {
        graph.singular_message_mut(&library_fd)?.encoded_len() as i64
    } else {
        0
    };
    let mut approx_node_size = proto_size - library_size;

    let node_splitters: [ElementSplitter; 2] = [constant_splitter, large_message_splitter];
    let function_splitters: [ElementSplitter; 1] = [function_splitter];

    let split_nodes = |graph: &mut WireMessage, scope: &mut Scope<'_>, ctx: &mut SplitContext| {
        split_repeated(graph, desc, "node", &node_splitters, scope, ctx)
    };
    let split_functions =
        |graph: &mut WireMessage, scope: &mut Scope<'_>, ctx: &mut SplitContext| {
            if !has_library {
                return Ok(0);
            }
            let library = graph.singular_message_mut(&library_fd)?;
            let mut child = scope.child(&[PathElem::from("library")]);
            split_repeated(
                library,
                &library_desc,
                "function",
                &function_splitters,
                &mut child,
                ctx,
            )
        };

    if library_size > approx_node_size {
        library_size -= split_functions(graph, scope, ctx)?;
        if library_size + approx_node_size > max {
            split_nodes(graph, scope, ctx)?;
        }
    } else {
        approx_node_size -= split_nodes(graph, scope, ctx)?;
        if library_size + approx_node_size > max {
            split_functions(graph, scope, ctx)?;
        }
    }

    if graph.encoded_len() > ctx.max_size && has_library {
        let library = std::mem::take(graph.singular_message_mut(&library_fd)?);
        graph.fields.retain(|f| f.number != library_fd.number());
        let mut library = library;
        library.descriptor = Some(library_desc);
        scope.add_chunk(
            Chunk::Message(library),
            &[PathElem::from("library")],
            Some(1),
        )?;
    }
    Ok(())
}
