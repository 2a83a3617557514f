//! Ops that pick or regroup elements: `ResizeBilinear` and the other image resizes, `TopKV2`
//! and `TopK`, `Unpack` and `Where`, following TensorFlow's registered shape functions
//! (`image_ops.cc`, `nn_ops.cc`, `array_ops.cc`).

use super::super::shape::{axis, Shape};
use super::super::tensor::Tensor;
use super::Ctx;

/// Resize ops whose output is `[batch, size[0], size[1], channels]`.
const RESIZES: &[&str] = &[
    "ResizeBilinear",
    "ResizeNearestNeighbor",
    "ResizeBicubic",
    "ResizeArea",
    "ScaleAndTranslate",
];

pub(super) fn infer(op: &str, ctx: &Ctx<'_>) -> Option<Vec<Tensor>> {
    let out = match op {
        _ if RESIZES.contains(&op) => resize(ctx),
        "TopKV2" => return Some(top_k(ctx, ctx.exact_scalar_int(1))),
        "TopK" => return Some(top_k(ctx, ctx.attrs.int("k"))),
        "Unpack" => return Some(unpack(ctx)),
        "Where" => {
            let rank = ctx.shape(0).rank().and_then(|r| i64::try_from(r).ok());
            Shape::Known(vec![-1, rank.unwrap_or(-1)])
        }
        _ => return None,
    };
    Some(vec![Tensor::shaped(out)])
}

/// `[batch, new_height, new_width, channels]` from a 4-D image and a 2-element size.
fn resize(ctx: &Ctx<'_>) -> Shape {
    let image = ctx.shape(0).with_rank(4);
    let size = ctx.ints(1).filter(|s| s.len() == 2 && ctx.exact(1));
    let (h, w) = size.map_or((-1, -1), |s| (s[0], s[1]));
    Shape::known(vec![image.dim(0), h, w, image.dim(3)])
}

/// Values and indices: the input's shape with the last dim replaced by `k`.
fn top_k(ctx: &Ctx<'_>, k: Option<i64>) -> Vec<Tensor> {
    let shape = match ctx.shape(0).dims() {
        Some(dims) if !dims.is_empty() => {
            let mut dims = dims.to_vec();
            let last = dims.len() - 1;
            dims[last] = k.unwrap_or(-1);
            Shape::known(dims)
        }
        _ => Shape::Unknown,
    };
    vec![Tensor::shaped(shape.clone()), Tensor::shaped(shape)]
}

/// `num` outputs, each the input's shape without `axis`.
fn unpack(ctx: &Ctx<'_>) -> Vec<Tensor> {
    let n = ctx.dtypes.len();
    let shape = match ctx.shape(0).dims() {
        Some(dims) => match axis(ctx.attrs.int("axis").unwrap_or(0), dims.len()) {
            Some(a) => {
                let mut dims = dims.to_vec();
                dims.remove(a);
                Shape::known(dims)
            }
            None => Shape::Unknown,
        },
        None => Shape::Unknown,
    };
    vec![Tensor::shaped(shape); n]
}
