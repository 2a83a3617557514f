//! The object graph (`SavedObjectGraph`): concrete functions, the functions of the root object
//! and the variables with their object paths and checkpoint keys.

use std::collections::{BTreeMap, HashMap, VecDeque};

use unbound_proto::tensorflow::{
    saved_object::Kind, trackable_object_graph::trackable_object::ObjectReference,
    trackable_object_graph::TrackableObject, SavedObjectGraph, TrackableObjectGraph,
};

use super::signature::dims;
use super::structured::{input_signature, keyword};
use super::{CallableInfo, ConcreteFunctionInfo, FunctionInfo, ObjectGraphInfo, VariableInfo};
use unbound_bundle::dtype::enum_name;

/// The attribute name under which a variable's value is checkpointed.
const VARIABLE_VALUE: &str = "VARIABLE_VALUE";

/// What `show` reports about an object graph. `load_order` is the library's import order
/// ([`super::load_order`]), which orders each function's concrete functions as
/// `saved_model_cli` lists them; functions not in it come last, by name.
pub fn object_graph(og: &SavedObjectGraph, load_order: &[String]) -> ObjectGraphInfo {
    let paths = saved_object_paths(og);
    let variables = og
        .nodes
        .iter()
        .enumerate()
        .filter_map(|(i, n)| match &n.kind {
            Some(Kind::Variable(v)) => Some(VariableInfo {
                path: paths.get(i).cloned().flatten().unwrap_or_default(),
                name: v.name.clone(),
                dtype: enum_name(v.dtype),
                shape: dims(v.shape.as_ref()),
                trainable: v.trainable,
                checkpoint_key: None,
            }),
            _ => None,
        })
        .collect();
    let mut concrete_functions: Vec<ConcreteFunctionInfo> = og
        .concrete_functions
        .iter()
        .map(|(name, f)| ConcreteFunctionInfo {
            name: name.clone(),
            bound_inputs: f.bound_inputs.len() as u64,
        })
        .collect();
    concrete_functions.sort_by(|a, b| a.name.cmp(&b.name));
    ObjectGraphInfo {
        nodes: og.nodes.len() as u64,
        concrete_functions,
        functions: root_functions(og, load_order),
        variables,
    }
}

/// The object path of each node of a SavedModel's object graph (by node id): the child names
/// from the root (node 0) joined with `/` (`dense/kernel`; `""` for the root), the first
/// (shortest, then earliest) path found; `None` for a node the root does not reach. The
/// spelling `unbound show`, `vars`, `convert` and `reshard` use for object paths.
pub fn saved_object_paths(og: &SavedObjectGraph) -> Vec<Option<String>> {
    object_paths(&child_lists(og.nodes.iter().map(|n| &n.children[..])))
}

/// Each node's children as (name, node id) pairs: the edges of a SavedModel's object graph or
/// of a checkpoint's (both hold `ObjectReference`s).
fn child_lists<'a>(
    nodes: impl Iterator<Item = &'a [ObjectReference]>,
) -> Vec<Vec<(String, usize)>> {
    nodes
        .map(|children| {
            children
                .iter()
                .map(|c| (c.local_name.clone(), c.node_id.max(0) as usize))
                .collect()
        })
        .collect()
}

/// The first (shortest, then earliest) path of child names from node 0 to each node.
fn object_paths(children: &[Vec<(String, usize)>]) -> Vec<Option<String>> {
    let mut paths: Vec<Option<String>> = vec![None; children.len()];
    if paths.is_empty() {
        return paths;
    }
    paths[0] = Some(String::new());
    let mut queue = VecDeque::from([0usize]);
    while let Some(i) = queue.pop_front() {
        let base = paths[i].clone().unwrap_or_default();
        for (name, child) in &children[i] {
            if *child < paths.len() && paths[*child].is_none() {
                paths[*child] = Some(if base.is_empty() {
                    name.clone()
                } else {
                    format!("{base}/{name}")
                });
                queue.push_back(*child);
            }
        }
    }
    paths
}

/// The function children of the root object, sorted by name, each with its concrete functions
/// in load order: what `saved_model_cli show --all` lists under "Concrete Functions".
fn root_functions(og: &SavedObjectGraph, load_order: &[String]) -> Vec<FunctionInfo> {
    let rank: HashMap<&str, usize> = load_order
        .iter()
        .enumerate()
        .map(|(i, n)| (n.as_str(), i))
        .collect();
    let key = |c: &CallableInfo| {
        (
            rank.get(c.name.as_str()).copied().unwrap_or(usize::MAX),
            c.name.clone(),
        )
    };
    let Some(root) = og.nodes.first() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for child in &root.children {
        let Some(node) = usize::try_from(child.node_id)
            .ok()
            .and_then(|i| og.nodes.get(i))
        else {
            continue;
        };
        let mut callables = match &node.kind {
            Some(Kind::Function(f)) => f
                .concrete_functions
                .iter()
                .map(|name| callable(og, name, &[]))
                .collect(),
            Some(Kind::BareConcreteFunction(b)) => {
                vec![callable(
                    og,
                    &b.concrete_function_name,
                    &b.argument_keywords,
                )]
            }
            _ => continue,
        };
        callables.sort_by_key(|c: &CallableInfo| key(c));
        out.push(FunctionInfo {
            name: child.local_name.clone(),
            concrete_functions: callables,
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// A concrete function's arguments: its canonicalized input signature, or else the argument
/// keywords of a bare concrete function.
fn callable(og: &SavedObjectGraph, name: &str, keywords: &[String]) -> CallableInfo {
    let sig = og
        .concrete_functions
        .get(name)
        .and_then(|f| f.canonicalized_input_signature.as_ref());
    let (args, kwargs) = match sig {
        Some(sig) => input_signature(sig),
        None => (keywords.iter().map(|k| keyword(k)).collect(), Vec::new()),
    };
    CallableInfo {
        name: name.to_string(),
        args,
        kwargs: kwargs.into_iter().collect(),
    }
}

/// Fills in the checkpoint key of each variable from the checkpoint's object graph: the
/// `VARIABLE_VALUE` attribute of the node at the same object path.
pub fn attach_checkpoint_keys(info: &mut ObjectGraphInfo, ckpt: &Option<TrackableObjectGraph>) {
    let Some(ckpt) = ckpt else { return };
    let keys = checkpoint_keys_by_path(ckpt);
    for v in &mut info.variables {
        v.checkpoint_key = keys.get(&v.path).cloned();
    }
}

/// The `VARIABLE_VALUE` checkpoint key of every node of a checkpoint's object graph that has
/// one, by object path.
pub fn checkpoint_keys_by_path(ckpt: &TrackableObjectGraph) -> BTreeMap<String, String> {
    let paths = object_paths(&child_lists(ckpt.nodes.iter().map(|n| &n.children[..])));
    ckpt.nodes
        .iter()
        .zip(paths)
        .filter_map(|(n, p)| Some((p?, variable_key(n)?)))
        .collect()
}

/// A checkpoint node's `VARIABLE_VALUE` key.
fn variable_key(n: &TrackableObject) -> Option<String> {
    n.attributes
        .iter()
        .find(|a| a.name == VARIABLE_VALUE)
        .map(|a| a.checkpoint_key.clone())
}
