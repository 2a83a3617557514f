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
        Some(saver) => saver,
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
    for var in vars {
        let read = unique(&format!("{}/externalized_save_read", var.name), taken);
        let mut node = NodeDef {
            name: read.clone(),
            op: "ReadVariableOp".into(),
            input: vec![var.name.clone()],
            ..NodeDef::default()
        };
        node.attr.insert("dtype".into(), type_attr(var.dtype));
        graph.node.push(node);
        save_inputs.push(read);
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

/// A `list(type)` attribute.
fn type_list(types: impl IntoIterator<Item = i32>) -> AttrValue {
    AttrValue {
        value: Some(attr_value::Value::List(attr_value::ListValue {
            r#type: types.into_iter().collect(),
            ..Default::default()
        })),
    }
}
