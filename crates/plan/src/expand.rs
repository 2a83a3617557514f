//! SPMD expansion over the propagated layouts: per op, the operands relayouted first, the
//! collectives, and the refusals (`mlir/spmd_expansion.cc`).

use crate::attrs::dtype_size;
use crate::collectives::{Collective, MeshDims};
use crate::error::{PlanError, Result};
use crate::program::Program;
use crate::propagate::{view, Layouts};
use crate::report::{Assumption, OpPlan, Relayout};
use crate::rules::{expand, family, Family};
use crate::specs::{replicated, Spec, Specs};

/// Renders specs with mesh dimension names.
pub fn names(specs: &[Spec], mesh: &MeshDims) -> Vec<String> {
    specs
        .iter()
        .map(|s| match s {
            Spec::D(d) => mesh.names.get(usize::from(*d)).cloned().unwrap_or_default(),
            _ => unbound_dtensor::spec::UNSHARDED.to_string(),
        })
        .collect()
}

/// The plan of every op, and the assumptions made.
pub fn expand_all(
    p: &Program,
    layouts: &Layouts,
    mesh: &MeshDims,
) -> Result<(Vec<OpPlan>, Vec<Assumption>)> {
    let mut ops = Vec::with_capacity(p.nodes.len());
    let mut assumed = Vec::new();
    let layout_of = |v: usize| -> Specs {
        layouts.merged[v]
            .clone()
            .unwrap_or_else(|| replicated(p.values[v].shape.as_ref().map_or(0, Vec::len)))
    };
    for (n, node) in p.nodes.iter().enumerate() {
        let f = family(&node.op);
        let v = view(p, n, &layouts.variables, mesh.sizes, mesh.names);
        let ins: Vec<Specs> = node
            .inputs
            .iter()
            .zip(&v.in_vars)
            .map(|(&x, var)| var.cloned().unwrap_or_else(|| layout_of(x)))
            .collect();
        let outs: Vec<Specs> = node.outputs.iter().map(|&x| layout_of(x)).collect();
        let ex = expand(f, &v, &ins, &outs).map_err(|rule| PlanError::Refused {
            node: node.name.clone(),
            op: node.op.clone(),
            rule,
        })?;
        if f == Family::Unknown {
            assumed.push(Assumption {
                name: node.name.clone(),
                op: node.op.clone(),
                assumed: "no rule: operands gathered to replicated, run locally, results \
                          replicated (DTensor itself has no expander for it unless enrolled \
                          with DTENSOR_ENABLE_REPLICATED_SPMD_AS_DEFAULT_*)"
                    .into(),
            });
        }
        let mut relayouts = Vec::new();
        let mut collectives: Vec<Collective> = Vec::new();
        // The operands' all-gathers run side by side before the op: DTensor's combiner packs
        // those on the same mesh dims and dtype into one all-reduce call.
        let mut gathers: Vec<(Vec<String>, i32)> = Vec::new();
        for (i, target) in ex.operands.iter().enumerate() {
            let (Some(t), Some(&x)) = (target, node.inputs.get(i)) else {
                continue;
            };
            if v.in_vars.get(i).copied().flatten().is_some() {
                continue;
            }
            let from = &ins[i];
            if from == t || from.len() != t.len() {
                continue;
            }
            let value = &p.values[x];
            let moves = mesh.relayout(
                from,
                t,
                value.shape.as_deref(),
                dtype_size(value.dtype),
                &format!("input {i}"),
            );
            if moves.is_empty() {
                continue;
            }
            let mut moves = moves;
            for c in &mut moves {
                if c.kind == "all_gather" {
                    let key = (c.mesh_dims.clone(), value.dtype);
                    c.combined = gathers.contains(&key);
                    if !c.combined {
                        gathers.push(key);
                    }
                }
            }
            relayouts.push(Relayout {
                operand: i,
                from: names(from, mesh),
                to: names(t, mesh),
            });
            collectives.extend(moves);
        }
        let elem = node
            .outputs
            .first()
            .map_or(4, |&x| dtype_size(p.values[x].dtype));
        for r in &ex.reduces {
            collectives.extend(mesh.all_reduce(r.op, &r.dims, &r.shape, &r.specs, elem));
        }
        for (k, local) in ex.results.iter().enumerate() {
            let (Some(local), Some(&x)) = (local, node.outputs.get(k)) else {
                continue;
            };
            let value = &p.values[x];
            collectives.extend(mesh.relayout(
                local,
                &outs[k],
                value.shape.as_deref(),
                dtype_size(value.dtype),
                &format!("output {k}"),
            ));
        }
        ops.push(OpPlan {
            name: node.name.clone(),
            op: node.op.clone(),
            inputs: ins.iter().map(|s| names(s, mesh)).collect(),
            outputs: outs.iter().map(|s| names(s, mesh)).collect(),
            relayouts,
            collectives,
        });
    }
    Ok((ops, assumed))
}
