//! `unbound merge DIR OUT`.

use std::path::PathBuf;

use unbound_savedmodel::dir;

use super::CmdResult;

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
    let report = dir::merge_dir(&args.dir, &args.out)?;
    println!(
        "wrote {} ({} bytes) and {} other files",
        args.out.join("saved_model.pb").display(),
        report.model_bytes,
        report.copied_files
    );
    Ok(())
}
