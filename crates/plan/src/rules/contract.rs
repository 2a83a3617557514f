//! Contractions: `MatMul` / `BatchMatMul*` (`matmul_spmd_expander.cc`) and `Einsum`
//! (`einsum_spmd_expander.cc`). The contraction's all-reduce is emitted at the op: DTensor has
//! no partial layout.

use std::collections::BTreeMap;

use super::{Expansion, OpView, Reduce, Refusal};
use crate::attrs;
use crate::specs::{broadcast_pair, fix_duplicates, replicated, Spec, Specs};

/// Whether operand `i` is transposed (`transpose_a/b`, `adj_x/y`).
fn transposed(v: &OpView, i: usize) -> bool {
    let names = if v.op == "MatMul" {
        ["transpose_a", "transpose_b"]
    } else {
        ["adj_x", "adj_y"]
    };
    attrs::flag(v.attrs, names[i])
}

/// Operand `i`'s layout with its last two axes swapped when it is transposed.
fn oriented(v: &OpView, i: usize, s: &[Spec]) -> Specs {
    let mut s = s.to_vec();
    let n = s.len();
    if transposed(v, i) && n >= 2 {
        s.swap(n - 1, n - 2);
    }
    s
}

/// Operand `i`'s layout, or replicated when unknown.
fn operand(v: &OpView, ins: &[Option<Specs>], i: usize) -> Option<Specs> {
    match ins.get(i).cloned().flatten() {
        Some(s) => Some(oriented(v, i, &s)),
        None => v.in_rank(i).map(replicated),
    }
}

/// The batch part (all but the last two axes) of operand `i`, with size-one axes unsharded.
fn batch(v: &OpView, i: usize, s: &[Spec]) -> Specs {
    let n = s.len().saturating_sub(2);
    (0..n)
        .map(|a| if v.in_dim(i, a) == 1 { Spec::U } else { s[a] })
        .collect()
}

/// F: batch axes broadcast, then the left's rows and the right's columns.
pub fn matmul_forward(v: &OpView, ins: &[Option<Specs>]) -> Option<Specs> {
    if ins.iter().all(Option::is_none) {
        return None;
    }
    let l = operand(v, ins, 0)?;
    let r = operand(v, ins, 1)?;
    if l.len() < 2 || r.len() < 2 {
        return None;
    }
    let rank = l.len().max(r.len());
    let mut out = broadcast_pair(&batch(v, 0, &l), &batch(v, 1, &r), rank - 2);
    let (a, d) = (l[l.len() - 2], r[r.len() - 1]);
    if a == d && a.is_sharded() {
        out.extend([Spec::U, Spec::U]);
    } else {
        out.extend([a, d]);
    }
    Some(fix_duplicates(out))
}

/// B: each operand takes the output's specs, its contracting axis `any`.
pub fn matmul_backward(v: &OpView, outs: &[Option<Specs>]) -> Vec<Option<Specs>> {
    let Some(Some(out)) = outs.first() else {
        return Vec::new();
    };
    if out.len() < 2 {
        return Vec::new();
    }
    let (e, f) = (out[out.len() - 2], out[out.len() - 1]);
    let ob = &out[..out.len() - 2];
    (0..2)
        .map(|i| {
            let r = v.in_rank(i)?;
            if r < 2 || r - 2 > ob.len() {
                return None;
            }
            let mut s: Specs = ob[ob.len() - (r - 2)..]
                .iter()
                .enumerate()
                .map(|(a, &x)| if v.in_dim(i, a) == 1 { Spec::U } else { x })
                .collect();
            if i == 0 {
                s.extend([e, Spec::Any]);
            } else {
                s.extend([Spec::Any, f]);
            }
            Some(oriented(v, i, &s))
        })
        .collect()
}

