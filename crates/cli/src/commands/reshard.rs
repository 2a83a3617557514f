//! `unbound reshard SRC DST --mesh MESH [--layout KEY_OR_REGEX=SPECS ...] [--default SPECS]
//! [--jobs N] [--json] [--dry-run] [--to tf|safetensors] [--from tf|safetensors]`: a
//! checkpoint rewritten for other layouts on another mesh, streamed; or one safetensors file
//! per device, and back.

use std::path::PathBuf;

use unbound_bundle::Variables;
use unbound_reshard::{parse_mesh, parse_specs, plan, run, LayoutRule, Plan, ReshardOptions};

use super::CmdResult;
use crate::progress::bytes_bar;

/// Arguments of `unbound reshard`.
#[derive(clap::Args)]
#[command(after_long_help = HELP)]
pub struct Args {
    /// The source checkpoint prefix (reads SRC.index and SRC.data-*): a DTensor checkpoint
    /// or a plain one.
    src: PathBuf,
    /// The output prefix (writes DST.index and DST.data-*; DST.index must not exist); with
    /// `--to safetensors`, a new directory (must not exist).
    dst: PathBuf,
    /// Output format: `tf` (a checkpoint) or `safetensors` (DST is a directory of one
    /// device_NNNN.safetensors file per device of the mesh, in mesh position order, each
    /// holding that device's local shard of every variable; the mesh and layouts are in each
    /// header's metadata).
    #[arg(long, value_enum, default_value_t = Format::Tf)]
    to: Format,
    /// Input format: `tf` (a checkpoint prefix) or `safetensors` (SRC is a directory of
    /// .safetensors files: as written by `--to safetensors`, or plain ones, e.g. from
    /// PyTorch or JAX, whose tensors are taken whole and replicated).
    #[arg(long, value_enum, default_value_t = Format::Tf)]
    from: Format,
    /// The target mesh: TensorFlow's mesh string (|x=4,y=2|0,...|...|...), or its short form
    /// |x=4,y=2|*CPU, or only the dimensions x=4,y=2.
    #[arg(long)]
    mesh: String,
    /// KEY_OR_REGEX=SPECS: variables whose checkpoint key or object path is KEY_OR_REGEX, or
    /// matches it whole as a regular expression, take the layout SPECS on the mesh (a comma
    /// list, e.g. y,unsharded). First match wins; a rule matching nothing is an error.
    #[arg(long = "layout", value_name = "KEY_OR_REGEX=SPECS")]
    layouts: Vec<String>,
    /// SPECS for every variable no --layout matches whose rank is the number of specs; or
    /// `replicated`: every variable no --layout matches, whatever its rank, replicated on the
    /// mesh.
    #[arg(long, value_name = "SPECS|replicated")]
    default: Option<String>,
    /// Worker threads (each writes whole data shards).
    #[arg(long, default_value_t = 2)]
    jobs: usize,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    /// Print the plan (each variable's layouts, each target shard's entries and bytes) and
    /// write nothing.
    #[arg(long)]
    dry_run: bool,
}

const HELP: &str = "\
Every variable of SRC is placed: one matched by --layout takes that layout; otherwise one of the
rank of --default takes it (--default replicated: every such variable, of any rank, is
replicated); otherwise a sliced variable keeps its grid (each axis cut in n pieces goes to the
first free mesh dimension of size n) and a whole one stays whole outside the mesh. Sliced
variables whose grid the mesh cannot hold are all named in one error, with the rule to add. The output is numbered as TensorFlow's tf.train.Checkpoint.save numbers a DTensor
checkpoint: data shard 0 holds the tensors outside the mesh (object graph, save_counter,
variables kept whole), shard 1+i the unique slices the device at mesh position i is the lowest
holder of (a replicated variable whole in shard 1). A `checkpoint` state file beside SRC is
written beside DST too. Each target slice is streamed from the source slices intersecting it
in blocks of 8 MiB; the source checksums are all checked before the output is renamed into
place.

Exit codes: 0 success, 1 failure (bad input, a layout that does not fit, I/O), 2 usage error.";

/// A checkpoint format `reshard` reads or writes.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Format {
    /// A TensorFlow checkpoint (bundle).
    Tf,
    /// safetensors files.
    Safetensors,
}

