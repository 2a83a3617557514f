//! The order in which TensorFlow's loader imports library functions
//! (`function_deserialization._sort_function_defs`): it names each imported function
//! `__inference_<name>_<new uid>` with increasing uids, and `saved_model_cli` lists a function's
//! concrete functions sorted by those names, so this order is the order it shows them in.

use std::collections::{BTreeSet, HashMap, HashSet};

/// A node's op and the functions its attributes name: what the load order (and the op list
/// `show` reports) needs of a node.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct NodeOps {
    /// The op.
    pub op: String,
    /// For `PartitionedCall` / `StatefulPartitionedCall`, `attr["f"]`'s function.
    pub called: Option<String>,
    /// Every function named by a `func` or `list.func` attribute (function body nodes only).
    pub funcs: Vec<String>,
}

/// Kahn's topological sort as TensorFlow does it: the functions without dependencies in library
/// order form a stack; each popped function is output and frees the functions depending on it.
/// A function depends on the library functions its nodes call as ops, or else (for a node
/// whose op is not a library function) on the functions its attributes name.
pub fn load_order(functions: &[(String, Vec<NodeOps>)]) -> Vec<String> {
    let names: HashSet<&str> = functions.iter().map(|(n, _)| n.as_str()).collect();
    let mut edges: HashMap<&str, Vec<&str>> = HashMap::new();
    let mut in_count: HashMap<&str, usize> = HashMap::new();
    for (name, body) in functions {
        let mut deps: BTreeSet<&str> = BTreeSet::new();
        for node in body {
            if names.contains(node.op.as_str()) {
                deps.insert(&node.op);
            } else {
                deps.extend(node.funcs.iter().map(String::as_str));
            }
        }
        for dep in &deps {
            edges.entry(dep).or_default().push(name);
        }
        *in_count.entry(name).or_default() += deps.len();
    }
    let mut ready: Vec<&str> = functions
        .iter()
        .map(|(n, _)| n.as_str())
        .filter(|n| in_count.get(n).copied().unwrap_or(0) == 0)
        .collect();
    let mut out = Vec::with_capacity(functions.len());
    while let Some(node) = ready.pop() {
        out.push(node.to_string());
        for dest in edges.get(node).map(Vec::as_slice).unwrap_or_default() {
            let count = in_count.entry(dest).or_default();
            *count = count.saturating_sub(1);
            if *count == 0 {
                ready.push(dest);
            }
        }
    }
    out
}
