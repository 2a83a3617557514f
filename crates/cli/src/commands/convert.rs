//! `unbound convert SRC DST [--to safetensors|tf] [--max-shard-size 5GB] [--names paths|keys]
//! [--jobs N] [--dry-run] [--json]`: whole tensors between a TensorFlow checkpoint and
//! Hugging Face's sharded safetensors layout, both ways.

use std::path::PathBuf;

use unbound_convert::{convert, parse_size, ConvertOptions, ConvertReport, Names, Target};

use super::CmdResult;
use crate::progress::bytes_bar;

/// Arguments of `unbound convert`.
#[derive(clap::Args)]
#[command(after_long_help = HELP)]
pub struct Args {
    /// The source: a checkpoint prefix or a SavedModel directory (to safetensors); a
    /// directory of safetensors files (with model.safetensors.index.json or without, PyTorch
    /// DCP's Hugging Face writer output included) or one .safetensors file (to tf).
    src: PathBuf,
    /// The output: a new directory (to safetensors); a checkpoint prefix whose DST.index
    /// does not exist (to tf).
    dst: PathBuf,
    /// The format written; by default the other one than SRC's.
    #[arg(long, value_enum)]
    to: Option<Format>,
    /// Largest safetensors file (bytes of tensor data; 5GB = 5*10^9, 5GiB = 5*2^30); a
    /// tensor larger than that is alone in its file.
    #[arg(long, default_value = "5GB", value_name = "SIZE")]
    max_shard_size: String,
    /// Tensor names in the safetensors files: object paths (dense/kernel) or checkpoint keys.
    #[arg(long, default_value = "paths", value_name = "paths|keys")]
    names: String,
    /// Worker threads (each writes whole files or data shards).
    #[arg(long, default_value_t = 2)]
    jobs: usize,
    /// Print what would be written (every tensor, its name, file and size) and write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

const HELP: &str = "\
To safetensors: every tensor of the checkpoint, whole (partitioned and DTensor variables are
assembled from their slices), in model-0000i-of-0000N.safetensors files filled up to
--max-shard-size in name order (Hugging Face's rule), with model.safetensors.index.json; or one
model.safetensors when one file holds everything. Each file's __metadata__ has \"format\": \"tf\",
unbound.keys (each tensor's checkpoint key) and unbound.object_graph (the checkpoint's object
graph, hex), so converting back restores into objects. Strings and complex numbers are refused,
naming every such key, and nothing is written.

To tf: the tensors of the files (a name in two files is an error, unless the files are PyTorch
DCP's, whose DCP_SHARDING_INFO pieces are assembled into whole tensors) as a checkpoint
tf.train.load_checkpoint reads.

Streamed in blocks of 8 MiB per worker; the checkpoint's checksums are checked going out, and
coming in each data shard is read back against the checksums of the bytes read before the
index is written. A directory output is written under a temporary name and renamed into place.

Exit codes: 0 success, 1 failure (bad input, an unconvertible dtype, I/O), 2 usage error.";

/// A format `convert` writes.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Format {
    /// Hugging Face's layout of safetensors files.
    Safetensors,
    /// A TensorFlow checkpoint.
    Tf,
}

/// Runs the command.
pub fn run(args: Args) -> CmdResult {
    let options = ConvertOptions {
        to: args.to.map(|f| match f {
            Format::Safetensors => Target::Safetensors,
            Format::Tf => Target::Tf,
        }),
        max_shard_size: parse_size(&args.max_shard_size)?,
        names: Names::parse(&args.names)?,
        jobs: args.jobs.max(1),
        dry_run: args.dry_run,
    };
    // The total is known only once the source is read; the bar learns it from a dry run.
    let planned = convert(
        &args.src,
        &args.dst,
        &ConvertOptions {
            dry_run: true,
            ..options.clone()
        },
        &|_| {},
    )?;
    let report = if args.dry_run {
        planned
    } else {
        let bar = bytes_bar(planned.bytes, "convert");
        let report = convert(&args.src, &args.dst, &options, &|n| bar.inc(n))?;
        bar.finish_and_clear();
        report
    };
    let printed = if args.json {
        outln!("{}", serde_json::to_string_pretty(&report)?)
    } else {
        out!("{}", text(&report))
    };
    if !args.dry_run {
        printed.map_err(|e| e.after_writing(&args.dst))?;
    } else {
        printed?;
    }
    Ok(())
}

/// The report as text: a summary line, then with a dry run one line per file and tensor.
fn text(r: &ConvertReport) -> String {
    let to = match r.to {
        Target::Safetensors => "safetensors",
        Target::Tf => "a TensorFlow checkpoint",
    };
    let mut out = format!(
        "{} {} to {to}: {} tensors, {} bytes in {} file{}{}{}\n",
        if r.dry_run {
            "would convert"
        } else {
            "converted"
        },
        r.src,
        r.tensors.len(),
        r.bytes,
        r.files.len(),
        if r.files.len() == 1 { "" } else { "s" },
        if r.object_graph {
            ", object graph carried"
        } else {
            ""
        },
        if r.dry_run {
            String::new()
        } else {
            format!(" ({}, {:.2} s)", r.dst, r.seconds)
        },
    );
    if r.dry_run {
        for f in &r.files {
            out += &format!("  {}: {} tensors, {} bytes\n", f.name, f.tensors, f.bytes);
        }
        for t in &r.tensors {
            out += &format!(
                "  {} ({}) {} {:?} {} bytes{}{}\n",
                t.name,
                t.key,
                t.dtype,
                t.shape,
                t.bytes,
                if t.pieces > 1 {
                    format!(", from {} pieces", t.pieces)
                } else {
                    String::new()
                },
                match r.to {
                    Target::Safetensors => format!(" -> {}", t.file),
                    Target::Tf => format!(" <- {}", t.file),
                }
            );
        }
    }
    out
}
