//! `unbound externalize DIR OUT [--min-size BYTES] [--dry-run] [--json]`: large constants
//! moved into variables, so the model is a small `saved_model.pb` every loader reads; with
//! `--inline`, the reverse: the variables the signatures only read become constants.

use std::path::PathBuf;

use unbound_externalize::{
    externalize, inline, ExternalizeOptions, ExternalizeReport, InlineReport, DEFAULT_MIN_SIZE,
};

use super::CmdResult;

/// Arguments of `unbound externalize`.
#[derive(clap::Args)]
pub struct Args {
    /// The SavedModel directory to read (saved_model.cpb, .pb or .pbtxt; TF1 or TF2).
    dir: PathBuf,
    /// The directory to create (not created with --dry-run).
    out: PathBuf,
    /// Move constants whose value is at least this many bytes (or with a K, M, G suffix).
    #[arg(long, value_name = "BYTES", value_parser = size, conflicts_with = "inline")]
    min_size: Option<u64>,
    /// The reverse: the variables the signatures only read become constants (written as
    /// saved_model.cpb when the model passes 2 GiB).
    #[arg(long)]
    inline: bool,
    /// List what would move (node, function, dtype, shape, bytes) and the resulting
    /// saved_model.pb size; write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

/// Parses a size ([`unbound_records::parse_size`]).
fn size(text: &str) -> Result<u64, String> {
    unbound_records::parse_size(text)
        .ok_or_else(|| format!("`{text}` is not a size (bytes, or a number with K, M, G or T)"))
}

/// Runs the command.
pub fn run(args: Args) -> CmdResult {
    super::note_model_choice(&args.dir);
    if args.inline {
        return run_inline(&args);
    }
    let options = ExternalizeOptions {
        min_size: args.min_size.unwrap_or(DEFAULT_MIN_SIZE),
        dry_run: args.dry_run,
    };
    let report = externalize(&args.dir, &args.out, &options)?;
    let after = |e: crate::output::StdoutError| {
        if report.written {
            e.after_writing(&args.out)
        } else {
            e
        }
    };
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&report)?).map_err(after)?;
        return Ok(());
    }
    render(&report, &args).map_err(after)?;
    Ok(())
}

/// `--inline`.
fn run_inline(args: &Args) -> CmdResult {
    let report = inline(&args.dir, &args.out, args.dry_run)?;
    let after = |e: crate::output::StdoutError| {
        if report.written {
            e.after_writing(&args.out)
        } else {
            e
        }
    };
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&report)?).map_err(after)?;
        return Ok(());
    }
    render_inline(&report, args).map_err(after)?;
    Ok(())
}

/// The text report of `--inline`.
fn render_inline(report: &InlineReport, args: &Args) -> Result<(), crate::output::StdoutError> {
    for v in &report.inlined {
        let shape: Vec<String> = v.shape.iter().map(i64::to_string).collect();
        outln!(
            "{} {} {}[{}] {} bytes ({} reads)",
            if report.written {
                "inlined"
            } else {
                "would inline"
            },
            v.variable,
            v.dtype,
            shape.join(","),
            v.bytes,
            v.reads
        )?;
    }
    for k in &report.kept {
        outln!("kept {}: {}", k.variable, k.reason)?;
    }
    outln!(
        "{} {}: {} {} bytes (was {})",
        if report.written {
            "wrote"
        } else {
            "would write"
        },
        args.out.display(),
        if report.chunked {
            "saved_model.cpb,"
        } else {
            "saved_model.pb"
        },
        report.model_bytes_after,
        report.model_bytes_before
    )?;
    Ok(())
}

/// The text report.
fn render(report: &ExternalizeReport, args: &Args) -> Result<(), crate::output::StdoutError> {
    for m in &report.moved {
        let shape: Vec<String> = m.shape.iter().map(i64::to_string).collect();
        outln!(
            "{} {}{} {}[{}] {} bytes -> {}",
            if report.written {
                "moved"
            } else {
                "would move"
            },
            m.function
                .as_ref()
                .map(|f| format!("{f}/"))
                .unwrap_or_default(),
            m.node,
            m.dtype,
            shape.join(","),
            m.bytes,
            m.variable
        )?;
    }
    for k in &report.kept {
        outln!(
            "kept {}{} ({} bytes): {}",
            k.function
                .as_ref()
                .map(|f| format!("{f}/"))
                .unwrap_or_default(),
            k.node,
            k.bytes,
            k.reason
        )?;
    }
    let verb = if report.written {
        "wrote"
    } else {
        "would write"
    };
    outln!(
        "{verb} {}: saved_model.pb {} bytes (was {}), {} constants ({} bytes) in variables/",
        args.out.display(),
        report.model_bytes_after,
        report.model_bytes_before,
        report.moved.len(),
        report.moved_bytes
    )?;
    Ok(())
}
