//! Structural checks run on every graph this crate writes (and usable on any graph): what
//! TensorFlow's loaders and the TPU rewrite passes need to hold, checked without TensorFlow.
//!
//! - every function an op or a `func` attribute names exists (or is a registered op);
//! - no function reaches itself through calls or function attributes (TensorFlow's loader
//!   follows every `func` attribute and refuses cycles);
//! - each `TPUPartitionedCall` has `Tin` data inputs plus the ordinal last, from a
//!   `TPUOrdinalSelector`; its, `StatefulPartitionedCall`'s, `PartitionedCall`'s and
//!   `BatchFunction`'s `Tin`/`Tout` (and `Tcaptured`) agree with the callee's signature;
//! - per scope, exactly one `TPUReplicateMetadata` per `_tpu_replicate` cluster, every
//!   clustered node's cluster has one, the fan-in/fan-out and compilation-result nodes are
//!   outside it, and pivots and compilation results name a cluster of their scope;
//! - no variable is read or written inside a cluster's own nodes, no resource is replicated,
//!   and nothing a cluster calls holds another cluster (no nesting);
//! - `BatchFunction` nodes carry the options asked for.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use unbound_graph::ops::builtin_ops;
use unbound_proto::tensorflow::{FunctionDef, NodeDef};

use crate::attrs::{self, function_name, get_s, input_node, referenced_functions};
use crate::error::CheckFault;
use crate::model::Graph;
use crate::options::BatchOptions;
use crate::rewrite::batch_attrs;

/// Ops that read or write a variable through its resource handle.
const VARIABLE_OPS: [&str; 5] = [
    "ReadVariableOp",
    "AssignVariableOp",
    "ResourceGather",
    "VarHandleOp",
    "AssignAddVariableOp",
];

/// Checks `graph`; `batches` maps a batch function's name to the options its `BatchFunction`
/// nodes must carry. The error says which check failed where.
pub fn check_graph(
    graph: &Graph,
    batches: &HashMap<String, BatchOptions>,
) -> Result<(), CheckFault> {
    let mut functions: HashMap<&str, &FunctionDef> = HashMap::new();
    for f in &graph.functions {
        if functions.insert(function_name(f), f).is_some() {
            return Err(CheckFault::DuplicateFunction {
                function: function_name(f).to_string(),
            });
        }
    }
    let graph_nodes: Vec<&NodeDef> = graph.live_nodes().collect();
    check_scope("graph", &graph_nodes, &functions, batches)?;
    for f in &graph.functions {
        let nodes: Vec<&NodeDef> = f.node_def.iter().collect();
        check_scope(function_name(f), &nodes, &functions, batches)?;
    }
    check_acyclic(&functions)?;
    check_not_nested(&functions)
}

/// The checks within one scope (the graph, or one function's body).
fn check_scope(
    scope: &str,
    nodes: &[&NodeDef],
    functions: &HashMap<&str, &FunctionDef>,
    batches: &HashMap<String, BatchOptions>,
) -> Result<(), CheckFault> {
    let by_name: HashMap<&str, &NodeDef> = nodes.iter().map(|n| (n.name.as_str(), *n)).collect();
    let mut metadata: BTreeMap<&[u8], usize> = BTreeMap::new();
    let mut clustered: BTreeSet<&[u8]> = BTreeSet::new();
    let at = |node: &NodeDef| format!("{scope}/{}", node.name);
    for node in nodes {
        let mut refs = Vec::new();
        for v in node.attr.values() {
            referenced_functions(v, &mut refs);
        }
        for r in refs {
            if !functions.contains_key(r) && !builtin_ops().contains_key(r) {
                return Err(CheckFault::MissingFunction {
                    node: at(node),
                    function: r.to_string(),
                });
            }
        }
        if node.op == "TPUReplicateMetadata" {
            match get_s(node, attrs::TPU_REPLICATE) {
                Some(c) => *metadata.entry(c).or_default() += 1,
                None => {
                    return Err(CheckFault::MetadataWithoutCluster {
                        node: at(node),
                        attr: attrs::TPU_REPLICATE,
                    })
                }
            }
        }
        if let Some(c) = get_s(node, attrs::TPU_REPLICATE) {
            clustered.insert(c);
            if [
                "TPUReplicatedInput",
                "TPUReplicatedOutput",
                "TPUCompilationResult",
            ]
            .contains(&node.op.as_str())
            {
                return Err(CheckFault::InsideCluster {
                    node: at(node),
                    op: node.op.clone(),
                });
            }
            if VARIABLE_OPS.contains(&node.op.as_str()) {
                return Err(CheckFault::VariableInCluster {
                    node: at(node),
                    op: node.op.clone(),
                    cluster: String::from_utf8_lossy(c).into_owned(),
                });
            }
        }
        if node.op == "TPUReplicatedInput"
            && attrs::get_type(node, "T").is_some_and(attrs::is_resource)
        {
            return Err(CheckFault::ReplicatedResource { node: at(node) });
        }
        check_call(scope, node, &by_name, functions, batches)?;
    }
    for c in &clustered {
        let n = metadata.get(c).copied().unwrap_or(0);
        if n != 1 {
            return Err(CheckFault::MetadataCount {
                scope: scope.to_string(),
                cluster: String::from_utf8_lossy(c).into_owned(),
                count: n,
            });
        }
    }
    for node in nodes {
        for attr in [attrs::PIVOT_FOR_CLUSTER, attrs::TPU_COMPILATION_STATUS] {
            if let Some(c) = get_s(node, attr) {
                if !metadata.contains_key(c) {
                    return Err(CheckFault::UnknownCluster {
                        node: at(node),
                        cluster: String::from_utf8_lossy(c).into_owned(),
                        attr,
                    });
                }
            }
        }
    }
    Ok(())
}

