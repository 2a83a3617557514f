//! Choosing the functions to run on TPU, as the TPU Inference Converter's options do: by
//! `function_aliases` alias, by concrete function name, or by signature name; and listing the
//! candidates with their aliases, signatures and sizes (`--list-functions`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use prost::Message;
use serde::Serialize;
use unbound_proto::tensorflow::{MetaGraphDef, NodeDef};

use crate::attrs::{func_name, function_name, input_node, CALL_OPS};
use crate::error::{Result, TpuError};
use crate::model::Graph;

/// The signature TensorFlow adds to run the initializers; never a TPU candidate.
pub const INIT_OP_SIGNATURE: &str = "__saved_model_init_op";

/// One function of a MetaGraphDef's library, as `--list-functions` shows it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct FunctionInfo {
    /// The concrete function's name.
    pub name: String,
    /// Its `function_aliases` alias, if any.
    pub alias: Option<String>,
    /// The signatures whose outputs it computes (called from the top-level graph).
    pub signatures: Vec<String>,
    /// Its serialized size in bytes.
    pub bytes: u64,
    /// Nodes in its body.
    pub nodes: usize,
    /// Call sites (`StatefulPartitionedCall`/`PartitionedCall` nodes naming it) in the graph
    /// and the library.
    pub call_sites: usize,
}

/// The library's functions, sorted by name, with what refers to them.
pub fn list_functions(info: &MetaGraphDef, graph: &Graph) -> Vec<FunctionInfo> {
    let aliases = aliases(info);
    let signatures = signature_functions(info, graph);
    let mut calls: BTreeMap<&str, usize> = BTreeMap::new();
    let all_nodes = graph
        .live_nodes()
        .chain(graph.functions.iter().flat_map(|f| f.node_def.iter()));
    for node in all_nodes {
        if let Some(f) = called_function(node) {
            *calls.entry(f).or_default() += 1;
        }
    }
    let mut out: Vec<FunctionInfo> = graph
        .functions
        .iter()
        .map(|f| {
            let name = function_name(f).to_string();
            FunctionInfo {
                alias: aliases.get(&name).cloned(),
                signatures: signatures
                    .iter()
                    .filter(|(_, fs)| fs.contains(&name))
                    .map(|(s, _)| s.clone())
                    .collect(),
                bytes: f.encoded_len() as u64,
                nodes: f.node_def.len(),
                call_sites: calls.get(name.as_str()).copied().unwrap_or(0),
                name,
            }
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// The concrete functions `names` choose, in the order named, without repeats. Each name is
/// looked up as an alias first (an alias may stand for several concrete functions), then as a
/// concrete function, then as a signature. With no names, every signature's functions (but
/// the initializer's) are chosen.
pub fn select_functions(
    dir: &Path,
    info: &MetaGraphDef,
    graph: &Graph,
    names: &[String],
) -> Result<Vec<String>> {
    let aliases = aliases(info);
    let signatures = signature_functions(info, graph);
    let defined: BTreeSet<&str> = graph.functions.iter().map(function_name).collect();
    let mut chosen: Vec<String> = Vec::new();
    let push = |name: &str, chosen: &mut Vec<String>| {
        if !chosen.iter().any(|c| c == name) {
            chosen.push(name.to_string());
        }
    };
    if names.is_empty() {
        for (signature, functions) in &signatures {
            if signature == INIT_OP_SIGNATURE {
                continue;
            }
            for f in functions {
                push(f, &mut chosen);
            }
        }
        if chosen.is_empty() {
            return Err(TpuError::Unsupported {
                dir: dir.to_path_buf(),
                fault: "no signature is computed by a function call; name the functions to \
                        rewrite with --function"
                    .to_string(),
            });
        }
        return Ok(chosen);
    }
    for name in names {
        let by_alias: Vec<&String> = aliases
            .iter()
            .filter(|(_, alias)| *alias == name)
            .map(|(f, _)| f)
            .collect();
        if !by_alias.is_empty() {
            for f in by_alias {
                if !defined.contains(f.as_str()) {
                    return Err(TpuError::Unsupported {
                        dir: dir.to_path_buf(),
                        fault: format!(
                            "alias {name:?} names function {f:?}, which the library does not have"
                        ),
                    });
                }
                push(f, &mut chosen);
            }
        } else if defined.contains(name.as_str()) {
            push(name, &mut chosen);
        } else if let Some(functions) = signatures.get(name) {
            if functions.is_empty() {
                return Err(TpuError::Unsupported {
                    dir: dir.to_path_buf(),
                    fault: format!(
                        "signature {name:?} is not computed by a function call; name a function"
                    ),
                });
            }
            for f in functions {
                push(f, &mut chosen);
            }
        } else {
            return Err(TpuError::UnknownFunction {
                dir: dir.to_path_buf(),
                name: name.clone(),
                hint: hint(&aliases, &signatures),
            });
        }
    }
    Ok(chosen)
}

/// Concrete function name -> alias (`MetaInfoDef.function_aliases`).
fn aliases(info: &MetaGraphDef) -> BTreeMap<String, String> {
    info.meta_info_def
        .as_ref()
        .map(|m| m.function_aliases.clone().into_iter().collect())
        .unwrap_or_default()
}

/// Signature name -> the functions called by the top-level nodes producing its outputs.
fn signature_functions(info: &MetaGraphDef, graph: &Graph) -> BTreeMap<String, Vec<String>> {
    let by_name: BTreeMap<&str, &NodeDef> =
        graph.live_nodes().map(|n| (n.name.as_str(), n)).collect();
    info.signature_def
        .iter()
        .map(|(name, sig)| {
            let mut functions: Vec<String> = Vec::new();
            for output in sig.outputs.values() {
                let Some(unbound_proto::tensorflow::tensor_info::Encoding::Name(tensor)) =
                    &output.encoding
                else {
                    continue;
                };
                let node = by_name.get(input_node(tensor));
                if let Some(f) = node.and_then(|n| called_function(n)) {
                    if !functions.iter().any(|g| g == f) {
                        functions.push(f.to_string());
                    }
                }
            }
            (name.clone(), functions)
        })
        .collect()
}

/// The function a call node calls.
pub fn called_function(node: &NodeDef) -> Option<&str> {
    if !CALL_OPS.contains(&node.op.as_str()) && node.op != "BatchFunction" {
        return None;
    }
    node.attr.get("f").and_then(func_name)
}

/// What names exist, for an error message.
fn hint(aliases: &BTreeMap<String, String>, signatures: &BTreeMap<String, Vec<String>>) -> String {
    let aliases: BTreeSet<&str> = aliases.values().map(String::as_str).collect();
    let signatures: Vec<&str> = signatures
        .keys()
        .map(String::as_str)
        .filter(|s| *s != INIT_OP_SIGNATURE)
        .collect();
    let list = |v: Vec<&str>| {
        if v.is_empty() {
            "none".to_string()
        } else {
            v.join(", ")
        }
    };
    format!(
        "aliases: {}; signatures: {}; --list-functions lists the concrete functions",
        list(aliases.into_iter().collect()),
        list(signatures)
    )
}
