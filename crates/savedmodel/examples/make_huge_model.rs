//! Builds a SavedModel whose serialized size is past protobuf's 2 GiB limit, splits it the way
//! TensorFlow does (`split_saved_model` at TensorFlow's default maximum, 1 GiB) and writes
//! `OUT_DIR/saved_model.cpb`. Prints, as JSON on stdout, what `merger_harness summary --type
//! tensorflow.SavedModel` prints for the graph (node count, every constant's `tensor_content`
//! size and FNV-1a checksum, totals) and the model's `byte_size`, computed here from the data
//! that went in, not from the file. `interop/huge_model.sh` compares it with TensorFlow's view.
//!
//! ```text
//! cargo run --release -p unbound-savedmodel --example make_huge_model -- OUT_DIR [--consts N] [--mib M] [--max-size BYTES] [--identities K] [--fill BYTE]
//! cargo run --release -p unbound-savedmodel --example make_huge_model -- --read DIR
//! ```
//!
//! Defaults: 20 float32 `Const` nodes of 120 MiB each (2.35 GiB of tensor data, deterministic
//! xorshift content) plus a few small nodes (a placeholder, a scalar constant with an inline
//! value, a small constant, ops consuming them). `--read DIR` instead reads `DIR/saved_model.cpb`
//! back with unbound's own reader and prints the same summary from what it finds. `--max-size`
//! (default 1 GiB, TensorFlow's) is for quick small runs that still get split. `--identities K` puts a
//! chain of K `Identity` nodes between the placeholder and its consumer (default 0), for a
//! graph-optimizer plugin to remove (`interop/huge_model.sh` runs `unbound optimize` on it).
//! `--fill BYTE` makes every large constant that one byte repeated instead of random: a model
//! past 2 GiB whose `.cpb` compresses to a few hundred kilobytes, as real models of one
//! repeated value do (issue 29: a decompression-bomb guard must not refuse it).
//!
//! Memory: the model is held once (each big node serialized once, its content referenced from
//! there), about 2.4 GB, plus what writing a chunk needs.

use std::path::PathBuf;
use std::time::Instant;

use unbound_chunked::{read_cpb, write_split};
use unbound_records::{Compression, WriterOptions};
use unbound_savedmodel::split::{split_saved_model, SplitContext, DEFAULT_MAX_SIZE};
use unbound_test_support::data::random_bytes;
use unbound_test_support::models::*;

const COLS: i64 = 1024;

fn main() {
    if let Err(e) = run() {
        eprintln!("make_huge_model: error: {e}");
        std::process::exit(1);
    }
}

fn usage() -> ! {
    eprintln!(
        "usage: make_huge_model OUT_DIR [--consts N] [--mib M] [--max-size BYTES] [--identities K] [--fill BYTE]\n       make_huge_model --read DIR"
    );
    std::process::exit(2);
}

fn run() -> AnyResult<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut consts = 20usize;
    let mut mib = 120u64;
    let mut max_size = DEFAULT_MAX_SIZE;
    let mut identities = 0usize;
    let mut fill: Option<u8> = None;
    let mut out: Option<PathBuf> = None;
    let mut read: Option<PathBuf> = None;
    let mut i = 0;
    while i < args.len() {
        let value = |i: usize| args.get(i + 1).cloned().unwrap_or_else(|| usage());
        match args[i].as_str() {
            "--consts" => {
                consts = value(i).parse()?;
                i += 1;
            }
            "--mib" => {
                mib = value(i).parse()?;
                i += 1;
            }
            "--max-size" => {
                max_size = value(i).parse()?;
                i += 1;
            }
            "--identities" => {
                identities = value(i).parse()?;
                i += 1;
            }
            "--fill" => {
                fill = Some(value(i).parse()?);
                i += 1;
            }
            "--read" => {
                read = Some(PathBuf::from(value(i)));
                i += 1;
            }
            s if !s.starts_with('-') && out.is_none() => out = Some(PathBuf::from(s)),
            _ => usage(),
        }
        i += 1;
    }
    if let Some(dir) = read {
        return read_back(&dir);
    }
    let Some(out) = out else { usage() };
    generate(&out, consts, mib, max_size, identities, fill)
}

