//! `unbound export-tpu DIR OUT`: the TPU inference rewrite of chosen functions into a
//! `{serve, tpu}` MetaGraphDef; `--to-cpu` its reverse; `--list-functions` the candidates.

use std::path::PathBuf;

use bytes::Bytes;
use unbound_savedmodel::split::DEFAULT_MAX_SIZE;
use unbound_tpu::export::{
    export_cpu, export_tpu, functions, CpuReport, ExportOptions, ExportReport, GraphChanges,
    WrittenFile,
};
use unbound_tpu::options::{BatchOptions, TpuOptions};
use unbound_tpu::select::FunctionInfo;
use unbound_tpu::tags::parse_tag_set;

use super::compression::CompressionArg;
use super::CmdResult;

/// The largest `--topology` file read: a TopologyProto holds a mesh shape and four
/// coordinates per TPU device, a few hundred kilobytes for the largest pods.
const MAX_TOPOLOGY_BYTES: u64 = 64 << 20;

/// Arguments of `unbound export-tpu`.
#[derive(clap::Args)]
pub struct Args {
    /// The SavedModel directory (saved_model.cpb, .pb or .pbtxt).
    dir: PathBuf,
    /// The directory to create (not needed with --dry-run or --list-functions).
    #[arg(required_unless_present_any = ["dry_run", "list_functions"])]
    out: Option<PathBuf>,
    /// A function to run on TPU: a function_aliases alias, a concrete function name or a
    /// signature name (repeatable). Default: every signature's function.
    #[arg(long = "function", value_name = "NAME")]
    functions: Vec<String>,
    /// The tag-set of the TPU MetaGraphDef.
    #[arg(long, default_value = "serve,tpu", value_name = "TAGS")]
    tags: String,
    /// The MetaGraphDef to rewrite (default: the one tagged serve, or the only one).
    #[arg(long, value_name = "TAGS")]
    source_tags: Option<String>,
    /// Wrap the TPU call in BatchFunction: max_batch_size=N,batch_timeout_micros=N,
    /// allowed_batch_sizes=A,B,..,num_batch_threads=N,max_enqueued_batches=N[,function=NAME]
    /// (repeatable, one per function; without function= it applies to all).
    #[arg(long, value_name = "K=V,...")]
    batch: Vec<String>,
    /// Keep the CPU MetaGraphDef beside the TPU one (the default).
    #[arg(long, conflicts_with = "tpu_only")]
    keep_cpu: bool,
    /// Replace the CPU MetaGraphDef by the TPU one instead of keeping both.
    #[arg(long)]
    tpu_only: bool,
    /// TPUReplicateMetadata.num_cores_per_replica.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(i64).range(1..))]
    num_cores_per_replica: i64,
    /// Write use_spmd_for_xla_partitioning=false (tpu.rewrite writes true, XLA's default).
    #[arg(long)]
    no_spmd: bool,
    /// A serialized TopologyProto for TPUReplicateMetadata.topology.
    #[arg(long, value_name = "FILE")]
    topology: Option<PathBuf>,
    /// TPUReplicateMetadata.device_assignment, comma-separated core ids.
    #[arg(long, value_name = "IDS", value_delimiter = ',')]
    device_assignment: Vec<i64>,
    /// One _tpu_replicate cluster name for all functions (default: one per function).
    #[arg(long)]
    shared_cluster_name: bool,
    /// Reverse: turn a TPU model back into one that runs on CPU (every MetaGraphDef, each
    /// keeping its tag-set). The options that choose or shape the TPU MetaGraphDef (--tags,
    /// --source-tags, --function, --batch, --topology, ...) do not apply and are refused.
    #[arg(long, conflicts_with_all = [
        "functions", "batch", "tpu_only", "keep_cpu", "list_functions", "tags", "source_tags",
        "num_cores_per_replica", "no_spmd", "topology", "device_assignment",
        "shared_cluster_name",
    ])]
    to_cpu: bool,
    /// With --to-cpu: also turn BatchFunction into plain calls.
    #[arg(long, requires = "to_cpu")]
    unbatch: bool,
    /// List the candidate functions with their aliases, signatures and sizes.
    #[arg(long)]
    list_functions: bool,
    /// Print what would change and write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    /// Split the written model when it reaches this many bytes (TensorFlow's default: 1 GiB).
    /// Every MetaGraphDef's graph is split, not only the first one's as in TensorFlow.
    #[arg(long, default_value_t = DEFAULT_MAX_SIZE, value_parser = clap::value_parser!(u64).range(1..))]
    max_size: u64,
    /// Record compression, when the model is split.
    #[arg(long, value_enum, default_value_t = CompressionArg::Zstd)]
    compression: CompressionArg,
}

