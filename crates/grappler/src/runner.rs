//! Running a plugin on one graph, in this process or in a child process, and judging what it
//! returned: ABORTED is "no change"; an error, an empty output or bytes that are not a
//! GraphDef keep the previous graph.

use std::path::Path;
use std::time::Duration;

use prost::Message;
use unbound_proto::tensorflow::GraphDef;

use crate::item::GrapplerItem;
use crate::plugin::{LoadedPlugin, RawOutcome, Registration};
use crate::util_api::ItemContext;

/// Something that can run one plugin's optimizer.
pub trait PluginRunner {
    /// The plugin file.
    fn path(&self) -> &Path;
    /// What the plugin registered.
    fn registration(&self) -> &Registration;
    /// Runs the optimizer once on the graph serialized as `graph_bytes` (parsed only if the
    /// plugin asks for something that needs it, such as graph properties). Returns what it
    /// returned and how long the plugin's own code ran.
    fn run(&mut self, item: &GrapplerItem, graph_bytes: &[u8]) -> (RawOutcome, Duration);
}

/// Runs plugins loaded into this process: fastest, but a crashing plugin takes the process
/// down (use [`crate::isolate::IsolatedPlugin`] for plugins you do not trust).
impl PluginRunner for LoadedPlugin {
    fn path(&self) -> &Path {
        &self.path
    }

    fn registration(&self) -> &Registration {
        &self.registration
    }

    fn run(&mut self, item: &GrapplerItem, graph_bytes: &[u8]) -> (RawOutcome, Duration) {
        let context = ItemContext::serialized(item, graph_bytes);
        // SAFETY: `context` lives until the call returns.
        unsafe { self.call_optimize(graph_bytes, context.as_ptr()) }
    }
}

/// A plugin call's result, judged.
#[derive(Debug)]
pub enum Outcome {
    /// The plugin returned a valid graph.
    Changed {
        /// The new graph.
        graph: Box<GraphDef>,
        /// Its serialization, as the plugin returned it.
        bytes: Vec<u8>,
    },
    /// The plugin returned ABORTED: it did nothing.
    Unchanged,
    /// The plugin failed; the previous graph stays. The message says why.
    Failed(String),
}

/// Turns a raw result into an [`Outcome`]: rejects an empty output, bytes that do not parse as
/// a GraphDef, and a graph with no nodes when the input had some.
pub fn judge(raw: RawOutcome, input_nodes: usize) -> Outcome {
    match raw {
        RawOutcome::Aborted => Outcome::Unchanged,
        RawOutcome::Error(message) => Outcome::Failed(message),
        RawOutcome::Output(bytes) if bytes.is_empty() => Outcome::Failed(
            "returned OK with an empty output buffer (no graph); an optimizer that changes \
             nothing must return ABORTED"
                .to_string(),
        ),
        RawOutcome::Output(bytes) => match GraphDef::decode(bytes.as_slice()) {
            Err(e) => Outcome::Failed(format!(
                "returned {} bytes that are an unparsable GraphDef: {e}",
                bytes.len()
            )),
            Ok(graph) if graph.node.is_empty() && input_nodes > 0 => Outcome::Failed(format!(
                "returned an empty graph (0 nodes, from {input_nodes})"
            )),
            Ok(graph) => Outcome::Changed {
                graph: Box::new(graph),
                bytes,
            },
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use unbound_proto::tensorflow::NodeDef;

    #[test]
    fn judging_outputs() {
        assert!(matches!(judge(RawOutcome::Aborted, 3), Outcome::Unchanged));
        let Outcome::Failed(m) = judge(RawOutcome::Error("INTERNAL: boom".into()), 3) else {
            panic!()
        };
        assert_eq!(m, "INTERNAL: boom");
        let Outcome::Failed(m) = judge(RawOutcome::Output(vec![]), 3) else {
            panic!()
        };
        assert!(m.contains("empty output"));
        let Outcome::Failed(m) = judge(RawOutcome::Output(vec![0xff; 9]), 3) else {
            panic!()
        };
        assert!(m.contains("unparsable"));
        let empty = GraphDef::default().encode_to_vec();
        // An empty GraphDef encodes to zero bytes; a graph with only versions has no nodes.
        assert!(empty.is_empty());
        let only_versions = GraphDef {
            versions: Some(Default::default()),
            ..Default::default()
        }
        .encode_to_vec();
        let Outcome::Failed(m) = judge(RawOutcome::Output(only_versions), 3) else {
            panic!()
        };
        assert!(m.contains("0 nodes"));
        let one = GraphDef {
            node: vec![NodeDef {
                name: "a".into(),
                op: "NoOp".into(),
                ..Default::default()
            }],
            ..Default::default()
        };
        let Outcome::Changed { graph, .. } = judge(RawOutcome::Output(one.encode_to_vec()), 3)
        else {
            panic!()
        };
        assert_eq!(*graph, one);
    }
}
