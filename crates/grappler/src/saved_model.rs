//! `unbound optimize`: run the plugins over every MetaGraphDef of a SavedModel directory and
//! write the optimized copy. The SavedModel surgery (hand over each graph's bytes, splice a new
//! graph into the lossless model, write the directory split when large and atomically) is
//! [`unbound_savedmodel::rewrite::rewrite_serialized_graphs`]; this module only plugs the plugins in.

use std::path::Path;

use unbound_records::WriterOptions;
use unbound_savedmodel::rewrite::rewrite_serialized_graphs;
use unbound_savedmodel::write::{SplitReport, WriteOptions};
use unbound_savedmodel::SavedModelError;

use crate::error::GrapplerError;
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
) -> Result<OptimizeReport, GrapplerError> {
    let mut passes = Vec::new();
    let options = WriteOptions::default()
        .with_max_size(max_size)
        .with_writer(options);
    let written = rewrite_serialized_graphs(src, out, &options, |tags, meta, graph| {
        let (graph, report) = plugins
            .optimize_serialized(meta, graph)
            .map_err(|e| match e {
                GrapplerError::Graph { fault } => GrapplerError::Model(SavedModelError::invalid(
                    src.display().to_string(),
                    format!(
                        "the graph of MetaGraphDef [{}] does not decode: {fault}",
                        tags.join(",")
                    ),
                )),
                other => other,
            })?;
        passes.push((tags.to_vec(), report));
        Ok::<_, GrapplerError>(graph)
    })?;
    Ok(OptimizeReport { passes, written })
}