/// Runs the command.
pub fn run_cmd(args: Args) -> CmdResult {
    let options = ReshardOptions {
        mesh: parse_mesh(&args.mesh)?,
        rules: args
            .layouts
            .iter()
            .map(|r| LayoutRule::parse(r))
            .collect::<Result<_, _>>()?,
        default: args.default.as_deref().map(parse_specs),
        jobs: args.jobs.max(1),
    };
    // safetensors input is first written as a checkpoint in a temporary directory beside
    // DST (removed when done), then resharded as any checkpoint.
    let staged = match args.from {
        Format::Safetensors => Some(unbound_reshard::stage_safetensors(&args.src, &args.dst)?),
        Format::Tf => None,
    };
    let src_prefix = staged
        .as_ref()
        .map_or_else(|| args.src.clone(), |s| s.prefix());
    let src = Variables::open(&src_prefix)?;
    for w in &src.warnings {
        errln!("unbound: warning: {w}");
    }
    let plan = plan(&src, &options)?;
    if args.dry_run {
        if args.json {
            // The plan, with the total reads and the read amplification beside it.
            let mut json = serde_json::to_value(&plan)?;
            if let Some(o) = json.as_object_mut() {
                o.insert("bytes".into(), plan.bytes().into());
                o.insert("read".into(), plan.read().into());
                o.insert(
                    "read_amplification".into(),
                    plan.read_amplification().into(),
                );
            }
            outln!("{}", serde_json::to_string_pretty(&json)?)?;
        } else {
            out!("{}", plan_text(&plan))?;
        }
        return Ok(());
    }
    if args.to == Format::Safetensors {
        let bar = bytes_bar(plan.bytes(), "reshard");
        let report =
            unbound_reshard::run_safetensors(&src, &plan, &args.dst, options.jobs, &|n| {
                bar.inc(n)
            })?;
        bar.finish_and_clear();
        let printed = if args.json {
            outln!("{}", serde_json::to_string_pretty(&report)?)
        } else {
            outln!(
                "wrote {}: {} safetensors files (one per device of mesh {}), {} tensors each, {} bytes",
                report.dst,
                report.files,
                plan.mesh,
                report.tensors,
                report.bytes
            )
        };
        printed.map_err(|e| e.after_writing(&args.dst))?;
        return Ok(());
    }
    let bar = bytes_bar(plan.bytes(), "reshard");
    #[cfg(feature = "mpi")]
    let report = {
        // Under mpirun the ranks split the target shards; only rank 0 reports.
        let world = unbound_reshard::MpiWorld::init().ok_or("MPI was initialized twice")?;
        if world.size() > 1 {
            if world.rank() != 0 {
                bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
            }
            match unbound_reshard::run_mpi(&world, &src, &plan, &args.dst, &options, &|n| {
                bar.inc(n)
            })? {
                Some(report) => report,
                None => return Ok(()),
            }
        } else {
            run(&src, &plan, &args.dst, &options, &|n| bar.inc(n))?
        }
    };
    #[cfg(not(feature = "mpi"))]
    let report = run(&src, &plan, &args.dst, &options, &|n| bar.inc(n))?;
    bar.finish_and_clear();
    let printed = if args.json {
        outln!("{}", serde_json::to_string_pretty(&report)?)
    } else {
        let dims: Vec<String> = options
            .mesh
            .dims()
            .iter()
            .map(|d| format!("{}={}", d.name, d.size))
            .collect();
        outln!(
            "wrote {}: {} variables ({} on mesh {}), {} data shards, {} bytes in {:.2} s ({:.2} GB/s)",
            report.dst,
            report.variables,
            report.resharded,
            dims.join(","),
            report.num_shards,
            report.bytes,
            report.seconds,
            report.gb_per_s
        )
    };
    printed.map_err(|e| e.after_writing(&args.dst))?;
    Ok(())
}

/// The plan as text: one line per variable, then one per shard.
fn plan_text(plan: &Plan) -> String {
    let mut out = format!(
        "plan: {} variables onto mesh {}, {} data shards, {} bytes; reads {} source bytes ({} to check checksums), read amplification {:.2}\n",
        plan.variables.len(),
        plan.mesh,
        plan.num_shards,
        plan.bytes(),
        plan.read(),
        plan.checksum_read,
        plan.read_amplification()
    );
    for v in &plan.variables {
        let to =
            v.to.as_ref()
                .map_or_else(|| "whole".to_string(), |s| s.join(","));
        out += &format!(
            "  {} {} {:?}: {} -> {}\n",
            v.key, v.dtype, v.shape, v.from, to
        );
    }
    for s in &plan.shards {
        out += &format!(
            "  shard {}: {} entries, {} bytes, reads {} bytes (amplification {:.2})\n",
            s.shard,
            s.items.len(),
            s.bytes,
            s.read,
            unbound_reshard::ratio(s.read, s.bytes)
        );
    }
    out
}
