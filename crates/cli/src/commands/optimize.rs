//! `unbound optimize DIR OUT --plugin PATH...`: apply graph-optimizer plugins to a SavedModel.

use std::path::PathBuf;
use std::time::Duration;

use unbound_grappler::host::{plugins_in_dir, CallResult, HostOptions, PluginSet};
use unbound_grappler::saved_model::optimize_saved_model;
use unbound_savedmodel::split::DEFAULT_MAX_SIZE;

use super::compression::CompressionArg;
use super::CmdResult;

/// Arguments of `unbound optimize`.
#[derive(clap::Args)]
pub struct Args {
    /// The SavedModel directory to read (saved_model.cpb, .pb or .pbtxt).
    dir: PathBuf,
    /// The directory to create.
    out: PathBuf,
    /// A plugin shared library (exports TF_InitGraph); repeat for several, run in this order.
    #[arg(long = "plugin", value_name = "PATH")]
    plugins: Vec<PathBuf>,
    /// Load every *.so in this directory too (after the --plugin ones, in name order).
    #[arg(long, value_name = "DIR")]
    plugin_dir: Vec<PathBuf>,
    /// Run plugins registered for TYPE even where no node is placed on it (repeatable). By
    /// default a plugin runs on a graph only if some NodeDef.device names its device type.
    #[arg(long = "device-type", value_name = "TYPE")]
    device_types: Vec<String>,
    /// Run each plugin in a child process: a crash or hang costs that plugin's result only.
    #[arg(long)]
    isolate: bool,
    /// With --isolate: seconds one plugin call may take before it is killed.
    #[arg(long, default_value_t = 600, value_parser = clap::value_parser!(u64).range(1..))]
    plugin_timeout: u64,
    /// Split the written model when it reaches this many bytes (TensorFlow's default: 1 GiB).
    #[arg(long, default_value_t = DEFAULT_MAX_SIZE, value_parser = clap::value_parser!(u64).range(1..))]
    max_size: u64,
    /// Record compression, when the model is split.
    #[arg(long, value_enum, default_value_t = CompressionArg::Zstd)]
    compression: CompressionArg,
}

/// Runs the command.
pub fn run(args: Args) -> CmdResult {
    super::note_model_choice(&args.dir);
    let mut paths = args.plugins.clone();
    for dir in &args.plugin_dir {
        paths.extend(plugins_in_dir(dir)?);
    }
    if paths.is_empty() {
        return Err("no plugins: name them with --plugin PATH or --plugin-dir DIR".into());
    }
    let options = HostOptions {
        isolate: args.isolate,
        timeout: Duration::from_secs(args.plugin_timeout),
        device_types: args.device_types.clone(),
        worker: None,
    };
    let mut plugins = PluginSet::load(&paths, options)?;
    for (path, device_type) in plugins.plugins() {
        outln!("loaded {} (device type {device_type})", path.display())?;
    }
    let configs = plugins.combined_configs();
    for line in configs.to_string().lines() {
        outln!("built-in optimizer config: {line}")?;
    }
    for conflict in &configs.conflicts {
        errln!("unbound: warning: plugins have conflicting configs: {conflict}");
    }
    for invalid in &configs.invalid {
        errln!("unbound: warning: {invalid}");
    }
    let report = optimize_saved_model(
        &args.dir,
        &args.out,
        &mut plugins,
        args.max_size,
        args.compression.writer_options(),
    )?;
    for (tags, pass) in &report.passes {
        let tags = if tags.is_empty() {
            "(no tags)".to_string()
        } else {
            tags.join(",")
        };
        for skipped in &pass.skipped {
            outln!("[{tags}] skipped {skipped}")?;
        }
        for call in &pass.calls {
            let what = match &call.result {
                CallResult::Changed => "changed",
                CallResult::Unchanged => "unchanged (ABORTED)",
                CallResult::Identical => "returned the graph it was given",
                CallResult::Failed(_) => "failed, kept the previous graph",
            };
            outln!(
                "[{tags}] {} {}: {} -> {} nodes, {:.3} s, {what}",
                call.plugin,
                call.graph,
                call.nodes_before,
                call.nodes_after,
                call.elapsed.as_secs_f64()
            )?;
            if let CallResult::Failed(message) = &call.result {
                errln!(
                    "unbound: warning: plugin {} failed on the {}: {message}; kept the previous graph",
                    call.plugin, call.graph
                );
            }
        }
        for warning in &pass.warnings {
            errln!("unbound: warning: {warning}");
        }
    }
    let calls: usize = report.passes.iter().map(|(_, p)| p.calls.len()).sum();
    let plugin_time: Duration = report.passes.iter().map(|(_, p)| p.plugin_time()).sum();
    outln!(
        "{calls} plugin calls, {:.3} s in the plugins' own code",
        plugin_time.as_secs_f64()
    )?;
    let w = &report.written.written;
    outln!(
        "wrote {} ({}) and {} other files",
        w.path.display(),
        if w.chunked {
            format!("{} chunks", w.chunks)
        } else {
            format!("{} bytes", w.data_bytes)
        },
        report.written.copied_files
    )?;
    Ok(())
}
