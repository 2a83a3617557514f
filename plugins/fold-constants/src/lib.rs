//! A TensorFlow graph-optimizer plugin that folds arithmetic on small constant tensors (see
//! [`mod@fold`] for the rules), built with `unbound-grappler-sdk`.
//!
//! It registers for device type `CPU` and leaves every built-in pass as the user configured it:
//! TensorFlow's own constant folding (which runs before plugins) is far more general, and turning
//! it off for a whole process to make this example visible would be a bad trade. When the user
//! turns it off, this plugin still folds the ops it knows.

pub mod fold;
pub mod ops;
pub mod tensor;

use std::collections::HashSet;

use unbound_grappler_sdk::{export_plugin, GraphDef, Item, Optimizer, Outcome, Result};

pub use fold::fold;

/// The optimizer the plugin exports.
pub struct FoldConstants;

impl Optimizer for FoldConstants {
    fn new() -> Self {
        FoldConstants
    }

    fn optimize(&mut self, graph: GraphDef, item: &Item<'_>) -> Result<Outcome> {
        let preserve: HashSet<String> = item.nodes_to_preserve()?.into_iter().collect();
        match fold(graph, &preserve) {
            (_, 0) => Ok(Outcome::Unchanged),
            (graph, _) => Ok(Outcome::Changed(graph)),
        }
    }
}

export_plugin!(FoldConstants, device_type = "CPU");
