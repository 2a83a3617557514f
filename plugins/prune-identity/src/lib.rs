//! A TensorFlow graph-optimizer plugin that removes `Identity` and `NoOp` nodes nothing needs
//! (see [`mod@prune`] for the exact rules), built with `unbound-grappler-sdk`.
//!
//! It registers for device type `CPU` and leaves every built-in pass as the user configured it:
//! it only removes what TensorFlow's dependency optimizer would, so it masks nothing. It runs
//! only on graphs whose fetch nodes are known (as TensorFlow's dependency optimizer): with no
//! fetch nodes every node's output may be wanted, and it reports "did nothing".

mod graph;
pub mod prune;

use std::collections::HashSet;

use unbound_grappler_sdk::serialized::{decode, node_ops};
use unbound_grappler_sdk::{export_plugin, GraphDef, Item, Optimizer, Outcome, Result};

pub use prune::prune;

/// The optimizer the plugin exports.
pub struct PruneIdentity;

impl Optimizer for PruneIdentity {
    fn new() -> Self {
        PruneIdentity
    }

    fn optimize(&mut self, graph: GraphDef, item: &Item<'_>) -> Result<Outcome> {
        if item.fetch_nodes()?.is_empty() {
            return Ok(Outcome::Unchanged);
        }
        let preserve: HashSet<String> = item
            .nodes_to_preserve()?
            .iter()
            .map(|name| graph::parse(name).node.to_string())
            .collect();
        match prune(graph, &preserve) {
            (_, 0) => Ok(Outcome::Unchanged),
            (graph, _) => Ok(Outcome::Changed(graph)),
        }
    }

    /// A graph without an `Identity` or `NoOp` node has nothing to prune: that is read from
    /// the bytes, and such a graph is never decoded.
    fn optimize_serialized(&mut self, graph: &[u8], item: &Item<'_>) -> Result<Outcome> {
        if item.fetch_nodes()?.is_empty() {
            return Ok(Outcome::Unchanged);
        }
        let mut prunable = false;
        for op in node_ops(graph) {
            if matches!(op?, "Identity" | "NoOp") {
                prunable = true;
                break;
            }
        }
        if !prunable {
            return Ok(Outcome::Unchanged);
        }
        self.optimize(decode(graph)?, item)
    }
}

export_plugin!(PruneIdentity, device_type = "CPU");
