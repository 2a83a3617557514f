//! `unbound verify DIR`: checks the whole SavedModel directory; prints every problem found, one
//! per line (`FILE: FAULT`), and exits with 1 if there is any, else prints a summary line.

use std::path::PathBuf;

use unbound_savedmodel::verify::verify_dir;

use super::CmdResult;

/// Arguments of `unbound verify`.
#[derive(clap::Args)]
pub struct Args {
    /// The SavedModel directory.
    dir: PathBuf,
}

/// Runs the command.
pub fn run(args: Args) -> CmdResult {
    super::note_model_choice(&args.dir);
    let report = verify_dir(&args.dir);
    for fault in &report.faults {
        outln!("{fault}")?;
    }
    match report.faults.len() {
        0 => {
            outln!("OK: {}: {}", args.dir.display(), report.checked.join("; "))?;
            Ok(())
        }
        n => Err(format!(
            "{}: {n} problem{} found",
            args.dir.display(),
            if n == 1 { "" } else { "s" }
        )
        .into()),
    }
}