/// Runs the command.
pub fn run(args: Args) -> CmdResult {
    let out = args.out.clone().unwrap_or_default();
    if args.list_functions {
        let source = source_tags(&args)?;
        let (tags, list) = functions(&args.dir, source.as_deref())?;
        if args.json {
            let json = serde_json::json!({ "tags": tags, "functions": list });
            outln!("{}", serde_json::to_string_pretty(&json)?)?;
        } else {
            out!("{}", functions_text(&tags, &list))?;
        }
        return Ok(());
    }
    if args.to_cpu {
        let report = export_cpu(
            &args.dir,
            &out,
            args.unbatch,
            args.dry_run,
            args.max_size,
            args.compression.writer_options(),
        )?;
        let printed = if args.json {
            outln!("{}", serde_json::to_string_pretty(&report)?)
        } else {
            out!("{}", cpu_text(&report))
        };
        printed.map_err(|e| e.after_writing(&out))?;
        return Ok(());
    }
    let topology = args.topology.as_deref().map(read_topology).transpose()?;
    let options = ExportOptions {
        functions: args.functions.clone(),
        tags: parse_tag_set(&args.tags).map_err(|e| format!("--tags: {e}"))?,
        source_tags: source_tags(&args)?,
        tpu_only: args.tpu_only,
        tpu: TpuOptions {
            num_cores_per_replica: args.num_cores_per_replica,
            use_spmd_for_xla_partitioning: !args.no_spmd,
            shared_cluster_name: args.shared_cluster_name,
            topology,
            device_assignment: args.device_assignment.clone(),
        },
        batch: args
            .batch
            .iter()
            .map(|b| BatchOptions::parse(b))
            .collect::<Result<_, _>>()?,
        dry_run: args.dry_run,
        max_size: args.max_size,
        writer: args.compression.writer_options(),
    };
    let report = export_tpu(&args.dir, &out, &options)?;
    let printed = if args.json {
        outln!("{}", serde_json::to_string_pretty(&report)?)
    } else {
        out!("{}", export_text(&report))
    };
    printed.map_err(|e| e.after_writing(&out))?;
    Ok(())
}

/// The `--topology` file: by the one input rule, a regular file (a FIFO or /dev/zero is
/// refused, not read) of a bounded size, read whole; it must be a protobuf message (its
/// fields are TensorFlow's to read: TopologyProto is not among our schemas).
fn read_topology(path: &std::path::Path) -> Result<Bytes, String> {
    let bytes = Bytes::from(
        unbound_io::read_file(path, MAX_TOPOLOGY_BYTES).map_err(|e| format!("--topology: {e}"))?,
    );
    unbound_wire::WireMessage::parse(&bytes, None).map_err(|e| {
        format!(
            "--topology: {}: not a serialized TopologyProto: {e}",
            path.display()
        )
    })?;
    Ok(bytes)
}

/// `--source-tags`, parsed; an error names the option.
fn source_tags(args: &Args) -> Result<Option<Vec<String>>, String> {
    args.source_tags
        .as_deref()
        .map(parse_tag_set)
        .transpose()
        .map_err(|e| format!("--source-tags: {e}"))
}

fn set(tags: &[String]) -> String {
    format!("{{{}}}", tags.join(","))
}

fn export_text(r: &ExportReport) -> String {
    let mut s = String::new();
    let kept = if r.tpu_only {
        "replacing it".to_string()
    } else {
        format!("keeping {}", set(&r.source_tags))
    };
    s += &format!(
        "MetaGraphDef {} -> {} ({kept})\n",
        set(&r.source_tags),
        set(&r.tags)
    );
    for f in &r.functions {
        s += &format!(
            "function {}: wrapper {}, cluster {}",
            f.function, f.wrapper, f.cluster
        );
        if let Some(h) = &f.host_function {
            s += &format!(", host function {h}");
        }
        if let Some(b) = &f.batch_function {
            s += &format!(", batched by {b}");
        }
        s += "\n";
        for site in &f.call_sites {
            s += &format!("  call site {} -> {} of {}\n", site.at, site.op, site.calls);
        }
    }
    s += &changes_text(&r.changes);
    s += &format!(
        "tag-sets: {}\n",
        r.tag_sets
            .iter()
            .map(|t| set(t))
            .collect::<Vec<_>>()
            .join(", ")
    );
    s += &format!("ops: {}\n", r.ops.join(", "));
    s += &written_text(r.written.as_ref());
    s
}

fn cpu_text(r: &CpuReport) -> String {
    let mut s = String::new();
    for m in &r.meta_graphs {
        s += &format!(
            "MetaGraphDef {}: {} TPUPartitionedCall -> StatefulPartitionedCall, {} BatchFunction \
             unbatched, {} replicated inputs/outputs -> Identity, {} nodes removed\n",
            set(&m.tags),
            m.counts.partitioned_calls,
            m.counts.batch_functions,
            m.counts.replicated,
            m.counts.removed
        );
    }
    s += &written_text(r.written.as_ref());
    s
}

fn changes_text(c: &GraphChanges) -> String {
    format!(
        "graph: {} nodes added, {} changed, {} removed; library: {} functions added, {} changed\n",
        c.nodes_added, c.nodes_changed, c.nodes_removed, c.functions_added, c.functions_changed
    )
}

fn written_text(w: Option<&WrittenFile>) -> String {
    match w {
        None => "dry run: nothing written\n".to_string(),
        Some(w) => format!(
            "wrote {} ({}) and {} other files\n",
            w.path.display(),
            if w.chunked {
                format!("{} chunks", w.chunks)
            } else {
                format!("{} bytes", w.model_bytes)
            },
            w.copied_files
        ),
    }
}

fn functions_text(tags: &[String], list: &[FunctionInfo]) -> String {
    let mut s = format!("functions of MetaGraphDef {}:\n", set(tags));
    for f in list {
        s += &format!(
            "{}  {} bytes, {} nodes, {} call sites",
            f.name, f.bytes, f.nodes, f.call_sites
        );
        if let Some(a) = &f.alias {
            s += &format!(", alias {a}");
        }
        if !f.signatures.is_empty() {
            s += &format!(", signatures {}", f.signatures.join(", "));
        }
        s += "\n";
    }
    s
}
