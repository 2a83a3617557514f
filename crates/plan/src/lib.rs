//! `unbound-plan`: what TensorFlow's DTensor would do with a SavedModel on a mesh, decided
//! offline, without devices or TensorFlow.
//!
//! Given a signature and the layouts of its inputs (and variables) on a mesh, [`plan`]
//! follows TensorFlow 2.21's DTensor: the signature's function and every function it calls
//! are flattened into one program (`program`); each op's forward and backward rule
//! (`rules`, one module per family of DTensor's SPMD expanders) proposes layouts, which are
//! merged as DTensor merges them until nothing changes (`propagate`, `specs`); then each op
//! is expanded (`expand`): the operands DTensor relayouts first, the all-gathers, all-reduces
//! and all-to-alls it emits, and what each costs a device in bytes (`collectives`). Where
//! DTensor refuses the program, so does the plan, naming the op and DTensor's message.
//!
//! ```no_run
//! use std::path::Path;
//! use unbound_plan::{plan, PlanOptions};
//!
//! let options = PlanOptions {
//!     mesh: "x=2,y=4".into(),
//!     inputs: vec![("x".into(), "x,unsharded".into())],
//!     ..PlanOptions::default()
//! };
//! let report = plan(Path::new("model"), &options)?;
//! println!("{:?}", report.outputs);
//! # Ok::<(), unbound_plan::PlanError>(())
//! ```
//!
//! Invariants: the model is untrusted input (no panics on its contents; calls nest at most
//! 64 deep); the work is linear in the nodes of the program; ops without a rule are listed
//! in [`PlanReport::assumed`] with what was assumed, never planned silently.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod attrs;
mod collectives;
mod error;
mod expand;
mod inputs;
mod lite;
mod model;
mod program;
mod propagate;
mod report;
mod rules;
mod shapes;
mod specs;

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

pub use collectives::Collective;
pub use error::{PlanError, Result};
pub use report::{Assumption, KindTotal, OpPlan, PlanReport, Relayout, TensorPlan, Totals};

use collectives::MeshDims;
use specs::{replicated, Specs};

/// What to plan.
#[derive(Debug, Clone, Default)]
pub struct PlanOptions {
    /// The mesh: `x=2,y=4` (CPU devices) or any mesh string.
    pub mesh: String,
    /// Input layouts: (input name, specs). Inputs not named are replicated.
    pub inputs: Vec<(String, String)>,
    /// Variable layouts: (name or regular expression matched whole against the variable's
    /// name, specs). Variables not matched are replicated.
    pub variables: Vec<(String, String)>,
    /// The signature (default `serving_default`).
    pub signature: Option<String>,
    /// The MetaGraphDef's tags, comma-separated (default: the only one, else `serve`).
    pub tags: Option<String>,
    /// Static shapes for inputs with dynamic dimensions: (input name, dims).
    pub shapes: Vec<(String, Vec<i64>)>,
}

/// The signature planned when none is named.
pub const DEFAULT_SIGNATURE: &str = "serving_default";

