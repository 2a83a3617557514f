//! Small `GraphDef` builders and lookups for plugin tests (feature `testing`).

use std::collections::HashSet;

use unbound_proto::tensorflow::{attr_value, AttrValue, DataType, GraphDef, NodeDef};

/// A node `name` running `op` on `inputs` (tensor names, `^name` for control inputs).
pub fn node(name: &str, op: &str, inputs: &[&str]) -> NodeDef {
    NodeDef {
        name: name.into(),
        op: op.into(),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

/// [`node`] with the type attr `T` set to `t`.
pub fn typed_node(name: &str, op: &str, inputs: &[&str], t: DataType) -> NodeDef {
    let mut node = node(name, op, inputs);
    let value = Some(attr_value::Value::Type(t as i32));
    node.attr.insert("T".into(), AttrValue { value });
    node
}

/// A graph of `nodes`.
pub fn graph(nodes: Vec<NodeDef>) -> GraphDef {
    GraphDef {
        node: nodes,
        ..Default::default()
    }
}

/// A set of node names.
pub fn name_set(names: &[&str]) -> HashSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

/// The node names of `g`, in order.
pub fn names(g: &GraphDef) -> Vec<&str> {
    g.node.iter().map(|n| n.name.as_str()).collect()
}

/// Node `name` of `g`; panics (failing the test) when there is none.
pub fn find<'g>(g: &'g GraphDef, name: &str) -> &'g NodeDef {
    g.node
        .iter()
        .find(|n| n.name == name)
        .unwrap_or_else(|| panic!("no node {name}"))
}

/// The inputs of node `name` of `g`.
pub fn inputs<'g>(g: &'g GraphDef, name: &str) -> Vec<&'g str> {
    find(g, name).input.iter().map(String::as_str).collect()
}
