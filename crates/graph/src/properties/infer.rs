//! The driver: resolves the graph, visits nodes in topological order, and builds the
//! reported `TensorProperties`.

use std::collections::HashSet;

use unbound_proto::tensorflow::{GraphDef, NodeDef, OpDef};

use super::attrs::Attrs;
use super::calls::{called_function, Calls};
use super::graph::{parse_input, InputName, Structure};
use super::ops::{self, Ctx};
use super::shape::Shape;
use super::tensor::Tensor;
use super::{dtypes, GraphProperties, InferOptions, PropertiesError, TensorProperties};
use crate::ops::OpLibrary;

pub(super) fn run(
    graph: &GraphDef,
    library: &OpLibrary,
    feeds: &[String],
    options: InferOptions,
) -> Result<GraphProperties, PropertiesError> {
    let fed = fed_ports(feeds, options);
    let mut calls = Calls::new(library, body_outputs);
    let (structure, outputs) = outputs(graph, &mut calls, &fed)?;
    let invalid = Tensor::default();
    let index = structure
        .index
        .iter()
        .map(|(&name, &i)| (name.to_owned(), i))
        .collect();
    let output_props = outputs
        .iter()
        .map(|ts| {
            ts.iter()
                .map(|t| report(t, options.include_output_tensor_values))
                .collect()
        })
        .collect();
    let input_props = structure
        .data_inputs
        .iter()
        .map(|edges| {
            edges
                .iter()
                .map(|e| {
                    let t = outputs[e.node].get(e.port).unwrap_or(&invalid);
                    report(t, options.include_input_tensor_values)
                })
                .collect()
        })
        .collect();
    Ok(GraphProperties {
        index,
        inputs: input_props,
        outputs: output_props,
    })
}

/// [`outputs`] of a function body, with nothing fed: how [`Calls`] infers the bodies of the
/// functions it instantiates.
fn body_outputs<'g>(
    graph: &'g GraphDef,
    calls: &mut Calls<'_>,
) -> Result<(Structure<'g>, Vec<Vec<Tensor>>), PropertiesError> {
    outputs(graph, calls, &HashSet::new())
}

/// What is known about every output of every node of `graph`, and the graph's structure.
/// Calls are inferred through `calls` (which recurses here for function bodies).
fn outputs<'g>(
    graph: &'g GraphDef,
    calls: &mut Calls<'_>,
    fed: &HashSet<(String, usize)>,
) -> Result<(Structure<'g>, Vec<Vec<Tensor>>), PropertiesError> {
    let structure = Structure::new(graph)?;
    let nodes = &graph.node;
    let library = calls.library;
    let op_defs: Vec<Option<&OpDef>> = nodes.iter().map(|n| library.op_def(&n.op)).collect();

    // Dtypes do not depend on inputs: fix them first, so inputs not yet visited (on cycles)
    // still have theirs.
    let mut outputs: Vec<Vec<Tensor>> = nodes
        .iter()
        .zip(&op_defs)
        .zip(&structure.consumed_ports)
        .map(|((node, op_def), &consumed)| {
            let attrs = Attrs::new(node, *op_def);
            let types = match op_def {
                Some(op_def) => dtypes::from_op_def(&attrs, op_def),
                None => dtypes::without_op_def(&attrs, consumed),
            };
            types.into_iter().map(Tensor::unknown).collect()
        })
        .collect();

    let invalid = Tensor::default();
    // Nodes that depend on a fed port whose shape is forgotten: their `_output_shapes`, recorded
    // from the declared feed shapes, are not trusted either (TensorFlow reports them unknown).
    let mut from_feed = vec![false; nodes.len()];
    for &i in &structure.order {
        let node = &nodes[i];
        from_feed[i] = (!fed.is_empty()
            && (0..outputs[i].len()).any(|k| fed.contains(&(node.name.clone(), k))))
            || structure.data_inputs[i].iter().any(|e| from_feed[e.node]);
        let attrs = Attrs::new(node, op_defs[i]);
        let dtypes: Vec<i32> = outputs[i].iter().map(|t| t.dtype).collect();
        let inputs: Vec<&Tensor> = structure.data_inputs[i]
            .iter()
            .map(|e| outputs[e.node].get(e.port).unwrap_or(&invalid))
            .collect();
        let inferred = match called_function(node, library) {
            Some(function) => calls.outputs(function, &inputs),
            None => ops::infer(&Ctx {
                node,
                attrs,
                inputs,
                input_nodes: structure.data_inputs[i]
                    .iter()
                    .map(|e| &nodes[e.node])
                    .collect(),
                dtypes: &dtypes,
            }),
        };
        outputs[i] = finish(node, &attrs, &dtypes, inferred, fed, from_feed[i]);
    }
    Ok((structure, outputs))
}

/// The fed ports whose shapes must be forgotten (none when feeds are assumed valid).
fn fed_ports(feeds: &[String], options: InferOptions) -> HashSet<(String, usize)> {
    if options.assume_valid_feeds {
        return HashSet::new();
    }
    feeds
        .iter()
        .filter_map(|f| match parse_input(f)? {
            InputName::Data(node, port) => Some((node.to_owned(), port)),
            InputName::Control(_) => None,
        })
        .collect()
}

/// A node's outputs: the inferred ones, refined by `_output_shapes` (unless the node depends
/// on a forgotten feed), with fed ports forgotten.
fn finish(
    node: &NodeDef,
    attrs: &Attrs<'_>,
    dtypes: &[i32],
    inferred: Option<Vec<Tensor>>,
    fed: &HashSet<(String, usize)>,
    from_feed: bool,
) -> Vec<Tensor> {
    let mut inferred = inferred
        .filter(|v| v.len() == dtypes.len())
        .unwrap_or_default();
    let declared = match from_feed {
        true => &[],
        false => attrs.shapes("_output_shapes").unwrap_or(&[]),
    };
    dtypes
        .iter()
        .enumerate()
        .map(|(k, &dtype)| {
            let mut t = if k < inferred.len() {
                std::mem::take(&mut inferred[k])
            } else {
                Tensor::default()
            };
            t.dtype = dtype;
            if let Some(d) = declared.get(k) {
                t.shape = t.shape.merge(&Shape::from_proto(d));
            }
            if !fed.is_empty() && fed.contains(&(node.name.clone(), k)) {
                t = Tensor::unknown(dtype);
            }
            t
        })
        .collect()
}

/// The reported properties of one tensor.
fn report(t: &Tensor, with_value: bool) -> TensorProperties {
    TensorProperties {
        dtype: t.dtype,
        shape: Some(t.shape.to_proto()),
        value: if with_value { t.exported_value() } else { None },
    }
}
