//! `unbound tags DIR [--json]`: list a SavedModel's MetaGraphDef tag-sets; with OUT and
//! `--duplicate`/`--retag`/`--remove`, write a copy with the tag-sets changed.

use std::path::PathBuf;

use unbound_savedmodel::split::DEFAULT_MAX_SIZE;
use unbound_tpu::tags::{edit_tags, list_tag_sets, parse_tag_set, TagEdit};

use super::compression::CompressionArg;
use super::CmdResult;

/// Arguments of `unbound tags`.
#[derive(clap::Args)]
pub struct Args {
    /// The SavedModel directory.
    dir: PathBuf,
    /// Where to write the changed copy (needed with --duplicate, --retag or --remove).
    out: Option<PathBuf>,
    /// FROM=TO: add a copy of the MetaGraphDef tagged FROM, tagged TO (sharing the variables),
    /// e.g. `serve=serve,tpu`. Repeatable.
    #[arg(long, value_name = "FROM=TO")]
    duplicate: Vec<String>,
    /// FROM=TO: retag the MetaGraphDef tagged FROM as TO. Repeatable.
    #[arg(long, value_name = "FROM=TO")]
    retag: Vec<String>,
    /// Remove the MetaGraphDef tagged TAGS (comma-separated). Repeatable.
    #[arg(long, value_name = "TAGS")]
    remove: Vec<String>,
    /// Print JSON: {"tag_sets": [[...], ...]}.
    #[arg(long)]
    json: bool,
    /// Split the written model when it reaches this many bytes (TensorFlow's default: 1 GiB).
    /// Every MetaGraphDef's graph is split, not only the first one's as in TensorFlow.
    #[arg(long, default_value_t = DEFAULT_MAX_SIZE, value_parser = clap::value_parser!(u64).range(1..))]
    max_size: u64,
    /// Record compression, when the model is split.
    #[arg(long, value_enum, default_value_t = CompressionArg::Zstd)]
    compression: CompressionArg,
}

/// Runs the command. Edits apply in this order: duplicates, retags, removals.
pub fn run(args: Args) -> CmdResult {
    let mut edits = Vec::new();
    for text in &args.duplicate {
        let (from, to) = pair("--duplicate", text)?;
        edits.push(TagEdit::Duplicate { from, to });
    }
    for text in &args.retag {
        let (from, to) = pair("--retag", text)?;
        edits.push(TagEdit::Replace { from, to });
    }
    for text in &args.remove {
        edits.push(TagEdit::Remove {
            tags: parse_tag_set(text).map_err(|e| format!("--remove: {e}"))?,
        });
    }
    let tag_sets = if edits.is_empty() {
        if args.out.is_some() {
            return Err(
                "OUT given without --duplicate, --retag or --remove: nothing to change".into(),
            );
        }
        list_tag_sets(&args.dir)?
    } else {
        let Some(out) = &args.out else {
            return Err("--duplicate, --retag and --remove write a copy: name OUT".into());
        };
        let report = edit_tags(
            &args.dir,
            out,
            &edits,
            args.max_size,
            args.compression.writer_options(),
        )?;
        if !args.json {
            outln!("wrote {}", report.written.display()).map_err(|e| e.after_writing(out))?;
        }
        report.tag_sets
    };
    if args.json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({ "tag_sets": tag_sets }))?
        )?;
    } else {
        for tags in &tag_sets {
            outln!("{}", tags.join(", "))?;
        }
    }
    Ok(())
}

/// `FROM=TO`, given to `option`, as two tag-sets; errors name the option.
fn pair(option: &str, text: &str) -> Result<(Vec<String>, Vec<String>), String> {
    let (from, to) = text
        .split_once('=')
        .ok_or_else(|| format!("{option} {text:?}: not FROM=TO (e.g. serve=serve,tpu)"))?;
    let parse = |set: &str| parse_tag_set(set).map_err(|e| format!("{option} {text:?}: {e}"));
    Ok((parse(from)?, parse(to)?))
}
