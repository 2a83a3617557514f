//! Ops that cut, pad, repeat or pick parts of tensors: `Slice`, `Pad`/`PadV2`/`MirrorPad`,
//! `Tile`, `Gather`/`GatherV2`, `Split`/`SplitV`, `OneHot` and `Range`, following the shape
//! functions TensorFlow registers for them (`array_ops.cc`, `math_ops.cc`): exact dims where
//! the inputs that decide them are constant, unknown dims (of the right rank when it is known)
//! otherwise.

use super::super::shape::{add_dims, axis, mul_dims, Shape};
use super::super::tensor::Tensor;
use super::Ctx;

pub(super) fn infer(op: &str, ctx: &Ctx<'_>) -> Option<Vec<Tensor>> {
    let out = match op {
        "Slice" => slice(ctx),
        "Pad" | "PadV2" | "MirrorPad" => pad(ctx),
        "Tile" => tile(ctx),
        "GatherV2" => gather(
            ctx,
            ctx.scalar_int(2),
            ctx.attrs.int("batch_dims").unwrap_or(0),
        ),
        "Gather" => gather(ctx, Some(0), 0),
        "Split" => return Some(split(ctx, 1, ctx.scalar_int(0), None)),
        "SplitV" => return Some(split(ctx, 0, ctx.scalar_int(2), ctx.ints(1))),
        "OneHot" => one_hot(ctx),
        "Range" => range(ctx),
        _ => return None,
    };
    Some(vec![Tensor::shaped(out)])
}

/// The rank of input 0, or the length of the 1-D input `vector` when input 0's is unknown.
fn rank_from(ctx: &Ctx<'_>, vector: usize) -> Option<usize> {
    ctx.shape(0)
        .rank()
        .or_else(|| usize::try_from(ctx.shape(vector).dim(0)).ok())
}

/// `Slice(input, begin, size)`: `size[i]`, or `input[i] - begin[i]` where `size[i]` is -1.
fn slice(ctx: &Ctx<'_>) -> Shape {
    let Some(rank) = rank_from(ctx, 1).or_else(|| rank_from(ctx, 2)) else {
        return Shape::Unknown;
    };
    let Some(size) = ctx.ints(2).filter(|s| s.len() == rank) else {
        return Shape::unknown_dims(rank);
    };
    // In a constant, a size of -1 means "to the end"; in shape-like contents, "unknown".
    let to_end = ctx.exact(2);
    let begin = ctx.ints(1).filter(|b| b.len() == rank);
    let input = ctx.shape(0);
    let dims = size
        .iter()
        .enumerate()
        .map(|(i, &n)| match (n, begin) {
            (-1, Some(b)) if to_end && b[i] >= 0 && input.dim(i) >= 0 => {
                (input.dim(i) - b[i]).max(-1)
            }
            (-1, _) => -1,
            (n, _) => n,
        })
        .collect();
    Shape::known(dims)
}

/// `Pad(input, paddings[, constant])`: `input[i] + paddings[i][0] + paddings[i][1]`;
/// `paddings` is `[rank, 2]`.
fn pad(ctx: &Ctx<'_>) -> Shape {
    let Some(rank) = rank_from(ctx, 1) else {
        return Shape::Unknown;
    };
    let Some(paddings) = ctx.ints(1).filter(|p| p.len() == 2 * rank) else {
        return Shape::unknown_dims(rank);
    };
    let input = ctx.shape(0);
    let dims = (0..rank)
        .map(|i| add_dims(input.dim(i), add_dims(paddings[2 * i], paddings[2 * i + 1])))
        .collect();
    Shape::known(dims)
}

/// `Tile(input, multiples)`: `input[i] * multiples[i]`.
fn tile(ctx: &Ctx<'_>) -> Shape {
    let Some(rank) = rank_from(ctx, 1) else {
        return Shape::Unknown;
    };
    let Some(multiples) = ctx.ints(1).filter(|m| m.len() == rank) else {
        return Shape::unknown_dims(rank);
    };
    let input = ctx.shape(0);
    let dims = multiples
        .iter()
        .enumerate()
        .map(|(i, &m)| match m {
            1 => input.dim(i),
            m if m < 0 => -1,
            m => mul_dims(input.dim(i), m),
        })
        .collect();
    Shape::known(dims)
}

