//! Rewriting every function of a graph's library as a graph of its own, and back: the walk
//! that graph optimizers (plugins) and graph rewrites (TPU export) share.

use unbound_proto::tensorflow::GraphDef;

use crate::functions::{function_to_graph, graph_to_function, plugin_library};
use crate::ops::OpLibrary;

/// One library function presented as a graph (TensorFlow's grappler function item).
#[derive(Debug, Clone)]
pub struct FunctionGraph {
    /// `function NAME`: how reports name this graph.
    pub id: String,
    /// The function's name.
    pub name: String,
    /// The `_Arg` node names (the graph's feeds).
    pub feed: Vec<String>,
    /// The `_Retval` node names (the graph's fetches).
    pub fetch: Vec<String>,
    /// The `control_ret` nodes, which must be kept.
    pub keep_ops: Vec<String>,
}

/// What happened to a function that was not rewritten.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FunctionNote {
    /// The function could not be turned into a graph (parametrized or unknown ops, ...).
    Skipped {
        /// The function's id (`function NAME`).
        id: String,
        /// The conversion error.
        error: String,
    },
    /// The rewritten graph did not convert back to a function; the original was kept.
    Kept {
        /// The function's id (`function NAME`).
        id: String,
        /// The conversion error.
        error: String,
    },
}

/// What [`rewrite_functions`] calls for each function of a library.
pub trait FunctionRewriter {
    /// Rewrites one function's graph in place; returns whether it changed.
    fn rewrite(&mut self, function: &FunctionGraph, graph: &mut GraphDef) -> bool;

    /// Told, in library order and as it happens, about a function that was not rewritten.
    fn note(&mut self, note: FunctionNote) {
        let _ = note;
    }
}

/// Runs `rewriter` on every function of `graph`'s library, each converted to a graph as
/// TensorFlow's `MakeGrapplerFunctionItem` does (its library: the functions it reaches, as
/// signatures only). Each graph the rewriter changed is converted back (`MakeFunctionDef`)
/// and replaces its function. Functions that cannot be converted either way are left as they
/// were and reported through [`FunctionRewriter::note`].
pub fn rewrite_functions(
    graph: &mut GraphDef,
    ops: &OpLibrary,
    rewriter: &mut impl FunctionRewriter,
) {
    let Some(library) = graph.library.clone() else {
        return;
    };
    for (index, function) in library.function.iter().enumerate() {
        let name = function
            .signature
            .as_ref()
            .map(|s| s.name.clone())
            .unwrap_or_default();
        let id = format!("function {name}");
        let converted = match function_to_graph(function, ops, graph.versions.as_ref()) {
            Ok(c) => c,
            Err(e) => {
                rewriter.note(FunctionNote::Skipped {
                    id,
                    error: e.to_string(),
                });
                continue;
            }
        };
        let unit = FunctionGraph {
            id,
            name,
            feed: converted.feed,
            fetch: converted.fetch,
            keep_ops: converted.keep_ops,
        };
        let mut fgraph = converted.graph;
        fgraph.library = Some(plugin_library(&library, function));
        if !rewriter.rewrite(&unit, &mut fgraph) {
            continue;
        }
        match graph_to_function(function, &fgraph, ops) {
            Ok(rewritten) => {
                if let Some(slot) = graph
                    .library
                    .as_mut()
                    .and_then(|lib| lib.function.get_mut(index))
                {
                    *slot = rewritten;
                }
            }
            Err(e) => rewriter.note(FunctionNote::Kept {
                id: unit.id,
                error: e.to_string(),
            }),
        }
    }
}