/// Plans the signature of the SavedModel in `dir` as `options` say.
pub fn plan(dir: &Path, options: &PlanOptions) -> Result<PlanReport> {
    let mesh = inputs::parse_mesh(&options.mesh)?;
    let mesh_names: Vec<String> = mesh.dims().iter().map(|d| d.name.clone()).collect();
    let mesh_sizes: Vec<i64> = mesh.dims().iter().map(|d| d.size).collect();
    let mesh_text = mesh.to_string();
    let pins: HashMap<String, Vec<i64>> = options.shapes.iter().cloned().collect();
    let signature = options.signature.as_deref().unwrap_or(DEFAULT_SIGNATURE);
    let mut sig = model::load(dir, options.tags.as_deref(), signature, &pins)?;
    shapes::refine(&mut sig.program);
    let p = &sig.program;

    let mut locked: Vec<(usize, Specs)> = Vec::new();
    let mut given: HashMap<&str, &str> = HashMap::new();
    for (name, specs) in &options.inputs {
        if !p.inputs.iter().any(|(n, _)| n == name) {
            let known: Vec<&str> = p.inputs.iter().map(|(n, _)| n.as_str()).collect();
            return Err(PlanError::Argument {
                fault: format!(
                    "--input {name}: the signature has no such input (it has {known:?})"
                ),
            });
        }
        given.insert(name, specs);
    }
    let mut inputs_report = BTreeMap::new();
    for (name, v) in &p.inputs {
        let shape = p.values[*v].shape.clone();
        let rank = shape.as_ref().map_or(0, Vec::len);
        let specs = match given.get(name.as_str()) {
            Some(text) => {
                inputs::parse_specs(text, &mesh, &mesh_text, rank, &format!("--input {name}"))?
            }
            None => replicated(rank),
        };
        check_divides(
            &shape,
            &specs,
            &mesh_sizes,
            &mesh_names,
            &format!("--input {name}"),
        )?;
        inputs_report.insert(
            name.clone(),
            TensorPlan {
                specs: expand::names(
                    &specs,
                    &MeshDims {
                        names: &mesh_names,
                        sizes: &mesh_sizes,
                    },
                ),
                shape,
            },
        );
        locked.push((*v, specs));
    }

    let patterns: Vec<(regex::Regex, &str, &str)> = options
        .variables
        .iter()
        .map(|(pat, specs)| {
            regex::Regex::new(&format!("^(?:{pat})$"))
                .map(|r| (r, pat.as_str(), specs.as_str()))
                .map_err(|e| PlanError::Argument {
                    fault: format!("--variable {pat}: not a regular expression: {e}"),
                })
        })
        .collect::<Result<_>>()?;
    let mut var_layouts = Vec::with_capacity(p.variables.len());
    let mut vars_report = BTreeMap::new();
    let md = MeshDims {
        names: &mesh_names,
        sizes: &mesh_sizes,
    };
    for var in &p.variables {
        let rank = var.shape.as_ref().map_or(0, Vec::len);
        let specs = match patterns
            .iter()
            .find(|(r, pat, _)| *pat == var.name || r.is_match(&var.name))
        {
            Some((_, pat, text)) => {
                inputs::parse_specs(text, &mesh, &mesh_text, rank, &format!("--variable {pat}"))?
            }
            None => replicated(rank),
        };
        check_divides(
            &var.shape,
            &specs,
            &mesh_sizes,
            &mesh_names,
            &format!("variable {}", var.name),
        )?;
        vars_report.insert(
            var.name.clone(),
            TensorPlan {
                specs: expand::names(&specs, &md),
                shape: var.shape.clone(),
            },
        );
        var_layouts.push(specs);
    }

    let layouts = propagate::propagate(p, &locked, var_layouts, &mesh_sizes, &mesh_names);
    let (ops, assumed) = expand::expand_all(p, &layouts, &md)?;
    let mut notes = p.skipped.clone();
    if !layouts.converged {
        notes.push(
            "layout propagation did not reach a fixed point (DTensor: \"Maximum number of layout \
             propagation steps reached\"); the layouts shown are the last ones"
                .into(),
        );
    }
    let outputs = p
        .outputs
        .iter()
        .map(|(name, v)| {
            let value = &p.values[*v];
            let specs = layouts.merged[*v]
                .clone()
                .unwrap_or_else(|| replicated(value.shape.as_ref().map_or(0, Vec::len)));
            (
                name.clone(),
                TensorPlan {
                    specs: expand::names(&specs, &md),
                    shape: value.shape.clone(),
                },
            )
        })
        .collect();
    let totals = totals(&ops);
    Ok(PlanReport {
        mesh: mesh_text,
        signature: sig.name.clone(),
        inputs: inputs_report,
        outputs,
        variables: vars_report,
        ops,
        assumed,
        notes,
        totals,
    })
}

/// Refuses a layout whose shard counts do not divide the static dimensions (DTensor's
/// "does not evenly divide").
fn check_divides(
    shape: &Option<Vec<i64>>,
    specs: &[specs::Spec],
    sizes: &[i64],
    names: &[String],
    what: &str,
) -> Result<()> {
    let Some(shape) = shape else { return Ok(()) };
    for (a, (&d, s)) in shape.iter().zip(specs).enumerate() {
        if let Some(m) = s.dim() {
            let k = sizes.get(usize::from(m)).copied().unwrap_or(1);
            if d > 0 && d % k != 0 {
                return Err(PlanError::Argument {
                    fault: format!(
                        "{what}: The sharding spec for axis {a} splits among {k} values, which does \
                         not evenly divide the length of that axis ({d}) (mesh dimension {})",
                        names.get(usize::from(m)).cloned().unwrap_or_default()
                    ),
                });
            }
        }
    }
    Ok(())
}

fn totals(ops: &[OpPlan]) -> Totals {
    let mut t = Totals::default();
    for c in ops.iter().flat_map(|o| &o.collectives) {
        let k = t.per_kind.entry(c.kind.to_string()).or_default();
        k.count += 1;
        match c.bytes {
            Some(b) => {
                k.bytes += b;
                t.bytes_per_step += b;
            }
            None => t.unknown_bytes += 1,
        }
        if c.kind != "all_scatter" && !c.combined {
            t.collectives += 1;
        }
    }
    t
}
