//! DTensor's layout propagation (`mlir/layout_propagation_v2.cc`): every value gets a layout
//! from its producer's forward rule and its consumers' backward rules, merged by
//! [`merge`](crate::specs::merge); locked values (the inputs) never change. Run as a
//! worklist to a fixed point, so the work is proportional to the nodes times the (small)
//! number of times a layout can change.

use std::collections::VecDeque;

use crate::program::{NodeId, Program};
use crate::rules::{backward, family, forward, Family, OpView};
use crate::specs::{merge, Specs};

/// How many node visits per node the propagation may make before it gives up.
const MAX_VISITS_PER_NODE: usize = 64;

/// The layouts of every value after propagation.
pub struct Layouts {
    /// Per value: its merged layout (`None` where nothing is known).
    pub merged: Vec<Option<Specs>>,
    /// Per variable: its layout.
    pub variables: Vec<Specs>,
    /// Whether the fixed point was reached.
    pub converged: bool,
}

/// Builds the view a rule sees of node `n`.
pub fn view<'p>(
    p: &'p Program,
    n: NodeId,
    variables: &'p [Specs],
    mesh: &'p [i64],
    mesh_names: &'p [String],
) -> OpView<'p> {
    let node = &p.nodes[n];
    OpView {
        op: &node.op,
        attrs: p.attrs(n),
        in_shapes: node
            .inputs
            .iter()
            .map(|&v| p.values[v].shape.as_deref())
            .collect(),
        out_shapes: node
            .outputs
            .iter()
            .map(|&v| p.values[v].shape.as_deref())
            .collect(),
        in_ints: node
            .inputs
            .iter()
            .map(|&v| p.values[v].ints.as_deref())
            .collect(),
        in_vars: node
            .inputs
            .iter()
            .map(|&v| p.values[v].variable.and_then(|i| variables.get(i)))
            .collect(),
        mesh,
        mesh_names,
    }
}

/// Runs propagation from the locked layouts `locked` (value, layout).
pub fn propagate(
    p: &Program,
    locked: &[(usize, Specs)],
    variables: Vec<Specs>,
    mesh: &[i64],
    mesh_names: &[String],
) -> Layouts {
    let nv = p.values.len();
    let mut merged: Vec<Option<Specs>> = vec![None; nv];
    let mut is_locked = vec![false; nv];
    let mut producer: Vec<Option<Specs>> = vec![None; nv];
    let mut consumer: Vec<Vec<Option<Specs>>> = p
        .values
        .iter()
        .map(|v| vec![None; v.consumers.len()])
        .collect();
    for (v, s) in locked {
        merged[*v] = Some(s.clone());
        is_locked[*v] = true;
    }
    let families: Vec<Family> = p.nodes.iter().map(|n| family(&n.op)).collect();
    let mut queue: VecDeque<NodeId> = (0..p.nodes.len()).collect();
    let mut queued = vec![true; p.nodes.len()];
    let budget = p.nodes.len().saturating_mul(MAX_VISITS_PER_NODE) + 1000;
    let mut visits = 0usize;
    let mut touched: Vec<usize> = Vec::new();
    while let Some(n) = queue.pop_front() {
        queued[n] = false;
        visits += 1;
        if visits > budget {
            return Layouts {
                merged,
                variables,
                converged: false,
            };
        }
        let node = &p.nodes[n];
        let v = view(p, n, &variables, mesh, mesh_names);
        let ins: Vec<Option<Specs>> = node.inputs.iter().map(|&x| merged[x].clone()).collect();
        let outs: Vec<Option<Specs>> = node.outputs.iter().map(|&x| merged[x].clone()).collect();
        let f = families[n];
        touched.clear();
        for (k, req) in forward(f, &v, &ins, node.outputs.len())
            .into_iter()
            .enumerate()
        {
            let x = node.outputs[k];
            let req = req.filter(|r| {
                p.values[x]
                    .shape
                    .as_ref()
                    .is_none_or(|s| s.len() == r.len())
            });
            if producer[x] != req {
                producer[x] = req;
                touched.push(x);
            }
        }
        for (i, req) in backward(f, &v, &outs).into_iter().enumerate() {
            let Some(&x) = node.inputs.get(i) else { break };
            let req = req.filter(|r| {
                p.values[x]
                    .shape
                    .as_ref()
                    .is_none_or(|s| s.len() == r.len())
            });
            let slot = node.input_slots[i];
            if consumer[x][slot] != req {
                consumer[x][slot] = req;
                touched.push(x);
            }
        }
        for &x in &touched {
            if is_locked[x] {
                continue;
            }
            let requests: Vec<&Specs> = consumer[x].iter().flatten().collect();
            let new = merge(producer[x].as_ref(), &requests);
            if new != merged[x] {
                merged[x] = new;
                let value = &p.values[x];
                for &m in value
                    .producer
                    .iter()
                    .chain(value.consumers.iter().map(|(c, _)| c))
                {
                    if !queued[m] {
                        queued[m] = true;
                        queue.push_back(m);
                    }
                }
            }
        }
    }
    Layouts {
        merged,
        variables,
        converged: true,
    }
}
