//! The restore path of one MetaGraphDef extended to the new variables: the graph restores
//! them where the `SaverDef`'s restore op runs (the C++ loader, TensorFlow Serving, the TF1
//! loader: a `RestoreV2` of their keys from the `SaverDef`'s filename tensor and an
//! `AssignVariableOp` into each handle, run before the restore op); a model without a
//! `SaverDef` (a frozen graph) gets one, with a save path as TensorFlow's `Saver` writes.
//! A TF2 model's object graph gets a `SavedVariable` per new variable, a child of the root,
//! bound to every concrete function that captures it (`bound_inputs`), so
//! `tf.saved_model.load` creates, restores and binds them.

use std::collections::{HashMap, HashSet};

use bytes::Bytes;
use unbound_proto::tensorflow::{
    attr_value, saved_object, saver_def::CheckpointFormatVersion,
    trackable_object_graph::trackable_object::ObjectReference, AttrValue, DataType, GraphDef,
    MetaGraphDef, NodeDef, SavedObject, SavedVariable, SaverDef, TensorProto,
};

use crate::error::{ExternalizeError, Result};
use crate::graph_edit::{type_attr, unique, NewVariable};

/// The suffix of a variable's value in an object-based checkpoint.
pub(crate) const VARIABLE_VALUE_SUFFIX: &str = "/.ATTRIBUTES/VARIABLE_VALUE";

/// Extends `meta`'s restore path to `vars`, stored under `keys`; `taken` holds the graph's
/// node names (new ones are added).
pub(crate) fn extend_restore(
    meta: &mut MetaGraphDef,
    vars: &[NewVariable],
    keys: &[String],
    taken: &mut HashSet<String>,
    source_name: &str,
) -> Result<()> {
    if vars.is_empty() {
        return Ok(());
    }
    let graph = meta.graph_def.get_or_insert_with(GraphDef::default);
    let saver = match meta.saver_def.take() {
        Some(saver) => {
            extend_save(graph, &saver, vars, keys, taken);
            saver
        }
        None => new_saver(graph, vars, keys, taken),
    };
    let filename = saver.filename_tensor_name.clone();
    let restore_op = crate::graph_edit::tensor_node(&saver.restore_op_name).to_string();
    meta.saver_def = Some(saver);
    let prefix = unique("externalized/restore", taken);
    let names = format!("{prefix}/tensor_names");
    let slices = format!("{prefix}/shape_and_slices");
    let restore = format!("{prefix}/RestoreV2");
    taken.extend([names.clone(), slices.clone(), restore.clone()]);
    graph
        .node
        .push(string_const(&names, keys.iter().map(|k| k.as_bytes())));
    graph
        .node
        .push(string_const(&slices, keys.iter().map(|_| &b""[..])));
    let mut restore_node = NodeDef {
        name: restore.clone(),
        op: "RestoreV2".into(),
        input: vec![filename, names, slices],
        device: "/device:CPU:0".into(),
        ..NodeDef::default()
    };
    restore_node
        .attr
        .insert("dtypes".into(), type_list(vars.iter().map(|v| v.dtype)));
    graph.node.push(restore_node);
    let mut assigns = Vec::new();
    for (i, var) in vars.iter().enumerate() {
        let name = unique(&format!("{}/externalized_assign", var.name), taken);
        let mut assign = NodeDef {
            name: name.clone(),
            op: "AssignVariableOp".into(),
            input: vec![var.name.clone(), format!("{restore}:{i}")],
            ..NodeDef::default()
        };
        assign.attr.insert("dtype".into(), type_attr(var.dtype));
        assign.attr.insert(
            "validate_shape".into(),
            AttrValue {
                value: Some(attr_value::Value::B(false)),
            },
        );
        graph.node.push(assign);
        assigns.push(format!("^{name}"));
    }
    let Some(node) = graph.node.iter_mut().find(|n| n.name == restore_op) else {
        return Err(ExternalizeError::invalid(
            source_name,
            format!("the SaverDef's restore op {restore_op:?} is not a node of the graph"),
        ));
    };
    node.input.extend(assigns);
    Ok(())
}

