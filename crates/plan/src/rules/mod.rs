//! DTensor's per-op rules (the `ComputeLayoutForward`, `ComputeLayoutBackward` and `ExpandOp`
//! of each SPMD expander under `dtensor/mlir/expansions/`), one module per family. Every
//! rule sees an [`OpView`]: the op, its attributes, its operands' shapes and constant values.

mod contract;
mod conv;
mod elementwise;
mod gather;
mod reduce;
mod shape_ops;
mod simple;
mod slice;

use crate::attrs::Attrs;
use crate::specs::{Spec, Specs};

/// What a rule may know about an op.
pub struct OpView<'p> {
    /// The op type.
    pub op: &'p str,
    /// Its attributes.
    pub attrs: &'p Attrs,
    /// The operands' global shapes (`-1` unknown).
    pub in_shapes: Vec<Option<&'p [i64]>>,
    /// The results' global shapes.
    pub out_shapes: Vec<Option<&'p [i64]>>,
    /// The operands' values, for integer constants.
    pub in_ints: Vec<Option<&'p [i64]>>,
    /// The layout of the variable behind each resource operand (`None` for others).
    pub in_vars: Vec<Option<&'p Specs>>,
    /// The mesh's dimension sizes.
    pub mesh: &'p [i64],
    /// The mesh's dimension names.
    pub mesh_names: &'p [String],
}

impl OpView<'_> {
    /// The rank of operand `i`, if known.
    pub fn in_rank(&self, i: usize) -> Option<usize> {
        self.in_shapes.get(i).copied().flatten().map(<[i64]>::len)
    }
    /// The rank of result `i`, if known.
    pub fn out_rank(&self, i: usize) -> Option<usize> {
        self.out_shapes.get(i).copied().flatten().map(<[i64]>::len)
    }
    /// The constant value of operand `i`.
    pub fn ints(&self, i: usize) -> Option<&[i64]> {
        self.in_ints.get(i).copied().flatten()
    }
    /// The single constant value of operand `i` (an axis).
    pub fn int(&self, i: usize) -> Option<i64> {
        self.ints(i).and_then(|v| (v.len() == 1).then(|| v[0]))
    }
    /// Dimension `axis` of operand `i` (`-1` unknown).
    pub fn in_dim(&self, i: usize, axis: usize) -> i64 {
        self.in_shapes
            .get(i)
            .copied()
            .flatten()
            .and_then(|s| s.get(axis).copied())
            .unwrap_or(-1)
    }
    /// How many shards spec `s` makes.
    pub fn shards(&self, s: Spec) -> i64 {
        match s {
            Spec::D(d) => self.mesh.get(usize::from(d)).copied().unwrap_or(1),
            _ => 1,
        }
    }
    /// How spec `s` reads in DTensor's messages.
    pub fn name(&self, s: Spec) -> String {
        match s {
            Spec::D(d) => self
                .mesh_names
                .get(usize::from(d))
                .cloned()
                .unwrap_or_default(),
            Spec::U => "unsharded".into(),
            Spec::Any => "any".into(),
        }
    }
    /// The number of operands.
    pub fn arity(&self) -> usize {
        self.in_shapes.len()
    }
}

/// Normalizes a possibly negative axis against `rank`.
pub fn norm_axis(axis: i64, rank: usize) -> Option<usize> {
    let r = i64::try_from(rank).ok()?;
    let a = if axis < 0 { axis + r } else { axis };
    usize::try_from(a).ok().filter(|_| a < r)
}

/// An all-reduce an op's expansion emits: its reduction, mesh dims, and the tensor it runs on
/// (global shape and layout, so its per-device size is known).
#[derive(Debug, Clone)]
pub struct Reduce {
    /// `Add`, `Max`, `Min`, `Mul`, `Mean`, `All`, `Any`.
    pub op: &'static str,
    /// The mesh dims reduced over.
    pub dims: Vec<u8>,
    /// The global shape of the reduced tensor.
    pub shape: Vec<i64>,
    /// Its layout.
    pub specs: Specs,
}

/// What an op's expansion does: the layouts its operands are relayouted to first, the
/// all-reduces it runs, and the layouts of its local results (relayouted to the merged
/// results afterwards).
#[derive(Debug, Clone, Default)]
pub struct Expansion {
    /// Per operand, the layout it is relayouted to (`None`: used as it is).
    pub operands: Vec<Option<Specs>>,
    /// The all-reduces on the local result.
    pub reduces: Vec<Reduce>,
    /// Per result, the layout the local op produces (`None`: the merged layout).
    pub results: Vec<Option<Specs>>,
}

