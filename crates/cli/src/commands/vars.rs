//! `unbound vars DIR [KEY] [--npy OUT.npy] [--raw-bits] [--json]`: the variables of a
//! SavedModel (or any TensorFlow checkpoint), and one of them as a NumPy file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use unbound_bundle::npy::{write_npy, NpyOptions};
use unbound_bundle::{
    display_key, dtype::tf_name, index_path, object_paths, saved_model_prefix, shape_from_proto,
    BundleReader, SliceSpec,
};

use super::CmdResult;

/// Arguments of `unbound vars`.
#[derive(clap::Args)]
#[command(after_long_help = NPY_HELP)]
pub struct Args {
    /// A SavedModel directory (its variables/variables bundle is read), or a checkpoint
    /// prefix PREFIX (reads PREFIX.index and PREFIX.data-*).
    dir: PathBuf,
    /// A checkpoint key (e.g. w/.ATTRIBUTES/VARIABLE_VALUE) or object path (e.g. w): show
    /// only this variable, or write it with --npy.
    key: Option<String>,
    /// Write KEY's value to this NumPy .npy file (atomically; see below for the formats).
    #[arg(long, value_name = "OUT.npy", requires = "key")]
    npy: Option<PathBuf>,
    /// With --npy: write bfloat16 as its uint16 bits (<u2) instead of float32, and float8,
    /// float4 and int4/int2 types as their stored bytes (|u1) instead of refusing them.
    #[arg(long, requires = "npy")]
    raw_bits: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

const NPY_HELP: &str = "\
.npy formats: numeric types as their little-endian NumPy dtype (float16 as <f2, complex as
<c8/<c16, bool as |b1, quantized types as their storage integers); bfloat16 widened exactly to
float32 (<f4), or its bits as <u2 with --raw-bits; float8/float4/int4/int2 refused, or their
stored bytes as |u1 with --raw-bits; strings as a fixed-width byte-string array |S<n> (n the
longest element; elements padded with zero bytes; refused when an element ends in a zero byte,
which NumPy would drop, or when padding would more than quadruple the size); variant and
resource tensors refused. Partitioned variables are assembled from their slices. Every value
is checked against its stored CRC32C.

Exit codes: 0 success, 1 failure (bad input, unknown key, I/O), 2 usage error.";

/// One row of the listing.
struct Row {
    key: String,
    object_path: Option<String>,
    dtype: String,
    shape: Option<Vec<i64>>,
    bytes: u64,
    shard: Option<i32>,
    slices: Vec<String>,
}

