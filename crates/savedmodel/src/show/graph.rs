//! Graph statistics from a wire-level `MetaGraphDef.graph_def`: node count, the ops used, the
//! library's functions. Nodes are decoded one level at a time; tensor values are never read.

use std::collections::{BTreeMap, BTreeSet};

use crate::Result;
use unbound_proto::fields::tensorflow::{
    attr_value, function_def, function_def_library, graph_def, meta_graph_def, name_attr_list,
    node_def, op_def, version_def,
};
use unbound_wire::WireMessage;

use super::load_order::load_order;
use super::wire::{messages, string, varint};

/// What `show` reports about a graph.
pub struct GraphStats {
    /// Number of nodes.
    pub nodes: u64,
    /// `versions.producer`.
    pub producer: i64,
    /// Ops used, as TensorFlow's `ops_used_by_graph_def` computes them, sorted.
    pub ops: Vec<String>,
    /// Library function names, in order.
    pub functions: Vec<String>,
    /// Nodes in all library functions.
    pub function_nodes: u64,
    /// The library functions in the order TensorFlow's loader imports them.
    pub load_order: Vec<String>,
}

/// A node's op and the functions its attributes name.
pub struct NodeOps {
    /// The op.
    pub op: String,
    /// For `PartitionedCall` / `StatefulPartitionedCall`, `attr["f"]`'s function.
    pub called: Option<String>,
    /// Every function named by a `func` or `list.func` attribute (function body nodes only).
    pub funcs: Vec<String>,
}

/// Statistics of the `graph_def` of `mg` (all its occurrences, as protobuf merges them).
pub fn graph_stats(mg: &WireMessage, file: &str) -> Result<GraphStats> {
    let mut nodes = Vec::new();
    let mut functions: Vec<(String, Vec<NodeOps>)> = Vec::new();
    let mut producer = 0;
    for graph in messages(mg, meta_graph_def::GRAPH_DEF, file) {
        let graph = graph?;
        for node in messages(&graph, graph_def::NODE, file) {
            nodes.push(node_ops(&*node?, file, false)?);
        }
        for library in messages(&graph, graph_def::LIBRARY, file) {
            let library = library?;
            for function in messages(&library, function_def_library::FUNCTION, file) {
                let function = function?;
                let mut name = String::new();
                for sig in messages(&function, function_def::SIGNATURE, file) {
                    name = string(&*sig?, op_def::NAME)?;
                }
                let mut body = Vec::new();
                for node in messages(&function, function_def::NODE_DEF, file) {
                    body.push(node_ops(&*node?, file, true)?);
                }
                functions.push((name, body));
            }
        }
        for versions in messages(&graph, graph_def::VERSIONS, file) {
            producer = varint(&*versions?, version_def::PRODUCER) as i64;
        }
    }
    let function_nodes = functions.iter().map(|(_, b)| b.len() as u64).sum();
    Ok(GraphStats {
        nodes: nodes.len() as u64,
        producer,
        ops: ops_used(&nodes, &functions),
        load_order: load_order(&functions),
        functions: functions.iter().map(|(n, _)| n.clone()).collect(),
        function_nodes,
    })
}

/// TensorFlow's `meta_graph.ops_used_by_graph_def`: the ops of the graph's nodes and of the
/// functions they reach (by op name, or by `attr["f"]` of a partitioned call), function names
/// excluded.
fn ops_used(nodes: &[NodeOps], functions: &[(String, Vec<NodeOps>)]) -> Vec<String> {
    let by_name: BTreeMap<&str, &[NodeOps]> = functions
        .iter()
        .map(|(n, b)| (n.as_str(), b.as_slice()))
        .collect();
    let mut used: BTreeSet<&str> = BTreeSet::new();
    let mut pending: Vec<&[NodeOps]> = vec![nodes];
    while let Some(list) = pending.pop() {
        for n in list {
            for op in std::iter::once(n.op.as_str()).chain(n.called.as_deref()) {
                if used.insert(op) {
                    if let Some(body) = by_name.get(op) {
                        pending.push(body);
                    }
                }
            }
        }
    }
    used.into_iter()
        .filter(|op| !by_name.contains_key(op))
        .map(str::to_string)
        .collect()
}

/// The op of a node, the function a partitioned call names, and with `all_funcs` every
/// function its attributes name.
fn node_ops(node: &WireMessage, file: &str, all_funcs: bool) -> Result<NodeOps> {
    let op = string(node, node_def::OP)?;
    let partitioned = op == "PartitionedCall" || op == "StatefulPartitionedCall";
    let mut called = None;
    let mut funcs = Vec::new();
    if partitioned || all_funcs {
        for entry in messages(node, node_def::ATTR, file) {
            let entry = entry?;
            let is_f = string(&entry, node_def::attr_entry::KEY)? == "f";
            for value in messages(&entry, node_def::attr_entry::VALUE, file) {
                let value = value?;
                for func in messages(&value, attr_value::FUNC, file) {
                    let name = string(&*func?, name_attr_list::NAME)?;
                    if partitioned && is_f {
                        called = Some(name.clone());
                    }
                    funcs.push(name);
                }
                if all_funcs {
                    for list in messages(&value, attr_value::LIST, file) {
                        for func in messages(&*list?, attr_value::list_value::FUNC, file) {
                            funcs.push(string(&*func?, name_attr_list::NAME)?);
                        }
                    }
                }
            }
        }
    }
    Ok(NodeOps { op, called, funcs })
}
