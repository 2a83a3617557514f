//! The graph's structure: input names, the node index and a topological order.

use std::collections::{HashMap, VecDeque};

use unbound_proto::tensorflow::GraphDef;

use super::PropertiesError;
use crate::tensor_names::split_port;

/// One data input: producing node index and output port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Edge {
    pub node: usize,
    pub port: usize,
}

/// A node input name parsed as TensorFlow's `ParseTensorName` does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum InputName<'a> {
    /// `^node`.
    Control(&'a str),
    /// `node` or `node:port`.
    Data(&'a str, usize),
}

/// Parses `node`, `node:port` or `^node`; `None` for an empty node name or a port that does
/// not fit an `i32`. A `:` suffix that is not all digits is part of the node name.
pub(crate) fn parse_input(input: &str) -> Option<InputName<'_>> {
    if let Some(name) = input.strip_prefix('^') {
        return (!name.is_empty()).then_some(InputName::Control(name));
    }
    let (name, port) = match split_port(input) {
        (name, Some(digits)) => (name, usize::try_from(digits.parse::<i32>().ok()?).ok()?),
        (name, None) => (name, 0),
    };
    (!name.is_empty()).then_some(InputName::Data(name, port))
}

/// The graph's nodes with their inputs resolved.
pub(crate) struct Structure<'g> {
    /// Node name -> index of its first definition.
    pub index: HashMap<&'g str, usize>,
    /// Each node's data inputs, in order.
    pub data_inputs: Vec<Vec<Edge>>,
    /// For each node, one more than the highest output port any consumer reads (0 if none).
    pub consumed_ports: Vec<usize>,
    /// Nodes in an order where every node comes after its inputs, except nodes on (or fed by)
    /// cycles, which come last in graph order.
    pub order: Vec<usize>,
}

impl<'g> Structure<'g> {
    /// Resolves every input of `graph`; an unparsable input or one naming no node is an error.
    pub(crate) fn new(graph: &'g GraphDef) -> Result<Self, PropertiesError> {
        let nodes = &graph.node;
        let mut index = HashMap::with_capacity(nodes.len());
        for (i, node) in nodes.iter().enumerate() {
            index.entry(node.name.as_str()).or_insert(i);
        }
        let mut data_inputs = Vec::with_capacity(nodes.len());
        let mut consumed_ports = vec![0usize; nodes.len()];
        let mut consumers: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
        let mut pending = vec![0usize; nodes.len()];
        for (i, node) in nodes.iter().enumerate() {
            let mut data = Vec::new();
            for input in &node.input {
                let parsed = parse_input(input).ok_or_else(|| PropertiesError::BadInput {
                    node: node.name.clone(),
                    input: input.clone(),
                })?;
                let (name, port) = match parsed {
                    InputName::Control(name) => (name, None),
                    InputName::Data(name, port) => (name, Some(port)),
                };
                let &producer = index
                    .get(name)
                    .ok_or_else(|| PropertiesError::MissingInput {
                        node: node.name.clone(),
                        input: input.clone(),
                    })?;
                if let Some(port) = port {
                    data.push(Edge {
                        node: producer,
                        port,
                    });
                    let used = port.saturating_add(1);
                    consumed_ports[producer] = consumed_ports[producer].max(used);
                }
                consumers[producer].push(i);
                pending[i] += 1;
            }
            data_inputs.push(data);
        }
        let order = topological_order(&consumers, pending);
        Ok(Self {
            index,
            data_inputs,
            consumed_ports,
            order,
        })
    }
}

/// Kahn's algorithm; nodes never freed (cycles and what they feed) follow in index order.
fn topological_order(consumers: &[Vec<usize>], mut pending: Vec<usize>) -> Vec<usize> {
    let n = consumers.len();
    let mut queue: VecDeque<usize> = (0..n).filter(|&i| pending[i] == 0).collect();
    let mut order = Vec::with_capacity(n);
    let mut placed = vec![false; n];
    while let Some(i) = queue.pop_front() {
        order.push(i);
        placed[i] = true;
        for &c in &consumers[i] {
            pending[c] -= 1;
            if pending[c] == 0 {
                queue.push_back(c);
            }
        }
    }
    order.extend((0..n).filter(|&i| !placed[i]));
    order
}
