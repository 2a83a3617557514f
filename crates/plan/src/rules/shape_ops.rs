//! Ops that move axes: `Reshape`, `Transpose` (`meta_spmd_expander.cc`), `ExpandDims`,
//! `Squeeze`, `Split(V)`, `Pad(V2)`, `Pack`, `Unpack` and `Concat(V2)`.

use std::ops::Range;

use super::{norm_axis, Expansion, OpView, Refusal};
use crate::attrs;
use crate::specs::{broadcast_pair, least_sharded, replicated, Spec, Specs};

/// A stand-in for an unknown dimension, so a dynamic batch axis pairs with the dynamic
/// axis on the other side of a reshape.
const DYNAMIC: i64 = 1 << 40;

fn statics(s: &[i64]) -> Vec<i64> {
    s.iter().map(|&d| if d < 0 { DYNAMIC } else { d }).collect()
}

/// DTensor's `ComputeReshapeSegments`: minimal runs of input and output axes with equal
/// products, size-one axes at the start of a run skipped.
fn segments(inp: &[i64], out: &[i64]) -> Vec<(Range<usize>, Range<usize>)> {
    let (inp, out) = (statics(inp), statics(out));
    let (mut i, mut j) = (0, 0);
    let mut segs = Vec::new();
    loop {
        while i < inp.len() && inp[i] == 1 {
            i += 1;
        }
        while j < out.len() && out[j] == 1 {
            j += 1;
        }
        if i >= inp.len() || j >= out.len() {
            break;
        }
        let (si, sj) = (i, j);
        let (mut pi, mut pj) = (inp[i], out[j]);
        i += 1;
        j += 1;
        while pi != pj {
            if pi < pj {
                let Some(&d) = inp.get(i) else { return segs };
                pi = pi.saturating_mul(d);
                i += 1;
            } else {
                let Some(&d) = out.get(j) else { return segs };
                pj = pj.saturating_mul(d);
                j += 1;
            }
        }
        segs.push((si..i, sj..j));
    }
    segs
}

/// Moves sharding across a reshape from `from` (shape `fs`) to shape `ts`: per segment, the
/// first axis's spec, when its shard count divides the first target axis.
fn carry(v: &OpView, from: &[Spec], fs: &[i64], ts: &[i64]) -> Specs {
    let mut out = replicated(ts.len());
    for (a, b) in segments(fs, ts) {
        let s = from.get(a.start).copied().unwrap_or(Spec::U);
        let d = ts[b.start];
        if s.is_sharded() && d > 0 && d % v.shards(s) == 0 {
            out[b.start] = s;
        }
    }
    out
}

fn reshape_shapes<'a>(v: &'a OpView) -> Option<(&'a [i64], &'a [i64])> {
    Some((
        v.in_shapes.first().copied().flatten()?,
        v.out_shapes.first().copied().flatten()?,
    ))
}

/// F: per segment, the first input axis's sharding moves to the first output axis.
pub fn reshape_forward(v: &OpView, ins: &[Option<Specs>]) -> Option<Specs> {
    let input = ins.first().cloned().flatten()?;
    let (i, o) = reshape_shapes(v)?;
    Some(carry(v, &input, i, o))
}

/// B: the same rule, from output to input.
pub fn reshape_backward(v: &OpView, outs: &[Option<Specs>]) -> Vec<Option<Specs>> {
    let (Some(Some(out)), Some((i, o))) = (outs.first(), reshape_shapes(v)) else {
        return Vec::new();
    };
    vec![Some(carry(v, out, o, i))]
}

/// X: the input's non-leading segment axes all-gathered, a local reshape.
pub fn reshape_expand(v: &OpView, ins: &[Specs], _outs: &[Specs]) -> Expansion {
    let mut ex = super::simple::local(v);
    let Some((i, o)) = reshape_shapes(v) else {
        return ex;
    };
    let local = carry(v, &ins[0], i, o);
    let target = carry(v, &local, o, i);
    ex.operands[0] = Some(target);
    ex.results = vec![Some(local)];
    ex
}

fn perm(v: &OpView) -> Option<Vec<usize>> {
    let p = v.ints(1)?;
    let r = p.len();
    p.iter().map(|&a| norm_axis(a, r)).collect()
}