/// Extends the save op of `saver` (a TF1 `Saver`'s: a `SaveV2` in the graph that its
/// `save_tensor_name` depends on) to `vars`, under `keys`: a Saver saves every variable it
/// restores, so a model saved after loading (the TF1 loader, then `saver.save`) keeps them.
/// The `SaveV2` (the first, in a sharded save) is given new tensor names and slices (its own
/// followed by the new ones: the constants it read may feed other nodes) and a read of each
/// variable. A save op inside a function (a TF2 model's, whose object graph is what
/// `tf.saved_model.load` saves from) is left as it is.
fn extend_save(
    graph: &mut GraphDef,
    saver: &SaverDef,
    vars: &[NewVariable],
    keys: &[String],
    taken: &mut HashSet<String>,
) {
    let root = crate::graph_edit::tensor_node(&saver.save_tensor_name).to_string();
    let path = crate::graph_edit::ancestors(&graph.node, &[root]);
    let Some(save) = graph
        .node
        .iter()
        .position(|n| n.op == "SaveV2" && path.contains(&n.name))
    else {
        return;
    };
    let strings_of = |input: Option<&String>| -> Option<Vec<Bytes>> {
        let name = crate::graph_edit::tensor_node(input?);
        let node = graph
            .node
            .iter()
            .find(|n| n.name == name && n.op == "Const")?;
        match node.attr.get("value").and_then(|v| v.value.as_ref()) {
            Some(attr_value::Value::Tensor(t)) if t.tensor_content.is_empty() => {
                Some(t.string_val.clone())
            }
            _ => None,
        }
    };
    let node = &graph.node[save];
    let (Some(names), Some(slices)) =
        (strings_of(node.input.get(1)), strings_of(node.input.get(2)))
    else {
        return;
    };
    if names.len() != slices.len() {
        return;
    }
    let base = node.name.clone();
    let device = node.device.clone();
    let names_node = unique(&format!("{base}/externalized_tensor_names"), taken);
    let slices_node = unique(&format!("{base}/externalized_shape_and_slices"), taken);
    let mut new_nodes = vec![
        string_const(
            &names_node,
            names
                .iter()
                .map(|b| &b[..])
                .chain(keys.iter().map(|k| k.as_bytes())),
        ),
        string_const(
            &slices_node,
            slices
                .iter()
                .map(|b| &b[..])
                .chain(keys.iter().map(|_| &b""[..])),
        ),
    ];
    for node in &mut new_nodes {
        node.device.clone_from(&device);
    }
    let read_nodes = save_reads(vars, taken);
    let reads: Vec<String> = read_nodes.iter().map(|n| n.name.clone()).collect();
    new_nodes.extend(read_nodes);
    let node = &mut graph.node[save];
    node.input[1] = names_node;
    node.input[2] = slices_node;
    let control = node.input.iter().position(|i| i.starts_with('^'));
    let at = control.unwrap_or(node.input.len());
    node.input.splice(at..at, reads);
    let dtypes = node
        .attr
        .entry("dtypes".into())
        .or_insert_with(|| type_list([]));
    if let Some(attr_value::Value::List(list)) = dtypes.value.as_mut() {
        list.r#type.extend(vars.iter().map(|v| v.dtype));
    }
    graph.node.extend(new_nodes);
}

/// A `SaverDef` for a graph that has none, and the nodes it names: a filename constant, a
/// `SaveV2` of the new variables, and a restore op (a `NoOp` the restores are made control
/// inputs of), as `tf.compat.v1.train.Saver` lays them out.
fn new_saver(
    graph: &mut GraphDef,
    vars: &[NewVariable],
    keys: &[String],
    taken: &mut HashSet<String>,
) -> SaverDef {
    let scope = unique("externalized/saver", taken);
    let filename = format!("{scope}/filename");
    let names = format!("{scope}/tensor_names");
    let slices = format!("{scope}/shape_and_slices");
    let save = format!("{scope}/SaveV2");
    let done = format!("{scope}/control_dependency");
    let restore_all = format!("{scope}/restore_all");
    taken.extend(
        [&filename, &names, &slices, &save, &done, &restore_all]
            .iter()
            .map(|s| s.to_string()),
    );
    graph.node.push(string_const(&filename, [&b"model"[..]]));
    graph
        .node
        .push(string_const(&names, keys.iter().map(|k| k.as_bytes())));
    graph
        .node
        .push(string_const(&slices, keys.iter().map(|_| &b""[..])));
    let mut save_inputs = vec![filename.clone(), names, slices];
    for node in save_reads(vars, taken) {
        save_inputs.push(node.name.clone());
        graph.node.push(node);
    }
    let mut save_node = NodeDef {
        name: save.clone(),
        op: "SaveV2".into(),
        input: save_inputs,
        device: "/device:CPU:0".into(),
        ..NodeDef::default()
    };
    save_node
        .attr
        .insert("dtypes".into(), type_list(vars.iter().map(|v| v.dtype)));
    graph.node.push(save_node);
    let mut identity = NodeDef {
        name: done.clone(),
        op: "Identity".into(),
        input: vec![filename.clone(), format!("^{save}")],
        ..NodeDef::default()
    };
    identity
        .attr
        .insert("T".into(), type_attr(DataType::DtString as i32));
    graph.node.push(identity);
    graph.node.push(NodeDef {
        name: restore_all.clone(),
        op: "NoOp".into(),
        ..NodeDef::default()
    });
    SaverDef {
        filename_tensor_name: format!("{filename}:0"),
        save_tensor_name: format!("{done}:0"),
        restore_op_name: restore_all,
        max_to_keep: 5,
        sharded: false,
        keep_checkpoint_every_n_hours: 10000.0,
        version: CheckpointFormatVersion::V2 as i32,
    }
}

