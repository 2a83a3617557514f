//! Ops whose expansion is local or fixed: constants, metadata, variables, and the fallback
//! for ops without a rule (taken as replicated, as DTensor's opt-in
//! `ReplicatedOpSPMDExpander(relayout_when_sharded)` would run them).

use super::{Expansion, OpView};
use crate::specs::{replicated, Specs};

/// A local op: operands used as they are, results in their merged layouts.
pub fn local(v: &OpView) -> Expansion {
    Expansion {
        operands: vec![None; v.arity()],
        ..Expansion::default()
    }
}

/// The layout of the variable behind operand 0, else replicated at the value's rank.
fn variable_layout(v: &OpView) -> Option<Specs> {
    v.in_vars
        .first()
        .copied()
        .flatten()
        .cloned()
        .or_else(|| v.in_rank(1).map(replicated))
}

/// B of an assignment: the value takes the variable's layout.
pub fn assign_backward(v: &OpView) -> Vec<Option<Specs>> {
    vec![None, variable_layout(v)]
}

/// X of an assignment: the value relayouted to the variable's layout.
pub fn assign_expand(v: &OpView, _ins: &[Specs]) -> Expansion {
    let mut ex = local(v);
    if ex.operands.len() > 1 {
        ex.operands[1] = variable_layout(v);
    }
    ex
}

/// X of an op without a rule: every operand gathered to replicated, a local op, results
/// replicated (then sliced to their merged layouts).
pub fn replicated_expand(_v: &OpView, ins: &[Specs], outs: &[Specs]) -> Expansion {
    Expansion {
        operands: ins.iter().map(|s| Some(replicated(s.len()))).collect(),
        reduces: Vec::new(),
        results: outs.iter().map(|s| Some(replicated(s.len()))).collect(),
    }
}
