//! Generates the graph-heavy benchmark SavedModel of `scripts/bench_nodes.sh` (issue 15): millions
//! of small nodes instead of a few big constants, the shape of model whose node and function
//! counts grow with the number of devices.
//!
//! - the graph: `--nodes` nodes (default 3,000,000). Two `Placeholder`s, then `AddV2`/`Mul`
//!   nodes, each with two inputs (the two nodes before it), a device string, a `T` attribute and
//!   an `_output_shapes` attribute, named in blocks of 1,000 (`block_12/add_12345`);
//! - the library: `--functions` functions (default 10,000) of `--function-nodes` nodes each
//!   (default 100), built the same way from one float argument to one result;
//! - a `serve` signature from the first placeholder to the last node.
//!
//! The defaults make a model of about 0.6 GB; `--nodes 10000000 --functions 33000` about 2 GB
//! (the `.pb` form refuses to exceed 2 GiB: use smaller counts or the `.cpb` only).
//!
//! ```text
//! cargo run --release -p unbound-savedmodel --example make_graph_model -- OUT \
//!     [--nodes N] [--functions F] [--function-nodes K] [--max-size BYTES]
//! ```
//!
//! Writes `OUT/model_pb/saved_model.pb` and `OUT/model_cpb/saved_model.cpb`, the latter split
//! by unbound at `--max-size` (default 64 MiB) with zstd, as `unbound split --max-size` would.
//! Nodes are serialized one at a time and kept as bytes, so the generator holds the model
//! about once.

use std::path::PathBuf;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use unbound_chunked::{write_message, write_split};
use unbound_proto::fields::tensorflow as fields;
use unbound_proto::tensorflow::{
    attr_value, op_def::ArgDef, AttrValue, DataType, FunctionDef, NodeDef, OpDef,
};
use unbound_records::WriterOptions;
use unbound_savedmodel::split::{split_saved_model, SplitContext};
use unbound_test_support::models::*;
use unbound_wire::{Payload, WireField, WireValue};

const DEVICE: &str = "/job:localhost/replica:0/task:0/device:CPU:0";
const WIDTH: i64 = 128;

struct Options {
    out: PathBuf,
    nodes: usize,
    functions: usize,
    function_nodes: usize,
    max_size: u64,
}

fn main() {
    if let Err(e) = run() {
        eprintln!("make_graph_model: error: {e}");
        std::process::exit(1);
    }
}

fn usage() -> ! {
    eprintln!(
        "usage: make_graph_model OUT [--nodes N] [--functions F] [--function-nodes K] [--max-size BYTES]"
    );
    std::process::exit(2);
}

fn run() -> AnyResult<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut o = Options {
        out: PathBuf::new(),
        nodes: 3_000_000,
        functions: 10_000,
        function_nodes: 100,
        max_size: 64 << 20,
    };
    let mut out = None;
    let mut i = 0;
    while i < args.len() {
        let value = |i: usize| args.get(i + 1).cloned().unwrap_or_else(|| usage());
        match args[i].as_str() {
            "--nodes" => o.nodes = value(i).parse()?,
            "--functions" => o.functions = value(i).parse()?,
            "--function-nodes" => o.function_nodes = value(i).parse()?,
            "--max-size" => o.max_size = value(i).parse()?,
            s if !s.starts_with('-') && out.is_none() => {
                out = Some(PathBuf::from(s));
                i += 1;
                continue;
            }
            _ => usage(),
        }
        i += 2;
    }
    o.out = out.unwrap_or_else(|| usage());
    if o.nodes < 3 || o.function_nodes < 1 {
        return Err("--nodes must be at least 3 and --function-nodes at least 1".into());
    }
    generate(&o)
}

fn attr(value: attr_value::Value) -> AttrValue {
    AttrValue { value: Some(value) }
}

/// A binary float op with a device, `T` and `_output_shapes` (one `[1, WIDTH]` output).
fn binary_node(name: String, op: &str, a: String, b: String, device: &str) -> NodeDef {
    NodeDef {
        name,
        op: op.into(),
        input: vec![a, b],
        device: device.into(),
        attr: [
            (
                "T".to_string(),
                attr(attr_value::Value::Type(DataType::DtFloat as i32)),
            ),
            (
                "_output_shapes".to_string(),
                attr(attr_value::Value::List(attr_value::ListValue {
                    shape: vec![shape(&[1, WIDTH])],
                    ..Default::default()
                })),
            ),
        ]
        .into(),
        ..Default::default()
    }
}

fn op_name(i: usize) -> &'static str {
    if i % 3 == 2 {
        "Mul"
    } else {
        "AddV2"
    }
}