/// Adds `vars` to `meta`'s object graph, if it has one: a `SavedVariable` each, children of
/// the root under their local names, appended to the `bound_inputs` of every concrete
/// function given them as arguments (`function_variables`, in argument order). Returns whether
/// the MetaGraphDef has an object graph.
pub(crate) fn extend_object_graph(
    meta: &mut MetaGraphDef,
    vars: &[NewVariable],
    function_variables: &HashMap<String, Vec<usize>>,
) -> bool {
    let Some(objects) = meta
        .object_graph_def
        .as_mut()
        .filter(|g| !g.nodes.is_empty())
    else {
        return false;
    };
    let first = objects.nodes.len() as i32;
    for (i, var) in vars.iter().enumerate() {
        objects.nodes.push(SavedObject {
            kind: Some(saved_object::Kind::Variable(SavedVariable {
                dtype: var.dtype,
                shape: Some(unbound_bundle::shape_to_proto(&var.shape)),
                trainable: false,
                name: var.name.clone(),
                ..SavedVariable::default()
            })),
            ..SavedObject::default()
        });
        objects.nodes[0].children.push(ObjectReference {
            node_id: first + i as i32,
            local_name: var.local_name.clone(),
        });
    }
    for (name, function) in objects.concrete_functions.iter_mut() {
        if let Some(list) = function_variables.get(name) {
            function
                .bound_inputs
                .extend(list.iter().map(|&v| first + v as i32));
        }
    }
    true
}

/// A `Const` of strings, of shape `[n]` (or a scalar for one filename).
fn string_const<'a>(name: &str, values: impl IntoIterator<Item = &'a [u8]>) -> NodeDef {
    let values: Vec<Bytes> = values.into_iter().map(Bytes::copy_from_slice).collect();
    let scalar = name.ends_with("/filename");
    let shape = if scalar {
        Vec::new()
    } else {
        vec![values.len() as i64]
    };
    let mut node = NodeDef {
        name: name.to_string(),
        op: "Const".into(),
        ..NodeDef::default()
    };
    node.attr
        .insert("dtype".into(), type_attr(DataType::DtString as i32));
    node.attr.insert(
        "value".into(),
        AttrValue {
            value: Some(attr_value::Value::Tensor(TensorProto {
                dtype: DataType::DtString as i32,
                tensor_shape: Some(unbound_bundle::shape_to_proto(&shape)),
                string_val: values,
                ..TensorProto::default()
            })),
        },
    );
    node
}

/// A `ReadVariableOp` of each of `vars` for a `SaveV2` to save, named after the variable
/// (unique among `taken`, which gets the names).
fn save_reads(vars: &[NewVariable], taken: &mut HashSet<String>) -> Vec<NodeDef> {
    vars.iter()
        .map(|var| {
            let mut node = NodeDef {
                name: unique(&format!("{}/externalized_save_read", var.name), taken),
                op: "ReadVariableOp".into(),
                input: vec![var.name.clone()],
                ..NodeDef::default()
            };
            node.attr.insert("dtype".into(), type_attr(var.dtype));
            node
        })
        .collect()
}

/// A `list(type)` attribute.
fn type_list(types: impl IntoIterator<Item = i32>) -> AttrValue {
    AttrValue {
        value: Some(attr_value::Value::List(attr_value::ListValue {
            r#type: types.into_iter().collect(),
            ..Default::default()
        })),
    }
}

#[cfg(test)]
mod tests {
    use unbound_proto::tensorflow::TensorShapeProto;

    use super::*;
    use crate::graph_edit::Value;

    fn node(name: &str, op: &str, inputs: &[&str]) -> NodeDef {
        NodeDef {
            name: name.into(),
            op: op.into(),
            input: inputs.iter().map(|s| s.to_string()).collect(),
            ..NodeDef::default()
        }
    }

