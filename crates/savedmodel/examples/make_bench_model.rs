//! Generates the benchmark SavedModel of `scripts/bench.sh` (issue 2, "Speed and memory"):
//! 12 float32 `Const` nodes of 128 MiB each (about 1.6 GB; roughly normal values, like trained
//! weights), in two forms:
//!
//! - `OUT/model_pb/saved_model.pb`: the plain SavedModel (under 2 GiB);
//! - `OUT/model_cpb/saved_model.cpb`: its chunked form as TensorFlow writes it: split at a
//!   maximum chunk size of 100,000,000 bytes, which moves each constant's `tensor_content` into
//!   a BYTES chunk, and every chunk compressed with Brotli quality 6 whatever it holds
//!   (TensorFlow's Riegeli options; unbound's own `--compression brotli` would store
//!   incompressible chunks uncompressed instead).
//!
//! ```text
//! cargo run --release -p unbound-savedmodel --example make_bench_model -- OUT [--consts N] [--mib M] [--max-size BYTES] [--content normal|uniform]
//! ```
//!
//! `--content normal` (the default) fills the constants with roughly normal float32 values
//! (mean 0, standard deviation 0.05), like trained weights: Brotli shrinks them by about 12%,
//! so its stream has compressed meta-blocks that a reader must decode. `--content uniform`
//! fills them with uniformly random bytes, which Brotli cannot shrink: it stores them as
//! uncompressed meta-blocks, which a reader can copy.
//!
//! Prints the summary JSON of `merger_harness summary` for the model (see `make_huge_model`).

use std::path::{Path, PathBuf};
use std::time::Instant;

use unbound_chunked::{write_message, write_split};
use unbound_records::{Compression, WriterOptions};
use unbound_savedmodel::split::{split_saved_model, SplitContext};
use unbound_test_support::data::{normalish_f32_bytes, random_bytes};
use unbound_test_support::models::*;

const COLS: i64 = 1024;

fn main() {
    if let Err(e) = run() {
        eprintln!("make_bench_model: error: {e}");
        std::process::exit(1);
    }
}

fn usage() -> ! {
    eprintln!("usage: make_bench_model OUT [--consts N] [--mib M] [--max-size BYTES] [--content normal|uniform]");
    std::process::exit(2);
}

fn run() -> AnyResult<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut consts = 12usize;
    let mut mib = 128u64;
    let mut max_size = 100_000_000u64;
    let mut uniform = false;
    let mut out: Option<PathBuf> = None;
    let mut i = 0;
    while i < args.len() {
        let value = |i: usize| args.get(i + 1).cloned().unwrap_or_else(|| usage());
        match args[i].as_str() {
            "--consts" => consts = value(i).parse()?,
            "--mib" => mib = value(i).parse()?,
            "--max-size" => max_size = value(i).parse()?,
            "--content" => {
                uniform = match value(i).as_str() {
                    "normal" => false,
                    "uniform" => true,
                    _ => usage(),
                }
            }
            s if !s.starts_with('-') && out.is_none() => {
                out = Some(PathBuf::from(s));
                i += 1;
                continue;
            }
            _ => usage(),
        }
        i += 2;
    }
    let Some(out) = out else { usage() };
    generate(&out, consts, mib, max_size, uniform)
}

fn generate(out: &Path, consts: usize, mib: u64, max_size: u64, uniform: bool) -> AnyResult<()> {
    let t0 = Instant::now();
    let rows = (mib << 20) as i64 / (4 * COLS);
    let in_dims = [1, rows];
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
    let mut prev = "x".to_string();
    for k in 0..consts {
        let seed = 2000 + k as u64;
        let content = bytes::Bytes::from(if uniform {
            random_bytes((rows * COLS * 4) as usize, seed)
        } else {
            normalish_f32_bytes((rows * COLS) as usize, 0.05, seed)
        });
        let w = format!("dense_{k:02}/kernel");
        push(
            &const_node(&w, &[rows, COLS], content.clone()),
            &content,
            &mut nodes,
        )?;
        let y = format!("dense_{k:02}/MatMul");
        push(&op_node(&y, "MatMul", &[&prev, &w]), &[], &mut nodes)?;
        prev = y;
    }
    push(&op_node("y", "Identity", &[&prev]), &[], &mut nodes)?;
    let model = saved_model(nodes, ("x:0", &in_dims), ("y:0", &[1, COLS]))?;
    summary.byte_size = model.encoded_len();
    eprintln!(
        "make_bench_model: built a {} byte SavedModel ({} nodes) in {:.1}s",
        summary.byte_size,
        summary.nodes,
        t0.elapsed().as_secs_f64()
    );

    let t1 = Instant::now();
    let pb_dir = out.join("model_pb");
    std::fs::create_dir_all(&pb_dir)?;
    write_message(&pb_dir.join("saved_model.pb"), &model)?;
    eprintln!(
        "make_bench_model: wrote {}/saved_model.pb in {:.1}s",
        pb_dir.display(),
        t1.elapsed().as_secs_f64()
    );

    let t2 = Instant::now();
    let desc = descriptor("tensorflow.SavedModel");
    let mut ctx = SplitContext::new(max_size);
    let split = split_saved_model(model, &desc, &mut ctx)?;
    for w in &ctx.warnings {
        eprintln!("make_bench_model: split warning: {w}");
    }
    let cpb_dir = out.join("model_cpb");
    std::fs::create_dir_all(&cpb_dir)?;
    // TensorFlow's writer options: Brotli quality 6 on every chunk.
    let options = WriterOptions {
        compression: Compression::Brotli { level: 6 },
        store_incompressible: false,
        ..WriterOptions::default()
    };
    let written = write_split(&cpb_dir.join("saved_model"), split, options, &mut |_| {})?;
    eprintln!(
        "make_bench_model: wrote {} ({} chunks, {} bytes) in {:.1}s",
        written.path.display(),
        written.chunks,
        std::fs::metadata(&written.path)?.len(),
        t2.elapsed().as_secs_f64()
    );
    print!("{}", summary.to_json());
    Ok(())
}

type NodeDefT = unbound_proto::tensorflow::NodeDef;
