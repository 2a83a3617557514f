//! The pruning itself: bypass and remove `Identity` and `NoOp` nodes that nothing needs.
//!
//! Rules (after TensorFlow's dependency optimizer, more conservative where it is cheap to be):
//!
//! - A node named in `preserve` is never removed.
//! - `Identity` is removed when it has exactly one data input from a node of the graph, on the
//!   same device string, and its `T` is neither `DT_RESOURCE` nor a reference type; and its
//!   input is not a variable (`VariableV2`, `VarHandleOp`, ...: the Identity is the read) nor a
//!   `_Recv`/`_HostRecv`. `Snapshot` is kept: it exists to copy.
//!   Consumers read the Identity's input instead; a consumer with a control dependency on the
//!   Identity gets one on its input node instead (unless it already depends on it), and every
//!   consumer inherits the Identity's control inputs.
//!   Kept as TensorFlow keeps them: an Identity with control inputs feeding a `_Retval` or
//!   `Merge`, and an Identity after a `Switch` that some node has a control dependency on (that
//!   dependency selects a branch).
//! - `NoOp` (control inputs only) is bypassed, its consumers taking its control inputs, when that
//!   does not add edges (`inputs * consumers <= inputs + consumers`, so a NoOp with no consumers
//!   always goes) and none of its inputs is a `Switch`.
//! - No node ever gets a dependency on itself: a removal that would make one is skipped.
//! - The function library is left alone (TensorFlow optimizes each function as its own item;
//!   function-graph items with `_Arg`/`_Retval` nodes are handled like any graph).

use std::collections::HashSet;

use unbound_proto::tensorflow::{attr_value, DataType, GraphDef};

use crate::graph::{parse, Index};

/// Ops whose Identity consumer is a read of state, not a plain forward.
const STATEFUL_SOURCES: [&str; 8] = [
    "Variable",
    "VariableV2",
    "AutoReloadVariable",
    "TemporaryVariable",
    "VarHandleOp",
    "_VarHandlesOp",
    "_Recv",
    "_HostRecv",
];

/// Removes what can go; returns the graph and how many nodes were removed.
pub fn prune(mut graph: GraphDef, preserve: &HashSet<String>) -> (GraphDef, usize) {
    let mut index = Index::new(std::mem::take(&mut graph.node));
    let mut removed = 0;
    loop {
        let before = removed;
        for i in 0..index.nodes.len() {
            if index.removed[i] || preserve.contains(&index.nodes[i].name) {
                continue;
            }
            let done = match index.nodes[i].op.as_str() {
                "Identity" => bypass_identity(&mut index, i),
                "NoOp" => bypass_noop(&mut index, i),
                _ => false,
            };
            removed += usize::from(done);
        }
        if removed == before {
            break;
        }
    }
    graph.node = index.into_nodes();
    (graph, removed)
}

/// `T` of an Identity when it is a resource or reference type.
fn handle_like(t: Option<&attr_value::Value>) -> bool {
    match t {
        Some(attr_value::Value::Type(t)) => *t == DataType::DtResource as i32 || *t >= 100,
        _ => false,
    }
}

fn bypass_identity(index: &mut Index, i: usize) -> bool {
    let node = &index.nodes[i];
    let (data, controls): (Vec<&String>, Vec<&String>) =
        node.input.iter().partition(|s| !s.starts_with('^'));
    let [source] = data[..] else { return false };
    let source_input = parse(source);
    let Some(j) = index.get(source_input.node) else {
        return false;
    };
    let input_node = &index.nodes[j];
    if j == i
        || handle_like(node.attr.get("T").and_then(|a| a.value.as_ref()))
        || STATEFUL_SOURCES.contains(&input_node.op.as_str())
        || input_node.device != node.device
    {
        return false;
    }
    let name = node.name.clone();
    let control_ref = format!("^{name}");
    let after_switch = input_node.op == "Switch";
    for &c in &index.consumers[i] {
        let consumer = &index.nodes[c];
        if c == j
            || (!controls.is_empty() && matches!(consumer.op.as_str(), "_Retval" | "Merge"))
            || (after_switch && consumer.input.contains(&control_ref))
            // Identity has one output; anything else is malformed: leave it be.
            || consumer.input.iter().any(|s| {
                let p = parse(s);
                p.node == name && p.port.is_some_and(|port| port != 0)
            })
        {
            return false;
        }
    }
    let source = source.clone();
    let source_node = source_input.node.to_string();
    let controls: Vec<String> = controls.iter().map(|s| parse(s).node.to_string()).collect();
    for c in std::mem::take(&mut index.consumers[i]) {
        let mut data_use = false;
        let mut control_use = false;
        let inputs = std::mem::take(&mut index.nodes[c].input);
        let mut rewired = Vec::with_capacity(inputs.len());
        for input in inputs {
            let p = parse(&input);
            if p.node != name {
                rewired.push(input);
            } else if p.port.is_some() {
                data_use = true;
                rewired.push(source.clone());
            } else {
                control_use = true;
            }
        }
        index.nodes[c].input = rewired;
        if data_use {
            index.consumers[j].insert(c);
        }
        if control_use && !data_use {
            index.add_control(c, &source_node);
        }
        for producer in &controls {
            index.add_control(c, producer);
        }
    }
    index.remove(i);
    true
}

fn bypass_noop(index: &mut Index, i: usize) -> bool {
    let node = &index.nodes[i];
    if node.input.iter().any(|s| !s.starts_with('^')) {
        return false;
    }
    let name = node.name.clone();
    let inputs: Vec<String> = node
        .input
        .iter()
        .map(|s| parse(s).node.to_string())
        .collect();
    let consumers: Vec<usize> = index.consumers[i].iter().copied().collect();
    let (n_in, n_out) = (inputs.len(), consumers.len());
    if n_in * n_out > n_in + n_out {
        return false;
    }
    for producer in &inputs {
        if index
            .get(producer)
            .is_some_and(|p| index.nodes[p].op == "Switch")
        {
            return false;
        }
    }
    for &c in &consumers {
        let consumer = &index.nodes[c];
        let uses_data = consumer
            .input
            .iter()
            .any(|s| parse(s).node == name && !s.starts_with('^'));
        if uses_data || inputs.contains(&consumer.name) {
            return false;
        }
    }
    let control_ref = format!("^{name}");
    for c in consumers {
        index.nodes[c].input.retain(|s| *s != control_ref);
        for producer in &inputs {
            index.add_control(c, producer);
        }
    }
    index.remove(i);
    true
}