/// The checks of one call node: inputs, ordinal, types against the callee, batch options.
fn check_call(
    scope: &str,
    node: &NodeDef,
    by_name: &HashMap<&str, &NodeDef>,
    functions: &HashMap<&str, &FunctionDef>,
    batches: &HashMap<String, BatchOptions>,
) -> Result<(), CheckFault> {
    let is_call = attrs::CALL_OPS.contains(&node.op.as_str());
    if !is_call && node.op != "BatchFunction" {
        return Ok(());
    }
    let at = format!("{scope}/{} ({})", node.name, node.op);
    let Some(callee) = node.attr.get("f").and_then(attrs::func_name) else {
        return Err(CheckFault::NoFunctionAttr { call: at });
    };
    let Some(function) = functions.get(callee) else {
        return Err(CheckFault::MissingCallee {
            call: at,
            callee: callee.to_string(),
        });
    };
    let Some((fin, fout)) = attrs::signature_types(function) else {
        return Ok(());
    };
    let tin = attrs::get_types(node, "Tin");
    let tout = attrs::get_types(node, "Tout");
    let data = attrs::data_input_count(node);
    let mut expected_in = tin.clone();
    if node.op == "BatchFunction" {
        let captured = attrs::get_types(node, "Tcaptured");
        expected_in.extend(&captured);
        if tin.is_empty() || tout.is_empty() {
            return Err(CheckFault::EmptyBatchTypes { call: at });
        }
        if expected_in != fin {
            return Err(CheckFault::BatchArguments {
                call: at,
                inputs: expected_in,
                callee: callee.to_string(),
                arguments: fin,
            });
        }
        if let Some(b) = batches.get(callee) {
            for (k, v) in batch_attrs(callee, b, &tin, &captured, &tout) {
                if node.attr.get(k) != Some(&v) {
                    return Err(CheckFault::BatchAttr { call: at, attr: k });
                }
            }
        }
    } else if tin != fin {
        return Err(CheckFault::Arguments {
            call: at,
            tin,
            callee: callee.to_string(),
            arguments: fin,
        });
    }
    if tout != fout {
        return Err(CheckFault::Results {
            call: at,
            tout,
            callee: callee.to_string(),
            results: fout,
        });
    }
    let ordinal = usize::from(node.op == "TPUPartitionedCall");
    if data != expected_in.len() + ordinal {
        return Err(CheckFault::DataInputs {
            call: at,
            found: data,
            expected: expected_in.len() + ordinal,
        });
    }
    if ordinal == 1 {
        let last = input_node(&node.input[data - 1]);
        match by_name.get(last) {
            Some(n) if n.op == "TPUOrdinalSelector" => {}
            _ => {
                return Err(CheckFault::NoOrdinalSelector {
                    call: at,
                    input: node.input[data - 1].clone(),
                })
            }
        }
    }
    Ok(())
}

/// The functions each function refers to (as an op or through function attributes).
fn callees<'a>(f: &'a FunctionDef, functions: &HashMap<&str, &FunctionDef>) -> Vec<&'a str> {
    let mut out = Vec::new();
    for node in &f.node_def {
        if functions.contains_key(node.op.as_str()) {
            out.push(node.op.as_str());
        }
        for v in node.attr.values() {
            referenced_functions(v, &mut out);
        }
    }
    out
}

/// No function reaches itself.
fn check_acyclic(functions: &HashMap<&str, &FunctionDef>) -> Result<(), CheckFault> {
    // 0: unvisited, 1: on the stack, 2: done.
    let mut state: HashMap<&str, u8> = HashMap::new();
    let mut names: Vec<&str> = functions.keys().copied().collect();
    names.sort_unstable();
    for start in names {
        if state.get(start).copied().unwrap_or(0) != 0 {
            continue;
        }
        let mut stack: Vec<(&str, Vec<&str>)> = vec![(start, callees(functions[start], functions))];
        state.insert(start, 1);
        while let Some((name, pending)) = stack.last_mut() {
            match pending.pop() {
                None => {
                    state.insert(name, 2);
                    stack.pop();
                }
                Some(next) => {
                    let Some(f) = functions.get(next) else {
                        continue;
                    };
                    match state.get(next).copied().unwrap_or(0) {
                        1 => {
                            return Err(CheckFault::FunctionCycle {
                                function: name.to_string(),
                                next: next.to_string(),
                            })
                        }
                        0 => {
                            state.insert(next, 1);
                            stack.push((next, callees(f, functions)));
                        }
                        _ => {}
                    }
                }
            }
        }
    }
    Ok(())
}

/// Nothing a clustered node calls holds a cluster of its own.
fn check_not_nested(functions: &HashMap<&str, &FunctionDef>) -> Result<(), CheckFault> {
    for f in functions.values() {
        for node in f
            .node_def
            .iter()
            .filter(|n| get_s(n, attrs::TPU_REPLICATE).is_some())
        {
            let mut refs = Vec::new();
            for v in node.attr.values() {
                referenced_functions(v, &mut refs);
            }
            let mut seen = BTreeSet::new();
            while let Some(r) = refs.pop() {
                let Some(g) = functions.get(r) else { continue };
                if !seen.insert(r) {
                    continue;
                }
                if g.node_def.iter().any(|n| n.op == "TPUReplicateMetadata") {
                    return Err(CheckFault::Nested {
                        node: format!("{}/{}", function_name(f), node.name),
                        function: r.to_string(),
                    });
                }
                refs.extend(callees(g, functions));
            }
        }
    }
    Ok(())
}