/// A rule's outcome when DTensor refuses the op: its message.
pub type Refusal = String;

/// The family an op belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// Unary, binary and n-ary elementwise ops.
    Elementwise,
    /// `BiasAdd`.
    BiasAdd,
    /// `MatMul`, `BatchMatMul*`.
    MatMul,
    /// `Einsum`.
    Einsum,
    /// `Sum`, `Mean`, `Max`, `Min`, `Prod`, `All`, `Any`, `L2Loss`.
    Reduce,
    /// `ArgMax`.
    ArgMax,
    /// `Softmax`, `LogSoftmax`.
    Softmax,
    /// `Reshape`.
    Reshape,
    /// `Transpose`.
    Transpose,
    /// `ExpandDims`.
    ExpandDims,
    /// `Squeeze`.
    Squeeze,
    /// `ConcatV2`, `Concat`.
    Concat,
    /// `Split`, `SplitV`.
    Split,
    /// `Pack`.
    Pack,
    /// `Unpack`.
    Unpack,
    /// `Pad`, `PadV2`.
    Pad,
    /// `Slice`.
    Slice,
    /// `StridedSlice`.
    StridedSlice,
    /// `GatherV2`, `ResourceGather`.
    Gather,
    /// `Conv2D`, `Conv3D`, `MaxPool`.
    Conv,
    /// `Const`.
    Const,
    /// `Shape`, `Rank`, `ShapeN`, `Size` and other replicated metadata.
    Meta,
    /// `ReadVariableOp`.
    ReadVariable,
    /// `AssignVariableOp`, `AssignAddVariableOp`, `AssignSubVariableOp`.
    AssignVariable,
    /// Ops DTensor has an expander for that refuses them, or none at all.
    Refused(&'static str),
    /// Ops with no rule here: taken as replicated.
    Unknown,
}

/// Elementwise ops DTensor registers (`mlir/spmd_expanders.cc`).
const ELEMENTWISE: &[&str] = &[
    "Abs",
    "Cast",
    "Identity",
    "Neg",
    "ZerosLike",
    "OnesLike",
    "Exp",
    "Sqrt",
    "Rsqrt",
    "Log",
    "StopGradient",
    "Reciprocal",
    "Square",
    "Erf",
    "Tanh",
    "TanhGrad",
    "Relu",
    "ReluGrad",
    "Sigmoid",
    "SigmoidGrad",
    "IsFinite",
    "Add",
    "AddV2",
    "AddN",
    "RealDiv",
    "Div",
    "DivNoNan",
    "Equal",
    "FloorDiv",
    "FloorMod",
    "NotEqual",
    "Less",
    "LessEqual",
    "LogicalAnd",
    "LogicalNot",
    "LogicalOr",
    "Maximum",
    "Minimum",
    "Mul",
    "Select",
    "SelectV2",
    "Sub",
    "SquaredDifference",
    "Greater",
    "GreaterEqual",
    "RsqrtGrad",
    "SqrtGrad",
    "Pow",
    "BitwiseAnd",
    "BitwiseOr",
    "BitwiseXor",
    "LeftShift",
    "RightShift",
    "Acos",
    "Acosh",
    "Asin",
    "Asinh",
    "Atan",
    "Atan2",
    "Atanh",
    "Cos",
    "Cosh",
    "Sin",
    "Sinh",
    "Tan",
    "Ceil",
    "CheckNumerics",
    "ClipByValue",
    "Conj",
    "Complex",
    "ComplexAbs",
    "Digamma",
    "Elu",
    "EluGrad",
    "Erfc",
    "Erfinv",
    "Expm1",
    "Floor",
    "Imag",
    "Inv",
    "Invert",
    "IsInf",
    "IsNan",
    "LeakyRelu",
    "LeakyReluGrad",
    "Lgamma",
    "Log1p",
    "MulNoNan",
    "Ndtri",
    "NextAfter",
    "Polygamma",
    "PopulationCount",
    "PreventGradient",
    "Real",
    "ReciprocalGrad",
    "Relu6",
    "Relu6Grad",
    "Rint",
    "Round",
    "Selu",
    "SeluGrad",
    "Sign",
    "Softplus",
    "Softsign",
    "TruncateDiv",
    "TruncateMod",
    "Xdivy",
    "Xlog1py",
    "Xlogy",
    "Zeta",
    "Bitcast",
    "Gelu",
    "EnsureShape",
];