/// X: DTensor's `MaybeRelayoutInputs`, then the all-reduce over a sharded contraction.
pub fn matmul_expand(v: &OpView, ins: &[Specs], outs: &[Specs]) -> Result<Expansion, Refusal> {
    let out = &outs[0];
    let l = oriented(v, 0, &ins[0]);
    let r = oriented(v, 1, &ins[1]);
    if l.len() < 2 || r.len() < 2 || out.len() < 2 {
        return Ok(super::simple::local(v));
    }
    let (mut a, mut b) = (l[l.len() - 2], l[l.len() - 1]);
    let (mut c, mut d) = (r[r.len() - 2], r[r.len() - 1]);
    let (e, f) = (out[out.len() - 2], out[out.len() - 1]);
    if b.is_sharded() && c.is_sharded() && b != c {
        return Err(format!(
            "Contracting dimension for matmul has sharding dimension {} for the left input and \
             {} for the right input which are not equal. This case is currently not supported.",
            v.name(b),
            v.name(c)
        ));
    }
    if a.is_sharded() && e.is_sharded() && a != e {
        return Err(format!(
            "Non-contracting dimension for left argument of matmul has sharding dimension {} \
             and the second to last dimension of the output has sharding dimension {}, which \
             are not equal. This case is currently not supported.",
            v.name(a),
            v.name(e)
        ));
    }
    if d.is_sharded() && f.is_sharded() && d != f {
        return Err(format!(
            "Non-contracting dimension for right argument of matmul has sharding dimension {} \
             and the last dimension of the output has sharding dimension {}, which are not \
             equal. This case is currently not supported.",
            v.name(d),
            v.name(f)
        ));
    }
    if a == Spec::U && e.is_sharded() && ![b, c, d].contains(&e) {
        a = e;
    }
    if d == Spec::U && f.is_sharded() && ![a, b, c].contains(&f) {
        d = f;
    }
    if a == d && a.is_sharded() {
        if a == e {
            d = Spec::U;
        } else {
            a = Spec::U;
        }
    }
    if a.is_sharded() && a == c {
        c = Spec::U;
    }
    if b.is_sharded() && b == d {
        b = Spec::U;
    }
    if b != c {
        if b == Spec::U {
            b = c;
        } else if c == Spec::U {
            c = b;
        }
    }
    let used = [a, b, c, d];
    let ob = &out[..out.len() - 2];
    let batch_target = |i: usize, rank: usize| -> Specs {
        let n = rank - 2;
        let off = ob.len().saturating_sub(n);
        (0..n)
            .map(|j| {
                let s = ob.get(j + off).copied().unwrap_or(Spec::U);
                if v.in_dim(i, j) == 1 || (s.is_sharded() && used.contains(&s)) {
                    Spec::U
                } else {
                    s
                }
            })
            .collect()
    };
    let mut lt = batch_target(0, l.len());
    lt.extend([a, b]);
    let mut rt = batch_target(1, r.len());
    rt.extend([c, d]);
    let mut local: Specs = ob
        .iter()
        .map(|&s| {
            if s.is_sharded() && used.contains(&s) {
                Spec::U
            } else {
                s
            }
        })
        .collect();
    local.extend([a, d]);
    let mut reduces = Vec::new();
    if let (Spec::D(m), Some(shape)) = (b, v.out_shapes.first().copied().flatten()) {
        reduces.push(Reduce {
            op: "Add",
            dims: vec![m],
            shape: shape.to_vec(),
            specs: local.clone(),
        });
    }
    Ok(Expansion {
        operands: vec![Some(oriented(v, 0, &lt)), Some(oriented(v, 1, &rt))],
        reduces,
        results: vec![Some(local)],
    })
}

/// An einsum equation: the labels of each input and of the output.
struct Equation {
    inputs: Vec<Vec<char>>,
    output: Vec<char>,
}

fn parse_equation(v: &OpView) -> Result<Equation, Refusal> {
    let eq = attrs::string(v.attrs, "equation").unwrap_or_default();
    if eq.contains('.') {
        return Err("Broadcasting is unimplemented for einsum.".into());
    }
    let (lhs, rhs) = eq
        .split_once("->")
        .ok_or_else(|| format!("einsum equation {eq:?} has no output"))?;
    let inputs: Vec<Vec<char>> = lhs.split(',').map(|s| s.trim().chars().collect()).collect();
    if inputs.len() > 2 {
        return Err(format!("einsum only supports at most 2 inputs: {eq}"));
    }
    Ok(Equation {
        inputs,
        output: rhs.trim().chars().collect(),
    })
}

/// Label -> spec from the operand layouts; a label on two different mesh dims: unsharded.
fn label_map(eq: &Equation, ins: &[Option<&Specs>]) -> BTreeMap<char, Spec> {
    let mut map: BTreeMap<char, Spec> = BTreeMap::new();
    let mut conflicted = Vec::new();
    for (labels, s) in eq.inputs.iter().zip(ins) {
        let Some(s) = s else { continue };
        for (&l, &x) in labels.iter().zip(s.iter()) {
            match map.get(&l) {
                Some(&y) if y.is_sharded() && x.is_sharded() && x != y => conflicted.push(l),
                Some(&y) if y.is_sharded() => {}
                _ => {
                    map.insert(l, x);
                }
            }
        }
    }
    for l in conflicted {
        map.insert(l, Spec::U);
    }
    map
}

/// F: each output label takes its inputs' mesh dim.
pub fn einsum_forward(v: &OpView, ins: &[Option<Specs>]) -> Option<Specs> {
    let eq = parse_equation(v).ok()?;
    if ins.iter().all(Option::is_none) {
        return None;
    }
    let refs: Vec<Option<&Specs>> = ins.iter().map(Option::as_ref).collect();
    let map = label_map(&eq, &refs);
    Some(fix_duplicates(
        eq.output
            .iter()
            .map(|l| map.get(l).copied().unwrap_or(Spec::U))
            .collect(),
    ))
}

