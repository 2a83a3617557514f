//! Function calls: the outputs of `PartitionedCall`, `StatefulPartitionedCall` and direct
//! calls of library functions, inferred by instantiating the function's body with the
//! caller's input shapes, as TensorFlow's `SymbolicShapeRefiner` does for function nodes.
//!
//! Bodies are converted as grappler sees them ([`function_to_graph`]); each `_Arg` gets the
//! shape of the matching call input as its `_output_shapes`, and each `_Retval`'s input is the
//! call's output. Results are cached per function and input shapes. Recursion, nesting deeper
//! than [`MAX_CALL_DEPTH`], parametrized functions and calls whose inputs do not match the
//! signature one to one give unknown outputs.

use std::collections::HashMap;

use unbound_proto::tensorflow::attr_value::{ListValue, Value};
use unbound_proto::tensorflow::{AttrValue, GraphDef, NodeDef};

use super::graph::Structure;
use super::shape::Shape;
use super::tensor::Tensor;
use super::PropertiesError;
use crate::functions::function_to_graph;
use crate::ops::OpLibrary;

/// How deeply calls are followed into bodies that call further functions.
pub(crate) const MAX_CALL_DEPTH: usize = 8;

/// The function a node calls, if it is a call.
pub(super) fn called_function<'n>(node: &'n NodeDef, library: &OpLibrary) -> Option<&'n str> {
    match node.op.as_str() {
        "PartitionedCall" | "StatefulPartitionedCall" => {
            match node.attr.get("f")?.value.as_ref()? {
                Value::Func(f) => Some(f.name.as_str()),
                _ => None,
            }
        }
        op if library.function(op).is_some() => Some(op),
        _ => None,
    }
}

/// How a function body is inferred: the driver's inference of a whole graph with nothing fed,
/// which calls back into [`Calls`] for the calls in the body. The driver hands it to
/// [`Calls::new`], so that this module sits below the driver and imports nothing of it.
pub(super) type InferBody =
    for<'g, 'c, 'l> fn(
        &'g GraphDef,
        &'c mut Calls<'l>,
    ) -> Result<(Structure<'g>, Vec<Vec<Tensor>>), PropertiesError>;

/// The library calls resolve against, the calls being inferred, and the results so far.
pub(super) struct Calls<'l> {
    /// Resolves ops and functions.
    pub library: &'l OpLibrary,
    infer_body: InferBody,
    stack: Vec<String>,
    cache: HashMap<(String, Vec<Shape>), Option<Vec<Tensor>>>,
}

impl<'l> Calls<'l> {
    /// Calls resolved against `library`, their bodies inferred by `infer_body`.
    pub(super) fn new(library: &'l OpLibrary, infer_body: InferBody) -> Self {
        Self {
            library,
            infer_body,
            stack: Vec::new(),
            cache: HashMap::new(),
        }
    }

    /// The outputs of calling `function` on `inputs`, or None when they cannot be inferred.
    pub(super) fn outputs(&mut self, function: &str, inputs: &[&Tensor]) -> Option<Vec<Tensor>> {
        if self.stack.len() >= MAX_CALL_DEPTH || self.stack.iter().any(|f| f == function) {
            return None;
        }
        let shapes: Vec<Shape> = inputs.iter().map(|t| t.shape.clone()).collect();
        let key = (function.to_string(), shapes);
        if let Some(known) = self.cache.get(&key) {
            return known.clone();
        }
        self.stack.push(function.to_string());
        let result = self.instantiate(function, &key.1);
        self.stack.pop();
        self.cache.insert(key, result.clone());
        result
    }

    fn instantiate(&mut self, function: &str, shapes: &[Shape]) -> Option<Vec<Tensor>> {
        let body = self.library.function(function)?;
        let mut item = function_to_graph(body, self.library, None).ok()?;
        if item.feed.len() != shapes.len() {
            return None;
        }
        let args: HashMap<&str, &Shape> =
            item.feed.iter().map(String::as_str).zip(shapes).collect();
        for node in &mut item.graph.node {
            if let Some(shape @ Shape::Known(_)) = args.get(node.name.as_str()).copied() {
                let shape = shape.to_proto();
                node.attr.insert(
                    "_output_shapes".to_string(),
                    AttrValue {
                        value: Some(Value::List(ListValue {
                            shape: vec![shape],
                            ..ListValue::default()
                        })),
                    },
                );
            }
        }
        let (structure, outputs) = (self.infer_body)(&item.graph, self).ok()?;
        item.fetch
            .iter()
            .map(|retval| {
                let &i = structure.index.get(retval.as_str())?;
                let edge = structure.data_inputs.get(i)?.first()?;
                outputs.get(edge.node)?.get(edge.port).cloned()
            })
            .collect()
    }
}
