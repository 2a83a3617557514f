//! Ops whose outputs do not depend on input shapes: constants, placeholders, variables, calls.

use std::sync::Arc;

use unbound_proto::tensorflow::NodeDef;

use super::super::attrs::Attrs;
use super::super::shape::Shape;
use super::super::tensor::{int_values, Tensor};
use super::Ctx;

pub(super) fn infer(op: &str, ctx: &Ctx<'_>) -> Option<Vec<Tensor>> {
    let out = match op {
        "Const" | "HostConst" => constant(ctx),
        "Placeholder" | "PlaceholderV2" | "PlaceholderWithDefault" | "VariableV2" | "Variable" => {
            declared_shape(&ctx.attrs)
        }
        "VarHandleOp" | "_VarHandlesOp" => Tensor::shaped(Shape::scalar()),
        "ReadVariableOp" => Tensor::shaped(read_variable(ctx)),
        "NoOp" => return Some(Vec::new()),
        _ => return None,
    };
    Some(vec![out])
}

/// A `Const`: the shape of its `value`, its integer contents and the value itself.
fn constant(ctx: &Ctx<'_>) -> Tensor {
    let Some(value) = ctx.attrs.tensor("value") else {
        return Tensor::default();
    };
    let shape = value
        .tensor_shape
        .as_ref()
        .map_or_else(Shape::scalar, Shape::from_proto);
    Tensor {
        dtype: 0,
        shape,
        ints: int_values(value),
        value: Some(Arc::new(value.clone())),
    }
}

/// The `shape` attr of placeholders and ref variables.
fn declared_shape(attrs: &Attrs<'_>) -> Tensor {
    Tensor::shaped(
        attrs
            .shape("shape")
            .map_or(Shape::Unknown, Shape::from_proto),
    )
}

/// `ReadVariableOp`: the declared shape of the `VarHandleOp` it reads, when it reads one
/// directly.
fn read_variable(ctx: &Ctx<'_>) -> Shape {
    let Some(handle) = ctx.input_nodes.first() else {
        return Shape::Unknown;
    };
    var_handle_shape(handle)
}

fn var_handle_shape(node: &NodeDef) -> Shape {
    if node.op != "VarHandleOp" {
        return Shape::Unknown;
    }
    Attrs::new(node, None)
        .shape("shape")
        .map_or(Shape::Unknown, Shape::from_proto)
}
