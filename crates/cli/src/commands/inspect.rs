//! `unbound inspect FILE.cpb [--json]`: what a chunked file holds, without merging it.

use std::path::PathBuf;

use unbound_chunked::inspect::{inspect_as, InspectReport, MessageTree};

use super::CmdResult;

/// Arguments of `unbound inspect`.
#[derive(clap::Args)]
pub struct Args {
    /// The .cpb file.
    file: PathBuf,
    /// The message type of the file, whose schema names the field paths (default:
    /// tensorflow.SavedModel for a file named saved_model.cpb; otherwise paths keep their
    /// field numbers), e.g. tensorflow.GraphDef.
    #[arg(long = "type", value_name = "MESSAGE")]
    message_type: Option<String>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// Runs the command. A file whose chunk data is corrupt gets its report (with the faults, as
/// `FILE: FAULT` lines in text, a `faults` list in JSON) and then exit code 1.
pub fn run(args: Args) -> CmdResult {
    let type_name = args.message_type.clone().or_else(|| {
        (args.file.file_name().and_then(|n| n.to_str()) == Some("saved_model.cpb"))
            .then(|| "tensorflow.SavedModel".to_string())
    });
    let root = match &type_name {
        Some(name) => Some(unbound_savedmodel::dir::message_descriptor(name)?),
        None => None,
    };
    let report = inspect_as(&args.file, root.as_ref())?;
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&report)?)?;
    } else {
        out!("{}", to_text(&report))?;
    }
    match report.faults.len() {
        0 => Ok(()),
        n => Err(format!(
            "{}: corrupt: {n} fault{} in its chunks (listed above)",
            args.file.display(),
            if n == 1 { "" } else { "s" }
        )
        .into()),
    }
}

/// The text form: the file, version, chunk list, message tree and Riegeli chunks.
fn to_text(r: &InspectReport) -> String {
    let mut out = format!("{} ({} bytes)\n", r.file, r.file_size);
    out += &format!(
        "version: splitter {}, join {}\n",
        r.version.splitter_version, r.version.join_version
    );
    out += &format!("chunks: {}\n", r.chunks.len());
    for c in &r.chunks {
        out += &format!(
            "  #{} {:<7} size {}  position {}\n",
            c.index, c.chunk_type, c.size, c.offset
        );
    }
    out += "message tree:\n";
    tree_text(&r.message, 1, &mut out);
    out += &format!("riegeli chunks: {}\n", r.riegeli_chunks.len());
    for c in &r.riegeli_chunks {
        out += &format!(
            "  at {} {} records {} stored {} decoded {} {}\n",
            c.offset,
            c.chunk_type,
            c.records,
            c.data_size,
            c.decoded_size,
            c.compression.as_deref().unwrap_or("")
        );
    }
    if !r.faults.is_empty() {
        out += &format!("faults: {}\n", r.faults.len());
        for f in &r.faults {
            out += &format!("  {}: {f}\n", r.file);
        }
    }
    out
}

fn tree_text(m: &MessageTree, depth: usize, out: &mut String) {
    let pad = "  ".repeat(depth);
    match m.chunk_index {
        Some(i) => *out += &format!("{pad}chunk {i}\n"),
        None => *out += &format!("{pad}(no chunk)\n"),
    }
    for cf in &m.chunked_fields {
        let path = if cf.field_tag.is_empty() {
            "(merged into parent)".to_string()
        } else {
            cf.path.clone()
        };
        *out += &format!("{pad}  {path}:\n");
        tree_text(&cf.message, depth + 2, out);
    }
}
