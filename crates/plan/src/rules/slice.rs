//! `Slice` (`slice_spmd_expander.cc`) and `StridedSlice` (`strided_slice_spmd_expander.cc`,
//! `cc/slice_util.cc`): an axis keeps its sharding only where each shard slices locally.

use super::{Expansion, OpView, Refusal};
use crate::attrs;
use crate::specs::{Spec, Specs};

/// Whether `Slice` keeps axis `a` whole (size = dim, or begin 0 with size -1).
fn slice_full(v: &OpView, a: usize) -> bool {
    let (Some(begin), Some(size)) = (v.ints(1), v.ints(2)) else {
        return false;
    };
    let (b, s, d) = (
        begin.get(a).copied().unwrap_or(0),
        size.get(a).copied().unwrap_or(-1),
        v.in_dim(0, a),
    );
    (s >= 0 && s == d) || (b == 0 && s == -1)
}

fn slice_layout(v: &OpView, s: &[Spec]) -> Specs {
    s.iter()
        .enumerate()
        .map(|(a, &x)| if slice_full(v, a) { x } else { Spec::U })
        .collect()
}

/// F: sharding kept on the axes sliced whole.
pub fn slice_forward(v: &OpView, ins: &[Option<Specs>]) -> Option<Specs> {
    Some(slice_layout(v, ins.first()?.as_ref()?))
}

/// B: the same rule from the output.
pub fn slice_backward(v: &OpView, outs: &[Option<Specs>]) -> Vec<Option<Specs>> {
    match outs.first() {
        Some(Some(o)) => vec![Some(slice_layout(v, o))],
        _ => Vec::new(),
    }
}

/// X: the input relayouted to the kept sharding, a local slice.
pub fn slice_expand(v: &OpView, ins: &[Specs], _outs: &[Specs]) -> Result<Expansion, Refusal> {
    let t = slice_layout(v, &ins[0]);
    let mut ex = super::simple::local(v);
    ex.operands[0] = Some(t.clone());
    ex.results = vec![Some(t)];
    Ok(ex)
}

/// One axis of a strided slice.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Token {
    /// An input axis sliced `begin:end:stride` (masks applied), kept sharded or not.
    Regular { input: usize, keep: bool },
    /// An input axis indexed away.
    Shrink { input: usize },
    /// A new output axis.
    NewAxis,
    /// An input axis copied (ellipsis or implicit).
    Copy { input: usize },
}

/// The tokens of a strided slice, each with the input axis it reads.
fn tokens(v: &OpView, layout_for_keep: &[Spec]) -> Option<Vec<Token>> {
    let rank = v.in_rank(0)?;
    let begin = v.ints(1)?;
    let end = v.ints(2)?;
    let strides = v.ints(3)?;
    let mask = |n: &str| attrs::int(v.attrs, n).unwrap_or(0);
    let (bm, em, el, na, sh) = (
        mask("begin_mask"),
        mask("end_mask"),
        mask("ellipsis_mask"),
        mask("new_axis_mask"),
        mask("shrink_axis_mask"),
    );
    let n = begin.len();
    let bit = |m: i64, i: usize| i < 63 && (m >> i) & 1 == 1;
    let consumed = (0..n).filter(|&i| !bit(el, i) && !bit(na, i)).count();
    let mut out = Vec::new();
    let mut ia = 0usize;
    let mut saw_ellipsis = false;
    for i in 0..n {
        if bit(el, i) {
            if saw_ellipsis {
                return None;
            }
            saw_ellipsis = true;
            for _ in 0..rank.checked_sub(consumed)? {
                out.push(Token::Copy { input: ia });
                ia += 1;
            }
        } else if bit(na, i) {
            out.push(Token::NewAxis);
        } else if bit(sh, i) {
            out.push(Token::Shrink { input: ia });
            ia += 1;
        } else {
            let d = v.in_dim(0, ia);
            let k = v.shards(layout_for_keep.get(ia).copied().unwrap_or(Spec::U));
            let stride = strides.get(i).copied().unwrap_or(1);
            let full = bit(bm, i) && bit(em, i);
            let keep = full || {
                let norm = |x: i64| if x < 0 { x + d } else { x };
                let b = if bit(bm, i) { 0 } else { norm(begin[i]) };
                let e = if bit(em, i) { d } else { norm(end[i]) };
                d > 0
                    && stride > 0
                    && (d / k) % stride == 0
                    && b < stride
                    && e >= d
                    && e < d + stride
            };
            out.push(Token::Regular { input: ia, keep });
            ia += 1;
        }
    }
    while ia < rank {
        out.push(Token::Copy { input: ia });
        ia += 1;
    }
    Some(out)
}

