//! The reverse rewrite, TPU to CPU, so a TPU model can be run and tested without a TPU (what
//! the TPU Inference Converter's `rewrite_tpu_partitioned_call` and TensorFlow's
//! convert-TPU-model-to-CPU pass do), in the graph and in every function:
//!
//! - `TPUPartitionedCall` becomes `StatefulPartitionedCall` of the same function, without the
//!   ordinal input; `TPUOrdinalSelector`, `TPUReplicateMetadata` and `TPUCompilationResult`
//!   nodes go, and control inputs from them with them;
//! - one-replica `TPUReplicatedInput`/`TPUReplicatedOutput` become `Identity`;
//! - the cluster attributes (`_tpu_replicate`, ...) and `TPU` device placements are removed;
//! - `BatchFunction` stays (it has CPU kernels) unless `unbatch` is asked, then it becomes a
//!   `StatefulPartitionedCall` of its function with the same inputs.

use std::collections::HashSet;

use serde::Serialize;
use unbound_proto::tensorflow::NodeDef;

use crate::attrs::{self, data_input_count, input_node, is_control};
use crate::error::CpuFault;
use crate::model::Graph;
use crate::rewrite::rename_output_arg;

/// Ops removed by the reverse rewrite.
const REMOVED_OPS: [&str; 3] = [
    "TPUOrdinalSelector",
    "TPUReplicateMetadata",
    "TPUCompilationResult",
];

/// Attributes removed from every node.
const CLUSTER_ATTRS: [&str; 5] = [
    attrs::TPU_REPLICATE,
    attrs::TPU_INPUT_IDENTITY,
    attrs::TPU_OUTPUT_IDENTITY,
    attrs::TPU_COMPILATION_STATUS,
    attrs::PIVOT_FOR_CLUSTER,
];

/// What the reverse rewrite changed, summed over the graph and its functions.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct CpuCounts {
    /// `TPUPartitionedCall` nodes turned into `StatefulPartitionedCall`.
    pub partitioned_calls: usize,
    /// `BatchFunction` nodes turned into `StatefulPartitionedCall` (with `unbatch`).
    pub batch_functions: usize,
    /// `TPUReplicatedInput`/`Output` nodes turned into `Identity`.
    pub replicated: usize,
    /// Nodes removed.
    pub removed: usize,
}

/// Rewrites `graph` to run on CPU. Errors name a node the rewrite cannot turn back (several
/// replicas, or a data consumer of a removed node).
pub fn rewrite_to_cpu(graph: &mut Graph, unbatch: bool) -> Result<CpuCounts, CpuFault> {
    let mut counts = CpuCounts::default();
    let live: Vec<usize> = (0..graph.nodes.len())
        .filter(|&i| !graph.is_removed(i))
        .collect();
    let scope_nodes: Vec<NodeDef> = live.iter().map(|&i| graph.nodes[i].clone()).collect();
    let plan = plan_scope("graph", &scope_nodes)?;
    for (k, &i) in live.iter().enumerate() {
        if plan.removed.contains(&scope_nodes[k].name) {
            graph.remove_node(i);
            counts.removed += 1;
            continue;
        }
        let node = &mut graph.nodes[i];
        if convert_node(node, &plan.removed, unbatch, &mut counts)? {
            graph.touch_node(i);
        }
    }
    for f in 0..graph.functions.len() {
        let function = &mut graph.functions[f];
        let scope = attrs::function_name(function).to_string();
        let plan = plan_scope(&scope, &function.node_def)?;
        let before = counts.clone();
        let mut renames = Vec::new();
        function
            .node_def
            .retain(|n| !plan.removed.contains(&n.name));
        counts.removed += plan.removed.len();
        for node in function.node_def.iter_mut() {
            let op = node.op.clone();
            if convert_node(node, &plan.removed, unbatch, &mut counts)? {
                match op.as_str() {
                    "TPUReplicatedOutput" => renames.push((node.name.clone(), "outputs", "output")),
                    "BatchFunction" if node.op != op => {
                        renames.push((node.name.clone(), "out_tensors", "output"))
                    }
                    _ => {}
                }
            }
        }
        for (name, old, new) in renames {
            rename_output_arg(function, &name, old, new);
        }
        function
            .control_ret
            .retain(|_, node| !plan.removed.contains(node));
        if let Some(sig) = function.signature.as_mut() {
            let kept: HashSet<&String> = function.control_ret.keys().collect();
            sig.control_output.retain(|c| kept.contains(c));
        }
        if counts != before || !plan.removed.is_empty() {
            graph.touch_function(f);
        }
    }
    Ok(counts)
}

