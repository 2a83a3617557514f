//! The collective steps DTensor's relayout (`EmitRelayout` in `mlir/collectives.cc`) runs
//! to move a tensor from one layout to another on the same mesh, plus `Partial(sum)`
//! sources (beyond TensorFlow, as PyTorch redistributes them).

use serde::Serialize;

use crate::error::{DTensorError, Result};
use crate::layout::Layout;
use crate::sharding::Sharding;
use crate::spec::{MATCH, UNSHARDED};

/// One collective step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RelayoutStep {
    /// `Identity`, `AllScatter` (a local slice), `AllGather`, `AllToAll`, `AllReduce`,
    /// `ReduceScatter`.
    pub op: &'static str,
    /// The mesh dimensions the collective runs over.
    pub mesh_dims: Vec<String>,
    /// The tensor axes it changes.
    pub axes: Vec<usize>,
    /// The specs before the step (one per axis; `partial(sum):D` marks pending sums).
    pub from_specs: Vec<String>,
    /// The specs after the step.
    pub to_specs: Vec<String>,
}

/// The steps from one sharding to another.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RelayoutPlan {
    /// The source, as a layout string or a description.
    pub from: String,
    /// The target.
    pub to: String,
    /// The steps in order; empty when the layouts are identical.
    pub steps: Vec<RelayoutStep>,
}

struct State<'a> {
    names: Vec<&'a str>,
    specs: Vec<Option<usize>>,
    partial: Vec<usize>,
}

impl State<'_> {
    fn render(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .specs
            .iter()
            .map(|s| s.map_or(UNSHARDED.to_string(), |m| self.names[m].to_string()))
            .collect();
        for &p in &self.partial {
            v.push(format!("partial(sum):{}", self.names[p]));
        }
        v
    }
}

fn single_dims(s: &Sharding, from: &Sharding, to: &Sharding) -> Result<Vec<Option<usize>>> {
    s.axes()
        .iter()
        .map(|a| match a.as_slice() {
            [] => Ok(None),
            [m] => Ok(Some(*m)),
            _ => Err(DTensorError::Relayout {
                from: from.describe(),
                to: to.describe(),
                fault: "plans follow DTensor's rules, which shard an axis over one mesh dimension"
                    .into(),
            }),
        })
        .collect()
}

/// The plan from `from` to `to` (same mesh and rank), step by step as DTensor would run it.
pub fn relayout_plan(from: &Sharding, to: &Sharding) -> Result<RelayoutPlan> {
    let fail = |fault: String| DTensorError::Relayout {
        from: from.describe(),
        to: to.describe(),
        fault,
    };
    if from.mesh() != to.mesh() {
        return Err(fail("the layouts are on different meshes (DTensor copies across meshes with CopyToMesh, replicated only)".into()));
    }
    if from.rank() != to.rank() {
        return Err(fail(format!(
            "ranks differ ({} and {})",
            from.rank(),
            to.rank()
        )));
    }
    if let Some(&p) = to.partial().iter().find(|p| !from.partial().contains(p)) {
        return Err(fail(format!(
            "the target has partial sums over {} the source lacks (no collective creates them)",
            from.mesh().dims()[p].name
        )));
    }
    let names: Vec<&str> = from.mesh().dims().iter().map(|d| d.name.as_str()).collect();
    let target = single_dims(to, from, to)?;
    let mut st = State {
        names,
        specs: single_dims(from, from, to)?,
        partial: from.partial().to_vec(),
    };
    let mut steps = Vec::new();
    let push = |steps: &mut Vec<RelayoutStep>,
                st: &State,
                before: Vec<String>,
                op: &'static str,
                dims: Vec<usize>,
                axes: Vec<usize>| {
        steps.push(RelayoutStep {
            op,
            mesh_dims: dims.iter().map(|&m| st.names[m].to_string()).collect(),
            axes,
            from_specs: before,
            to_specs: st.render(),
        });
    };

    // Pending sums first: a reduce-scatter where the target shards an axis the source keeps
    // whole on that mesh dimension, an all-reduce otherwise.
    let pending: Vec<usize> = st
        .partial
        .iter()
        .copied()
        .filter(|p| !to.partial().contains(p))
        .collect();
    let mut reduce = Vec::new();
    for p in pending {
        let before = st.render();
        st.partial.retain(|&q| q != p);
        match (0..target.len()).find(|&i| target[i] == Some(p) && st.specs[i].is_none()) {
            Some(axis) => {
                st.specs[axis] = Some(p);
                push(
                    &mut steps,
                    &st,
                    before,
                    "ReduceScatter",
                    vec![p],
                    vec![axis],
                );
            }
            None => reduce.push((p, before)),
        }
    }
    if let Some((_, before)) = reduce.first().cloned() {
        push(
            &mut steps,
            &st,
            before,
            "AllReduce",
            reduce.iter().map(|(p, _)| *p).collect(),
            Vec::new(),
        );
    }

    if st.specs == target {
        if steps.is_empty()
            && from
                .to_layout()
                .zip(to.to_layout())
                .is_some_and(|(a, b)| a != b)
        {
            let before = st.render();
            push(&mut steps, &st, before, "Identity", Vec::new(), Vec::new());
        }
        return Ok(RelayoutPlan {
            from: from.describe(),
            to: to.describe(),
            steps,
        });
    }

    // One all-to-all when exactly one axis goes unsharded -> m and one m -> unsharded.
    let differing: Vec<usize> = (0..target.len())
        .filter(|&i| st.specs[i] != target[i])
        .collect();
    if let [a, b] = differing[..] {
        let pair = |i: usize, j: usize| {
            st.specs[i].is_none()
                && target[j].is_none()
                && target[i].is_some()
                && target[i] == st.specs[j]
        };
        let split_concat = if pair(a, b) {
            Some((a, b))
        } else if pair(b, a) {
            Some((b, a))
        } else {
            None
        };
        if let Some((split, concat)) = split_concat {
            let m = target[split].unwrap_or_default();
            let before = st.render();
            st.specs[split] = Some(m);
            st.specs[concat] = None;
            push(
                &mut steps,
                &st,
                before,
                "AllToAll",
                vec![m],
                vec![split, concat],
            );
            return Ok(RelayoutPlan {
                from: from.describe(),
                to: to.describe(),
                steps,
            });
        }
    }

    // Otherwise: slice what can be sliced, gather what differs, slice to the target.
    let before = st.render();
    let (mut dims, mut axes) = (Vec::new(), Vec::new());
    for (i, &t) in target.iter().enumerate() {
        if let Some(m) = t {
            if st.specs[i].is_none() && !st.specs.contains(&Some(m)) {
                st.specs[i] = Some(m);
                dims.push(m);
                axes.push(i);
            }
        }
    }
    if !axes.is_empty() {
        push(&mut steps, &st, before, "AllScatter", dims, axes);
    }
    let before = st.render();
    let (mut dims, mut axes) = (Vec::new(), Vec::new());
    for (i, &t) in target.iter().enumerate() {
        if let Some(m) = st.specs[i] {
            if t != Some(m) {
                st.specs[i] = None;
                dims.push(m);
                axes.push(i);
            }
        }
    }
    if !axes.is_empty() {
        push(&mut steps, &st, before, "AllGather", dims, axes);
    }
    let before = st.render();
    let (mut dims, mut axes) = (Vec::new(), Vec::new());
    for (i, &t) in target.iter().enumerate() {
        if let (None, Some(m)) = (st.specs[i], t) {
            st.specs[i] = Some(m);
            dims.push(m);
            axes.push(i);
        }
    }
    if !axes.is_empty() {
        push(&mut steps, &st, before, "AllScatter", dims, axes);
    }
    Ok(RelayoutPlan {
        from: from.describe(),
        to: to.describe(),
        steps,
    })
}

