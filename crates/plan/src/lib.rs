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
    /// Variable layouts: (object path or regular expression matched whole against it,
    /// specs); the first that matches a variable gives its layout. A variable's object path
    /// is its place in the SavedModel's object graph (child names from the root joined with
    /// `/`, `vars/kernel`), found through the captures (`bound_inputs`) of the functions
    /// the signature calls. TF1 models have no object graph: there a variable is matched by
    /// its name (VarHandleOp's `shared_name`). Variables not matched are replicated; a
    /// pattern that matches no variable is an error.
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

    let md = MeshDims {
        names: &mesh_names,
        sizes: &mesh_sizes,
    };
    let (var_layouts, vars_report) =
        variable_layouts(p, &options.variables, &mesh, &mesh_text, &md)?;

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

/// How many variables an error about an unmatched `--variable` lists.
const LISTED_VARIABLES: usize = 8;

/// The key a variable is matched and reported by: its object path (TF2 models), else its
/// name (`shared_name`; TF1 models have no object graph).
fn variable_key(var: &program::Variable) -> &str {
    var.path.as_deref().unwrap_or(&var.name)
}

/// A `--variable PATTERN=SPECS`: the pattern as given, compiled to match whole.
struct VariableRule<'o> {
    pattern: &'o str,
    regex: regex::Regex,
    specs: &'o str,
}

impl VariableRule<'_> {
    fn matches(&self, key: &str) -> bool {
        self.pattern == key || self.regex.is_match(key)
    }
}

/// Compiles the `--variable` rules.
fn variable_rules(given: &[(String, String)]) -> Result<Vec<VariableRule<'_>>> {
    given
        .iter()
        .map(|(pattern, specs)| {
            regex::Regex::new(&format!("^(?:{pattern})$"))
                .map(|regex| VariableRule {
                    pattern,
                    regex,
                    specs,
                })
                .map_err(|e| PlanError::Argument {
                    fault: format!("--variable {pattern}: not a regular expression: {e}"),
                })
        })
        .collect()
}

/// The layout of each variable of `p` (in order) and the report of them by key
/// ([`variable_key`]): the first rule whose pattern is the key or matches it whole, else
/// replicated. A rule that matches no variable is an error naming it and some keys.
fn variable_layouts(
    p: &program::Program,
    given: &[(String, String)],
    mesh: &unbound_dtensor::Mesh,
    mesh_text: &str,
    md: &MeshDims,
) -> Result<(Vec<Specs>, BTreeMap<String, TensorPlan>)> {
    let rules = variable_rules(given)?;
    let mut used = vec![false; rules.len()];
    let mut layouts = Vec::with_capacity(p.variables.len());
    let mut report = BTreeMap::new();
    for var in &p.variables {
        let key = variable_key(var);
        let rank = var.shape.as_ref().map_or(0, Vec::len);
        let mut rule = None;
        for (i, r) in rules.iter().enumerate() {
            if r.matches(key) {
                used[i] = true;
                rule.get_or_insert(r);
            }
        }
        let specs = match rule {
            Some(r) => inputs::parse_specs(
                r.specs,
                mesh,
                mesh_text,
                rank,
                &format!("--variable {}", r.pattern),
            )?,
            None => replicated(rank),
        };
        check_divides(
            &var.shape,
            &specs,
            md.sizes,
            md.names,
            &format!("variable {key}"),
        )?;
        report.insert(
            key.to_string(),
            TensorPlan {
                specs: expand::names(&specs, md),
                shape: var.shape.clone(),
            },
        );
        layouts.push(specs);
    }
    if let Some(i) = used.iter().position(|u| !u) {
        return Err(unmatched_variable(p, rules[i].pattern));
    }
    Ok((layouts, report))
}

/// The error for a `--variable` pattern no variable's key matches, listing some keys.
fn unmatched_variable(p: &program::Program, pattern: &str) -> PlanError {
    let mut keys: Vec<&str> = p.variables.iter().map(variable_key).collect();
    keys.sort_unstable();
    keys.dedup();
    let more = keys.len().saturating_sub(LISTED_VARIABLES);
    keys.truncate(LISTED_VARIABLES);
    let listed = if keys.is_empty() {
        "the signature uses no variable".to_string()
    } else if more > 0 {
        format!("its variables include {keys:?} and {more} more")
    } else {
        format!("its variables are {keys:?}")
    };
    PlanError::Argument {
        fault: format!(
            "--variable {pattern}: matches no variable's object path (nor, in a model without \
             an object graph, its name); {listed}"
        ),
    }
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