/// The nodes of one scope that go.
struct ScopePlan {
    removed: HashSet<String>,
}

fn plan_scope(scope: &str, nodes: &[NodeDef]) -> Result<ScopePlan, CpuFault> {
    let removed: HashSet<String> = nodes
        .iter()
        .filter(|n| REMOVED_OPS.contains(&n.op.as_str()))
        .map(|n| n.name.clone())
        .collect();
    for node in nodes {
        let data = data_input_count(node);
        for (k, input) in node.input[..data].iter().enumerate() {
            let from = input_node(input);
            if !removed.contains(from) {
                continue;
            }
            let is_ordinal = node.op == "TPUPartitionedCall" && k + 1 == data;
            if !is_ordinal {
                return Err(CpuFault::NoCpuEquivalent {
                    node: format!("{scope}/{}", node.name),
                    op: node.op.clone(),
                    input: from.to_string(),
                });
            }
        }
    }
    Ok(ScopePlan { removed })
}

/// Converts one node; whether it changed.
fn convert_node(
    node: &mut NodeDef,
    removed: &HashSet<String>,
    unbatch: bool,
    counts: &mut CpuCounts,
) -> Result<bool, CpuFault> {
    let before = node.clone();
    node.input
        .retain(|i| !(is_control(i) && removed.contains(input_node(i))));
    for attr in CLUSTER_ATTRS {
        node.attr.remove(attr);
    }
    if node.device.contains("TPU") {
        node.device.clear();
    }
    match node.op.as_str() {
        "TPUPartitionedCall" => {
            let data = data_input_count(node);
            if data == 0 {
                return Err(CpuFault::NoOrdinal {
                    node: node.name.clone(),
                });
            }
            node.input.remove(data - 1);
            node.op = "StatefulPartitionedCall".into();
            node.attr.remove("autotuner_thresh");
            for attr in attrs::PARTITIONED_CALL_ONLY {
                node.attr.insert(attr.into(), attrs::s(""));
            }
            counts.partitioned_calls += 1;
        }
        "BatchFunction" if unbatch => {
            let mut tin = attrs::get_types(node, "Tin");
            tin.extend(attrs::get_types(node, "Tcaptured"));
            let keep: Vec<String> = ["f", "Tout"].into_iter().map(String::from).collect();
            node.attr
                .retain(|k, _| keep.contains(k) || k.starts_with('_'));
            node.attr.insert("Tin".into(), attrs::types(&tin));
            for attr in attrs::PARTITIONED_CALL_ONLY {
                node.attr.insert(attr.into(), attrs::s(""));
            }
            node.op = "StatefulPartitionedCall".into();
            counts.batch_functions += 1;
        }
        "TPUReplicatedInput" | "TPUReplicatedOutput" => {
            let replicas = match node.op.as_str() {
                "TPUReplicatedInput" => attrs::get_i(node, "N"),
                _ => attrs::get_i(node, "num_replicas"),
            };
            if replicas != Some(1) {
                return Err(CpuFault::Replicas {
                    node: node.name.clone(),
                    op: node.op.clone(),
                    replicas,
                });
            }
            let dtype = attrs::get_type(node, "T").unwrap_or_default();
            node.attr.clear();
            node.attr.insert("T".into(), attrs::ty(dtype));
            node.op = "Identity".into();
            counts.replicated += 1;
        }
        _ => {}
    }
    Ok(*node != before)
}