/// `GatherV2(params, indices, axis)`: `params[:axis] + indices[batch_dims:] + params[axis+1:]`;
/// with the axis unknown only the rank is known.
fn gather(ctx: &Ctx<'_>, axis_value: Option<i64>, batch_dims: i64) -> Shape {
    let (Some(params), Some(indices)) = (ctx.shape(0).dims(), ctx.shape(1).dims()) else {
        return Shape::Unknown;
    };
    let batch = if batch_dims < 0 {
        batch_dims.checked_add(i64::try_from(indices.len()).unwrap_or(i64::MAX))
    } else {
        Some(batch_dims)
    };
    let Some(batch) = batch.and_then(|b| usize::try_from(b).ok()) else {
        return Shape::Unknown;
    };
    if batch > indices.len() || params.is_empty() {
        return Shape::Unknown;
    }
    let Some(a) = axis_value.and_then(|a| axis(a, params.len())) else {
        let rank = (params.len() + indices.len()).checked_sub(1 + batch);
        return rank.map_or(Shape::Unknown, Shape::unknown_dims);
    };
    if a < batch {
        return Shape::Unknown;
    }
    let mut dims = params[..a].to_vec();
    dims.extend_from_slice(&indices[batch..]);
    dims.extend_from_slice(&params[a + 1..]);
    Shape::known(dims)
}

/// `Split` (value input 1, `num_split` equal parts) and `SplitV` (value input 0, parts of
/// `sizes`, one of which may be -1 for the rest): `num_split` outputs.
fn split(
    ctx: &Ctx<'_>,
    value: usize,
    axis_value: Option<i64>,
    sizes: Option<&[i64]>,
) -> Vec<Tensor> {
    let Some(n) = ctx
        .attrs
        .int("num_split")
        .and_then(|n| usize::try_from(n).ok())
        .filter(|&n| n >= 1 && n <= ctx.dtypes.len().max(1))
    else {
        return Vec::new();
    };
    let Some(dims) = ctx.shape(value).dims() else {
        return vec![Tensor::shaped(Shape::Unknown); n];
    };
    let Some(a) = axis_value.and_then(|a| axis(a, dims.len())) else {
        return vec![Tensor::shaped(Shape::unknown_dims(dims.len())); n];
    };
    let whole = dims[a];
    // Each output's size along the axis.
    let along: Vec<i64> = match sizes {
        None if ctx.node.op == "Split" => {
            let each = match i64::try_from(n) {
                Ok(n) if whole >= 0 && whole % n == 0 => whole / n,
                _ => -1,
            };
            vec![each; n]
        }
        Some(sizes) if sizes.len() == n && ctx.exact(1) => {
            // Checked: the sizes come from the graph and may be anything.
            let rest = sizes
                .iter()
                .filter(|&&s| s != -1)
                .try_fold(0i64, |sum, &s| sum.checked_add(s));
            let fill = match rest {
                Some(rest) if whole >= 0 && rest <= whole => whole.checked_sub(rest).unwrap_or(-1),
                _ => -1,
            };
            sizes
                .iter()
                .map(|&s| if s == -1 { fill } else { s })
                .collect()
        }
        _ => vec![-1; n],
    };
    along
        .into_iter()
        .map(|size| {
            let mut out = dims.to_vec();
            out[a] = size;
            Tensor::shaped(Shape::known(out))
        })
        .collect()
}

/// `OneHot(indices, depth, on, off)`: indices' shape with `depth` inserted at `axis` (-1: last).
fn one_hot(ctx: &Ctx<'_>) -> Shape {
    let Some(indices) = ctx.shape(0).dims() else {
        return Shape::Unknown;
    };
    let depth = ctx.scalar_int(1).unwrap_or(-1);
    let at = match ctx.attrs.int("axis").unwrap_or(-1) {
        -1 => indices.len(),
        a => match usize::try_from(a) {
            Ok(a) if a <= indices.len() => a,
            _ => return Shape::Unknown,
        },
    };
    let mut dims = indices.to_vec();
    dims.insert(at, depth);
    Shape::known(dims)
}

/// `Range(start, limit, delta)` of integers: a vector of `ceil((limit - start) / delta)`
/// elements (0 when the range is empty); unknown length otherwise.
fn range(ctx: &Ctx<'_>) -> Shape {
    let bounds = (
        ctx.exact_scalar_int(0),
        ctx.exact_scalar_int(1),
        ctx.exact_scalar_int(2),
    );
    let length = match bounds {
        (Some(start), Some(limit), Some(delta)) if delta != 0 => {
            let span = i128::from(limit) - i128::from(start);
            let delta = i128::from(delta);
            let n = if (span > 0) == (delta > 0) && span != 0 {
                (span.abs() + delta.abs() - 1) / delta.abs()
            } else {
                0
            };
            i64::try_from(n).unwrap_or(-1)
        }
        _ => -1,
    };
    Shape::vector(length)
}
