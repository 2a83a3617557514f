//! Rewriting every function of a graph's library as a graph of its own, and back: the walk
//! that graph optimizers (plugins) and graph rewrites (TPU export) share.
//!
//! There is one loop, [`rewrite_library`], over any [`FunctionLibrary`]: a decoded
//! `FunctionDefLibrary` ([`rewrite_functions`] walks a graph's own) or a serialized one
//! indexed by [`LibraryIndex`], which decodes one function at a time (the plugin host walks
//! libraries of thousands of functions that way and never holds them all decoded).
//!
//! The library walked is the one read: a rewritten function is handed to the caller's
//! `put_back` and does not change what later functions' graphs carry (their
//! [`FunctionLibrary::plugin_library`] is built from the functions as read).

use std::borrow::Cow;
use std::convert::Infallible;

use unbound_proto::tensorflow::{FunctionDef, FunctionDefLibrary, GraphDef, VersionDef};

use crate::functions::{
    function_to_graph, graph_to_function, plugin_library, LibraryError, LibraryIndex,
};
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

/// What [`rewrite_library`] (and [`rewrite_functions`]) calls for each function of a library.
pub trait FunctionRewriter {
    /// Whether to rewrite this function, asked once it is a graph (`graph`, whose library is
    /// not set yet) and before its library is built; `false` skips it (the rewriter notes why
    /// in its own state if it wants to). All functions are taken by default.
    fn wants(&mut self, function: &FunctionGraph, graph: &GraphDef) -> bool {
        let _ = (function, graph);
        true
    }

    /// Rewrites one function's graph in place; returns whether it changed. The graph may be
    /// taken out (`std::mem::take`) when the rewrite works on a copy of it and returns `false`.
    fn rewrite(&mut self, function: &FunctionGraph, graph: &mut GraphDef) -> bool;

    /// Told, in library order and as it happens, about a function that was not rewritten.
    fn note(&mut self, note: FunctionNote) {
        let _ = note;
    }
}

/// A function library being walked by [`rewrite_library`]: its functions by position, and the
/// library each one's graph carries.
pub trait FunctionLibrary {
    /// Why a function or its library cannot be had.
    type Error;

    /// How many functions the library has (counting repeated names).
    fn function_count(&self) -> usize;

    /// The function at `position` (library order), decoded: borrowed when the library is
    /// decoded already, decoded now otherwise.
    fn function(&self, position: usize) -> Result<Cow<'_, FunctionDef>, Self::Error>;

    /// The library the graph of `function` carries:
    /// [`crate::functions::plugin_library`] of this library.
    fn plugin_library(&self, function: &FunctionDef) -> Result<FunctionDefLibrary, Self::Error>;
}

impl FunctionLibrary for FunctionDefLibrary {
    type Error = Infallible;

    fn function_count(&self) -> usize {
        self.function.len()
    }

    fn function(&self, position: usize) -> Result<Cow<'_, FunctionDef>, Infallible> {
        // Positions come from `function_count`: always in range.
        Ok(Cow::Borrowed(&self.function[position]))
    }

    fn plugin_library(&self, function: &FunctionDef) -> Result<FunctionDefLibrary, Infallible> {
        Ok(plugin_library(self, function))
    }
}

impl FunctionLibrary for LibraryIndex {
    type Error = LibraryError;

    fn function_count(&self) -> usize {
        self.len()
    }

    fn function(&self, position: usize) -> Result<Cow<'_, FunctionDef>, LibraryError> {
        self.decode(position).map(Cow::Owned)
    }

    fn plugin_library(&self, function: &FunctionDef) -> Result<FunctionDefLibrary, LibraryError> {
        LibraryIndex::plugin_library(self, function)
    }
}

/// Runs `rewriter` on every function of `library`, in order, each converted to a graph as
/// TensorFlow's `MakeGrapplerFunctionItem` does (with `ops` and the graph's `versions`; its
/// library: the functions it reaches, as signatures only). Each graph the rewriter changed is
/// converted back (`MakeFunctionDef`) and handed to `put_back` with the function's position.
/// Functions that cannot be converted either way are left as they were and reported through
/// [`FunctionRewriter::note`]. One function is held decoded at a time (for a library that
/// decodes on demand).
///
/// Errors only when `library` cannot give a function or its library; the first stops the walk.
pub fn rewrite_library<L: FunctionLibrary + ?Sized>(
    library: &L,
    ops: &OpLibrary,
    versions: Option<&VersionDef>,
    rewriter: &mut impl FunctionRewriter,
    mut put_back: impl FnMut(usize, FunctionDef),
) -> Result<(), L::Error> {
    for position in 0..library.function_count() {
        let function = library.function(position)?;
        let name = function
            .signature
            .as_ref()
            .map(|s| s.name.clone())
            .unwrap_or_default();
        let id = format!("function {name}");
        let converted = match function_to_graph(&function, ops, versions) {
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
        let mut graph = converted.graph;
        if !rewriter.wants(&unit, &graph) {
            continue;
        }
        graph.library = Some(library.plugin_library(&function)?);
        if !rewriter.rewrite(&unit, &mut graph) {
            continue;
        }
        match graph_to_function(&function, &graph, ops) {
            Ok(rewritten) => {
                drop(graph);
                put_back(position, rewritten);
            }
            Err(e) => rewriter.note(FunctionNote::Kept {
                id: unit.id,
                error: e.to_string(),
            }),
        }
    }
    Ok(())
}

/// Runs `rewriter` on every function of `graph`'s own library ([`rewrite_library`] over it,
/// with `graph`'s versions); each function rewritten replaces its original in `graph`.
pub fn rewrite_functions(
    graph: &mut GraphDef,
    ops: &OpLibrary,
    rewriter: &mut impl FunctionRewriter,
) {
    let Some(library) = graph.library.take() else {
        return;
    };
    let mut rewritten = Vec::new();
    let walked = rewrite_library(
        &library,
        ops,
        graph.versions.as_ref(),
        rewriter,
        |position, function| rewritten.push((position, function)),
    );
    let Ok(()) = walked;
    let mut library = library;
    for (position, function) in rewritten {
        library.function[position] = function;
    }
    graph.library = Some(library);
}

#[cfg(test)]
mod tests;
