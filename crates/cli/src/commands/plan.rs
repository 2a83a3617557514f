//! `unbound plan DIR --mesh MESH [--input NAME=SPECS]... [--variable PATH_OR_REGEX=SPECS]...
//! [--shape NAME=DIMS]... [--signature NAME] [--tags TAGS] [--json]`: what TensorFlow's
//! DTensor would do with a signature on a mesh (`unbound_plan`), rendered.

use std::path::PathBuf;

use unbound_plan::{plan, OpPlan, PlanOptions, PlanReport};

use super::CmdResult;

const PLAN_HELP: &str = "\
SPECS is one sharding spec per axis, comma-separated: a mesh dimension or `unsharded`
(`--input x=x,unsharded`), or a JAX PartitionSpec (`P('x', None)`) or TensorFlow layout
string. Inputs and variables not named are replicated.

Variables are matched by object path, the child names from the SavedModel's root object
joined with `/` (`dense/kernel`, `layer_with_weights-0/kernel`, as `unbound show` and
`unbound vars` print them), equal or as a regular expression matching the whole path; the
first --variable that matches wins, and one that matches no variable is an error. TF1 models
have no object graph: there variables are matched by name (VarHandleOp's shared_name).

Bytes are per device per call, what each device sends: an all-gather to local size G from
G/k moves G(k-1)/k, an all-reduce of L moves 2L(k-1)/k, an all-to-all of L moves L(k-1)/k,
an all-scatter is a local slice. Dimensions still unknown (pin them with --shape) leave a
byte count unknown.

Exit codes: 0 success, 1 the model or a layout is unusable or DTensor refuses the program
(the op and DTensor's message are named), 2 usage error.";

/// Arguments of `unbound plan`.
#[derive(clap::Args)]
#[command(after_long_help = PLAN_HELP)]
pub struct Args {
    /// The SavedModel directory.
    dir: PathBuf,
    /// The mesh: `x=2,y=4` (CPU devices) or any mesh string `unbound layout` takes.
    #[arg(long)]
    mesh: String,
    /// NAME=SPECS: the layout of a signature input. Repeatable.
    #[arg(long, value_name = "NAME=SPECS", value_parser = parse_pair)]
    input: Vec<(String, String)>,
    /// PATH_OR_REGEX=SPECS: the layout of the variables at this object path (`dense/kernel`;
    /// by name in TF1 models). Repeatable; the first match wins.
    #[arg(long, value_name = "PATH_OR_REGEX=SPECS", value_parser = parse_pair)]
    variable: Vec<(String, String)>,
    /// NAME=D0,D1,...: the static shape of an input with dynamic dimensions. Repeatable.
    #[arg(long, value_name = "NAME=DIMS", value_parser = parse_shape_pair)]
    shape: Vec<(String, Vec<i64>)>,
    /// The signature (default serving_default).
    #[arg(long)]
    signature: Option<String>,
    /// The MetaGraphDef's tags, comma-separated (default: the only one, else serve).
    #[arg(long)]
    tags: Option<String>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

fn parse_pair(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(a, b)| (a.trim().to_string(), b.trim().to_string()))
        .ok_or_else(|| format!("{s:?} is not NAME=VALUE"))
}

fn parse_shape_pair(s: &str) -> Result<(String, Vec<i64>), String> {
    let (name, dims) = parse_pair(s)?;
    let dims = unbound_dtensor::parse_shape(&dims).map_err(|e| e.to_string())?;
    Ok((name, dims))
}

/// Runs `unbound plan`.
pub fn run(a: Args) -> CmdResult {
    super::note_model_choice(&a.dir);
    let options = PlanOptions {
        mesh: a.mesh,
        inputs: a.input,
        variables: a.variable,
        signature: a.signature,
        tags: a.tags,
        shapes: a.shape,
    };
    let report = plan(&a.dir, &options)?;
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&report)?)?;
    } else {
        print_report(&report)?;
    }
    Ok(())
}

/// The most ops the text table lists in full; past it, only ops with collectives are listed.
const FULL_TABLE_OPS: usize = 200;

fn specs(s: &[String]) -> String {
    format!("[{}]", s.join(","))
}

fn shape(s: &Option<Vec<i64>>) -> String {
    match s {
        Some(s) => format!(
            "[{}]",
            s.iter()
                .map(|d| if *d < 0 { "?".into() } else { d.to_string() })
                .collect::<Vec<_>>()
                .join(",")
        ),
        None => "(unknown rank)".into(),
    }
}

fn bytes(b: Option<u64>) -> String {
    b.map_or("? bytes".into(), |b| format!("{b} bytes"))
}

fn print_op(o: &OpPlan) -> Result<(), crate::output::StdoutError> {
    let ins: Vec<String> = o.inputs.iter().map(|s| specs(s)).collect();
    let outs: Vec<String> = o.outputs.iter().map(|s| specs(s)).collect();
    outln!(
        "  {:<40} {:<18} {} -> {}",
        o.name,
        o.op,
        ins.join(" "),
        outs.join(" ")
    )?;
    for r in &o.relayouts {
        outln!(
            "      relayout input {}: {} -> {}",
            r.operand,
            specs(&r.from),
            specs(&r.to)
        )?;
    }
    for c in &o.collectives {
        let red = c.reduction.map(|r| format!("({r})")).unwrap_or_default();
        outln!(
            "      {}{red} over {} on {}: {}",
            c.kind,
            if c.mesh_dims.is_empty() {
                "-".to_string()
            } else {
                c.mesh_dims.join(",")
            },
            c.on,
            bytes(c.bytes)
        )?;
    }
    Ok(())
}

fn print_report(r: &PlanReport) -> Result<(), crate::output::StdoutError> {
    outln!("plan of signature {} on mesh {}", r.signature, r.mesh)?;
    outln!("inputs:")?;
    for (n, t) in &r.inputs {
        outln!("  {n}: {} {}", specs(&t.specs), shape(&t.shape))?;
    }
    if !r.variables.is_empty() {
        outln!("variables:")?;
        for (n, t) in &r.variables {
            outln!("  {n}: {} {}", specs(&t.specs), shape(&t.shape))?;
        }
    }
    let full = r.ops.len() <= FULL_TABLE_OPS;
    outln!(
        "ops ({}{}):",
        r.ops.len(),
        if full { "" } else { ", those with collectives" }
    )?;
    for o in &r.ops {
        if full || !o.collectives.is_empty() {
            print_op(o)?;
        }
    }
    outln!("outputs:")?;
    for (n, t) in &r.outputs {
        outln!("  {n}: {} {}", specs(&t.specs), shape(&t.shape))?;
    }
    for a in &r.assumed {
        outln!("assumed: {} ({}): {}", a.name, a.op, a.assumed)?;
    }
    for n in &r.notes {
        outln!("note: {n}")?;
    }
    outln!("totals:")?;
    for (kind, t) in &r.totals.per_kind {
        outln!("  {kind}: {} calls, {} bytes per device", t.count, t.bytes)?;
    }
    outln!(
        "  per step: {} communicating collectives, {} bytes per device{}",
        r.totals.collectives,
        r.totals.bytes_per_step,
        if r.totals.unknown_bytes > 0 {
            format!(
                " (+{} of unknown size: pin dynamic dims with --shape)",
                r.totals.unknown_bytes
            )
        } else {
            String::new()
        }
    )?;
    Ok(())
}