/// F: the input's specs permuted.
pub fn transpose_forward(v: &OpView, ins: &[Option<Specs>]) -> Option<Specs> {
    let input = ins.first().cloned().flatten()?;
    let p = perm(v)?;
    p.iter().map(|&a| input.get(a).copied()).collect()
}

/// B: the output's specs permuted back.
pub fn transpose_backward(v: &OpView, outs: &[Option<Specs>]) -> Vec<Option<Specs>> {
    let (Some(Some(out)), Some(p)) = (outs.first(), perm(v)) else {
        return Vec::new();
    };
    let mut input = replicated(p.len());
    for (i, &a) in p.iter().enumerate() {
        if let (Some(slot), Some(&s)) = (input.get_mut(a), out.get(i)) {
            *slot = s;
        }
    }
    vec![Some(input)]
}

/// X: a local transpose; the output must be the input permuted.
pub fn transpose_expand(v: &OpView, ins: &[Specs], outs: &[Specs]) -> Result<Expansion, Refusal> {
    if let Some(f) = transpose_forward(v, &[Some(ins[0].clone())]) {
        if f != outs[0] {
            return Err("TransposeOp SPMD needs communication is not supported yet.".into());
        }
    }
    Ok(super::simple::local(v))
}

fn expand_axis(v: &OpView) -> Option<usize> {
    norm_axis(v.int(1)?, v.in_rank(0)? + 1)
}

/// F: an unsharded axis inserted.
pub fn expand_forward(v: &OpView, ins: &[Option<Specs>]) -> Option<Specs> {
    let mut s = ins.first().cloned().flatten()?;
    let a = expand_axis(v)?;
    (a <= s.len()).then(|| {
        s.insert(a, Spec::U);
        s
    })
}

/// B: the inserted axis removed.
pub fn expand_backward(v: &OpView, outs: &[Option<Specs>]) -> Vec<Option<Specs>> {
    let (Some(Some(out)), Some(a)) = (outs.first(), expand_axis(v)) else {
        return Vec::new();
    };
    let mut s = out.clone();
    if a < s.len() {
        s.remove(a);
    }
    vec![Some(s)]
}

/// X: a local op, then a relayout to the merged output.
pub fn expand_expand(v: &OpView, ins: &[Specs], _outs: &[Specs]) -> Expansion {
    let mut ex = super::simple::local(v);
    ex.results = vec![expand_forward(v, &[Some(ins[0].clone())])];
    ex
}

fn squeezed(v: &OpView) -> Option<Vec<usize>> {
    let rank = v.in_rank(0)?;
    let dims = attrs::ints(v.attrs, "squeeze_dims").unwrap_or_default();
    if dims.is_empty() {
        return Some((0..rank).filter(|&a| v.in_dim(0, a) == 1).collect());
    }
    dims.iter().map(|&a| norm_axis(a, rank)).collect()
}

/// F: the squeezed axes dropped.
pub fn squeeze_forward(v: &OpView, ins: &[Option<Specs>]) -> Option<Specs> {
    let s = ins.first().cloned().flatten()?;
    let dims = squeezed(v)?;
    Some(
        s.iter()
            .enumerate()
            .filter(|(a, _)| !dims.contains(a))
            .map(|(_, &x)| x)
            .collect(),
    )
}

/// B: unsharded axes put back.
pub fn squeeze_backward(v: &OpView, outs: &[Option<Specs>]) -> Vec<Option<Specs>> {
    let (Some(Some(out)), Some(dims), Some(rank)) = (outs.first(), squeezed(v), v.in_rank(0))
    else {
        return Vec::new();
    };
    let mut it = out.iter();
    vec![Some(
        (0..rank)
            .map(|a| {
                if dims.contains(&a) {
                    Spec::U
                } else {
                    it.next().copied().unwrap_or(Spec::U)
                }
            })
            .collect(),
    )]
}

/// The value operands and axis operand of a concat.
fn concat_parts(v: &OpView) -> (Range<usize>, usize) {
    let n = v.arity();
    if v.op == "Concat" {
        (1..n, 0)
    } else {
        (0..n.saturating_sub(1), n.saturating_sub(1))
    }
}

