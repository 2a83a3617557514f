//! Static shape and dtype inference over a `GraphDef`: the engine behind `TF_NewGraphProperties`,
//! `TF_InferStatically` and `TF_Get{Input,Output}PropertiesList`.
//!
//! Follows TensorFlow's `GraphProperties::InferStatically`: every node's outputs get a dtype
//! (from the OpDef) and a shape (known dims, `-1` for unknown dims, `unknown_rank` when even the
//! rank is unknown); a node's input properties are the output properties of the tensors it
//! consumes. Shape functions cover the common ops of inference graphs (see the private `ops` module); other ops
//! fall back to their `_output_shapes` attr or unknown shapes. Function calls are inferred through
//! the callee's body with the caller's input shapes (see `calls`). Nodes are visited once, in
//! topological order (Kahn's algorithm); nodes on cycles (and what they feed) are visited
//! last, with not-yet-visited inputs treated as unknown.

mod attrs;
mod calls;
mod dtypes;
mod graph;
mod infer;
mod ops;
mod shape;
mod tensor;
#[cfg(test)]
mod tests;

use std::collections::HashMap;

use unbound_proto::tensorflow::GraphDef;

pub use tensor::MAX_VALUE_BYTES;
pub use unbound_proto::tensorflow::op_info::TensorProperties;

use crate::ops::OpLibrary;

/// The switches of `TF_InferStatically`.
#[derive(Debug, Clone, Copy, Default)]
pub struct InferOptions {
    /// Trust that fed tensors have the shapes their nodes declare. When false, the shape of
    /// every fed tensor is unknown (its dtype is kept) and so is whatever depends on it.
    pub assume_valid_feeds: bool,
    /// Accepted for compatibility; inference here is the same either way.
    pub aggressive_shape_inference: bool,
    /// Report known constant values (`TensorProperties.value`) of input tensors.
    pub include_input_tensor_values: bool,
    /// Report known constant values (`TensorProperties.value`) of output tensors.
    pub include_output_tensor_values: bool,
}

/// Why inference could not run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PropertiesError {
    /// An input names a node that is not in the graph.
    #[error("node '{node}' has input '{input}', which names no node in the graph")]
    MissingInput {
        /// The consuming node.
        node: String,
        /// The input as written.
        input: String,
    },
    /// An input is not a valid tensor name.
    #[error("node '{node}' has input '{input}', which is not a valid tensor name")]
    BadInput {
        /// The consuming node.
        node: String,
        /// The input as written.
        input: String,
    },
}

/// Input and output properties of every node of a graph.
#[derive(Debug, Clone, Default)]
pub struct GraphProperties {
    index: HashMap<String, usize>,
    inputs: Vec<Vec<TensorProperties>>,
    outputs: Vec<Vec<TensorProperties>>,
}

impl GraphProperties {
    /// Infers every node's output (and so input) properties. `feeds` are tensor names
    /// (`"x"` or `"x:0"`) the caller may feed; `ops` resolves each node's OpDef.
    ///
    /// Fails only when an input names no node or is not a tensor name; everything else that
    /// cannot be inferred is reported as unknown.
    pub fn infer(
        graph: &GraphDef,
        ops: &OpLibrary,
        feeds: &[String],
        options: InferOptions,
    ) -> Result<GraphProperties, PropertiesError> {
        infer::run(graph, ops, feeds, options)
    }

    /// The properties of the tensors `node` consumes (control inputs excluded), in order;
    /// empty for an unknown node.
    pub fn input_properties(&self, node: &str) -> &[TensorProperties] {
        self.index
            .get(node)
            .and_then(|&i| self.inputs.get(i))
            .map_or(&[], Vec::as_slice)
    }

    /// The properties of `node`'s outputs, in order; empty for an unknown node.
    pub fn output_properties(&self, node: &str) -> &[TensorProperties] {
        self.index
            .get(node)
            .and_then(|&i| self.outputs.get(i))
            .map_or(&[], Vec::as_slice)
    }

    /// Whether `node` is a node of the inferred graph.
    pub fn has_node(&self, node: &str) -> bool {
        self.index.contains_key(node)
    }
}