fn generate(
    out: &std::path::Path,
    consts: usize,
    mib: u64,
    max_size: u64,
    identities: usize,
    fill: Option<u8>,
) -> AnyResult<()> {
    let t0 = Instant::now();
    let rows = (mib << 20) as i64 / (4 * COLS);
    let in_dims = [1, COLS];
    let mut summary = Summary {
        running_fnv: FNV_OFFSET,
        ..Default::default()
    };
    let mut nodes = Vec::new();
    let mut push =
        |node: &NodeDefT, content: &[u8], nodes: &mut Vec<bytes::Bytes>| -> AnyResult<()> {
            summary.add_node(node, |h| {
                std::io::Write::write_all(h, content)?;
                Ok(())
            })?;
            nodes.push(encode_node(node));
            Ok(())
        };

    push(&placeholder_node("x", &in_dims), &[], &mut nodes)?;
    push(&scalar_const_node("scale", 0.5), &[], &mut nodes)?;
    let bias = random_bytes(4 * COLS as usize, 7);
    push(
        &const_node("bias", &[COLS], bias.clone().into()),
        &bias,
        &mut nodes,
    )?;
    for k in 0..consts {
        let len = (rows * COLS * 4) as usize;
        let content = bytes::Bytes::from(match fill {
            Some(byte) => vec![byte; len],
            None => random_bytes(len, 1000 + k as u64),
        });
        let node = const_node(
            &format!("dense_{k:02}/kernel"),
            &[rows, COLS],
            content.clone(),
        );
        push(&node, &content, &mut nodes)?;
        // `node` (and with it `content`) is dropped here; the serialized node holds the data.
    }
    let mut input = "x".to_string();
    for k in 0..identities {
        let name = format!("x_identity_{k}");
        push(&op_node(&name, "Identity", &[&input]), &[], &mut nodes)?;
        input = name;
    }
    push(
        &op_node("scaled", "Mul", &[&input, "scale"]),
        &[],
        &mut nodes,
    )?;
    push(&op_node("y", "AddV2", &["scaled", "bias"]), &[], &mut nodes)?;
    let model = saved_model(nodes, ("x:0", &in_dims), ("y:0", &in_dims))?;
    summary.byte_size = model.encoded_len();
    eprintln!(
        "make_huge_model: built a {} byte SavedModel ({:.2} GiB; {} nodes) in {:.1}s",
        summary.byte_size,
        summary.byte_size as f64 / f64::from(1u32 << 30),
        summary.nodes,
        t0.elapsed().as_secs_f64()
    );

    let t1 = Instant::now();
    let desc = descriptor("tensorflow.SavedModel");
    let mut ctx = SplitContext::new(max_size);
    let split = split_saved_model(model, &desc, &mut ctx)?;
    for w in &ctx.warnings {
        eprintln!("make_huge_model: split warning: {w}");
    }
    std::fs::create_dir_all(out)?;
    let options = WriterOptions {
        compression: Compression::Zstd { level: 3 },
        store_incompressible: true,
        ..WriterOptions::default()
    };
    let written = write_split(&out.join("saved_model"), split, options, &mut |_| {})?;
    eprintln!(
        "make_huge_model: wrote {} ({} chunks, {} bytes) in {:.1}s",
        written.path.display(),
        written.chunks,
        std::fs::metadata(&written.path)?.len(),
        t1.elapsed().as_secs_f64()
    );
    print!("{}", summary.to_json());
    Ok(())
}

type NodeDefT = unbound_proto::tensorflow::NodeDef;

fn read_back(dir: &std::path::Path) -> AnyResult<()> {
    let t0 = Instant::now();
    let desc = descriptor("tensorflow.SavedModel");
    let read = read_cpb(&dir.join("saved_model.cpb"), &desc)?;
    let summary = summarize_wire(&read.message)?;
    eprintln!(
        "make_huge_model: read back with unbound in {:.1}s",
        t0.elapsed().as_secs_f64()
    );
    print!("{}", summary.to_json());
    Ok(())
}
