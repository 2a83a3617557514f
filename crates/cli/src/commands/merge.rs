//! `unbound merge DIR OUT`.

use std::path::PathBuf;

use unbound_savedmodel::write;

use super::CmdResult;
use crate::progress::bytes_bar;

/// Arguments of `unbound merge`.
#[derive(clap::Args)]
pub struct Args {
    /// The SavedModel directory to read (saved_model.cpb, .pb or .pbtxt).
    dir: PathBuf,
    /// The directory to create.
    out: PathBuf,
}

/// Runs the command.
pub fn run(args: Args) -> CmdResult {
    super::note_model_choice(&args.dir);
    let bar = bytes_bar(0, "merge");
    let report = write::merge_dir(&args.dir, &args.out, &mut |n, total| {
        if bar.length() != Some(total) {
            bar.set_length(total);
            if total >= crate::progress::MIN_BYTES_FOR_BAR {
                bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
            }
        }
        bar.inc(n);
    })
    .map_err(|e| super::with_model_only_hint(e, super::DirCopy::Merge, &args.dir))?;
    bar.finish_and_clear();
    outln!(
        "wrote {} ({} bytes) and {} other files",
        args.out.join("saved_model.pb").display(),
        report.model_bytes,
        report.copied_files
    )
    .map_err(|e| e.after_writing(&args.out))?;
    Ok(())
}