/// One function of `k` nodes: `x` -> `y`, each node combining the two values before it.
fn function(index: usize, k: usize) -> FunctionDef {
    let arg = |name: &str| ArgDef {
        name: name.into(),
        r#type: DataType::DtFloat as i32,
        ..Default::default()
    };
    let mut nodes = Vec::with_capacity(k);
    let out = |j: usize| format!("n{j}:z:0");
    for j in 0..k {
        let a = if j == 0 { "x".to_string() } else { out(j - 1) };
        let b = if j < 2 { "x".to_string() } else { out(j - 2) };
        nodes.push(binary_node(format!("n{j}"), op_name(j), a, b, ""));
    }
    FunctionDef {
        signature: Some(OpDef {
            name: format!("__inference_block_{index}_{}", 1000 + index),
            input_arg: vec![arg("x")],
            output_arg: vec![arg("y")],
            ..Default::default()
        }),
        node_def: nodes,
        ret: [("y".to_string(), out(k - 1))].into(),
        ..Default::default()
    }
}

/// Appends `message` to `buf` as field `number`, length-delimited.
fn put_field(buf: &mut BytesMut, number: u32, message: &impl prost::Message) {
    prost::encoding::encode_key(number, prost::encoding::WireType::LengthDelimited, buf);
    prost::encoding::encode_varint(message.encoded_len() as u64, buf);
    message.encode_raw(buf);
}

fn generate(o: &Options) -> AnyResult<()> {
    let t0 = Instant::now();
    let mut nodes: Vec<Bytes> = Vec::with_capacity(o.nodes);
    nodes.push(encode_node(&placeholder_node("x", &[1, WIDTH])));
    nodes.push(encode_node(&placeholder_node("x2", &[1, WIDTH])));
    let name = |i: usize| format!("block_{}/op_{i}", i / 1000);
    let mut names = vec!["x".to_string(), "x2".to_string()];
    for i in 2..o.nodes {
        let node = binary_node(
            name(i),
            op_name(i),
            names[i - 1].clone(),
            names[i - 2].clone(),
            DEVICE,
        );
        nodes.push(encode_node(&node));
        names.push(node.name);
    }
    let last = format!("{}:0", names[o.nodes - 1]);
    drop(names);

    let mut library = BytesMut::new();
    for f in 0..o.functions {
        put_field(
            &mut library,
            fields::function_def_library::FUNCTION,
            &function(f, o.function_nodes),
        );
    }
    let mut model = saved_model(nodes, ("x:0", &[1, WIDTH]), (&last, &[1, WIDTH]))?;
    // Add the library to the one MetaGraph's GraphDef, as serialized bytes.
    let sm_desc = descriptor("tensorflow.SavedModel");
    let meta_fd = sm_desc
        .get_field_by_name("meta_graphs")
        .expect("meta_graphs");
    let graph_fd = meta_fd
        .kind()
        .as_message()
        .expect("message")
        .get_field_by_name("graph_def")
        .expect("graph_def");
    let graph = model
        .repeated_message_mut(&meta_fd, 0)?
        .singular_message_mut(&graph_fd)?;
    graph.fields.push(WireField {
        number: fields::graph_def::LIBRARY,
        value: WireValue::Bytes(Payload::Inline(library.freeze())),
    });
    // Fields in number order (nodes, library, versions), as TensorFlow writes a GraphDef.
    graph.fields.sort_by_key(|f| f.number);
    let size = model.encoded_len();
    eprintln!(
        "make_graph_model: built a {size} byte SavedModel ({} graph nodes, {} functions of {} nodes) in {:.1}s",
        o.nodes,
        o.functions,
        o.function_nodes,
        t0.elapsed().as_secs_f64()
    );

    let pb_dir = o.out.join("model_pb");
    std::fs::create_dir_all(&pb_dir)?;
    if size < (2u64 << 30) {
        let t = Instant::now();
        write_message(&pb_dir.join("saved_model.pb"), &model)?;
        eprintln!(
            "make_graph_model: wrote {}/saved_model.pb in {:.1}s",
            pb_dir.display(),
            t.elapsed().as_secs_f64()
        );
    } else {
        eprintln!("make_graph_model: past 2 GiB: no saved_model.pb");
    }

    let t = Instant::now();
    let mut ctx = SplitContext::new(o.max_size);
    let split = split_saved_model(model, &sm_desc, &mut ctx)?;
    let cpb_dir = o.out.join("model_cpb");
    std::fs::create_dir_all(&cpb_dir)?;
    let written = write_split(
        &cpb_dir.join("saved_model"),
        split,
        WriterOptions::default(),
        &mut |_| {},
    )?;
    eprintln!(
        "make_graph_model: wrote {} ({} chunks) in {:.1}s",
        written.path.display(),
        written.chunks,
        t.elapsed().as_secs_f64()
    );
    println!("{size}");
    Ok(())
}
