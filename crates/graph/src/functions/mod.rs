//! Library functions as standalone graphs, the way TensorFlow's meta optimizer hands them to
//! graph optimizers, and back.
//!
//! TensorFlow optimizes every reachable, non-parametrized function of a graph's library as its
//! own *grappler function item* (`MakeGrapplerFunctionItem` in
//! `tensorflow/core/grappler/utils/functions.cc`, which instantiates the function with
//! `InstantiateFunction` from `tensorflow/core/framework/function.cc`), then converts the
//! optimized graph back with `MakeFunctionDef`:
//!
//! - each input arg `x` becomes a node `x` with op `_Arg` and attrs `T` (its type), `index`,
//!   `_resource_arg_unique_id` (when the function has one for it) and the arg's `arg_attr`s;
//! - each body node is copied with its op's default attrs added and its inputs rewritten from
//!   the FunctionDef form (`node:out_arg:i`, or a bare arg name) to the GraphDef form
//!   (`node:flat_index`);
//! - each output arg `y` becomes a node `y_RetVal` with op `_Retval`, reading `ret[y]`, with
//!   attrs `T` and `index`;
//! - with the function attr `experimental_ints_on_device`, int32 args and results use
//!   `_DeviceArg` / `_DeviceRetval` instead.
//!
//! The item's `feed` are the `_Arg` node names, its `fetch` the `_Retval` node names, its
//! `keep_ops` the `control_ret` nodes; its graph's `versions.producer` is the main graph's.
//! Its library is the functions reachable from the function's body, replaced by a stub
//! (signatures and attrs only, see [`stub_library`]) for optimizers that do not use the
//! library, which includes every plugin optimizer (`CGraphOptimizer::UsesFunctionLibrary()`
//! is false). [`function_to_graph`] leaves `graph.library` empty; set it to
//! [`plugin_library`]`(library, function)`.

mod attrs;
mod index;
mod library;
mod to_function;
mod to_graph;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_model;

pub use index::{LibraryError, LibraryIndex};
pub use library::{plugin_library, reachable_library, stub_library};
pub use to_function::graph_to_function;
pub use to_graph::function_to_graph;

use unbound_proto::tensorflow::{FunctionDef, GraphDef, NodeDef, OpDef};

use crate::ops::OpLibrary;
use crate::tensor_names::split_port;

/// The op of the nodes that stand for a function's inputs.
pub const ARG_OP: &str = "_Arg";
/// The op of the nodes that stand for a function's int32 inputs kept on the device.
pub const DEVICE_ARG_OP: &str = "_DeviceArg";
/// The op of the nodes that stand for a function's outputs.
pub const RETVAL_OP: &str = "_Retval";
/// The op of the nodes that stand for a function's int32 outputs kept on the device.
pub const DEVICE_RETVAL_OP: &str = "_DeviceRetval";
/// The suffix TensorFlow appends to an output arg's name to name its `_Retval` node.
pub const RETVAL_SUFFIX: &str = "_RetVal";
/// The function attr that turns int32 args and results into `_DeviceArg` / `_DeviceRetval`.
pub const INTS_ON_DEVICE_ATTR: &str = "experimental_ints_on_device";

/// A function as a standalone graph, with what TensorFlow's `GrapplerFunctionItem` adds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FunctionGraph {
    /// `_Arg` nodes, the body, `_Retval` nodes; `library` unset (see the module docs).
    pub graph: GraphDef,
    /// The `_Retval` node names, one per output arg, in order.
    pub fetch: Vec<String>,
    /// The `_Arg` node names, one per input arg, in order.
    pub feed: Vec<String>,
    /// The nodes named by the function's `control_ret`, which must not be removed.
    pub keep_ops: Vec<String>,
}

