//! `unbound optimize`: run the plugins over every MetaGraphDef of a SavedModel directory and
//! write the optimized copy (split when large, every other file carried over, atomically).

use std::path::Path;

use bytes::Bytes;
use prost::Message;
use unbound_chunked::ChunkedError;
use unbound_proto::tensorflow::MetaGraphDef;
use unbound_records::WriterOptions;
use unbound_savedmodel::dir::{message_descriptor, read_saved_model, write_model_dir, SplitReport};
use unbound_wire::WireMessage;

use crate::host::{PassReport, PluginSet};

/// What optimizing a SavedModel did.
#[derive(Debug)]
pub struct OptimizeReport {
    /// One pass report per MetaGraphDef, with its tags.
    pub passes: Vec<(Vec<String>, PassReport)>,
    /// What writing the output did.
    pub written: SplitReport,
}

/// Reads the SavedModel in `src`, runs `plugins` on each MetaGraphDef's graph and functions,
/// and writes the result to `out` (which must not exist).
pub fn optimize_saved_model(
    src: &Path,
    out: &Path,
    plugins: &mut PluginSet,
    max_size: u64,
    options: WriterOptions,
) -> Result<OptimizeReport, ChunkedError> {
    let mut model = read_saved_model(src)?.message;
    let saved_model_desc = message_descriptor("tensorflow.SavedModel")?;
    let meta_desc = message_descriptor("tensorflow.MetaGraphDef")?;
    let graph_desc = message_descriptor("tensorflow.GraphDef")?;
    let field = |desc: &prost_reflect::MessageDescriptor, name: &str| {
        desc.get_field_by_name(name)
            .ok_or_else(|| ChunkedError::Schema {
                message: desc.full_name().to_string(),
                fault: format!("no field {name}"),
            })
    };
    let meta_fd = field(&saved_model_desc, "meta_graphs")?;
    let graph_fd = field(&meta_desc, "graph_def")?;
    let count = model.positions(meta_fd.number()).len();
    let mut passes = Vec::new();
    for index in 0..count {
        let meta_wire = model.repeated_message_mut(&meta_fd, index as u64)?;
        let meta_bytes = Bytes::from(meta_wire.to_vec()?);
        let meta = MetaGraphDef::decode(meta_bytes).map_err(|e| {
            ChunkedError::metadata(
                src.display().to_string(),
                format!("meta_graphs[{index}] is not a valid MetaGraphDef: {e}"),
            )
        })?;
        let tags = meta
            .meta_info_def
            .as_ref()
            .map(|m| m.tags.clone())
            .unwrap_or_default();
        // The decoded copy is what the plugins work on: free the wire copy of the graph now
        // (it is replaced below), so a graph past 2 GiB is not held twice meanwhile.
        *meta_wire.singular_message_mut(&graph_fd)? = WireMessage::new(Some(graph_desc.clone()));
        let (graph, report) = plugins.optimize_meta_graph(meta);
        let graph_bytes = Bytes::from(graph.encode_to_vec());
        let graph_wire =
            WireMessage::parse(&graph_bytes, Some(graph_desc.clone())).map_err(|error| {
                ChunkedError::Wire {
                    source_name: "optimized graph".to_string(),
                    error,
                }
            })?;
        *meta_wire.singular_message_mut(&graph_fd)? = graph_wire;
        passes.push((tags, report));
    }
    let written = write_model_dir(src, out, model, max_size, options, &mut |_| {})?;
    Ok(OptimizeReport { passes, written })
}
