//! Matrix products: `MatMul` and the batched variants.

use super::super::shape::Shape;
use super::super::tensor::Tensor;
use super::Ctx;

pub(super) fn infer(op: &str, ctx: &Ctx<'_>) -> Option<Vec<Tensor>> {
    let out = match op {
        "MatMul" | "_FusedMatMul" | "SparseMatMul" => {
            let a = ctx.shape(0).with_rank(2);
            let b = ctx.shape(1).with_rank(2);
            let m = row(&a, flag(ctx, "transpose_a"));
            let n = col(&b, flag(ctx, "transpose_b"));
            Shape::Known(vec![m, n])
        }
        "BatchMatMul" | "BatchMatMulV2" | "BatchMatMulV3" | "_MklBatchMatMulV2" => batch(ctx),
        _ => return None,
    };
    Some(vec![Tensor::shaped(out)])
}

fn flag(ctx: &Ctx<'_>, name: &str) -> bool {
    ctx.attrs.bool(name).unwrap_or(false)
}

/// The output rows of a rank-2 (or more) operand, transposed or not.
fn row(s: &Shape, transposed: bool) -> i64 {
    let r = s.rank().unwrap_or(0);
    if r < 2 {
        return -1;
    }
    s.dim(if transposed { r - 1 } else { r - 2 })
}

/// The output columns of a rank-2 (or more) operand, transposed or not.
fn col(s: &Shape, transposed: bool) -> i64 {
    row(s, !transposed)
}

/// Batched product: broadcast batch dims, then `[m, n]`.
fn batch(ctx: &Ctx<'_>) -> Shape {
    let (a, b) = (ctx.shape(0), ctx.shape(1));
    let (Some(da), Some(db)) = (a.dims(), b.dims()) else {
        return Shape::Unknown;
    };
    if da.len() < 2 || db.len() < 2 {
        return Shape::Unknown;
    }
    let batch_a = Shape::Known(da[..da.len() - 2].to_vec());
    let batch_b = Shape::Known(db[..db.len() - 2].to_vec());
    let Shape::Known(mut dims) = batch_a.broadcast(&batch_b) else {
        return Shape::Unknown;
    };
    dims.push(row(a, flag(ctx, "adj_x")));
    dims.push(col(b, flag(ctx, "adj_y")));
    Shape::Known(dims)
}
