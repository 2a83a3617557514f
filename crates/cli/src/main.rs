//! The `unbound` command: parse arguments, call a library, print. Exit codes: 0 success,
//! 1 the operation failed (bad input, I/O, standard output not writable), 2 usage error. A
//! closed standard output pipe is not a failure (see [`output`]).

#![forbid(unsafe_code)]

#[macro_use]
mod output;
mod allocator;
mod commands;
mod progress;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// unbound: TensorFlow model artifacts of any size, without TensorFlow.
#[derive(Parser)]
#[command(name = "unbound", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Memory budget for decoded model data held at once, in bytes or with a K, M, G or T
    /// suffix (default: the UNBOUND_MEMORY_LIMIT environment variable, else half the memory
    /// available). Commands that must hold a model refuse, saying so, past it.
    #[arg(long, global = true, value_name = "BYTES", value_parser = memory_limit)]
    memory_limit: Option<u64>,
}

/// Parses `--memory-limit` ([`unbound_records::parse_size`]).
fn memory_limit(text: &str) -> Result<u64, String> {
    unbound_records::parse_size(text)
        .ok_or_else(|| format!("`{text}` is not a size (bytes, or a number with K, M, G or T)"))
}

#[derive(Subcommand)]
enum Command {
    /// Write DIR's SavedModel to OUT in the chunked image format (saved_model.cpb), or as
    /// saved_model.pb when nothing needs splitting; every other file is carried over.
    Split(commands::split::Args),
    /// Write DIR's chunked SavedModel to OUT as one saved_model.pb.
    Merge(commands::merge::Args),
    /// Split or merge a single message of any type in the descriptor pool.
    #[command(subcommand)]
    Proto(commands::proto::ProtoCommand),
    /// Show the chunk metadata tree, chunk types, sizes and positions of a .cpb file.
    Inspect(commands::inspect::Args),
    /// Print the FingerprintDef TensorFlow computes for a SavedModel (.pb or .cpb).
    Fingerprint(commands::fingerprint::Args),
    /// List the variables (checkpoint key, object path, dtype, shape, bytes); write one as .npy.
    Vars(commands::vars::Args),
    /// Show what a SavedModel holds: tag-sets, signatures, ops, functions, variables, sizes.
    Show(commands::show::Args),
    /// Check a SavedModel directory: record hashes, chunk metadata, merge, variables CRCs.
    Verify(commands::verify::Args),
    /// Apply graph-optimizer plugins (TensorFlow's pluggable Grappler C API) to a SavedModel.
    Optimize(commands::optimize::Args),
    /// DTensor meshes and layouts: show, convert from XLA OpSharding, unpack, pack, relayout.
    #[command(subcommand)]
    Layout(commands::layout::LayoutCommand),
    /// DTensor's layout propagation offline: the layout of every op of a signature on a mesh,
    /// the collectives it costs and their bytes per device.
    Plan(commands::plan::Args),
    /// Rewrite a (DTensor or plain) checkpoint for other layouts on another mesh, streamed.
    Reshard(commands::reshard::Args),
    /// Whole tensors between a TensorFlow checkpoint and Hugging Face's sharded safetensors.
    Convert(commands::convert::Args),
    /// Find denylisted ops (default ReadFile, WriteFile, PrintV2) in a SavedModel's graphs and
    /// functions, as saved_model_cli scan; exit code 1 when any is found.
    Scan(commands::scan::Args),
    /// List MetaGraphDef tag-sets; with OUT, duplicate, retag or remove them.
    Tags(commands::tags::Args),
    /// Rewrite chosen functions for TPU inference into a {serve, tpu} MetaGraphDef
    /// (TPUPartitionedCall, replication, batching); --to-cpu reverses it.
    ExportTpu(commands::export_tpu::Args),
    /// Move large constants into variables: a model too big for one protobuf becomes a small
    /// saved_model.pb that every TensorFlow loader (C++, TF Serving, Python) reads.
    Externalize(commands::externalize::Args),
}

fn main() -> ExitCode {
    // `--isolate` runs plugins in copies of this executable started with this argument.
    if std::env::args().nth(1).as_deref() == Some(unbound_grappler::isolate::WORKER_ARG) {
        let code = unbound_grappler::isolate::worker_main();
        return ExitCode::from(u8::try_from(code).unwrap_or(1));
    }
    let cli = Cli::parse();
    if let Some(bytes) = cli.memory_limit {
        unbound_records::set_default_budget(bytes);
    }
    if matches!(cli.command, Command::Optimize(_)) {
        allocator::restart_with_larger_thread_cache();
    }
    // On Ctrl-C or SIGTERM, remove the temporary output being written before exiting, so an
    // interrupted run leaves nothing behind (a kill -9 leaves only a hidden temporary name).
    let _ = ctrlc::set_handler(|| {
        unbound_io::remove_temporaries();
        errln!("unbound: interrupted; partial output removed");
        std::process::exit(130);
    });
    let result = match cli.command {
        Command::Split(args) => commands::split::run(args),
        Command::Merge(args) => commands::merge::run(args),
        Command::Proto(cmd) => commands::proto::run(cmd),
        Command::Inspect(args) => commands::inspect::run(args),
        Command::Fingerprint(args) => commands::fingerprint::run(args),
        Command::Vars(args) => commands::vars::run(args),
        Command::Show(args) => commands::show::run(args),
        Command::Verify(args) => commands::verify::run(args),
        Command::Optimize(args) => commands::optimize::run(args),
        Command::Layout(cmd) => commands::layout::run(cmd),
        Command::Plan(args) => commands::plan::run(args),
        Command::Reshard(args) => commands::reshard::run_cmd(args),
        Command::Convert(args) => commands::convert::run(args),
        Command::Scan(args) => commands::scan::run(args),
        Command::Tags(args) => commands::tags::run(args),
        Command::ExportTpu(args) => commands::export_tpu::run(args),
        Command::Externalize(args) => commands::externalize::run(args),
    };
    let stale = unbound_io::take_removed_stale();
    if !stale.is_empty() {
        let names: Vec<String> = stale.iter().map(|p| p.display().to_string()).collect();
        errln!(
            "unbound: note: removed {} temporar{} left by killed unbound runs: {}",
            stale.len(),
            if stale.len() == 1 { "y" } else { "ies" },
            names.join(", ")
        );
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            errln!("unbound: error: {e}");
            ExitCode::from(1)
        }
    }
}
