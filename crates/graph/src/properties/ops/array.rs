//! Ops that assemble or permute tensors: `ConcatV2`, `Concat`, `Pack`, `Transpose`,
//! and `StridedSlice` in the simple cases shape code uses (`tf.shape(x)[i]`).

use super::super::shape::{add_dims, axis, Shape};
use super::super::tensor::Tensor;
use super::Ctx;

pub(super) fn infer(op: &str, ctx: &Ctx<'_>) -> Option<Vec<Tensor>> {
    let out = match op {
        "ConcatV2" => {
            let n = ctx.inputs.len().saturating_sub(1);
            Tensor::shaped(concat(ctx, 0..n, n))
        }
        "Concat" => Tensor::shaped(concat(ctx, 1..ctx.inputs.len(), 0)),
        "Pack" => pack(ctx),
        "Transpose" => Tensor::shaped(transpose(ctx)),
        "StridedSlice" => strided_slice(ctx),
        _ => return None,
    };
    Some(vec![out])
}

/// Concatenation of inputs `values` along the axis given by input `axis_input`.
fn concat(ctx: &Ctx<'_>, values: std::ops::Range<usize>, axis_input: usize) -> Shape {
    let shapes: Vec<&Shape> = values.map(|i| ctx.shape(i)).collect();
    let Some(rank) = shapes.iter().find_map(|s| s.rank()) else {
        return Shape::Unknown;
    };
    let Some(a) = ctx.scalar_int(axis_input).and_then(|a| axis(a, rank)) else {
        return Shape::unknown_dims(rank);
    };
    let mut out = vec![-1; rank];
    let mut total = 0i64;
    for s in shapes {
        let s = s.with_rank(rank);
        total = add_dims(total, s.dim(a));
        for (i, slot) in out.iter_mut().enumerate() {
            if i != a && *slot < 0 {
                *slot = s.dim(i);
            }
        }
    }
    out[a] = total;
    Shape::Known(out)
}

/// `Pack`: inputs of one shape stacked along a new axis; stacked scalars keep their contents.
fn pack(ctx: &Ctx<'_>) -> Tensor {
    let n = ctx.inputs.len();
    let merged = ctx
        .inputs
        .iter()
        .fold(Shape::Unknown, |acc, t| acc.merge(&t.shape));
    let Some(dims) = merged.dims() else {
        return Tensor::default();
    };
    let a = ctx.attrs.int("axis").unwrap_or(0);
    let Some(a) = axis(a, dims.len() + 1) else {
        return Tensor::default();
    };
    let mut out = dims.to_vec();
    out.insert(a, i64::try_from(n).unwrap_or(-1));
    let shape = Shape::known(out);
    if dims.is_empty() {
        let ints: Option<Vec<i64>> = (0..n).map(|i| ctx.scalar_int(i)).collect();
        if let Some(ints) = ints {
            return Tensor::with_ints(shape, ints);
        }
    }
    Tensor::shaped(shape)
}

/// `Transpose` with a constant permutation (otherwise only the rank is known).
fn transpose(ctx: &Ctx<'_>) -> Shape {
    let input = ctx.shape(0);
    let rank = input.rank().or_else(|| {
        let n = ctx.shape(1).dim(0);
        usize::try_from(n).ok()
    });
    let Some(rank) = rank else {
        return Shape::Unknown;
    };
    let Some(perm) = ctx.ints(1).filter(|p| p.len() == rank) else {
        return Shape::unknown_dims(rank);
    };
    let mut out = Vec::with_capacity(rank);
    for &p in perm {
        match axis(p, rank) {
            Some(p) => out.push(input.dim(p)),
            None => return Shape::unknown_dims(rank),
        }
    }
    Shape::Known(out)
}

/// `StridedSlice` of a 1-D tensor with constant one-element begin/end/strides: either one
/// element (`shrink_axis_mask` 1) or a range. Other cases give unknown shapes.
fn strided_slice(ctx: &Ctx<'_>) -> Tensor {
    let attr = |name: &str| ctx.attrs.int(name).unwrap_or(0);
    let simple = attr("ellipsis_mask") == 0 && attr("new_axis_mask") == 0;
    let (Some(begin), Some(end), Some(stride)) =
        (ctx.scalar_int(1), ctx.scalar_int(2), ctx.scalar_int(3))
    else {
        return Tensor::default();
    };
    let Some(len) = ctx.shape(0).dims().and_then(|d| match d {
        [n] if *n >= 0 && simple => Some(*n),
        _ => None,
    }) else {
        return Tensor::default();
    };
    let contents = ctx.ints(0);
    if attr("shrink_axis_mask") & 1 == 1 {
        let Some(i) = axis(begin, usize::try_from(len).unwrap_or(0)) else {
            return Tensor::shaped(Shape::scalar());
        };
        return match contents.and_then(|c| c.get(i)) {
            Some(&v) => Tensor::with_ints(Shape::scalar(), vec![v]),
            None => Tensor::shaped(Shape::scalar()),
        };
    }
    if stride != 1 {
        return Tensor::shaped(Shape::vector(-1));
    }
    let clamp = |v: i64| {
        let v = if v < 0 { v.saturating_add(len) } else { v };
        v.clamp(0, len)
    };
    let b = if attr("begin_mask") & 1 == 1 {
        0
    } else {
        clamp(begin)
    };
    let e = if attr("end_mask") & 1 == 1 {
        len
    } else {
        clamp(end)
    };
    let n = (e - b).max(0);
    let shape = Shape::vector(n);
    match contents.and_then(|c| c.get(usize::try_from(b).ok()?..usize::try_from(e).ok()?)) {
        Some(slice) => Tensor::with_ints(shape, slice.to_vec()),
        None => Tensor::shaped(shape),
    }
}
