//! The plan as data: what `unbound plan` prints and `unbound.plan` returns.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::collectives::Collective;

/// A tensor at the signature's edge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TensorPlan {
    /// One sharding spec per axis (`unsharded` or a mesh dimension).
    pub specs: Vec<String>,
    /// Its global shape (`-1` where still unknown), when the rank is known.
    pub shape: Option<Vec<i64>>,
}

/// An operand DTensor relayouts before the op runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Relayout {
    /// Which operand.
    pub operand: usize,
    /// Its layout as produced.
    pub from: Vec<String>,
    /// The layout the op needs.
    pub to: Vec<String>,
}

/// One op of the program.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OpPlan {
    /// The node, prefixed by the calls it sits in (`StatefulPartitionedCall/MatMul`).
    pub name: String,
    /// Its op type.
    pub op: String,
    /// The layouts of its operands (as produced).
    pub inputs: Vec<Vec<String>>,
    /// The layouts of its results.
    pub outputs: Vec<Vec<String>>,
    /// The operands relayouted first.
    pub relayouts: Vec<Relayout>,
    /// The collectives its expansion emits.
    pub collectives: Vec<Collective>,
}

/// An op planned without a rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Assumption {
    /// The node.
    pub name: String,
    /// Its op type.
    pub op: String,
    /// What was assumed.
    pub assumed: String,
}

/// Totals of one collective kind.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct KindTotal {
    /// How many calls.
    pub count: usize,
    /// Bytes each device sends over all of them (the known ones).
    pub bytes: u64,
}

/// Totals over the step.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Totals {
    /// Per kind (`all_gather`, `all_reduce`, `all_to_all`, `all_scatter`).
    pub per_kind: BTreeMap<String, KindTotal>,
    /// Calls of collectives that communicate (all-scatters, local slices, are not counted;
    /// collectives DTensor packs into one call count once).
    pub collectives: usize,
    /// Bytes each device sends in one step.
    pub bytes_per_step: u64,
    /// Collectives whose bytes are unknown (a dynamic shape not pinned with `--shape`).
    pub unknown_bytes: usize,
}

/// The plan of one signature on one mesh.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PlanReport {
    /// The mesh, as TensorFlow prints it.
    pub mesh: String,
    /// The signature planned.
    pub signature: String,
    /// The inputs as laid out.
    pub inputs: BTreeMap<String, TensorPlan>,
    /// The layout DTensor gives each output.
    pub outputs: BTreeMap<String, TensorPlan>,
    /// The variables the program uses, by object path (by name in TF1 models, which have no
    /// object graph), with their layouts.
    pub variables: BTreeMap<String, TensorPlan>,
    /// Every op, producers first.
    pub ops: Vec<OpPlan>,
    /// Ops without a rule, and what was assumed for them.
    pub assumed: Vec<Assumption>,
    /// What else the reader should know (nodes left out, non-convergence).
    pub notes: Vec<String>,
    /// The collectives summed.
    pub totals: Totals,
}
