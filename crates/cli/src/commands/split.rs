//! `unbound split DIR OUT`.

use std::path::PathBuf;

use unbound_savedmodel::write::{self, WriteOptions};
use unbound_savedmodel::{dir, split::DEFAULT_MAX_SIZE};

use super::compression::CompressionArg;
use super::CmdResult;
use crate::progress::bytes_bar;

/// Arguments of `unbound split`.
#[derive(clap::Args)]
pub struct Args {
    /// The SavedModel directory to read (saved_model.cpb, .pb or .pbtxt).
    dir: PathBuf,
    /// The directory to create.
    out: PathBuf,
    /// Maximum chunk size in bytes (TensorFlow's default: 1 GiB).
    #[arg(long, default_value_t = DEFAULT_MAX_SIZE, value_parser = clap::value_parser!(u64).range(1..))]
    max_size: u64,
    /// Record compression.
    #[arg(long, value_enum, default_value_t = CompressionArg::Zstd)]
    compression: CompressionArg,
}

/// Runs the command.
pub fn run(args: Args) -> CmdResult {
    super::note_model_choice(&args.dir);
    let model_path = dir::model_file(&args.dir)?.path;
    let total = std::fs::metadata(&model_path).map(|m| m.len()).unwrap_or(0);
    let bar = bytes_bar(total, "split");
    let report = write::split_dir(
        &args.dir,
        &args.out,
        &WriteOptions::default()
            .with_max_size(args.max_size)
            .with_writer(args.compression.writer_options()),
        &|n| bar.inc(n),
    )
    .map_err(|e| super::with_model_only_hint(e, super::DirCopy::Split, &args.dir))?;
    bar.finish_and_clear();
    for w in &report.warnings {
        errln!("unbound: warning: {w}");
    }
    let w = &report.written;
    let printed = if w.chunked {
        outln!(
            "wrote {} ({} chunks, {} bytes of model data) and {} other files",
            w.path.display(),
            w.chunks,
            report.model_bytes,
            report.copied_files
        )
    } else {
        outln!(
            "wrote {} ({} bytes; nothing needed splitting) and {} other files",
            w.path.display(),
            w.data_bytes,
            report.copied_files
        )
    };
    printed.map_err(|e| e.after_writing(&args.out))?;
    if w.chunked {
        errln!(
            "unbound: note: stock TensorFlow loaders (C++ LoadSavedModel and TF Serving, \
             tf.saved_model.load, the TF1 loader, saved_model_cli) read only saved_model.pb: \
             see the README's \"Which loaders read which format\" (unbound externalize makes \
             one of a model whose size is constants)"
        );
    }
    Ok(())
}
