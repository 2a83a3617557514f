//! Reductions over constant axes (`Sum`, `Mean`, ...) and `ArgMax`/`ArgMin`.

use super::super::shape::{axis, Shape};
use super::super::tensor::Tensor;
use super::Ctx;

const REDUCTIONS: &[&str] = &[
    "Sum",
    "Mean",
    "Max",
    "Min",
    "Prod",
    "All",
    "Any",
    "EuclideanNorm",
];

pub(super) fn infer(op: &str, ctx: &Ctx<'_>) -> Option<Vec<Tensor>> {
    let out = if REDUCTIONS.contains(&op) {
        let keep = ctx.attrs.bool("keep_dims").unwrap_or(false);
        reduce(ctx.shape(0), ctx.ints(1), keep)
    } else if op == "ArgMax" || op == "ArgMin" {
        let a = ctx.scalar_int(1);
        reduce(ctx.shape(0), a.as_ref().map(std::slice::from_ref), false)
    } else {
        return None;
    };
    Some(vec![Tensor::shaped(out)])
}

/// The shape after reducing `input` over `axes` (unknown axes: only the rank, if kept).
fn reduce(input: &Shape, axes: Option<&[i64]>, keep_dims: bool) -> Shape {
    let Some(dims) = input.dims() else {
        return Shape::Unknown;
    };
    let Some(axes) = axes else {
        return if keep_dims {
            Shape::unknown_dims(dims.len())
        } else {
            Shape::Unknown
        };
    };
    let mut reduced = vec![false; dims.len()];
    for &a in axes {
        match axis(a, dims.len()) {
            Some(a) => reduced[a] = true,
            None => return Shape::Unknown,
        }
    }
    let out = dims
        .iter()
        .zip(reduced)
        .filter_map(|(&d, r)| match (r, keep_dims) {
            (false, _) => Some(d),
            (true, true) => Some(1),
            (true, false) => None,
        });
    Shape::Known(out.collect())
}