/// The family of `op`.
pub fn family(op: &str) -> Family {
    use Family as F;
    match op {
        "BiasAdd" | "BiasAddV1" => F::BiasAdd,
        "MatMul" | "BatchMatMul" | "BatchMatMulV2" | "BatchMatMulV3" => F::MatMul,
        "Einsum" => F::Einsum,
        "Sum" | "Mean" | "Max" | "Min" | "Prod" | "All" | "Any" | "L2Loss" | "BiasAddGrad" => {
            F::Reduce
        }
        "ArgMax" => F::ArgMax,
        "Softmax" | "LogSoftmax" => F::Softmax,
        "Reshape" => F::Reshape,
        "Transpose" => F::Transpose,
        "ExpandDims" => F::ExpandDims,
        "Squeeze" => F::Squeeze,
        "ConcatV2" | "Concat" => F::Concat,
        "Split" | "SplitV" => F::Split,
        "Pack" => F::Pack,
        "Unpack" => F::Unpack,
        "Pad" | "PadV2" => F::Pad,
        "Slice" => F::Slice,
        "StridedSlice" => F::StridedSlice,
        "GatherV2" | "ResourceGather" => F::Gather,
        "Conv2D" | "Conv3D" | "MaxPool" => F::Conv,
        "Const" => F::Const,
        "Shape" | "Rank" | "ShapeN" | "BroadcastGradientArgs" => F::Meta,
        "ReadVariableOp" => F::ReadVariable,
        "AssignVariableOp" | "AssignAddVariableOp" | "AssignSubVariableOp" => F::AssignVariable,
        "RandomUniform" | "RandomUniformInt" | "RandomStandardNormal" => F::Refused(
            "Stateful random operations are not supported in DTensor. Please use stateless \
             random operations instead.",
        ),
        "ArgMin" | "Cumprod" | "Mod" => F::Refused(
            "no SPMD expander: DTensor's layout propagation fails with \"does not implement \
             layout propagation\"",
        ),
        _ if ELEMENTWISE.contains(&op) => F::Elementwise,
        _ => F::Unknown,
    }
}

/// The forward rule: result layouts from operand layouts (`None` where unknown).
pub fn forward(f: Family, v: &OpView, ins: &[Option<Specs>], n_out: usize) -> Vec<Option<Specs>> {
    use Family as F;
    let out = match f {
        F::Elementwise => vec![elementwise::forward(v, ins)],
        F::BiasAdd => vec![elementwise::bias_forward(v, ins)],
        F::MatMul => vec![contract::matmul_forward(v, ins)],
        F::Einsum => vec![contract::einsum_forward(v, ins)],
        F::Reduce => vec![reduce::forward(v, ins)],
        F::ArgMax => vec![reduce::argmax_forward(v, ins)],
        F::Softmax => vec![ins.first().cloned().flatten()],
        F::Reshape => vec![shape_ops::reshape_forward(v, ins)],
        F::Transpose => vec![shape_ops::transpose_forward(v, ins)],
        F::ExpandDims => vec![shape_ops::expand_forward(v, ins)],
        F::Squeeze => vec![shape_ops::squeeze_forward(v, ins)],
        F::Concat => vec![shape_ops::concat_forward(v, ins)],
        F::Split => shape_ops::split_forward(v, ins, n_out),
        F::Pack => vec![shape_ops::pack_forward(v, ins)],
        F::Unpack => shape_ops::unpack_forward(v, ins, n_out),
        F::Pad => vec![ins.first().cloned().flatten()],
        F::Slice => vec![slice::slice_forward(v, ins)],
        F::StridedSlice => vec![slice::strided_forward(v, ins)],
        F::Gather => vec![gather::forward(v, ins)],
        F::Conv => vec![ins.first().cloned().flatten()],
        F::Const | F::Meta | F::Unknown => (0..n_out)
            .map(|i| v.out_rank(i).map(crate::specs::replicated))
            .collect(),
        F::ReadVariable => vec![v.in_vars.first().copied().flatten().cloned()],
        F::AssignVariable | F::Refused(_) => vec![None; n_out],
    };
    pad(out, n_out)
}

