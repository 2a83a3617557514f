//! Windowed ops over images: 2-D convolutions and pooling, NHWC or NCHW.

use super::super::shape::{mul_dims, Shape};
use super::super::tensor::Tensor;
use super::Ctx;

pub(super) fn infer(op: &str, ctx: &Ctx<'_>) -> Option<Vec<Tensor>> {
    let out = match op {
        "Conv2D" | "_FusedConv2D" => conv(ctx, Filter::Regular),
        "DepthwiseConv2dNative" | "_FusedDepthwiseConv2dNative" => conv(ctx, Filter::Depthwise),
        "MaxPool" | "AvgPool" => pool(ctx),
        _ => return None,
    };
    Some(vec![Tensor::shaped(out)])
}

#[derive(Clone, Copy)]
enum Filter {
    /// `[h, w, in, out]`: `out` output channels.
    Regular,
    /// `[h, w, in, multiplier]`: `in * multiplier` output channels.
    Depthwise,
}

/// Positions of the batch, spatial and channel dims in a rank-4 tensor.
struct Layout {
    batch: usize,
    spatial: [usize; 2],
    channel: usize,
}

fn layout(ctx: &Ctx<'_>) -> Layout {
    if ctx.channels_first() {
        Layout {
            batch: 0,
            spatial: [2, 3],
            channel: 1,
        }
    } else {
        Layout {
            batch: 0,
            spatial: [1, 2],
            channel: 3,
        }
    }
}

/// An attr of 4 ints in data-format order, read at the spatial positions.
fn spatial_attr(ctx: &Ctx<'_>, name: &str, l: &Layout) -> [i64; 2] {
    match ctx.attrs.ints(name) {
        Some(v) if v.len() == 4 => [v[l.spatial[0]], v[l.spatial[1]]],
        _ => [1, 1],
    }
}

/// Padding before + after of spatial dim `i`, for `EXPLICIT` padding.
fn explicit_padding(ctx: &Ctx<'_>, l: &Layout, i: usize) -> Option<i64> {
    let pads = ctx.attrs.ints("explicit_paddings")?;
    let d = l.spatial[i];
    let before = *pads.get(2 * d)?;
    let after = *pads.get(2 * d + 1)?;
    before.checked_add(after)
}

/// Output size of one spatial dim; `-1` when unknown or invalid.
fn window_output(
    input: i64,
    window: i64,
    stride: i64,
    dilation: i64,
    padding: &str,
    pad: Option<i64>,
) -> i64 {
    if input < 0 || stride <= 0 {
        return -1;
    }
    if padding == "SAME" {
        return input.checked_add(stride - 1).map_or(-1, |x| x / stride);
    }
    if window < 0 || dilation <= 0 {
        return -1;
    }
    let Some(effective) = window
        .checked_sub(1)
        .and_then(|w| w.checked_mul(dilation))
        .and_then(|w| w.checked_add(1))
    else {
        return -1;
    };
    let padded = match padding {
        "VALID" => Some(input),
        "EXPLICIT" => pad.and_then(|p| input.checked_add(p)),
        _ => None,
    };
    match padded.and_then(|p| p.checked_sub(effective)) {
        Some(span) if span >= 0 => span / stride + 1,
        _ => -1,
    }
}

/// Assembles a rank-4 output in the node's layout.
fn output(l: &Layout, batch: i64, spatial: [i64; 2], channels: i64) -> Shape {
    let mut dims = vec![-1; 4];
    dims[l.batch] = batch;
    dims[l.spatial[0]] = spatial[0];
    dims[l.spatial[1]] = spatial[1];
    dims[l.channel] = channels;
    Shape::known(dims)
}

fn conv(ctx: &Ctx<'_>, kind: Filter) -> Shape {
    let l = layout(ctx);
    let input = ctx.shape(0).with_rank(4);
    let filter = ctx.shape(1).with_rank(4);
    let strides = spatial_attr(ctx, "strides", &l);
    let dilations = spatial_attr(ctx, "dilations", &l);
    let padding = ctx.attrs.string("padding").unwrap_or_default();
    let mut spatial = [-1; 2];
    for (i, out) in spatial.iter_mut().enumerate() {
        *out = window_output(
            input.dim(l.spatial[i]),
            filter.dim(i),
            strides[i],
            dilations[i],
            &padding,
            explicit_padding(ctx, &l, i),
        );
    }
    let channels = match kind {
        Filter::Regular => filter.dim(3),
        Filter::Depthwise => {
            let in_channels = match input.dim(l.channel) {
                -1 => filter.dim(2),
                c => c,
            };
            mul_dims(in_channels, filter.dim(3))
        }
    };
    output(&l, input.dim(l.batch), spatial, channels)
}

fn pool(ctx: &Ctx<'_>) -> Shape {
    let l = layout(ctx);
    let input = ctx.shape(0).with_rank(4);
    let ksize = spatial_attr(ctx, "ksize", &l);
    let strides = spatial_attr(ctx, "strides", &l);
    let padding = ctx.attrs.string("padding").unwrap_or_default();
    let mut spatial = [-1; 2];
    for (i, out) in spatial.iter_mut().enumerate() {
        *out = window_output(
            input.dim(l.spatial[i]),
            ksize[i],
            strides[i],
            1,
            &padding,
            None,
        );
    }
    output(&l, input.dim(l.batch), spatial, input.dim(l.channel))
}
