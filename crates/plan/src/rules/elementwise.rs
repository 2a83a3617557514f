//! Elementwise ops (`elementwise_spmd_expander.cc`) and `BiasAdd` (`bias_add_spmd_expander.cc`).

use super::{Expansion, OpView};
use crate::attrs;
use crate::specs::{broadcast_pair, uses, Spec, Specs};

/// Operand `i`'s layout with axes of size one unsharded (they broadcast).
fn without_ones(v: &OpView, i: usize, s: &[Spec]) -> Specs {
    s.iter()
        .enumerate()
        .map(|(a, &x)| if v.in_dim(i, a) == 1 { Spec::U } else { x })
        .collect()
}

/// The output rank: the recorded one, else the largest operand's.
fn out_rank(v: &OpView, ins: &[Option<Specs>]) -> usize {
    v.out_rank(0)
        .unwrap_or_else(|| ins.iter().flatten().map(Vec::len).max().unwrap_or(0))
}

/// F: the operand layouts folded by the broadcast rule, in operand order.
pub fn forward(v: &OpView, ins: &[Option<Specs>]) -> Option<Specs> {
    let rank = out_rank(v, ins);
    let mut acc: Option<Specs> = None;
    for (i, s) in ins.iter().enumerate() {
        let Some(s) = s else { continue };
        if s.len() > rank {
            continue;
        }
        let s = without_ones(v, i, s);
        acc = Some(match acc {
            None => broadcast_pair(&s, &[], rank),
            Some(a) => broadcast_pair(&a, &s, rank),
        });
    }
    acc
}

/// The output layout cut to operand `i`'s rank (right-aligned), axes of size ≤ 1 unsharded.
fn truncated(v: &OpView, i: usize, out: &[Spec]) -> Option<Specs> {
    let r = v.in_rank(i)?;
    if r > out.len() {
        return None;
    }
    let tail = &out[out.len() - r..];
    Some(
        tail.iter()
            .enumerate()
            .map(|(a, &x)| {
                let d = v.in_dim(i, a);
                if (0..=1).contains(&d) {
                    Spec::U
                } else {
                    x
                }
            })
            .collect(),
    )
}

/// B: each operand gets the output layout, truncated to its rank.
pub fn backward(v: &OpView, outs: &[Option<Specs>]) -> Vec<Option<Specs>> {
    let Some(Some(out)) = outs.first() else {
        return Vec::new();
    };
    (0..v.arity()).map(|i| truncated(v, i, out)).collect()
}

/// X: every operand of rank > 0 relayouted to the truncated output layout; a local op.
pub fn expand(v: &OpView, _ins: &[Specs], outs: &[Specs]) -> Expansion {
    let out = &outs[0];
    Expansion {
        operands: (0..v.arity())
            .map(|i| truncated(v, i, out).filter(|t| !t.is_empty()))
            .collect(),
        ..Expansion::default()
    }
}

/// The channel axis of a `BiasAdd` value of rank `rank`.
fn channel_axis(v: &OpView, rank: usize) -> usize {
    let nchw = attrs::string(v.attrs, "data_format").is_some_and(|f| f.starts_with("NC"));
    if nchw && rank >= 3 {
        rank - 3
    } else {
        rank.saturating_sub(1)
    }
}

/// F: the value's layout; an unsharded channel axis takes the bias's sharding when free.
pub fn bias_forward(_v: &OpView, ins: &[Option<Specs>]) -> Option<Specs> {
    let mut out = ins.first().cloned().flatten()?;
    let c = channel_axis(_v, out.len());
    if let Some(Some(bias)) = ins.get(1) {
        if let (Some(&Spec::U), Some(&b)) = (out.get(c), bias.first()) {
            if let Spec::D(d) = b {
                if !uses(&out, d) {
                    out[c] = b;
                }
            }
        }
    }
    Some(out)
}

/// B: the value takes the output layout, the bias its channel spec.
pub fn bias_backward(v: &OpView, outs: &[Option<Specs>]) -> Vec<Option<Specs>> {
    let Some(Some(out)) = outs.first() else {
        return Vec::new();
    };
    let c = channel_axis(v, out.len());
    vec![Some(out.clone()), out.get(c).map(|&s| vec![s])]
}

/// X: the value to the output layout, the bias to its channel spec, a local add.
pub fn bias_expand(v: &OpView, _ins: &[Specs], outs: &[Specs]) -> Expansion {
    let out = &outs[0];
    let c = channel_axis(v, out.len());
    Expansion {
        operands: vec![Some(out.clone()), out.get(c).map(|&s| vec![s])],
        ..Expansion::default()
    }
}
