//! `unbound-graph`: TensorFlow graphs as data, without TensorFlow.
//!
//! What a tool needs to understand or rewrite a `GraphDef` offline, with no C compiler and no
//! plugin machinery:
//!
//! - [`ops`]: the op registry — TensorFlow 2.21's registered `OpDef`s (exact bytes, regenerated
//!   by `scripts/gen_op_defs.py`), a graph's own functions, and a MetaGraph's stripped op list,
//!   looked up in that order ([`OpLibrary`]);
//! - [`properties`]: static shape and dtype inference, as TensorFlow's
//!   `GraphProperties::InferStatically` ([`GraphProperties`]);
//! - [`functions`]: a library function as a standalone graph and back, as TensorFlow's
//!   `MakeGrapplerFunctionItem` / `MakeFunctionDef`;
//! - [`rewrite`]: the walk over every function of a library as a graph, for optimizers and
//!   rewrites ([`rewrite_library`], over a decoded or an indexed [`FunctionLibrary`]);
//! - [`device`] and [`tensor_names`]: TensorFlow's device-name parsing and `node:port` names.
//!
//! ```
//! use unbound_graph::tensor_names::node_name;
//! use unbound_graph::OpLibrary;
//!
//! assert_eq!(node_name("^init"), "init");
//! assert_eq!(node_name("split:1"), "split");
//! let ops = OpLibrary::builtin();
//! assert_eq!(ops.op_def("AddV2").map(|op| op.input_arg.len()), Some(2));
//! ```
//!
//! Invariants: graphs are untrusted input — shapes, sizes and indices found in them are
//! checked (overflow included), recursion through function calls is bounded, and nothing here
//! panics on a graph's contents.

#![forbid(unsafe_code)]

pub mod device;
pub mod functions;
pub mod ops;
pub mod properties;
pub mod rewrite;
pub mod tensor_names;

pub use ops::OpLibrary;
pub use properties::{GraphProperties, InferOptions};
pub use rewrite::{
    rewrite_functions, rewrite_library, FunctionGraph, FunctionLibrary, FunctionNote,
    FunctionRewriter,
};
