//! Shape functions, one file per op family. Each returns the outputs' shapes (and known
//! integer contents); dtypes come from the OpDef and are filled in by the driver.

mod array;
mod control_flow;
mod conv;
mod einsum;
mod elementwise;
mod matmul;
mod norm;
mod reduction;
mod selection;
mod shape_ops;
mod slicing;
mod sources;

use unbound_proto::tensorflow::NodeDef;

use super::attrs::Attrs;
use super::shape::Shape;
use super::tensor::Tensor;

/// Everything a shape function may look at.
pub(crate) struct Ctx<'a> {
    /// The node.
    pub node: &'a NodeDef,
    /// Its attrs (with OpDef defaults).
    pub attrs: Attrs<'a>,
    /// What is known about its data inputs, in order.
    pub inputs: Vec<&'a Tensor>,
    /// The node producing each data input.
    pub input_nodes: Vec<&'a NodeDef>,
    /// Its output dtypes.
    pub dtypes: &'a [i32],
}

static UNKNOWN: Tensor = Tensor {
    dtype: 0,
    shape: Shape::Unknown,
    ints: None,
    value: None,
};

impl<'a> Ctx<'a> {
    /// Input `i` (an unknown tensor when the node has fewer inputs).
    pub(crate) fn input(&self, i: usize) -> &'a Tensor {
        self.inputs.get(i).copied().unwrap_or(&UNKNOWN)
    }

    /// The shape of input `i`.
    pub(crate) fn shape(&self, i: usize) -> &'a Shape {
        &self.input(i).shape
    }

    /// The known integer contents of input `i`.
    pub(crate) fn ints(&self, i: usize) -> Option<&'a [i64]> {
        self.input(i).ints.as_deref()
    }

    /// The contents of input `i` when it is a scalar or a one-element vector.
    pub(crate) fn scalar_int(&self, i: usize) -> Option<i64> {
        match self.ints(i)? {
            [v] => Some(*v),
            _ => None,
        }
    }

    /// Whether input `i`'s integer contents are all real values: a constant's (where -1 is a
    /// value), or shape-like contents with no unknown (-1) element.
    pub(crate) fn exact(&self, i: usize) -> bool {
        let t = self.input(i);
        t.value.is_some() || t.ints.as_ref().is_some_and(|v| !v.contains(&-1))
    }

    /// [`Self::scalar_int`] when it is a real value (see [`Self::exact`]).
    pub(crate) fn exact_scalar_int(&self, i: usize) -> Option<i64> {
        self.scalar_int(i).filter(|_| self.exact(i))
    }

    /// The `data_format` attr says channels come first (`NCHW`, `NCDHW`).
    pub(crate) fn channels_first(&self) -> bool {
        self.attrs
            .string("data_format")
            .is_some_and(|f| f.starts_with("NC"))
    }
}

/// Shapes of the node's outputs; `None` when the op has no shape function here (the driver
/// then falls back to `_output_shapes` or unknown shapes).
pub(crate) fn infer(ctx: &Ctx<'_>) -> Option<Vec<Tensor>> {
    let op = ctx.node.op.as_str();
    sources::infer(op, ctx)
        .or_else(|| elementwise::infer(op, ctx))
        .or_else(|| matmul::infer(op, ctx))
        .or_else(|| conv::infer(op, ctx))
        .or_else(|| norm::infer(op, ctx))
        .or_else(|| shape_ops::infer(op, ctx))
        .or_else(|| array::infer(op, ctx))
        .or_else(|| slicing::infer(op, ctx))
        .or_else(|| selection::infer(op, ctx))
        .or_else(|| einsum::infer(op, ctx))
        .or_else(|| reduction::infer(op, ctx))
        .or_else(|| control_flow::infer(op, ctx))
}
