//! The graph pass: replace each foldable node by a `Const` of the same name, until nothing more
//! folds.
//!
//! A node folds when its op is one of [`crate::ops::Op`], it is not in `preserve` (TensorFlow's
//! constant folding leaves preserved nodes alone too), every data input is output 0 of a
//! `Const` whose tensor [`crate::tensor::read`] accepts (float, double, int32, int64; at most
//! 4096 elements), the dtypes equal the node's `T`, and the kernel gives a result (shapes
//! broadcast; no integer `RealDiv`; result at most 4096 elements). The `Const` keeps the name
//! (consumers are untouched) and device, and as control inputs the node's control inputs and its
//! input constants' (so it stays in the same frame and after the same dependencies). The input
//! constants stay (other nodes may read them; pruning removes them when dead).

use std::collections::{HashMap, HashSet};

use unbound_proto::tensorflow::{attr_value, AttrValue, GraphDef, NodeDef};

use crate::ops::{self, Op};
use crate::tensor::{self, Tensor};

/// Folds what can be folded; returns the graph and how many nodes became constants.
pub fn fold(mut graph: GraphDef, preserve: &HashSet<String>) -> (GraphDef, usize) {
    let position: HashMap<String, usize> = graph
        .node
        .iter()
        .enumerate()
        .map(|(i, n)| (n.name.clone(), i))
        .collect();
    let mut folded = 0;
    loop {
        let before = folded;
        for i in 0..graph.node.len() {
            if preserve.contains(&graph.node[i].name) {
                continue;
            }
            if let Some(constant) = try_fold(&graph.node, &position, i) {
                graph.node[i] = constant;
                folded += 1;
            }
        }
        if folded == before {
            return (graph, folded);
        }
    }
}

fn attr_type(node: &NodeDef, name: &str) -> Option<i32> {
    match node.attr.get(name)?.value.as_ref()? {
        attr_value::Value::Type(t) => Some(*t),
        _ => None,
    }
}

/// The `Const` node `nodes[i]` folds into, if it folds.
fn try_fold(nodes: &[NodeDef], position: &HashMap<String, usize>, i: usize) -> Option<NodeDef> {
    let node = &nodes[i];
    let op = Op::parse(&node.op)?;
    let t = attr_type(node, "T")?;
    let (data, controls): (Vec<&String>, Vec<&String>) =
        node.input.iter().partition(|s| !s.starts_with('^'));
    if data.len() != op.arity() {
        return None;
    }
    let mut inputs: Vec<Tensor> = Vec::with_capacity(data.len());
    let mut control_inputs: Vec<String> = controls.iter().map(|s| s.to_string()).collect();
    for input in data {
        let name = input.strip_suffix(":0").unwrap_or(input);
        let source = &nodes[*position.get(name)?];
        if source.op != "Const" || attr_type(source, "dtype") != Some(t) {
            return None;
        }
        let proto = match source.attr.get("value")?.value.as_ref()? {
            attr_value::Value::Tensor(proto) => proto,
            _ => return None,
        };
        if proto.dtype != t {
            return None;
        }
        inputs.push(tensor::read(proto)?);
        control_inputs.extend(source.input.iter().filter(|s| s.starts_with('^')).cloned());
    }
    let result = match op {
        Op::Binary(b) => ops::binary(b, &inputs[0], &inputs[1])?,
        Op::Unary(u) => ops::unary(u, &inputs[0])?,
    };
    let mut seen = HashSet::new();
    control_inputs.retain(|c| seen.insert(c.clone()) && c[1..] != node.name);
    let mut attr = std::collections::BTreeMap::new();
    attr.insert(
        "dtype".to_string(),
        AttrValue {
            value: Some(attr_value::Value::Type(t)),
        },
    );
    attr.insert(
        "value".to_string(),
        AttrValue {
            value: Some(attr_value::Value::Tensor(tensor::write(&result))),
        },
    );
    Some(NodeDef {
        name: node.name.clone(),
        op: "Const".to_string(),
        input: control_inputs,
        device: node.device.clone(),
        attr,
        ..Default::default()
    })
}
