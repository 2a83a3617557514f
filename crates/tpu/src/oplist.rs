//! `MetaInfoDef.stripped_op_list`, recomputed after a rewrite: the OpDefs of every op the graph
//! uses, following function calls the way TensorFlow's `ops_used_by_graph_def` does, but
//! through every `func` attribute (TensorFlow's follows only `PartitionedCall`'s and
//! `StatefulPartitionedCall`'s `f`, so it misses what `BatchFunction` and `TPUPartitionedCall`
//! call, and the TPU ops in there).

use std::collections::{BTreeSet, HashMap};

use unbound_graph::ops::builtin_ops;
use unbound_proto::tensorflow::{FunctionDef, NodeDef, OpDef, OpList};

use crate::attrs::{function_name, referenced_functions};
use crate::model::Graph;

/// The op list of `graph`, sorted by name as TensorFlow writes it. An op keeps the OpDef the
/// model's own list had for it (custom ops included); a new one gets TensorFlow 2.21's. An op
/// neither knows (a custom op the rewrite cannot have added) is left out, as TensorFlow leaves
/// out ops missing from its registry.
pub fn stripped_op_list(graph: &Graph, original: Option<&OpList>) -> OpList {
    let functions: HashMap<&str, &FunctionDef> = graph
        .functions
        .iter()
        .map(|f| (function_name(f), f))
        .collect();
    let mut used: BTreeSet<String> = BTreeSet::new();
    let mut seen: BTreeSet<&str> = BTreeSet::new();
    let mut pending: Vec<&FunctionDef> = Vec::new();
    let mut nodes: Vec<&NodeDef> = graph.live_nodes().collect();
    loop {
        for node in nodes.drain(..) {
            let mut names: Vec<&str> = Vec::new();
            for v in node.attr.values() {
                referenced_functions(v, &mut names);
            }
            if !functions.contains_key(node.op.as_str()) {
                used.insert(node.op.clone());
            }
            for name in std::iter::once(node.op.as_str()).chain(names) {
                if let Some((k, f)) = functions.get_key_value(name) {
                    if seen.insert(k) {
                        pending.push(f);
                    }
                }
            }
        }
        match pending.pop() {
            Some(f) => nodes.extend(f.node_def.iter()),
            None => break,
        }
    }
    let from_model: HashMap<&str, &OpDef> = original
        .map(|l| l.op.iter().map(|o| (o.name.as_str(), o)).collect())
        .unwrap_or_default();
    let op = used
        .iter()
        .filter_map(|name| {
            from_model
                .get(name.as_str())
                .map(|o| (*o).clone())
                .or_else(|| builtin_ops().get(name).map(|e| (*e.op_def).clone()))
        })
        .collect();
    OpList { op }
}