/// The backward rule: operand requests from result layouts (`None`: no request).
pub fn backward(f: Family, v: &OpView, outs: &[Option<Specs>]) -> Vec<Option<Specs>> {
    use Family as F;
    let n = v.arity();
    let out = match f {
        F::Elementwise => elementwise::backward(v, outs),
        F::BiasAdd => elementwise::bias_backward(v, outs),
        F::MatMul => contract::matmul_backward(v, outs),
        F::Einsum => contract::einsum_backward(v, outs),
        F::Reduce => reduce::backward(v, outs),
        F::ArgMax => reduce::argmax_backward(v, outs),
        F::Softmax => vec![outs.first().cloned().flatten()],
        F::Reshape => shape_ops::reshape_backward(v, outs),
        F::Transpose => shape_ops::transpose_backward(v, outs),
        F::ExpandDims => shape_ops::expand_backward(v, outs),
        F::Squeeze => shape_ops::squeeze_backward(v, outs),
        F::Concat => shape_ops::concat_backward(v, outs),
        F::Split => shape_ops::split_backward(v, outs),
        F::Pack => shape_ops::pack_backward(v, outs),
        F::Unpack => shape_ops::unpack_backward(v, outs),
        F::Pad => shape_ops::pad_backward(v, outs),
        F::Slice => slice::slice_backward(v, outs),
        F::StridedSlice => slice::strided_backward(v, outs),
        F::Gather => gather::backward(v, outs),
        F::Conv => conv::backward(v, outs),
        F::AssignVariable => simple::assign_backward(v),
        F::Const | F::Meta | F::ReadVariable | F::Unknown | F::Refused(_) => Vec::new(),
    };
    let mut out = pad(out, n);
    // Operands that are shape-like (axes, perms, sizes) are always asked to be replicated.
    for (i, o) in out.iter_mut().enumerate() {
        if o.is_none() && v.ints(i).is_some() {
            *o = v.in_rank(i).map(crate::specs::replicated);
        }
    }
    out
}

/// The expansion: relayouts, all-reduces, local result layouts; or DTensor's refusal.
pub fn expand(f: Family, v: &OpView, ins: &[Specs], outs: &[Specs]) -> Result<Expansion, Refusal> {
    use Family as F;
    match f {
        F::Elementwise => Ok(elementwise::expand(v, ins, outs)),
        F::BiasAdd => Ok(elementwise::bias_expand(v, ins, outs)),
        F::MatMul => contract::matmul_expand(v, ins, outs),
        F::Einsum => contract::einsum_expand(v, ins, outs),
        F::Reduce => Ok(reduce::expand(v, ins, outs)),
        F::ArgMax => Ok(reduce::argmax_expand(v, ins, outs)),
        F::Softmax => reduce::softmax_expand(v, ins, outs),
        F::Reshape => Ok(shape_ops::reshape_expand(v, ins, outs)),
        F::Transpose => shape_ops::transpose_expand(v, ins, outs),
        F::ExpandDims => Ok(shape_ops::expand_expand(v, ins, outs)),
        F::Squeeze => Ok(simple::local(v)),
        F::Concat => shape_ops::concat_expand(v, ins, outs),
        F::Split => shape_ops::split_expand(v, ins, outs),
        F::Pack => Ok(shape_ops::pack_expand(v, ins, outs)),
        F::Unpack => Ok(shape_ops::unpack_expand(v, ins, outs)),
        F::Pad => shape_ops::pad_expand(v, ins, outs),
        F::Slice => slice::slice_expand(v, ins, outs),
        F::StridedSlice => slice::strided_expand(v, ins, outs),
        F::Gather => gather::expand(v, ins, outs),
        F::Conv => conv::expand(v, ins, outs),
        F::Const | F::Meta | F::ReadVariable => Ok(simple::local(v)),
        F::AssignVariable => Ok(simple::assign_expand(v, ins)),
        F::Unknown => Ok(simple::replicated_expand(v, ins, outs)),
        F::Refused(why) => Err(why.to_string()),
    }
}

fn pad(mut v: Vec<Option<Specs>>, n: usize) -> Vec<Option<Specs>> {
    v.resize(n, None);
    v
}
