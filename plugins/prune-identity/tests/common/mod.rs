//! Graph-building helpers shared by the tests.
#![allow(dead_code)]

use std::collections::HashSet;

use unbound_proto::tensorflow::{attr_value, AttrValue, DataType, GraphDef, NodeDef};

/// A node with inputs.
pub fn n(name: &str, op: &str, inputs: &[&str]) -> NodeDef {
    NodeDef {
        name: name.into(),
        op: op.into(),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

/// A node with a type attr `T`.
pub fn typed(name: &str, op: &str, inputs: &[&str], t: DataType) -> NodeDef {
    let mut node = n(name, op, inputs);
    node.attr.insert(
        "T".into(),
        AttrValue {
            value: Some(attr_value::Value::Type(t as i32)),
        },
    );
    node
}

pub fn graph(nodes: Vec<NodeDef>) -> GraphDef {
    GraphDef {
        node: nodes,
        ..Default::default()
    }
}

pub fn set(names: &[&str]) -> HashSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

/// Node names in order.
pub fn names(g: &GraphDef) -> Vec<&str> {
    g.node.iter().map(|n| n.name.as_str()).collect()
}

/// The inputs of node `name`.
pub fn inputs<'g>(g: &'g GraphDef, name: &str) -> Vec<&'g str> {
    g.node
        .iter()
        .find(|n| n.name == name)
        .unwrap_or_else(|| panic!("no node {name}"))
        .input
        .iter()
        .map(String::as_str)
        .collect()
}
