//! The pass over one serialized graph: the main graph, then each function of its library as a
//! graph of its own, as TensorFlow's meta optimizer runs plugin optimizers.
//!
//! Built for graphs of millions of nodes and thousands of functions:
//!
//! - the main graph is handed to plugins as the bytes it was read as (a slice of the mapped
//!   model); the host only scans it at the wire level (node count, device types, library);
//! - the library is indexed, not decoded ([`LibraryIndex`]) and walked by
//!   [`rewrite_library`] (the loop `rewrite_functions` runs over a decoded library): one
//!   function is decoded, turned into a graph, serialized for the plugins and dropped before
//!   the next; the library a function's graph carries is built from the functions its body
//!   reaches;
//! - what a plugin returns is checked, and its bytes kept as they are: a plugin output is
//!   decoded only to check it and, for a function, to turn it back into a FunctionDef;
//! - an unchanged graph (ABORTED, or the very bytes it was given) is never decoded or
//!   re-encoded: the pass returns `None` and the model keeps its bytes. Changed functions are
//!   spliced into the library's bytes; nothing else is re-encoded.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use prost::Message;
use unbound_graph::functions::LibraryIndex;
use unbound_graph::{rewrite_library, FunctionGraph, FunctionNote, FunctionRewriter, OpLibrary};
use unbound_proto::tensorflow::{GraphDef, MetaGraphDef};

use crate::error::GrapplerError;
use crate::host::{file_name, CallReport, CallResult, PassReport, PluginSet};
use crate::item::{stripped_ops, GrapplerItem, OpSources};
use crate::runner::{judge, Outcome};
use crate::serialized::{scan_graph, splice_library, GraphScan};

/// The current graph's library, indexed, with the ops and sources items share.
struct Library {
    index: LibraryIndex,
    ops: Arc<OpLibrary>,
    sources: Arc<OpSources>,
}

impl Library {
    fn of(scan: &GraphScan, meta: &MetaGraphDef) -> Result<Self, GrapplerError> {
        let index = LibraryIndex::new(&scan.library).map_err(|e| graph_error(&e))?;
        let stripped = stripped_ops(meta);
        Ok(Self {
            ops: Arc::new(index.op_library(stripped)),
            sources: Arc::new(OpSources::new(scan.library.clone(), stripped)),
            index,
        })
    }
}

fn graph_error(fault: &dyn std::fmt::Display) -> GrapplerError {
    GrapplerError::Graph {
        fault: fault.to_string(),
    }
}

/// What one plugin run on one graph left.
struct Ran {
    /// The graph's bytes now (the input's unless a plugin changed it).
    bytes: Bytes,
    /// The last valid output, decoded (None when nothing changed).
    changed: Option<GraphDef>,
}

/// The plugins as the [`FunctionRewriter`] of a library walk: each function whose device types
/// a plugin matches is serialized, run through the plugins and, when one changed it, replaced
/// by the last valid output.
struct FunctionPlugins<'a> {
    plugins: &'a mut PluginSet,
    library: &'a Library,
    report: &'a mut PassReport,
    /// The device types of the function [`FunctionRewriter::wants`] last took.
    types: BTreeSet<String>,
}

impl FunctionRewriter for FunctionPlugins<'_> {
    fn wants(&mut self, function: &FunctionGraph, graph: &GraphDef) -> bool {
        let types = unbound_graph::device::graph_device_types(graph);
        match self
            .plugins
            .device_types_of(types, &function.id, self.report)
        {
            Some(types) => {
                self.types = types;
                true
            }
            None => false,
        }
    }

    fn rewrite(&mut self, function: &FunctionGraph, graph: &mut GraphDef) -> bool {
        let nodes = graph.node.len();
        // Plugins take bytes: the decoded graph is dropped while they run.
        let bytes = Bytes::from(std::mem::take(graph).encode_to_vec());
        let item = GrapplerItem {
            id: function.id.clone(),
            fetch: function.fetch.clone(),
            feed: function.feed.clone(),
            keep_ops: function.keep_ops.clone(),
            ops: Arc::clone(&self.library.ops),
            sources: Arc::clone(&self.library.sources),
            ..Default::default()
        };
        let types = std::mem::take(&mut self.types);
        let ran = self
            .plugins
            .run_all(&item, &types, bytes, nodes, self.report);
        match ran.changed {
            Some(new_graph) => {
                *graph = new_graph;
                true
            }
            None => false,
        }
    }

    fn note(&mut self, note: FunctionNote) {
        match note {
            FunctionNote::Skipped { id, error } => self
                .report
                .skipped
                .push(format!("{id}: cannot be turned into a graph: {error}")),
            FunctionNote::Kept { id, error } => self.report.warnings.push(format!(
                "{id}: the optimized graph does not convert back to a function ({error}); kept \
                 the original function"
            )),
        }
    }
}

