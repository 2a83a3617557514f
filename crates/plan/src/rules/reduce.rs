//! Reductions (`reduce_spmd_expander.cc`), `ArgMax` (`argmax_spmd_expander.cc`) and
//! `Softmax` / `LogSoftmax` (`softmax_spmd_expander.cc`).

use super::{norm_axis, Expansion, OpView, Reduce, Refusal};
use crate::attrs;
use crate::specs::{Spec, Specs};

/// The axes operand 0 is reduced over, normalised, when known.
fn reduced_axes(v: &OpView) -> Option<Vec<usize>> {
    let rank = v.in_rank(0)?;
    match v.op {
        "L2Loss" => Some((0..rank).collect()),
        "BiasAddGrad" => {
            let nchw = attrs::string(v.attrs, "data_format").is_some_and(|f| f.starts_with("NC"));
            let c = if nchw && rank >= 3 {
                rank - 3
            } else {
                rank.saturating_sub(1)
            };
            Some((0..rank).filter(|&a| a != c).collect())
        }
        _ => {
            let mut axes: Vec<usize> = v
                .ints(1)?
                .iter()
                .map(|&a| norm_axis(a, rank))
                .collect::<Option<_>>()?;
            axes.sort_unstable();
            axes.dedup();
            Some(axes)
        }
    }
}

fn keep_dims(v: &OpView) -> bool {
    attrs::flag(v.attrs, "keep_dims")
}

/// The input layout with the reduced axes dropped (or unsharded with `keep_dims`).
fn reduced(specs: &[Spec], axes: &[usize], keep: bool) -> Specs {
    specs
        .iter()
        .enumerate()
        .filter_map(|(a, &s)| match (axes.contains(&a), keep) {
            (false, _) => Some(s),
            (true, true) => Some(Spec::U),
            (true, false) => None,
        })
        .collect()
}

/// F: the input layout without the reduced axes.
pub fn forward(v: &OpView, ins: &[Option<Specs>]) -> Option<Specs> {
    let input = ins.first().cloned().flatten()?;
    let axes = reduced_axes(v)?;
    Some(reduced(&input, &axes, keep_dims(v)))
}

/// B: kept axes take the output's spec, reduced axes `any`.
pub fn backward(v: &OpView, outs: &[Option<Specs>]) -> Vec<Option<Specs>> {
    let (Some(Some(out)), Some(axes), Some(rank)) = (outs.first(), reduced_axes(v), v.in_rank(0))
    else {
        return Vec::new();
    };
    let keep = keep_dims(v);
    let mut kept = out.iter();
    let input: Specs = (0..rank)
        .map(|a| {
            if axes.contains(&a) {
                if keep {
                    kept.next();
                }
                Spec::Any
            } else {
                kept.next().copied().unwrap_or(Spec::U)
            }
        })
        .collect();
    vec![Some(input)]
}

/// The collective reduction of a reduce op.
fn reduction(op: &str) -> &'static str {
    match op {
        "Mean" => "Mean",
        "Max" => "Max",
        "Min" => "Min",
        "Prod" => "Mul",
        "All" => "All",
        "Any" => "Any",
        _ => "Add",
    }
}

/// X: a local reduce, then an all-reduce over the mesh dims of the reduced axes.
pub fn expand(v: &OpView, ins: &[Specs], _outs: &[Specs]) -> Expansion {
    let Some(axes) = reduced_axes(v) else {
        return super::simple::local(v);
    };
    let input = &ins[0];
    let local = reduced(input, &axes, keep_dims(v));
    let mut dims: Vec<u8> = axes
        .iter()
        .filter_map(|&a| input.get(a).and_then(|s| s.dim()))
        .collect();
    dims.sort_unstable();
    let mut reduces = Vec::new();
    if let (false, Some(shape)) = (dims.is_empty(), v.out_shapes.first().copied().flatten()) {
        reduces.push(Reduce {
            op: reduction(v.op),
            dims,
            shape: shape.to_vec(),
            specs: local.clone(),
        });
    }
    let mut ex = super::simple::local(v);
    ex.reduces = reduces;
    ex.results = vec![Some(local)];
    ex
}

fn argmax_axis(v: &OpView) -> Option<usize> {
    norm_axis(v.int(1)?, v.in_rank(0)?)
}

/// F: the input layout without the arg axis.
pub fn argmax_forward(v: &OpView, ins: &[Option<Specs>]) -> Option<Specs> {
    let mut s = ins.first().cloned().flatten()?;
    let axis = argmax_axis(v)?;
    (axis < s.len()).then(|| {
        s.remove(axis);
        s
    })
}

/// B: the output layout with the arg axis inserted unsharded.
pub fn argmax_backward(v: &OpView, outs: &[Option<Specs>]) -> Vec<Option<Specs>> {
    let (Some(Some(out)), Some(axis)) = (outs.first(), argmax_axis(v)) else {
        return Vec::new();
    };
    let mut s = out.clone();
    if axis <= s.len() {
        s.insert(axis, Spec::U);
    }
    vec![Some(s)]
}

/// X: the arg axis all-gathered if sharded, a local ArgMax.
pub fn argmax_expand(v: &OpView, ins: &[Specs], _outs: &[Specs]) -> Expansion {
    let Some(axis) = argmax_axis(v) else {
        return super::simple::local(v);
    };
    let mut target = ins[0].clone();
    if axis < target.len() {
        target[axis] = Spec::U;
    }
    let mut local = target.clone();
    if axis < local.len() {
        local.remove(axis);
    }
    let mut ex = super::simple::local(v);
    ex.operands[0] = Some(target);
    ex.results = vec![Some(local)];
    ex
}

/// X: locally when the last axis is unsharded; else a max and a sum all-reduced over its
/// mesh dim.
pub fn softmax_expand(v: &OpView, ins: &[Specs], _outs: &[Specs]) -> Result<Expansion, Refusal> {
    let input = &ins[0];
    let Some(&last) = input.last() else {
        return Err("softmax not supported for rank 0 tensors.".into());
    };
    let mut ex = super::simple::local(v);
    ex.results = vec![Some(input.clone())];
    if let (Spec::D(m), Some(shape)) = (last, v.in_shapes.first().copied().flatten()) {
        let mut shape = shape.to_vec();
        let mut specs = input.clone();
        if let (Some(d), Some(s)) = (shape.last_mut(), specs.last_mut()) {
            *d = 1;
            *s = Spec::U;
        }
        for op in ["Max", "Add"] {
            ex.reduces.push(Reduce {
                op,
                dims: vec![m],
                shape: shape.clone(),
                specs: specs.clone(),
            });
        }
    }
    Ok(ex)
}
