//! `unbound fingerprint DIR [--json]`: the FingerprintDef TensorFlow computes for a SavedModel
//! (`.pb` or `.cpb`), with a fresh random uuid.

use std::path::PathBuf;

use unbound_savedmodel::fingerprint::{fingerprint_report, FingerprintReport};

use super::CmdResult;

/// Arguments of `unbound fingerprint`.
#[derive(clap::Args)]
pub struct Args {
    /// The SavedModel directory (saved_model.cpb or saved_model.pb).
    dir: PathBuf,
    /// Print JSON (the FingerprintDef fields under their proto names) instead of text.
    #[arg(long)]
    json: bool,
}

/// Runs the command.
pub fn run(args: Args) -> CmdResult {
    super::note_model_choice(&args.dir);
    super::warn_unreadable_index(
        &args.dir,
        "checkpoint_hash is 0 (TensorFlow also gives 0, warning \"Failed to read checkpoint file\")",
    );
    let report = fingerprint_report(&args.dir)?;
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&report.fingerprint)?)?;
    } else {
        out!("{}", to_text(&report))?;
    }
    Ok(())
}

/// `key: value` lines, plus the model file and TensorFlow's `singleprint`.
fn to_text(report: &FingerprintReport) -> String {
    let f = &report.fingerprint;
    format!(
        "model: {}\n\
         saved_model_checksum: {}\n\
         graph_def_program_hash: {}\n\
         signature_def_hash: {}\n\
         saved_object_graph_hash: {}\n\
         checkpoint_hash: {}\n\
         version: producer {}\n\
         uuid: {}\n\
         singleprint: {}\n",
        report.model_file.display(),
        f.saved_model_checksum,
        f.graph_def_program_hash,
        f.signature_def_hash,
        f.saved_object_graph_hash,
        f.checkpoint_hash,
        f.version.producer,
        f.uuid,
        f.singleprint(),
    )
}