impl PluginSet {
    /// Runs the plugins on a MetaGraphDef's graph, given serialized as `graph` (the
    /// MetaGraphDef's own `graph_def` is not looked at), then on each function of its
    /// library. Returns the new graph's serialization, or None when no plugin changed
    /// anything (the graph is then to be kept exactly as it was), and what happened. Errors
    /// only when `graph` is not a GraphDef.
    pub fn optimize_serialized(
        &mut self,
        meta: &MetaGraphDef,
        graph: Bytes,
    ) -> Result<(Option<Vec<u8>>, PassReport), GrapplerError> {
        let mut report = PassReport::default();
        let scan = scan_graph(&graph).map_err(|e| graph_error(&e))?;
        let mut library = Library::of(&scan, meta)?;
        let item =
            GrapplerItem::with_ops(meta, Arc::clone(&library.ops), Arc::clone(&library.sources));
        let mut current = graph;
        let mut changed = false;
        if let Some(types) = self.device_types_of(scan.device_types, &item.id, &mut report) {
            let ran = self.run_all(&item, &types, current, scan.nodes, &mut report);
            current = ran.bytes;
            if let Some(decoded) = ran.changed {
                drop(decoded);
                changed = true;
            }
        }
        drop(item);
        let mut versions = scan.versions;
        if changed {
            // Functions are optimized as the rewritten graph has them.
            let rescan = scan_graph(&current).map_err(|e| graph_error(&e))?;
            library = Library::of(&rescan, meta)?;
            versions = rescan.versions;
        }
        let replacements = self.optimize_functions(&library, versions.as_ref(), &mut report)?;
        drop(library);
        if !replacements.is_empty() {
            let spliced = splice_library(&current, &replacements).map_err(|e| graph_error(&e))?;
            return Ok((Some(spliced), report));
        }
        Ok((changed.then(|| current.to_vec()), report))
    }

    /// Runs matching plugins on every function of `library`, each turned into a graph as
    /// TensorFlow's `MakeGrapplerFunctionItem` does ([`rewrite_library`] over the index: one
    /// function decoded at a time). Returns the serialized FunctionDefs of the functions whose
    /// optimized graphs convert back, by library position.
    fn optimize_functions(
        &mut self,
        library: &Library,
        versions: Option<&unbound_proto::tensorflow::VersionDef>,
        report: &mut PassReport,
    ) -> Result<BTreeMap<usize, Vec<u8>>, GrapplerError> {
        let mut replacements = BTreeMap::new();
        let mut rewriter = FunctionPlugins {
            plugins: self,
            library,
            report,
            types: BTreeSet::new(),
        };
        rewrite_library(
            &library.index,
            &library.ops,
            versions,
            &mut rewriter,
            |position, rewritten| {
                // Kept serialized: the library's bytes are spliced, not re-encoded.
                replacements.insert(position, rewritten.encode_to_vec());
            },
        )
        .map_err(|e| graph_error(&e))?;
        Ok(replacements)
    }

    /// Runs each plugin whose device type is in `types` on `bytes` (a graph of `nodes` nodes),
    /// in order; each valid result replaces the graph for the next plugin.
    fn run_all(
        &mut self,
        item: &GrapplerItem,
        types: &BTreeSet<String>,
        bytes: Bytes,
        nodes: usize,
        report: &mut PassReport,
    ) -> Ran {
        let mut ran = Ran {
            bytes,
            changed: None,
        };
        let mut nodes_before = nodes;
        for plugin in self.plugins_mut() {
            if !types.contains(&plugin.registration().device_type) {
                continue;
            }
            let start = Instant::now();
            let (raw, plugin_time) = plugin.run(item, &ran.bytes);
            let identical =
                matches!(&raw, crate::plugin::RawOutcome::Output(out) if out[..] == ran.bytes[..]);
            let (result, nodes_after) = if identical {
                (CallResult::Identical, nodes_before)
            } else {
                match judge(raw, nodes_before) {
                    Outcome::Changed { graph, bytes } => {
                        let after = graph.node.len();
                        ran.changed = Some(*graph);
                        ran.bytes = Bytes::from(bytes);
                        (CallResult::Changed, after)
                    }
                    Outcome::Unchanged => (CallResult::Unchanged, nodes_before),
                    Outcome::Failed(message) => (CallResult::Failed(message), nodes_before),
                }
            };
            report.calls.push(CallReport {
                plugin: file_name(plugin.path()),
                graph: item.id.clone(),
                nodes_before,
                nodes_after,
                elapsed: start.elapsed(),
                plugin_time,
                result,
            });
            nodes_before = nodes_after;
        }
        ran
    }
}
