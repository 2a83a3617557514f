//! Ops that read or rewrite shapes: `Shape`, `Size`, `Rank`, `Reshape`, `ExpandDims`,
//! `Squeeze`, `Fill`. `Shape`/`Size`/`Rank` also produce their (partly) known contents, which
//! later `Reshape`s and `Fill`s consume.

use super::super::shape::{axis, Shape};
use super::super::tensor::Tensor;
use super::Ctx;

pub(super) fn infer(op: &str, ctx: &Ctx<'_>) -> Option<Vec<Tensor>> {
    let out = match op {
        "Shape" => shape_of(ctx.shape(0)),
        "ShapeN" => return Some(ctx.inputs.iter().map(|t| shape_of(&t.shape)).collect()),
        "Size" => match ctx.shape(0).num_elements() {
            Some(n) => Tensor::with_ints(Shape::scalar(), vec![n]),
            None => Tensor::shaped(Shape::scalar()),
        },
        "Rank" => match ctx.shape(0).rank().and_then(|r| i64::try_from(r).ok()) {
            Some(r) => Tensor::with_ints(Shape::scalar(), vec![r]),
            None => Tensor::shaped(Shape::scalar()),
        },
        "Reshape" => Tensor::shaped(reshape(ctx)),
        "ExpandDims" => Tensor::shaped(expand_dims(ctx)),
        "Squeeze" => Tensor::shaped(squeeze(ctx)),
        "Fill" => Tensor::shaped(shape_from_tensor(ctx, 0)),
        _ => return None,
    };
    Some(vec![out])
}

/// The output of `Shape` on a tensor of shape `s`: a vector with the dims as contents.
fn shape_of(s: &Shape) -> Tensor {
    match s.dims() {
        Some(dims) => {
            let rank = i64::try_from(dims.len()).unwrap_or(-1);
            Tensor::with_ints(Shape::vector(rank), dims.to_vec())
        }
        None => Tensor::shaped(Shape::vector(-1)),
    }
}

/// The shape described by shape tensor input `i` (a vector of dims, `-1` for unknown ones).
pub(super) fn shape_from_tensor(ctx: &Ctx<'_>, i: usize) -> Shape {
    if let Some(dims) = ctx.ints(i) {
        if ctx.shape(i).rank() == Some(1) {
            return Shape::known(dims.to_vec());
        }
    }
    match ctx.shape(i).dims() {
        Some([n]) if *n >= 0 => usize::try_from(*n).map_or(Shape::Unknown, Shape::unknown_dims),
        _ => Shape::Unknown,
    }
}

/// `Reshape`: the requested shape, with a single unknown dim solved from the element count.
fn reshape(ctx: &Ctx<'_>) -> Shape {
    let target = shape_from_tensor(ctx, 1);
    let Shape::Known(mut dims) = target else {
        return Shape::Unknown;
    };
    let unknown: Vec<usize> = (0..dims.len()).filter(|&i| dims[i] < 0).collect();
    if let ([only], Some(total)) = (unknown.as_slice(), ctx.shape(0).num_elements()) {
        let known = dims
            .iter()
            .filter(|&&d| d >= 0)
            .try_fold(1i64, |acc, &d| acc.checked_mul(d));
        if let Some(known) = known.filter(|&k| k > 0 && total % k == 0) {
            dims[*only] = total / known;
        }
    }
    Shape::Known(dims)
}

/// `ExpandDims`: a 1 inserted at the (constant) axis.
fn expand_dims(ctx: &Ctx<'_>) -> Shape {
    let input = ctx.shape(0);
    let Some(dims) = input.dims() else {
        return Shape::Unknown;
    };
    let Some(a) = ctx.scalar_int(1) else {
        return Shape::unknown_dims(dims.len() + 1);
    };
    let Some(a) = axis(a, dims.len() + 1) else {
        return Shape::Unknown;
    };
    let mut out = dims.to_vec();
    out.insert(a, 1);
    Shape::known(out)
}

/// `Squeeze`: size-1 dims removed (the listed ones, or all of them).
fn squeeze(ctx: &Ctx<'_>) -> Shape {
    let input = ctx.shape(0);
    let Some(dims) = input.dims() else {
        return Shape::Unknown;
    };
    let listed = ctx
        .attrs
        .ints("squeeze_dims")
        .or_else(|| ctx.attrs.ints("axis"))
        .unwrap_or(&[]);
    if listed.is_empty() {
        if dims.contains(&-1) {
            return Shape::Unknown;
        }
        return Shape::Known(dims.iter().copied().filter(|&d| d != 1).collect());
    }
    let mut remove = vec![false; dims.len()];
    for &a in listed {
        match axis(a, dims.len()) {
            Some(a) => remove[a] = true,
            None => return Shape::Unknown,
        }
    }
    Shape::Known(
        dims.iter()
            .zip(remove)
            .filter(|(_, r)| !r)
            .map(|(&d, _)| d)
            .collect(),
    )
}
