//! `unbound show DIR [--json]`: what a SavedModel holds, as `saved_model_cli show --all`
//! reports it, plus format, sizes, functions, variables, assets and function aliases.

use std::path::PathBuf;

use unbound_savedmodel::show::{show, text};

use super::CmdResult;

/// Arguments of `unbound show`.
#[derive(clap::Args)]
pub struct Args {
    /// The SavedModel directory.
    dir: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// Runs the command.
pub fn run(args: Args) -> CmdResult {
    super::note_model_choice(&args.dir);
    super::warn_unreadable_index(
        &args.dir,
        "variables are shown without their checkpoint keys",
    );
    let info = show(&args.dir)?;
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&info)?)?;
    } else {
        out!("{}", text::render(&info))?;
    }
    Ok(())
}
