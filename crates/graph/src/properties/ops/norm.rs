//! Batch normalization: `FusedBatchNorm` and its V2/V3. `y` has the input's shape; the
//! statistics outputs are per-channel vectors.

use super::super::shape::Shape;
use super::super::tensor::Tensor;
use super::Ctx;

pub(super) fn infer(op: &str, ctx: &Ctx<'_>) -> Option<Vec<Tensor>> {
    if !matches!(
        op,
        "FusedBatchNorm" | "FusedBatchNormV2" | "FusedBatchNormV3"
    ) {
        return None;
    }
    let x = ctx.shape(0).with_rank(4);
    let channel = if ctx.channels_first() { 1 } else { 3 };
    let mut channels = x.dim(channel);
    for i in 1..ctx.inputs.len().min(5) {
        if channels < 0 {
            channels = ctx.shape(i).dim(0);
        }
    }
    let mut y = x.dims().map(<[i64]>::to_vec).unwrap_or_default();
    if let Some(slot) = y.get_mut(channel) {
        *slot = channels;
    }
    let mut out = vec![Tensor::shaped(Shape::known(y))];
    for k in 1..ctx.dtypes.len() {
        // V3's sixth output (`reserve_space_3`) is opaque.
        let shape = if k == 5 {
            Shape::Unknown
        } else {
            Shape::vector(channels)
        };
        out.push(Tensor::shaped(shape));
    }
    Some(out)
}
