//! Convolutions and max-pooling (`conv_spmd_expander.cc`): batch-parallel runs locally; the
//! filter must be replicated; spatial sharding needs a halo exchange only TPU meshes have.

use super::{Expansion, OpView, Refusal};
use crate::attrs;
use crate::specs::{replicated, Specs};

/// B: the image takes the output layout, the filter replicated.
pub fn backward(v: &OpView, outs: &[Option<Specs>]) -> Vec<Option<Specs>> {
    let Some(Some(out)) = outs.first() else {
        return Vec::new();
    };
    let mut r = vec![Some(out.clone())];
    if v.op != "MaxPool" {
        r.push(v.in_rank(1).map(replicated));
    }
    r
}

/// X: DTensor's `VerifyConvLayout`, then a local op for batch-parallel images.
pub fn expand(v: &OpView, ins: &[Specs], _outs: &[Specs]) -> Result<Expansion, Refusal> {
    let image = &ins[0];
    if v.op != "MaxPool" {
        if let Some(filter) = ins.get(1) {
            if filter.iter().any(|s| s.is_sharded()) {
                return Err("Filter for convolution must have fully replicated layout.".into());
            }
        }
    }
    let nchw = attrs::string(v.attrs, "data_format").is_some_and(|f| f.starts_with("NC"));
    let rank = image.len();
    let channel = if nchw { 1 } else { rank.saturating_sub(1) };
    if image.get(channel).is_some_and(|s| s.is_sharded()) {
        return Err("Conv input's channel dimension must be replicated.".into());
    }
    let spatial: Vec<usize> = (1..rank).filter(|&a| a != channel).collect();
    if spatial.iter().any(|&a| image[a].is_sharded()) {
        if attrs::string(v.attrs, "padding").as_deref() == Some("EXPLICIT") {
            return Err(
                "Explicit padding not supported for convolution with spatial partitions.".into(),
            );
        }
        let ones = |name: &str| {
            attrs::ints(v.attrs, name)
                .unwrap_or_default()
                .iter()
                .all(|&x| x == 1)
        };
        if !ones("dilations") {
            return Err(
                "Only dilation rate 1 is supported for convolution with spatial partitions.".into(),
            );
        }
        if !ones("strides") {
            return Err(
                "Only stride 1 is supported for convolution with spatial partitions.".into(),
            );
        }
        let window: Vec<i64> = if v.op == "MaxPool" {
            attrs::ints(v.attrs, "ksize").unwrap_or_default()
        } else {
            v.in_shapes
                .get(1)
                .copied()
                .flatten()
                .map(|f| f[..f.len().saturating_sub(2)].to_vec())
                .unwrap_or_default()
        };
        if window.iter().any(|&k| k % 2 == 0) {
            return Err("Filter dimensions must be odd numbers.".into());
        }
        let same = attrs::string(v.attrs, "padding").as_deref() == Some("SAME");
        if window.iter().any(|&k| k > 1) || !same {
            return Err("Halo exchange is only supported on TPU.".into());
        }
    }
    let mut ex = super::simple::local(v);
    ex.results = vec![Some(image.clone())];
    Ok(ex)
}
