//! `GatherV2` and `ResourceGather` (`gather_spmd_expander.cc`).

use super::{norm_axis, Expansion, OpView, Refusal};
use crate::attrs;
use crate::specs::{uses, Spec, Specs};

/// (axis, batch_dims, params rank, indices rank) when known.
fn geometry(v: &OpView) -> Option<(usize, usize, usize, usize)> {
    let resource = v.op == "ResourceGather";
    let params_rank = if resource {
        v.in_vars.first().copied().flatten().map(Vec::len)?
    } else {
        v.in_rank(0)?
    };
    let axis = if resource {
        0
    } else {
        norm_axis(v.int(2)?, params_rank)?
    };
    let bd = usize::try_from(attrs::int(v.attrs, "batch_dims").unwrap_or(0).max(0)).ok()?;
    Some((axis, bd, params_rank, v.in_rank(1)?))
}

/// The params layout: the operand's, or the variable's for `ResourceGather`.
fn params<'a>(v: &'a OpView, ins: &'a [Option<Specs>]) -> Option<Specs> {
    if v.op == "ResourceGather" {
        v.in_vars.first().copied().flatten().cloned()
    } else {
        ins.first().cloned().flatten()
    }
}

/// F: params before the axis, the indices' non-batch axes, params after the axis.
pub fn forward(v: &OpView, ins: &[Option<Specs>]) -> Option<Specs> {
    let (axis, bd, pr, ir) = geometry(v)?;
    let p = params(v, ins).unwrap_or_else(|| vec![Spec::U; pr]);
    let idx = ins
        .get(1)
        .cloned()
        .flatten()
        .unwrap_or_else(|| vec![Spec::U; ir]);
    if p.len() != pr || idx.len() != ir || bd > ir || axis >= pr {
        return None;
    }
    let non_axis: Specs = p
        .iter()
        .enumerate()
        .filter(|&(a, _)| a != axis)
        .map(|(_, &s)| s)
        .collect();
    let mut out: Specs = p[..axis].to_vec();
    for &s in &idx[bd..] {
        out.push(match s {
            Spec::D(d) if uses(&non_axis, d) => Spec::U,
            other => other,
        });
    }
    out.extend_from_slice(&p[axis + 1..]);
    Some(out)
}

/// B: params and indices take their parts of the output.
pub fn backward(v: &OpView, outs: &[Option<Specs>]) -> Vec<Option<Specs>> {
    let (Some(Some(out)), Some((axis, bd, pr, ir))) = (outs.first(), geometry(v)) else {
        return Vec::new();
    };
    let k = ir.saturating_sub(bd);
    if out.len() != pr + k - 1 || bd > axis {
        return Vec::new();
    }
    let mut p: Specs = out[..axis].to_vec();
    p.push(Spec::U);
    p.extend_from_slice(&out[axis + k..]);
    let mut idx: Specs = out[..bd].to_vec();
    idx.extend_from_slice(&out[axis..axis + k]);
    let params = (v.op != "ResourceGather").then_some(p);
    vec![
        params,
        Some(idx),
        v.in_rank(2).map(crate::specs::replicated),
    ]
}

/// X: the params' axis all-gathered (refused for a resource), the indices relayouted to the
/// output's, a local gather.
pub fn expand(v: &OpView, ins: &[Specs], outs: &[Specs]) -> Result<Expansion, Refusal> {
    let mut ex = super::simple::local(v);
    let Some((axis, bd, _pr, ir)) = geometry(v) else {
        return Ok(ex);
    };
    let resource = v.op == "ResourceGather";
    let Some(p) = params(v, &ins.iter().cloned().map(Some).collect::<Vec<_>>()) else {
        return Ok(ex);
    };
    let out = &outs[0];
    let k = ir.saturating_sub(bd);
    if resource && p.get(axis).is_some_and(|s| s.is_sharded()) {
        return Err(
            "DTensor does not support sharded 0th dimension for the resource tensor \
                    for ResourceGatherOp. Please unshard dimension 0"
                .into(),
        );
    }
    let mut target = p.clone();
    if let Some(slot) = target.get_mut(axis) {
        *slot = Spec::U;
    }
    let mut local: Specs = target[..axis].to_vec();
    if out.len() >= axis + k {
        let mut idx: Specs = out[..bd.min(out.len())].to_vec();
        idx.extend_from_slice(&out[axis..axis + k]);
        local.extend_from_slice(&out[axis..axis + k]);
        if ex.operands.len() > 1 {
            ex.operands[1] = Some(idx);
        }
    }
    local.extend_from_slice(target.get(axis + 1..).unwrap_or(&[]));
    if !resource {
        ex.operands[0] = Some(target);
    }
    ex.results = vec![Some(local)];
    Ok(ex)
}