/// Runs the command.
pub fn run(args: Args) -> CmdResult {
    let Some(prefix) = bundle_prefix(&args.dir)? else {
        // A SavedModel without variables.
        if let Some(key) = &args.key {
            return Err(format!(
                "{}: the model has no variables (no {key})",
                args.dir.display()
            )
            .into());
        }
        if args.json {
            let out = json!({ "prefix": null, "num_shards": 0, "variables": [] });
            println!("{}", serde_json::to_string_pretty(&out)?);
        } else {
            println!("{}: no variables", args.dir.display());
        }
        return Ok(());
    };
    let reader = BundleReader::open(&prefix)?;
    let paths = match reader.object_graph() {
        Ok(Some(graph)) => object_paths(&graph),
        Ok(None) => BTreeMap::new(),
        Err(e) => {
            eprintln!("unbound: warning: object paths unavailable: {e}");
            BTreeMap::new()
        }
    };
    let key = args.key.as_deref().map(|k| resolve_key(&reader, &paths, k));
    if let (Some(key), Some(out)) = (&key, &args.npy) {
        let opts = NpyOptions {
            raw_bits: args.raw_bits,
        };
        let info = write_npy(&reader, key.as_bytes(), out, opts)?;
        if args.json {
            let out = json!({
                "key": key,
                "npy": out.display().to_string(),
                "descr": info.descr,
                "shape": info.shape,
                "file_bytes": info.file_bytes,
                "note": info.note,
            });
            println!("{}", serde_json::to_string_pretty(&out)?);
        } else {
            println!(
                "wrote {} ({} bytes): {key} as {} {}",
                out.display(),
                info.file_bytes,
                info.descr,
                shape_text(Some(&info.shape))
            );
            if let Some(note) = info.note {
                println!("note: {note}");
            }
        }
        return Ok(());
    }
    let rows: Vec<Row> = match &key {
        Some(k) => {
            reader.entry(k).ok_or_else(|| {
                format!(
                    "{}: no variable {k} in this bundle",
                    index_path(&prefix).display()
                )
            })?;
            vec![row(&reader, &paths, k.as_bytes())]
        }
        None => reader
            .tensor_keys()
            .map(|k| row(&reader, &paths, k))
            .collect(),
    };
    if args.json {
        let vars: Vec<Value> = rows
            .iter()
            .map(|r| {
                json!({
                    "key": r.key,
                    "object_path": r.object_path,
                    "dtype": r.dtype,
                    "shape": r.shape,
                    "bytes": r.bytes,
                    "shard": r.shard,
                    "slices": r.slices,
                })
            })
            .collect();
        let out = json!({
            "prefix": prefix.display().to_string(),
            "num_shards": reader.num_shards(),
            "variables": vars,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        print_table(&reader, &prefix, &rows);
    }
    Ok(())
}

/// The bundle prefix for `dir`: `DIR/variables/variables` for a SavedModel, `DIR` itself
/// for a checkpoint prefix; `None` for a SavedModel without variables.
fn bundle_prefix(dir: &Path) -> Result<Option<PathBuf>, String> {
    let in_model = saved_model_prefix(dir);
    if index_path(&in_model).is_file() {
        return Ok(Some(in_model));
    }
    if index_path(dir).is_file() {
        return Ok(Some(dir.to_path_buf()));
    }
    let is_model = ["saved_model.pb", "saved_model.cpb", "saved_model.pbtxt"]
        .iter()
        .any(|f| dir.join(f).is_file());
    if is_model {
        return Ok(None);
    }
    Err(format!(
        "{}: neither a SavedModel directory nor a checkpoint prefix (no {} or {})",
        dir.display(),
        index_path(&in_model).display(),
        index_path(dir).display()
    ))
}

/// A checkpoint key as given, or the key saved by the object at that path (when exactly one
/// attribute of it is saved).
fn resolve_key(reader: &BundleReader, paths: &BTreeMap<String, String>, given: &str) -> String {
    if reader.entry(given).is_some() {
        return given.to_string();
    }
    let mut matches = paths.iter().filter(|(_, p)| p.as_str() == given);
    match (matches.next(), matches.next()) {
        (Some((key, _)), None) => key.clone(),
        _ => given.to_string(),
    }
}

fn row(reader: &BundleReader, paths: &BTreeMap<String, String>, key: &[u8]) -> Row {
    let entry = reader.entry(key).cloned().unwrap_or_default();
    let name = display_key(key);
    Row {
        object_path: paths.get(&name).cloned(),
        key: name,
        dtype: tf_name(entry.dtype),
        shape: shape_from_proto(entry.shape.as_ref()),
        bytes: reader.stored_bytes(key).unwrap_or(0),
        shard: entry.slices.is_empty().then_some(entry.shard_id),
        slices: entry
            .slices
            .iter()
            .map(|s| SliceSpec::from_proto(s).to_string())
            .collect(),
    }
}

fn plural(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

fn shape_text(shape: Option<&Vec<i64>>) -> String {
    match shape {
        Some(s) => format!(
            "[{}]",
            s.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")
        ),
        None => "(invalid)".into(),
    }
}

fn print_table(reader: &BundleReader, prefix: &Path, rows: &[Row]) {
    let total: u64 = rows.iter().map(|r| r.bytes).sum();
    println!(
        "{}: {} variable{}, {} data shard{}, {total} bytes",
        prefix.display(),
        rows.len(),
        plural(rows.len() as u64),
        reader.num_shards(),
        plural(reader.num_shards() as u64)
    );
    let shapes: Vec<String> = rows.iter().map(|r| shape_text(r.shape.as_ref())).collect();
    let w_key = rows.iter().map(|r| r.key.len()).max().unwrap_or(0).max(3);
    let w_dtype = rows.iter().map(|r| r.dtype.len()).max().unwrap_or(0).max(5);
    let w_shape = shapes.iter().map(String::len).max().unwrap_or(0).max(5);
    let w_bytes = rows
        .iter()
        .map(|r| r.bytes.to_string().len())
        .max()
        .unwrap_or(0)
        .max(5);
    println!(
        "{:w_key$}  {:w_dtype$}  {:w_shape$}  {:>w_bytes$}  OBJECT",
        "KEY", "DTYPE", "SHAPE", "BYTES"
    );
    for (r, shape) in rows.iter().zip(&shapes) {
        let mut object = r.object_path.clone().map_or_else(String::new, |p| {
            if p.is_empty() {
                "(root)".to_string()
            } else {
                p
            }
        });
        if !r.slices.is_empty() {
            object = format!("{object} (partitioned: {})", r.slices.join(" "))
                .trim_start()
                .to_string();
        }
        println!(
            "{:w_key$}  {:w_dtype$}  {:w_shape$}  {:>w_bytes$}  {object}",
            r.key, r.dtype, shape, r.bytes
        );
    }
}
