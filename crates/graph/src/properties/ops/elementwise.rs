//! Elementwise ops: unary (output shaped like the input), binary with broadcasting, AddN,
//! BiasAdd and the identity family (which also forwards known contents).

use super::super::shape::Shape;
use super::super::tensor::Tensor;
use super::Ctx;

/// Ops whose single output has the shape (and, for these, the contents) of input 0.
const FORWARDING: &[&str] = &[
    "Identity",
    "Snapshot",
    "StopGradient",
    "PreventGradient",
    "CheckNumerics",
    "CheckNumericsV2",
    "Enter",
    "RefEnter",
    "Exit",
    "RefExit",
    "NextIteration",
    "RefNextIteration",
    "RefIdentity",
    "DebugIdentity",
    "DebugIdentityV2",
];

/// Ops whose single output has the shape of input 0.
const UNARY: &[&str] = &[
    "Abs",
    "Acos",
    "Acosh",
    "Angle",
    "Asin",
    "Asinh",
    "Atan",
    "Atanh",
    "Cast",
    "Ceil",
    "ComplexAbs",
    "Conj",
    "Cos",
    "Cosh",
    "Digamma",
    "Elu",
    "Erf",
    "Erfc",
    "Erfinv",
    "Exp",
    "Expm1",
    "Floor",
    "Gelu",
    "Imag",
    "Inv",
    "Invert",
    "IsFinite",
    "IsInf",
    "IsNan",
    "LeakyRelu",
    "Lgamma",
    "Log",
    "Log1p",
    "LogSoftmax",
    "LogicalNot",
    "Neg",
    "OnesLike",
    "Real",
    "Reciprocal",
    "Relu",
    "Relu6",
    "Rint",
    "Round",
    "Rsqrt",
    "Selu",
    "Sigmoid",
    "Sign",
    "Sin",
    "Sinh",
    "Softmax",
    "Softplus",
    "Softsign",
    "Sqrt",
    "Square",
    "Tan",
    "Tanh",
    "ZerosLike",
    "Ndtri",
    "Bitcast",
    "ClipByValue",
    "FakeQuantWithMinMaxArgs",
    "FakeQuantWithMinMaxVars",
    "QuantizeAndDequantizeV2",
    "QuantizeAndDequantizeV3",
    "QuantizeAndDequantizeV4",
    "LRN",
    "Relu6Grad",
    "ReluGrad",
    "SigmoidGrad",
    "TanhGrad",
    "RsqrtGrad",
    "SqrtGrad",
    "EluGrad",
    "SeluGrad",
    "SoftplusGrad",
    "LeakyReluGrad",
    "InvertPermutation",
    "Roll",
    "ReverseV2",
    "RandomShuffle",
    "Cumsum",
    "Cumprod",
    "CumulativeLogsumexp",
];

/// Binary ops with numpy broadcasting (comparisons included: their dtype comes from the
/// OpDef).
const BINARY: &[&str] = &[
    "Add",
    "AddV2",
    "ApproximateEqual",
    "Atan2",
    "BitwiseAnd",
    "BitwiseOr",
    "BitwiseXor",
    "Complex",
    "Div",
    "DivNoNan",
    "Equal",
    "FloorDiv",
    "FloorMod",
    "Greater",
    "GreaterEqual",
    "Igamma",
    "Igammac",
    "LeftShift",
    "Less",
    "LessEqual",
    "LogicalAnd",
    "LogicalOr",
    "Maximum",
    "Minimum",
    "Mod",
    "Mul",
    "MulNoNan",
    "NextAfter",
    "NotEqual",
    "Polygamma",
    "Pow",
    "RealDiv",
    "RightShift",
    "SquaredDifference",
    "Sub",
    "TruncateDiv",
    "TruncateMod",
    "Xdivy",
    "Xlog1py",
    "Xlogy",
    "Zeta",
];

pub(super) fn infer(op: &str, ctx: &Ctx<'_>) -> Option<Vec<Tensor>> {
    if FORWARDING.contains(&op) {
        let input = ctx.input(0);
        return Some(vec![Tensor {
            dtype: 0,
            shape: input.shape.clone(),
            ints: input.ints.clone(),
            value: input.value.clone(),
        }]);
    }
    if UNARY.contains(&op) {
        return Some(vec![Tensor::shaped(ctx.shape(0).clone())]);
    }
    if op == "BroadcastTo" {
        return Some(vec![Tensor::shaped(broadcast_to(ctx))]);
    }
    if BINARY.contains(&op) {
        return Some(vec![Tensor::shaped(ctx.shape(0).broadcast(ctx.shape(1)))]);
    }
    let out = match op {
        "AddN" | "AccumulateNV2" => ctx
            .inputs
            .iter()
            .fold(Shape::Unknown, |acc, t| acc.merge(&t.shape)),
        "SelectV2" => ctx.shape(0).broadcast(ctx.shape(1)).broadcast(ctx.shape(2)),
        "Select" => ctx.shape(1).merge(ctx.shape(2)),
        "BiasAdd" | "BiasAddV1" => bias_add(ctx),
        "IdentityN" => {
            return Some(
                ctx.inputs
                    .iter()
                    .map(|t| Tensor {
                        dtype: 0,
                        shape: t.shape.clone(),
                        ints: t.ints.clone(),
                        value: t.value.clone(),
                    })
                    .collect(),
            )
        }
        _ => return None,
    };
    Some(vec![Tensor::shaped(out)])
}

/// `BiasAdd`: the value's shape, its channel dim refined by the bias length.
fn bias_add(ctx: &Ctx<'_>) -> Shape {
    let value = ctx.shape(0);
    let Some(dims) = value.dims() else {
        return Shape::Unknown;
    };
    let mut dims = dims.to_vec();
    let channel = if ctx.channels_first() && dims.len() >= 3 {
        Some(1)
    } else {
        dims.len().checked_sub(1)
    };
    if let Some(c) = channel {
        if dims[c] < 0 {
            dims[c] = ctx.shape(1).dim(0);
        }
    }
    Shape::Known(dims)
}

/// `BroadcastTo`: the requested shape (a shape tensor).
fn broadcast_to(ctx: &Ctx<'_>) -> Shape {
    match ctx.ints(1) {
        Some(dims) => Shape::known(dims.to_vec()),
        None => match ctx.shape(1).dims() {
            Some([n]) if *n >= 0 => usize::try_from(*n).map_or(Shape::Unknown, Shape::unknown_dims),
            _ => Shape::Unknown,
        },
    }
}