    /// A TF1 `Saver`'s graph (sharded, as the TF1 SavedModel builder makes it) saving and
    /// restoring one variable `v`.
    fn tf1_saver_graph() -> MetaGraphDef {
        let mut save = node(
            "save/SaveV2",
            "SaveV2",
            &[
                "save/ShardedFilename",
                "save/SaveV2/tensor_names",
                "save/SaveV2/shape_and_slices",
                "v/Read",
                "^save/StringJoin",
            ],
        );
        save.attr
            .insert("dtypes".into(), type_list([DataType::DtFloat as i32]));
        let graph = GraphDef {
            node: vec![
                node("v", "VarHandleOp", &[]),
                node("v/Read", "ReadVariableOp", &["v"]),
                node("save/filename", "PlaceholderWithDefault", &[]),
                node("save/StringJoin", "StringJoin", &["save/filename"]),
                node(
                    "save/ShardedFilename",
                    "ShardedFilename",
                    &["save/StringJoin"],
                ),
                string_const("save/SaveV2/tensor_names", [&b"v"[..]]),
                string_const("save/SaveV2/shape_and_slices", [&b""[..]]),
                save,
                node(
                    "save/control_dependency",
                    "Identity",
                    &["save/ShardedFilename", "^save/SaveV2"],
                ),
                node(
                    "save/MergeV2Checkpoints",
                    "MergeV2Checkpoints",
                    &["save/control_dependency"],
                ),
                node(
                    "save/Identity",
                    "Identity",
                    &["save/filename", "^save/MergeV2Checkpoints"],
                ),
                node("save/restore_all", "NoOp", &[]),
            ],
            ..GraphDef::default()
        };
        MetaGraphDef {
            graph_def: Some(graph),
            saver_def: Some(SaverDef {
                filename_tensor_name: "save/filename:0".into(),
                save_tensor_name: "save/Identity:0".into(),
                restore_op_name: "save/restore_all".into(),
                sharded: true,
                version: CheckpointFormatVersion::V2 as i32,
                ..SaverDef::default()
            }),
            ..MetaGraphDef::default()
        }
    }

    fn variable(name: &str) -> NewVariable {
        NewVariable {
            name: name.into(),
            local_name: name.replace('/', "_"),
            dtype: DataType::DtInt32 as i32,
            shape: vec![4],
            value: Value::Raw(unbound_wire::Payload::Inline(Bytes::from(vec![0u8; 16]))),
            function: None,
            node: "c".into(),
            bytes: 16,
        }
    }

    #[test]
    fn a_tf1_saver_saves_the_new_variables_it_restores() {
        let mut meta = tf1_saver_graph();
        let vars = [variable("externalized/c")];
        let keys = ["externalized/c".to_string()];
        let mut taken: HashSet<String> = meta
            .graph_def
            .iter()
            .flat_map(|g| g.node.iter().map(|n| n.name.clone()))
            .collect();
        extend_restore(&mut meta, &vars, &keys, &mut taken, "m").unwrap();
        let graph = meta.graph_def.as_ref().unwrap();
        let by_name = |name: &str| graph.node.iter().find(|n| n.name == name).unwrap();
        let save = by_name("save/SaveV2");
        // The old names, then the new key; a read of the variable among the data inputs,
        // before the control input; its dtype.
        let Some(attr_value::Value::Tensor(names)) =
            by_name(&save.input[1]).attr["value"].value.clone()
        else {
            panic!("no names")
        };
        assert_eq!(names.string_val, [&b"v"[..], b"externalized/c"]);
        assert_eq!(
            names.tensor_shape,
            Some(TensorShapeProto {
                dim: vec![unbound_proto::tensorflow::tensor_shape_proto::Dim {
                    size: 2,
                    name: String::new()
                }],
                unknown_rank: false,
            })
        );
        assert_eq!(save.input[3], "v/Read");
        assert_eq!(by_name(&save.input[4]).op, "ReadVariableOp");
        assert_eq!(by_name(&save.input[4]).input, ["externalized/c"]);
        assert_eq!(save.input[5], "^save/StringJoin");
        let Some(attr_value::Value::List(dtypes)) = save.attr["dtypes"].value.clone() else {
            panic!("no dtypes")
        };
        assert_eq!(
            dtypes.r#type,
            [DataType::DtFloat as i32, DataType::DtInt32 as i32]
        );
        // The old constants are left to whatever else reads them.
        assert!(graph
            .node
            .iter()
            .any(|n| n.name == "save/SaveV2/tensor_names"));
        // The restore op restores it.
        assert!(by_name("save/restore_all")
            .input
            .iter()
            .any(|i| i.starts_with("^externalized/c/externalized_assign")));
    }
}
