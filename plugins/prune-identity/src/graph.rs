//! Node-input strings (`name`, `name:port`, `^name`) and a graph index with consumer sets.

use std::collections::{BTreeSet, HashMap};

use unbound_proto::tensorflow::NodeDef;

/// One entry of `NodeDef.input`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Input<'a> {
    /// The producing node.
    pub node: &'a str,
    /// The output port, or `None` for a control input (`^name`).
    pub port: Option<u32>,
}

/// Parses `name`, `name:port` or `^name`.
pub fn parse(input: &str) -> Input<'_> {
    if let Some(node) = input.strip_prefix('^') {
        return Input { node, port: None };
    }
    match input.rsplit_once(':') {
        Some((node, port)) if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => {
            Input {
                node,
                port: port.parse().ok(),
            }
        }
        _ => Input {
            node: input,
            port: Some(0),
        },
    }
}

/// The nodes, their positions by name, and who consumes each (by position).
pub struct Index {
    pub nodes: Vec<NodeDef>,
    pub position: HashMap<String, usize>,
    pub consumers: Vec<BTreeSet<usize>>,
    pub removed: Vec<bool>,
}

impl Index {
    /// Indexes `nodes` (a name given twice keeps its first position).
    pub fn new(nodes: Vec<NodeDef>) -> Index {
        let mut position = HashMap::with_capacity(nodes.len());
        for (i, n) in nodes.iter().enumerate() {
            position.entry(n.name.clone()).or_insert(i);
        }
        let mut consumers = vec![BTreeSet::new(); nodes.len()];
        for (i, n) in nodes.iter().enumerate() {
            for input in &n.input {
                if let Some(&j) = position.get(parse(input).node) {
                    consumers[j].insert(i);
                }
            }
        }
        let removed = vec![false; nodes.len()];
        Index {
            nodes,
            position,
            consumers,
            removed,
        }
    }

    /// The position of a live node.
    pub fn get(&self, name: &str) -> Option<usize> {
        self.position
            .get(name)
            .copied()
            .filter(|&i| !self.removed[i])
    }

    /// Removes node `i`, dropping it from its producers' consumer sets.
    pub fn remove(&mut self, i: usize) {
        self.removed[i] = true;
        let inputs = std::mem::take(&mut self.nodes[i].input);
        for input in &inputs {
            if let Some(&j) = self.position.get(parse(input).node) {
                self.consumers[j].remove(&i);
            }
        }
        self.nodes[i].input = inputs;
        self.consumers[i].clear();
    }

    /// Whether node `c` has any input (data or control) from node `producer`.
    pub fn has_input_from(&self, c: usize, producer: &str) -> bool {
        self.nodes[c]
            .input
            .iter()
            .any(|s| parse(s).node == producer)
    }

    /// Appends `^producer` to node `c` unless it already depends on `producer` or is it.
    pub fn add_control(&mut self, c: usize, producer: &str) {
        if self.nodes[c].name == producer || self.has_input_from(c, producer) {
            return;
        }
        self.nodes[c].input.push(format!("^{producer}"));
        if let Some(&j) = self.position.get(producer) {
            self.consumers[j].insert(c);
        }
    }

    /// The live nodes, in their original order.
    pub fn into_nodes(self) -> Vec<NodeDef> {
        self.nodes
            .into_iter()
            .zip(self.removed)
            .filter(|(_, removed)| !removed)
            .map(|(n, _)| n)
            .collect()
    }
}