/// Why a function cannot be converted to a graph or back. Every variant names the function.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FunctionError {
    /// The function has no signature or an empty name.
    #[error("function {function:?}: function name must be specified")]
    NoName {
        /// The name, possibly empty.
        function: String,
    },
    /// The function's types or body depend on attrs given at call time; TensorFlow's meta
    /// optimizer skips such functions.
    #[error("function {function}: parametrized functions cannot be optimized: {reason}")]
    Parametrized {
        /// The function.
        function: String,
        /// What is parametrized.
        reason: String,
    },
    /// A node's op is neither a standard op, nor a library function, nor a stripped op.
    #[error("function {function}: node {node}: op {op} is not registered")]
    UnknownOp {
        /// The function.
        function: String,
        /// The node.
        node: String,
        /// The unknown op.
        op: String,
    },
    /// A node's input does not name a tensor (or node, for a control input) of the function.
    #[error("function {function}: node {node}: input {input:?} is not found")]
    UnknownInput {
        /// The function.
        function: String,
        /// The node.
        node: String,
        /// The input as written.
        input: String,
    },
    /// Anything else that makes the function or graph malformed.
    #[error("function {function}: {message}")]
    Invalid {
        /// The function.
        function: String,
        /// What is wrong.
        message: String,
    },
}

/// The signature of `function`, with a non-empty name.
fn signature(function: &FunctionDef) -> Result<&OpDef, FunctionError> {
    match &function.signature {
        Some(signature) if !signature.name.is_empty() => Ok(signature),
        other => Err(FunctionError::NoName {
            function: other.as_ref().map(|s| s.name.clone()).unwrap_or_default(),
        }),
    }
}

/// Fails, as TensorFlow's `IsParametrized` check does, when `function`'s arg types or body
/// attrs are only known at call time; also rejects non-type signature attrs, as
/// `MakeGrapplerFunctionItem` does.
fn check_not_parametrized(function: &FunctionDef, signature: &OpDef) -> Result<(), FunctionError> {
    let parametrized = |reason: String| FunctionError::Parametrized {
        function: signature.name.clone(),
        reason,
    };
    for arg in signature.input_arg.iter().chain(&signature.output_arg) {
        for (kind, attr) in [
            ("type_attr", &arg.type_attr),
            ("number_attr", &arg.number_attr),
            ("type_list_attr", &arg.type_list_attr),
        ] {
            if !attr.is_empty() {
                return Err(parametrized(format!("arg {} has {kind} {attr}", arg.name)));
            }
        }
    }
    for node in &function.node_def {
        for (name, value) in &node.attr {
            if let Some(unbound_proto::tensorflow::attr_value::Value::Placeholder(p)) = &value.value
            {
                return Err(parametrized(format!(
                    "node {} attr {name} is the placeholder {p}",
                    node.name
                )));
            }
        }
    }
    if signature.attr.iter().any(|attr| attr.r#type != "type") {
        return Err(FunctionError::Invalid {
            function: signature.name.clone(),
            message: "Function signature must have only type attributes".into(),
        });
    }
    Ok(())
}

/// The OpDef of `node`'s op, or [`FunctionError::UnknownOp`] naming `function` and the node.
fn op_def_of<'o>(
    ops: &'o OpLibrary,
    function: &str,
    node: &NodeDef,
) -> Result<&'o OpDef, FunctionError> {
    ops.op_def(&node.op)
        .ok_or_else(|| FunctionError::UnknownOp {
            function: function.to_string(),
            node: node.name.clone(),
            op: node.op.clone(),
        })
}

/// The GraphDef name of output `index` of `node`: `node` for 0, `node:index` otherwise.
fn tensor_name(node: &str, index: usize) -> String {
    if index == 0 {
        node.to_string()
    } else {
        format!("{node}:{index}")
    }
}

/// Splits a GraphDef data input `node[:index]` as TensorFlow's `ParseTensorName` does.
fn parse_tensor_name(input: &str) -> (&str, usize) {
    match split_port(input) {
        (node, Some(digits)) => match digits.parse() {
            Ok(index) => (node, index),
            Err(_) => (input, 0),
        },
        (_, None) => (input, 0),
    }
}
