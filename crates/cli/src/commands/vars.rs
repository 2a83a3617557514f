//! `unbound vars DIR [KEY] [--box SHAPE_AND_SLICE] [--npy OUT.npy] [--raw-bits] [--json]`:
//! the variables of a SavedModel (or any TensorFlow checkpoint, DTensor ones included), and
//! one of them, or any box of it, as a NumPy file.

use std::path::PathBuf;

use unbound_bundle::npy::NpyOptions;
use unbound_bundle::{NpyReport, VarsReport};
use unbound_savedmodel::vars::open_variables;
use unbound_savedmodel::SavedModelError;

use super::CmdResult;

/// Arguments of `unbound vars`.
#[derive(clap::Args)]
#[command(after_long_help = NPY_HELP)]
pub struct Args {
    /// A SavedModel directory (its variables/variables bundle is read), or a checkpoint
    /// prefix PREFIX (reads PREFIX.index and PREFIX.data-*).
    dir: PathBuf,
    /// A checkpoint key (e.g. w/.ATTRIBUTES/VARIABLE_VALUE) or object path (e.g. w): show
    /// only this variable, or write it with --npy.
    key: Option<String>,
    /// Write KEY's value to this NumPy .npy file (atomically; see below for the formats).
    #[arg(long, value_name = "OUT.npy", requires = "key")]
    npy: Option<PathBuf>,
    /// With --npy: write only this box of KEY, in TensorFlow's shape_and_slice text (the
    /// full shape, then per dimension start,length or - separated by ':'), e.g.
    /// "8 16 2,4:3,10". Assembled from whatever slices hold it; a box they do not cover is
    /// an error.
    #[arg(long = "box", value_name = "SHAPE_AND_SLICE", requires = "npy")]
    region: Option<String>,
    /// With --npy: write bfloat16 as its uint16 bits (<u2) instead of float32, and float8,
    /// float4 and int4/int2 types as their stored bytes (|u1) instead of refusing them.
    #[arg(long, requires = "npy")]
    raw_bits: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

const NPY_HELP: &str = "\
.npy formats: numeric types as their little-endian NumPy dtype (float16 as <f2, complex as
<c8/<c16, bool as |b1, quantized types as their storage integers); bfloat16 widened exactly to
float32 (<f4), or its bits as <u2 with --raw-bits; float8/float4/int4/int2 refused, or their
stored bytes as |u1 with --raw-bits; strings as a fixed-width byte-string array |S<n> (n the
longest element; elements padded with zero bytes; refused when an element ends in a zero byte,
which NumPy would drop, or when padding would more than quadruple the size); variant and
resource tensors refused. Partitioned variables (DTensor checkpoints included) are assembled from
their slices; --box writes any part of a variable from the slices that intersect it. Every
value is checked against its stored CRC32C. Listing a partitioned variable shows each slice
with its data shard (SLICE@SHARD) and, when the slices form an even grid as a DTensor layout
writes them, the number of shards per axis (grid 2x4).

Exit codes: 0 success, 1 failure (bad input, unknown key, I/O), 2 usage error.";

/// Runs the command.
pub fn run(args: Args) -> CmdResult {
    super::note_model_choice(&args.dir);
    let Some(vars) = open_variables(&args.dir)? else {
        // A SavedModel without variables.
        if let Some(key) = &args.key {
            return Err(SavedModelError::NoVariables {
                dir: args.dir.clone(),
                key: key.clone(),
            }
            .into());
        }
        if args.json {
            let report = VarsReport::no_variables();
            outln!("{}", serde_json::to_string_pretty(&report)?)?;
        } else {
            outln!("{}: no variables", args.dir.display())?;
        }
        return Ok(());
    };
    for w in &vars.warnings {
        errln!("unbound: warning: {w}");
    }
    if let (Some(key), Some(out)) = (&args.key, &args.npy) {
        let opts = NpyOptions {
            raw_bits: args.raw_bits,
        };
        super::refuse_existing(out)?;
        let report = match &args.region {
            Some(region) => vars.write_box_npy(key, region, out, opts)?,
            None => vars.write_npy(key, out, opts)?,
        };
        if args.json {
            outln!("{}", serde_json::to_string_pretty(&report)?)?;
        } else {
            out!("{}", npy_text(&report)).map_err(|e| e.after_writing(out))?;
        }
        return Ok(());
    }
    let report = vars.report(args.key.as_deref())?;
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&report)?)?;
    } else {
        out!("{}", table_text(&report))?;
    }
    Ok(())
}

/// What `--npy` wrote, as text.
fn npy_text(r: &NpyReport) -> String {
    let mut out = format!(
        "wrote {} ({} bytes): {} as {} {}\n",
        r.npy,
        r.file_bytes,
        r.key,
        r.descr,
        shape_text(Some(&r.shape))
    );
    if let Some(note) = &r.note {
        out += &format!("note: {note}\n");
    }
    out
}

fn plural(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

fn shape_text(shape: Option<&Vec<i64>>) -> String {
    match shape {
        Some(s) => format!(
            "[{}]",
            s.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")
        ),
        None => "(invalid)".into(),
    }
}

/// The listing as a table: a summary line, a header and one row per variable.
fn table_text(report: &VarsReport) -> String {
    let rows = &report.variables;
    let mut out = format!(
        "{}: {} variable{}, {} data shard{}, {} bytes\n",
        report.prefix.as_deref().unwrap_or(""),
        rows.len(),
        plural(rows.len() as u64),
        report.num_shards,
        plural(report.num_shards as u64),
        report.total_bytes()
    );
    let shapes: Vec<String> = rows.iter().map(|r| shape_text(r.shape.as_ref())).collect();
    let w_key = rows.iter().map(|r| r.key.len()).max().unwrap_or(0).max(3);
    let w_dtype = rows.iter().map(|r| r.dtype.len()).max().unwrap_or(0).max(5);
    let w_shape = shapes.iter().map(String::len).max().unwrap_or(0).max(5);
    let w_bytes = rows
        .iter()
        .map(|r| r.bytes.to_string().len())
        .max()
        .unwrap_or(0)
        .max(5);
    out += &format!(
        "{:w_key$}  {:w_dtype$}  {:w_shape$}  {:>w_bytes$}  OBJECT\n",
        "KEY", "DTYPE", "SHAPE", "BYTES"
    );
    for (r, shape) in rows.iter().zip(&shapes) {
        let mut object = r.object_path.clone().map_or_else(String::new, |p| {
            if p.is_empty() {
                "(root)".to_string()
            } else {
                p
            }
        });
        if !r.slices.is_empty() {
            let stored: Vec<String> = r
                .stored_slices
                .iter()
                .map(|s| match s.shard {
                    Some(shard) => format!("{}@{shard}", s.slice),
                    None => format!("{}@missing", s.slice),
                })
                .collect();
            let grid = r.grid.as_ref().map_or_else(String::new, |g| {
                let g: Vec<String> = g.iter().map(i64::to_string).collect();
                format!("; grid {}", g.join("x"))
            });
            object = format!("{object} (partitioned: {}{grid})", stored.join(" "))
                .trim_start()
                .to_string();
        }
        out += &format!(
            "{:w_key$}  {:w_dtype$}  {:w_shape$}  {:>w_bytes$}  {object}\n",
            r.key, r.dtype, shape, r.bytes
        );
    }
    out
}
