//! `unbound fingerprint DIR [--json]`: the FingerprintDef TensorFlow computes for a SavedModel
//! (`.pb` or `.cpb`), with a fresh random uuid.

use std::path::PathBuf;

use serde_json::json;
use unbound_savedmodel::fingerprint::{fingerprint_dir, fingerprinted_file, FingerprintDef};

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
    let file = fingerprinted_file(&args.dir)?;
    let def = fingerprint_dir(&args.dir)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&to_json(&def))?);
    } else {
        print!("{}", to_text(&def, &file.display().to_string()));
    }
    Ok(())
}

/// The FingerprintDef as JSON: proto field names, uint64 values as exact JSON numbers.
pub fn to_json(def: &FingerprintDef) -> serde_json::Value {
    let version = def.version.clone().unwrap_or_default();
    json!({
        "saved_model_checksum": def.saved_model_checksum,
        "graph_def_program_hash": def.graph_def_program_hash,
        "signature_def_hash": def.signature_def_hash,
        "saved_object_graph_hash": def.saved_object_graph_hash,
        "checkpoint_hash": def.checkpoint_hash,
        "version": {
            "producer": version.producer,
            "min_consumer": version.min_consumer,
            "bad_consumers": version.bad_consumers,
        },
        "uuid": def.uuid,
    })
}

/// `key: value` lines, plus the model file and TensorFlow's `singleprint`.
fn to_text(def: &FingerprintDef, file: &str) -> String {
    let producer = def.version.as_ref().map_or(0, |v| v.producer);
    format!(
        "model: {file}\n\
         saved_model_checksum: {}\n\
         graph_def_program_hash: {}\n\
         signature_def_hash: {}\n\
         saved_object_graph_hash: {}\n\
         checkpoint_hash: {}\n\
         version: producer {producer}\n\
         uuid: {}\n\
         singleprint: {}/{}/{}/{}\n",
        def.saved_model_checksum,
        def.graph_def_program_hash,
        def.signature_def_hash,
        def.saved_object_graph_hash,
        def.checkpoint_hash,
        def.uuid,
        def.graph_def_program_hash,
        def.signature_def_hash,
        def.saved_object_graph_hash,
        def.checkpoint_hash,
    )
}