/// B: each input takes the output's label specs; contracted labels `any`.
pub fn einsum_backward(v: &OpView, outs: &[Option<Specs>]) -> Vec<Option<Specs>> {
    let (Ok(eq), Some(Some(out))) = (parse_equation(v), outs.first()) else {
        return Vec::new();
    };
    eq.inputs
        .iter()
        .map(|labels| {
            Some(
                labels
                    .iter()
                    .map(|l| match eq.output.iter().position(|o| o == l) {
                        Some(p) => out.get(p).copied().unwrap_or(Spec::U),
                        None if labels.iter().filter(|&x| x == l).count() > 1 => Spec::U,
                        None => Spec::Any,
                    })
                    .collect(),
            )
        })
        .collect()
}

/// X: inputs made to agree per label, a local einsum, an all-reduce over the contracted
/// labels' mesh dims.
pub fn einsum_expand(v: &OpView, ins: &[Specs], outs: &[Specs]) -> Result<Expansion, Refusal> {
    let eq = parse_equation(v)?;
    let out = &outs[0];
    let mut map: BTreeMap<char, Spec> = BTreeMap::new();
    for (labels, s) in eq.inputs.iter().zip(ins) {
        for (&l, &x) in labels.iter().zip(s.iter()) {
            match map.get(&l) {
                Some(&y) if y.is_sharded() && x.is_sharded() && x != y => {
                    return Err(format!(
                        "incompatible mesh dimensions in equation, label '{l}' is mapped to mesh \
                         dimension '{}' and '{}'",
                        v.name(y),
                        v.name(x)
                    ))
                }
                Some(&y) if y.is_sharded() => {}
                _ => {
                    map.insert(l, x);
                }
            }
        }
    }
    for labels in &eq.inputs {
        for &l in labels {
            if labels.iter().filter(|&&x| x == l).count() > 1 {
                map.insert(l, Spec::U);
            }
        }
    }
    for (p, &l) in eq.output.iter().enumerate() {
        let want = out.get(p).copied().unwrap_or(Spec::U);
        let have = map.get(&l).copied().unwrap_or(Spec::U);
        if have.is_sharded() && want.is_sharded() && have != want {
            return Err(format!(
                "for label {l} input and output layouts are sharded on  non-equal dimensions {} \
                 and {} respectively",
                v.name(have),
                v.name(want)
            ));
        }
        if have == Spec::U && want.is_sharded() && !map.values().any(|&s| s == want) {
            map.insert(l, want);
        }
    }
    // Two output labels on one mesh dim: keep the one the output agrees with, else the
    // smallest label.
    let out_labels: Vec<char> = eq.output.clone();
    for (i, &l) in out_labels.iter().enumerate() {
        let Some(&Spec::D(m)) = map.get(&l) else {
            continue;
        };
        for &k in &out_labels[i + 1..] {
            if map.get(&k) == Some(&Spec::D(m)) {
                let keep_k = out.get(out_labels.iter().position(|&x| x == k).unwrap_or(0))
                    == Some(&Spec::D(m))
                    && out.get(i) != Some(&Spec::D(m));
                let drop = if keep_k { l } else { k.max(l) };
                map.insert(drop, Spec::U);
            }
        }
    }
    let contracted: Vec<char> = map
        .keys()
        .copied()
        .filter(|l| !eq.output.contains(l))
        .collect();
    for &l in &contracted {
        if let Some(&Spec::D(m)) = map.get(&l) {
            if eq.output.iter().any(|o| map.get(o) == Some(&Spec::D(m))) {
                map.insert(l, Spec::U);
            }
        }
    }
    let spec_of = |l: &char| map.get(l).copied().unwrap_or(Spec::U);
    let local: Specs = eq.output.iter().map(spec_of).collect();
    let mut dims: Vec<u8> = contracted.iter().filter_map(|l| spec_of(l).dim()).collect();
    dims.sort_unstable();
    dims.dedup();
    let mut reduces = Vec::new();
    if let (false, Some(shape)) = (dims.is_empty(), v.out_shapes.first().copied().flatten()) {
        reduces.push(Reduce {
            op: "Add",
            dims,
            shape: shape.to_vec(),
            specs: local.clone(),
        });
    }
    Ok(Expansion {
        operands: eq
            .inputs
            .iter()
            .map(|labels| Some(labels.iter().map(spec_of).collect()))
            .collect(),
        reduces,
        results: vec![Some(local)],
    })
}
