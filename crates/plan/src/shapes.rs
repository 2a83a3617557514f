//! Filling the dynamic dimensions TensorFlow recorded (`-1` in `_output_shapes`, such as the
//! batch) from the shapes pinned on the inputs, op by op, for the families whose output shape
//! follows simply from their operands'. What stays unknown makes a byte count unknown, never
//! a wrong one.

use crate::attrs;
use crate::program::Program;
use crate::rules::{family, norm_axis, Family};

/// Numpy broadcasting of known shapes (`-1` stays unknown unless the other side knows it).
fn broadcast(shapes: &[&[i64]]) -> Option<Vec<i64>> {
    let rank = shapes.iter().map(|s| s.len()).max()?;
    let mut out = vec![1i64; rank];
    for s in shapes {
        let off = rank - s.len();
        for (j, &d) in s.iter().enumerate() {
            let o = &mut out[off + j];
            *o = match (*o, d) {
                (1, d) => d,
                (o, 1) => o,
                (-1, d) => d,
                (o, _) => o,
            };
        }
    }
    Some(out)
}

/// What the op's output 0 shape is, from its operands, where that is simple.
fn infer(p: &Program, n: usize) -> Option<Vec<i64>> {
    let node = &p.nodes[n];
    let attrs = p.attrs(n);
    let shape = |i: usize| -> Option<&[i64]> {
        node.inputs
            .get(i)
            .and_then(|&v| p.values[v].shape.as_deref())
    };
    let ints = |i: usize| -> Option<&[i64]> {
        node.inputs
            .get(i)
            .and_then(|&v| p.values[v].ints.as_deref())
    };
    match family(&node.op) {
        Family::Elementwise => {
            let all: Vec<&[i64]> = (0..node.inputs.len()).filter_map(shape).collect();
            broadcast(&all)
        }
        Family::BiasAdd | Family::Softmax | Family::Pad => shape(0).map(<[i64]>::to_vec),
        Family::Conv => {
            let mut s = p.values[node.outputs[0]].shape.clone()?;
            if let (Some(first), Some(&b)) = (s.first_mut(), shape(0).and_then(|x| x.first())) {
                *first = b;
            }
            Some(s)
        }
        Family::MatMul => {
            let (l, r) = (shape(0)?, shape(1)?);
            if l.len() < 2 || r.len() < 2 {
                return None;
            }
            let t = |i: usize| {
                let names = if node.op == "MatMul" {
                    ["transpose_a", "transpose_b"]
                } else {
                    ["adj_x", "adj_y"]
                };
                attrs::flag(attrs, names[i])
            };
            let rows = if t(0) { l[l.len() - 1] } else { l[l.len() - 2] };
            let cols = if t(1) { r[r.len() - 2] } else { r[r.len() - 1] };
            let mut out = broadcast(&[&l[..l.len() - 2], &r[..r.len() - 2]]).unwrap_or_default();
            out.extend([rows, cols]);
            Some(out)
        }
        Family::Reduce => {
            let s = shape(0)?;
            let axes: Vec<usize> = ints(1)?
                .iter()
                .map(|&a| norm_axis(a, s.len()))
                .collect::<Option<_>>()?;
            let keep = attrs::flag(attrs, "keep_dims");
            Some(
                s.iter()
                    .enumerate()
                    .filter_map(|(a, &d)| match (axes.contains(&a), keep) {
                        (false, _) => Some(d),
                        (true, true) => Some(1),
                        (true, false) => None,
                    })
                    .collect(),
            )
        }
        Family::Transpose => {
            let s = shape(0)?;
            ints(1)?
                .iter()
                .map(|&a| norm_axis(a, s.len()).map(|a| s[a]))
                .collect()
        }
        Family::ExpandDims => {
            let mut s = shape(0)?.to_vec();
            let a = norm_axis(*ints(1)?.first()?, s.len() + 1)?;
            s.insert(a, 1);
            Some(s)
        }
        Family::Einsum => {
            let eq = attrs::string(attrs, "equation")?;
            let (lhs, out) = eq.split_once("->")?;
            let mut dims: std::collections::HashMap<char, i64> = std::collections::HashMap::new();
            for (i, labels) in lhs.split(',').enumerate() {
                let s = shape(i)?;
                let labels: Vec<char> = labels.trim().chars().collect();
                if labels.len() != s.len() {
                    return None;
                }
                for (l, &d) in labels.into_iter().zip(s) {
                    let e = dims.entry(l).or_insert(d);
                    if *e < 0 {
                        *e = d;
                    }
                }
            }
            out.trim().chars().map(|l| dims.get(&l).copied()).collect()
        }
        Family::Reshape => {
            let s = shape(0)?;
            let mut target = ints(1)?.to_vec();
            if s.iter().all(|&d| d >= 0) {
                let total: i64 = s.iter().product();
                let known: i64 = target.iter().filter(|&&d| d >= 0).product();
                if target.iter().filter(|&&d| d < 0).count() == 1 && known > 0 {
                    for d in &mut target {
                        if *d < 0 {
                            *d = total / known;
                        }
                    }
                }
            }
            Some(target)
        }
        _ => None,
    }
}

/// Fills unknown dims of every recorded shape from the operands', in program order.
pub fn refine(p: &mut Program) {
    for n in 0..p.nodes.len() {
        if let Some(s) = p.nodes[n]
            .inputs
            .first()
            .and_then(|&v| p.values[v].shape.clone())
        {
            if p.nodes[n].op == "Shape" && s.iter().all(|&d| d >= 0) {
                let out = p.nodes[n].outputs[0];
                p.values[out].ints = Some(s);
            }
        }
        let Some(inferred) = infer(p, n) else {
            continue;
        };
        let Some(&out) = p.nodes[n].outputs.first() else {
            continue;
        };
        let value = &mut p.values[out];
        match &mut value.shape {
            Some(rec) if rec.len() == inferred.len() => {
                for (r, &i) in rec.iter_mut().zip(&inferred) {
                    if *r < 0 && i >= 0 {
                        *r = i;
                    }
                }
            }
            None => value.shape = Some(inferred),
            _ => {}
        }
    }
}
