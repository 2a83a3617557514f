//! Graph-building helpers shared by the tests.
#![allow(dead_code, unused_imports)]

use prost::bytes::Bytes;
use unbound_plugin_fold_constants::tensor::{self, Tensor, Values};
use unbound_proto::tensorflow::{
    attr_value, tensor_shape_proto, AttrValue, DataType, GraphDef, NodeDef, TensorProto,
    TensorShapeProto,
};

pub fn shape(dims: &[i64]) -> Option<TensorShapeProto> {
    Some(TensorShapeProto {
        dim: dims
            .iter()
            .map(|&size| tensor_shape_proto::Dim {
                size,
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    })
}

fn attr(value: attr_value::Value) -> AttrValue {
    AttrValue { value: Some(value) }
}

/// A `Const` holding `proto`.
pub fn constant(name: &str, proto: TensorProto) -> NodeDef {
    let mut node = NodeDef {
        name: name.into(),
        op: "Const".into(),
        ..Default::default()
    };
    node.attr
        .insert("dtype".into(), attr(attr_value::Value::Type(proto.dtype)));
    node.attr
        .insert("value".into(), attr(attr_value::Value::Tensor(proto)));
    node
}

/// A float `Const` written with tensor_content.
pub fn f32s(name: &str, dims: &[i64], values: &[f32]) -> NodeDef {
    let content: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    constant(
        name,
        TensorProto {
            dtype: DataType::DtFloat as i32,
            tensor_shape: shape(dims),
            tensor_content: Bytes::from(content),
            ..Default::default()
        },
    )
}

/// An int32 `Const` written with int_val.
pub fn i32s(name: &str, dims: &[i64], values: &[i32]) -> NodeDef {
    constant(
        name,
        TensorProto {
            dtype: DataType::DtInt32 as i32,
            tensor_shape: shape(dims),
            int_val: values.to_vec(),
            ..Default::default()
        },
    )
}

pub use unbound_grappler_sdk::test_graphs::{
    find as node, graph, name_set as set, typed_node as op,
};

/// The tensor of `Const` node `name`.
pub fn value(g: &GraphDef, name: &str) -> Tensor {
    let n = node(g, name);
    assert_eq!(n.op, "Const", "{name} is a Const");
    match n.attr["value"].value.as_ref() {
        Some(attr_value::Value::Tensor(t)) => tensor::read(t).expect("readable"),
        other => panic!("no tensor: {other:?}"),
    }
}

pub fn f32_values(t: &Tensor) -> Vec<f32> {
    match &t.values {
        Values::F32(v) => v.clone(),
        other => panic!("not f32: {other:?}"),
    }
}