fn concat_axis(v: &OpView) -> Option<usize> {
    let (values, axis) = concat_parts(v);
    norm_axis(v.int(axis)?, v.in_rank(values.start)?)
}

/// F: the value layouts merged elementwise, the concat axis unsharded.
pub fn concat_forward(v: &OpView, ins: &[Option<Specs>]) -> Option<Specs> {
    let (values, _) = concat_parts(v);
    let rank = v.in_rank(values.start)?;
    let mut acc: Option<Specs> = None;
    for i in values {
        let Some(Some(s)) = ins.get(i) else { continue };
        if s.len() != rank {
            continue;
        }
        acc = Some(match acc {
            None => s.clone(),
            Some(a) => broadcast_pair(&a, s, rank),
        });
    }
    let mut out = acc?;
    if let Some(slot) = concat_axis(v).and_then(|a| out.get_mut(a)) {
        *slot = Spec::U;
    }
    Some(out)
}

/// B: every value takes the output layout with the concat axis unsharded.
pub fn concat_backward(v: &OpView, outs: &[Option<Specs>]) -> Vec<Option<Specs>> {
    let Some(Some(out)) = outs.first() else {
        return Vec::new();
    };
    let mut want = out.clone();
    if let Some(slot) = concat_axis(v).and_then(|a| want.get_mut(a)) {
        *slot = Spec::U;
    }
    let (values, _) = concat_parts(v);
    (0..v.arity())
        .map(|i| values.contains(&i).then(|| want.clone()))
        .collect()
}

/// X: every value relayouted to the output; a sharded concat axis is refused.
pub fn concat_expand(v: &OpView, _ins: &[Specs], outs: &[Specs]) -> Result<Expansion, Refusal> {
    let axis = concat_axis(v);
    if axis.is_some_and(|a| outs[0].get(a).is_some_and(|s| s.is_sharded())) {
        return Err(
            "Concat op SPMD with concat dimension in sharded dimension is not supported.".into(),
        );
    }
    let (values, _) = concat_parts(v);
    let mut ex = super::simple::local(v);
    for i in values {
        ex.operands[i] = Some(outs[0].clone());
    }
    Ok(ex)
}

/// The value operand and split axis of a split.
fn split_parts(v: &OpView) -> (usize, Option<usize>) {
    let (value, axis_operand) = if v.op == "Split" { (1, 0) } else { (0, 2) };
    (
        value,
        v.in_rank(value)
            .and_then(|r| norm_axis(v.int(axis_operand)?, r)),
    )
}

/// F: every output copies the input layout, split axis included.
pub fn split_forward(v: &OpView, ins: &[Option<Specs>], n_out: usize) -> Vec<Option<Specs>> {
    let (value, _) = split_parts(v);
    vec![ins.get(value).cloned().flatten(); n_out]
}

/// B: the outputs merged (conflicts unsharded), the split axis unsharded.
pub fn split_backward(v: &OpView, outs: &[Option<Specs>]) -> Vec<Option<Specs>> {
    let (value, axis) = split_parts(v);
    let mut acc: Option<Specs> = None;
    for o in outs.iter().flatten() {
        acc = Some(match acc {
            None => o.clone(),
            Some(a) if a.len() == o.len() => least_sharded(&a, o),
            Some(a) => a,
        });
    }
    let Some(mut want) = acc else {
        return Vec::new();
    };
    if let Some(slot) = axis.and_then(|a| want.get_mut(a)) {
        *slot = Spec::U;
    }
    let mut out = vec![None; v.arity()];
    out[value] = Some(want);
    out
}

/// X: a local split; an input sharded on the split axis is refused.
pub fn split_expand(v: &OpView, ins: &[Specs], _outs: &[Specs]) -> Result<Expansion, Refusal> {
    let (value, axis) = split_parts(v);
    if axis.is_some_and(|a| ins[value].get(a).is_some_and(|s| s.is_sharded())) {
        return Err("Spliting over sharded dimension is not supported.".into());
    }
    let mut ex = super::simple::local(v);
    ex.results = vec![Some(ins[value].clone()); v.out_shapes.len()];
    Ok(ex)
}

