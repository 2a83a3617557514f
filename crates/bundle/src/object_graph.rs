//! Object paths of checkpointed values: which object of the `TrackableObjectGraph` (reached
//! from the root through named children) saved each checkpoint key.

use std::collections::{BTreeMap, VecDeque};

use unbound_proto::tensorflow::TrackableObjectGraph;

/// Maps each checkpoint key the graph names to the object path that saved it: the children
/// names from the root joined with `/` (`""` for the root itself). The shortest path wins,
/// found breadth-first in child order as TensorFlow walks the graph. Optimizer slot variables,
/// reached through `slot_variables` rather than children, get
/// `VARIABLE_PATH/.OPTIMIZER_SLOT/OPTIMIZER_PATH/SLOT_NAME`, TensorFlow's naming for them.
pub fn object_paths(graph: &TrackableObjectGraph) -> BTreeMap<String, String> {
    let nodes = &graph.nodes;
    let mut paths: Vec<Option<String>> = vec![None; nodes.len()];
    let mut queue = VecDeque::new();
    if !nodes.is_empty() {
        paths[0] = Some(String::new());
        queue.push_back(0usize);
    }
    while let Some(i) = queue.pop_front() {
        let parent = paths[i].clone().unwrap_or_default();
        for child in &nodes[i].children {
            let Some(c) = usize::try_from(child.node_id)
                .ok()
                .filter(|&c| c < nodes.len())
            else {
                continue;
            };
            if paths[c].is_none() {
                paths[c] = Some(join(&parent, &child.local_name));
                queue.push_back(c);
            }
        }
    }
    for (i, node) in nodes.iter().enumerate() {
        let Some(optimizer) = paths[i].clone() else {
            continue;
        };
        for slot in &node.slot_variables {
            let index = |id: i32| usize::try_from(id).ok().filter(|&x| x < nodes.len());
            let (Some(var), Some(s)) = (
                index(slot.original_variable_node_id),
                index(slot.slot_variable_node_id),
            ) else {
                continue;
            };
            if let (Some(var_path), None) = (paths[var].clone(), &paths[s]) {
                paths[s] = Some(format!(
                    "{var_path}/.OPTIMIZER_SLOT/{optimizer}/{}",
                    slot.slot_name
                ));
            }
        }
    }
    let mut out = BTreeMap::new();
    for (node, path) in nodes.iter().zip(paths) {
        let Some(path) = path else { continue };
        for attr in &node.attributes {
            if !attr.checkpoint_key.is_empty() {
                out.entry(attr.checkpoint_key.clone())
                    .or_insert_with(|| path.clone());
            }
        }
    }
    out
}

fn join(parent: &str, name: &str) -> String {
    if parent.is_empty() {
        name.to_string()
    } else {
        format!("{parent}/{name}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use unbound_proto::tensorflow::trackable_object_graph::{
        trackable_object::{ObjectReference, SerializedTensor, SlotVariableReference},
        TrackableObject,
    };

    fn child(id: i32, name: &str) -> ObjectReference {
        ObjectReference {
            node_id: id,
            local_name: name.into(),
        }
    }

    fn attr(key: &str) -> SerializedTensor {
        SerializedTensor {
            name: "VARIABLE_VALUE".into(),
            full_name: String::new(),
            checkpoint_key: key.into(),
        }
    }

    #[test]
    fn paths_from_root_and_slots() {
        let graph = TrackableObjectGraph {
            nodes: vec![
                TrackableObject {
                    children: vec![child(1, "layer"), child(3, "optimizer"), child(99, "bad")],
                    ..Default::default()
                },
                TrackableObject {
                    children: vec![child(2, "kernel"), child(0, "back")],
                    ..Default::default()
                },
                TrackableObject {
                    attributes: vec![attr("layer/kernel/.ATTRIBUTES/VARIABLE_VALUE")],
                    ..Default::default()
                },
                TrackableObject {
                    slot_variables: vec![SlotVariableReference {
                        original_variable_node_id: 2,
                        slot_name: "m".into(),
                        slot_variable_node_id: 4,
                    }],
                    ..Default::default()
                },
                TrackableObject {
                    attributes: vec![attr("slot-key")],
                    ..Default::default()
                },
            ],
        };
        let p = object_paths(&graph);
        assert_eq!(p["layer/kernel/.ATTRIBUTES/VARIABLE_VALUE"], "layer/kernel");
        assert_eq!(p["slot-key"], "layer/kernel/.OPTIMIZER_SLOT/optimizer/m");
        assert!(object_paths(&TrackableObjectGraph::default()).is_empty());
    }
}