/// `to` with every `match` spec replaced by `from`'s spec on that axis (what relayout does
/// with `match`).
pub fn resolve_match(from: &Layout, to: &Layout) -> Result<Layout> {
    if !to.specs().iter().any(|s| s == MATCH) {
        return Ok(to.clone());
    }
    if from.rank() != to.rank() {
        return Err(DTensorError::Relayout {
            from: from.to_string(),
            to: to.to_string(),
            fault: "ranks differ".into(),
        });
    }
    let specs = to
        .specs()
        .iter()
        .zip(from.specs())
        .map(|(t, f)| if t == MATCH { f.clone() } else { t.clone() })
        .collect();
    Layout::new(to.layout_type(), specs, to.mesh().clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sharding::Chunking;

    fn plan(a: &str, b: &str) -> Vec<(&'static str, Vec<String>)> {
        let mesh = "|x=2,y=4|*CPU";
        let s = |specs: &str| {
            let l = Layout::parse(&format!("sharding_specs:{specs} mesh:{mesh}")).unwrap();
            Sharding::from_layout(&l, Chunking::Even).unwrap()
        };
        relayout_plan(&s(a), &s(b))
            .unwrap()
            .steps
            .into_iter()
            .map(|s| (s.op, s.to_specs))
            .collect()
    }

    #[test]
    fn follows_dtensor_rules() {
        assert!(plan("x,y,", "x,y,").is_empty());
        // DTensor's own example: x,y -> y,x gathers everything, then slices.
        assert_eq!(
            plan("x,y,", "y,x,"),
            vec![
                ("AllGather", vec!["unsharded".into(), "unsharded".into()]),
                ("AllScatter", vec!["y".into(), "x".into()])
            ]
        );
        assert_eq!(
            plan("x,unsharded,", "unsharded,x,"),
            vec![("AllToAll", vec!["unsharded".into(), "x".into()])]
        );
        assert_eq!(
            plan("unsharded,unsharded,", "x,y,"),
            vec![("AllScatter", vec!["x".into(), "y".into()])]
        );
        assert_eq!(
            plan("x,y,", "unsharded,y,"),
            vec![("AllGather", vec!["unsharded".into(), "y".into()])]
        );
        assert_eq!(
            plan("x,unsharded,", "unsharded,y,"),
            vec![
                ("AllScatter", vec!["x".into(), "y".into()]),
                ("AllGather", vec!["unsharded".into(), "y".into()])
            ]
        );
    }

    #[test]
    fn partial_sums_reduce_first() {
        let mesh = crate::Mesh::parse("|x=2,y=4|*CPU").unwrap();
        let from =
            Sharding::new(mesh.clone(), vec![vec![], vec![]], vec![1], Chunking::Even).unwrap();
        let to =
            Sharding::new(mesh.clone(), vec![vec![1], vec![]], vec![], Chunking::Even).unwrap();
        let p = relayout_plan(&from, &to).unwrap();
        assert_eq!(p.steps.len(), 1);
        assert_eq!(
            (p.steps[0].op, p.steps[0].axes.as_slice()),
            ("ReduceScatter", &[0][..])
        );
        let to =
            Sharding::new(mesh.clone(), vec![vec![0], vec![]], vec![], Chunking::Even).unwrap();
        let p = relayout_plan(&from, &to).unwrap();
        let ops: Vec<&str> = p.steps.iter().map(|s| s.op).collect();
        assert_eq!(ops, vec!["AllReduce", "AllScatter"]);
        assert!(relayout_plan(&to, &from).is_err());
    }
}
