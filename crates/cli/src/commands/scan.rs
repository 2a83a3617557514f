//! `unbound scan DIR [--op-denylist A,B,...] [--tags TAGS] [--json]`: denylisted ops in each
//! MetaGraphDef's graph and functions, as `saved_model_cli scan`; exit code 1 when any is
//! found.

use std::path::PathBuf;

use unbound_savedmodel::scan::{scan, ScanReport, DEFAULT_OP_DENYLIST};
use unbound_savedmodel::SavedModel;

use super::{note_model_choice, CmdResult};

/// Arguments of `unbound scan`.
#[derive(clap::Args)]
#[command(after_long_help = HELP)]
pub struct Args {
    /// The SavedModel directory.
    dir: PathBuf,
    /// The ops to look for, comma-separated (default ReadFile,WriteFile,PrintV2; "" looks for
    /// none).
    #[arg(long, value_name = "A,B,...")]
    op_denylist: Option<String>,
    /// Scan only the MetaGraphDef of exactly this tag set (comma-separated, e.g. serve).
    #[arg(long, value_name = "TAGS")]
    tags: Option<String>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

const HELP: &str = "\
Every node of each MetaGraphDef's graph and of every function of its library is looked at (a
While body or If branch too: saved_model_cli follows only functions named by a node's op or a
PartitionedCall's f). Each denylisted op found is listed with its node, and its function.

Exit codes: 0 no denylisted op found, 1 some found (or the model cannot be read), 2 usage
error.";

/// Runs the command.
pub fn run(args: Args) -> CmdResult {
    note_model_choice(&args.dir);
    let model = SavedModel::open(&args.dir)?;
    let denylist: Vec<String> = match &args.op_denylist {
        Some(text) => text.split(',').map(|s| s.trim().to_string()).collect(),
        None => DEFAULT_OP_DENYLIST.iter().map(|s| s.to_string()).collect(),
    };
    let tags: Option<Vec<String>> = args
        .tags
        .as_deref()
        .map(|t| t.split(',').map(|s| s.trim().to_string()).collect());
    let report = scan(&model, &denylist, tags.as_deref())?;
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&report)?)?;
    } else {
        out!("{}", text(&report))?;
    }
    if report.found {
        let n: usize = report.meta_graphs.iter().map(|m| m.findings.len()).sum();
        return Err(format!(
            "{}: {n} node{} run{} denylisted ops (listed above)",
            args.dir.display(),
            if n == 1 { "" } else { "s" },
            if n == 1 { "s" } else { "" }
        )
        .into());
    }
    Ok(())
}

/// Python's repr of a list of strings, as saved_model_cli prints tag sets.
fn py_list(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| format!("'{s}'")).collect();
    format!("[{}]", quoted.join(", "))
}

/// The text form: saved_model_cli's line per MetaGraphDef, then each finding.
fn text(r: &ScanReport) -> String {
    let mut out = String::new();
    for m in &r.meta_graphs {
        if m.ops.is_empty() {
            out += &format!(
                "MetaGraph with tag set {} does not contain the denylisted ops: {}\n",
                py_list(&m.tags),
                r.denylist.join(", ")
            );
            continue;
        }
        out += &format!(
            "MetaGraph with tag set {} contains the following denylisted ops: {}\n",
            py_list(&m.tags),
            m.ops.join(", ")
        );
        for f in &m.findings {
            match &f.function {
                Some(fun) => out += &format!("  {}: node {} in function {fun}\n", f.op, f.node),
                None => out += &format!("  {}: node {} in the graph\n", f.op, f.node),
            }
        }
    }
    out
}