fn pack_axis(v: &OpView) -> Option<usize> {
    let rank = v.out_rank(0).or_else(|| v.in_rank(0).map(|r| r + 1))?;
    norm_axis(attrs::int(v.attrs, "axis").unwrap_or(0), rank)
}

/// F: a new unsharded axis; the others agree across inputs or are unsharded.
pub fn pack_forward(v: &OpView, ins: &[Option<Specs>]) -> Option<Specs> {
    let mut acc: Option<Specs> = None;
    for s in ins.iter().flatten() {
        acc = Some(match acc {
            None => s.clone(),
            Some(a) if a.len() == s.len() => least_sharded(&a, s),
            Some(a) => a,
        });
    }
    let mut s = acc?;
    let a = pack_axis(v)?;
    (a <= s.len()).then(|| {
        s.insert(a, Spec::U);
        s
    })
}

/// B: every input takes the output without the pack axis.
pub fn pack_backward(v: &OpView, outs: &[Option<Specs>]) -> Vec<Option<Specs>> {
    let (Some(Some(out)), Some(a)) = (outs.first(), pack_axis(v)) else {
        return Vec::new();
    };
    let mut s = out.clone();
    if a < s.len() {
        s.remove(a);
    }
    vec![Some(s); v.arity()]
}

/// X: every input relayouted to the output without the pack axis.
pub fn pack_expand(v: &OpView, _ins: &[Specs], outs: &[Specs]) -> Expansion {
    let mut ex = super::simple::local(v);
    if let Some(Some(s)) = pack_backward(v, &[Some(outs[0].clone())]).first() {
        ex.operands = vec![Some(s.clone()); v.arity()];
    }
    ex
}

fn unpack_axis(v: &OpView) -> Option<usize> {
    norm_axis(attrs::int(v.attrs, "axis").unwrap_or(0), v.in_rank(0)?)
}

/// F: every output is the input without the unpacked axis.
pub fn unpack_forward(v: &OpView, ins: &[Option<Specs>], n_out: usize) -> Vec<Option<Specs>> {
    let out = ins.first().cloned().flatten().and_then(|mut s| {
        let a = unpack_axis(v)?;
        (a < s.len()).then(|| {
            s.remove(a);
            s
        })
    });
    vec![out; n_out]
}

/// B: the first output with the axis put back unsharded.
pub fn unpack_backward(v: &OpView, outs: &[Option<Specs>]) -> Vec<Option<Specs>> {
    let (Some(Some(out)), Some(a)) = (outs.first(), unpack_axis(v)) else {
        return Vec::new();
    };
    let mut s = out.clone();
    if a <= s.len() {
        s.insert(a, Spec::U);
    }
    vec![Some(s)]
}

/// X: the unpacked axis all-gathered if sharded.
pub fn unpack_expand(v: &OpView, ins: &[Specs], _outs: &[Specs]) -> Expansion {
    let mut ex = super::simple::local(v);
    if let Some(a) = unpack_axis(v) {
        let mut t = ins[0].clone();
        if a < t.len() {
            t[a] = Spec::U;
        }
        let mut local = t.clone();
        local.remove(a);
        ex.operands[0] = Some(t);
        ex.results = vec![Some(local); v.out_shapes.len()];
    }
    ex
}

/// B: the value takes the output layout; paddings replicated.
pub fn pad_backward(v: &OpView, outs: &[Option<Specs>]) -> Vec<Option<Specs>> {
    let Some(Some(out)) = outs.first() else {
        return Vec::new();
    };
    let mut r = vec![Some(out.clone())];
    for i in 1..v.arity() {
        r.push(v.in_rank(i).map(replicated));
    }
    r
}

/// X: a local pad; the input layout must equal the output's.
pub fn pad_expand(v: &OpView, ins: &[Specs], outs: &[Specs]) -> Result<Expansion, Refusal> {
    if ins[0] != outs[0] {
        return Err(
            "pad op with input layout different from op output layout is not yet supported.".into(),
        );
    }
    Ok(super::simple::local(v))
}