/// DTensor's message where an ellipsis or implicit axis is copied from an input axis that
/// does not exist (TensorFlow 2.21 fails, or crashes, there).
const COPY_OUT_OF_RANGE: &str = "ComputeLayoutForward error: sharding spec out of range: an \
     ellipsis or implicit axis after a new axis is copied from the input axis of its output \
     index, which does not exist (TensorFlow 2.21's DTensor fails or crashes here)";

/// The input layout the slice can run on locally, the output layout DTensor gives, and the
/// layout the local slice produces; `Err`
/// where DTensor fails. Quirk kept from `slice_util.cc`: an ellipsis or implicit axis copies
/// the input spec at its *output* index (so `a[:, 3]` of `[x,y,u]` is `[x,y]`).
fn strided_layouts(v: &OpView, input: &[Spec]) -> Option<Result<(Specs, Specs, Specs), Refusal>> {
    let toks = tokens(v, input)?;
    let mut target = input.to_vec();
    let mut out = Vec::new();
    let mut local = Vec::new();
    for t in toks {
        match t {
            Token::Regular { input: a, keep } => {
                let s = if keep {
                    input.get(a).copied()?
                } else {
                    Spec::U
                };
                *target.get_mut(a)? = s;
                out.push(s);
                local.push(s);
            }
            Token::Shrink { input: a } => *target.get_mut(a)? = Spec::U,
            Token::NewAxis => {
                out.push(Spec::U);
                local.push(Spec::U);
            }
            Token::Copy { input: a } => match input.get(out.len()) {
                Some(&s) => {
                    out.push(s);
                    local.push(input.get(a).copied()?);
                }
                None => return Some(Err(COPY_OUT_OF_RANGE.into())),
            },
        }
    }
    Some(Ok((target, out, local)))
}

/// F: the output layout the slice gives the input's.
pub fn strided_forward(v: &OpView, ins: &[Option<Specs>]) -> Option<Specs> {
    strided_layouts(v, ins.first()?.as_ref()?)?
        .ok()
        .map(|(_, o, _)| o)
}

/// B: the output's specs carried back to the input axes that can keep them.
pub fn strided_backward(v: &OpView, outs: &[Option<Specs>]) -> Vec<Option<Specs>> {
    let (Some(Some(out)), Some(rank)) = (outs.first(), v.in_rank(0)) else {
        return Vec::new();
    };
    let mut input = vec![Spec::U; rank];
    // Decide keepability per input axis with the output's sharding carried back first.
    let mut guess = vec![Spec::U; rank];
    if let Some(toks) = tokens(v, &guess) {
        let mut o = 0;
        for t in &toks {
            match *t {
                Token::Regular { input: a, .. } | Token::Copy { input: a } => {
                    if let (Some(slot), Some(&s)) = (guess.get_mut(a), out.get(o)) {
                        *slot = s;
                    }
                    o += 1;
                }
                Token::NewAxis => o += 1,
                Token::Shrink { .. } => {}
            }
        }
    }
    if let Some(toks) = tokens(v, &guess) {
        for t in toks {
            match t {
                Token::Regular {
                    input: a,
                    keep: true,
                }
                | Token::Copy { input: a } => {
                    input[a] = guess[a];
                }
                _ => {}
            }
        }
    }
    vec![Some(input)]
}

/// X: the input relayouted (axes that cannot keep their sharding gathered), a local slice.
pub fn strided_expand(v: &OpView, ins: &[Specs], _outs: &[Specs]) -> Result<Expansion, Refusal> {
    let mut ex = super::simple::local(v);
    if let Some(r) = strided_layouts(v, &ins[0]) {
        // The local slice gives each copied axis its own sharding; the quirk's output layout
        // is reached by a relayout after it.
        let (t, _, local) = r?;
        ex.operands[0] = Some(t);
        ex.results = vec![Some(local)];
    }
    Ok(ex)
}
