//! The host's overhead per plugin call on a graph of 100,000 nodes, against the time of one
//! parse plus one serialization of that graph (the issue's target: within 2x).
//!
//! Runs the whole pass (`PluginSet::optimize_meta_graph`: serialize the graph, find its device
//! types, call the plugin, copy and validate its output) with a plugin that returns a copy of
//! its input (`echo_plugin.c`, compiled here with `cc`), and subtracts the plugin's own work
//! (one malloc and memcpy of the graph, timed separately).
//!
//! ```text
//! cargo run --release -p unbound-grappler --example bench_host [-- NODES]
//! ```

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use prost::Message;
use unbound_grappler::host::{HostOptions, PluginSet};
use unbound_proto::tensorflow::{attr_value, AttrValue, GraphDef, MetaGraphDef, NodeDef};

fn main() {
    // The isolated pass runs the plugin in copies of this executable, as `unbound` does.
    if std::env::args().nth(1).as_deref() == Some(unbound_grappler::isolate::WORKER_ARG) {
        std::process::exit(unbound_grappler::isolate::worker_main());
    }
    let nodes: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100_000);
    let plugin = build_echo_plugin();
    let meta = MetaGraphDef {
        graph_def: Some(graph(nodes)),
        ..Default::default()
    };
    let graph = meta.graph_def.as_ref().expect("set above");
    let bytes = graph.encode_to_vec();
    let runs = 7;
    // Each reference is timed before and after the host passes and the faster kept: the first
    // large allocations of a fresh process pay page faults that later ones do not, and the
    // reference must not be inflated by them.
    let mut parse_once = || {
        std::hint::black_box(GraphDef::decode(bytes.as_slice()).expect("valid"));
    };
    let mut serialize_once = || {
        std::hint::black_box(graph.encode_to_vec());
    };
    let mut copy_once = || {
        std::hint::black_box(bytes.clone());
    };
    let (parse, serialize, copy) = (
        best(runs, &mut parse_once),
        best(runs, &mut serialize_once),
        best(runs, &mut copy_once),
    );
    let pass = host_pass(&plugin, false, &meta, runs);
    let isolated = host_pass(&plugin, true, &meta, runs);
    let parse = parse.min(best(runs, &mut parse_once));
    let serialize = serialize.min(best(runs, &mut serialize_once));
    let copy = copy.min(best(runs, &mut copy_once));
    let overhead = pass.saturating_sub(copy);
    let reference = parse + serialize;
    println!("graph: {nodes} nodes, {} bytes", bytes.len());
    println!(
        "parse {:.1} ms + serialize {:.1} ms = {:.1} ms",
        ms(parse),
        ms(serialize),
        ms(reference)
    );
    println!(
        "plugin call through the host: {:.1} ms; plugin's own copy {:.1} ms; host overhead {:.1} ms",
        ms(pass),
        ms(copy),
        ms(overhead)
    );
    println!(
        "ratio host overhead / (parse + serialize): {:.2} (target <= 2)",
        overhead.as_secs_f64() / reference.as_secs_f64()
    );
    println!(
        "with --isolate (worker process, graph over pipes both ways): {:.1} ms, ratio {:.2}",
        ms(isolated),
        isolated.saturating_sub(copy).as_secs_f64() / reference.as_secs_f64()
    );
}

/// The fastest of `runs` whole host passes over `meta` with the echo plugin, in process or in
/// a worker (started once, at load, and reused, as `unbound optimize --isolate` does).
fn host_pass(plugin: &Path, isolate: bool, meta: &MetaGraphDef, runs: usize) -> Duration {
    let options = HostOptions {
        isolate,
        ..HostOptions::default()
    };
    let nodes = meta.graph_def.as_ref().map_or(0, |g| g.node.len());
    let mut set = PluginSet::load(&[plugin.to_path_buf()], options).expect("echo plugin loads");
    (0..runs)
        .map(|_| {
            // The host takes the MetaGraphDef by value; the copy it is given is made untimed.
            let meta = meta.clone();
            let start = Instant::now();
            let (out, report) = set.optimize_meta_graph(meta);
            let elapsed = start.elapsed();
            assert_eq!(out.node.len(), nodes);
            assert_eq!(report.calls.len(), 1);
            elapsed
        })
        .min()
        .unwrap_or_default()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The fastest of `runs` timings of `f`.
fn best(runs: usize, f: &mut dyn FnMut()) -> Duration {
    (0..runs)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .min()
        .unwrap_or_default()
}

/// A graph shaped like an inference graph: placeholders, small constants and chains of binary
/// ops with dtype attrs, every node placed on the CPU.
fn graph(nodes: usize) -> GraphDef {
    let dtype = |v: i32| AttrValue {
        value: Some(attr_value::Value::Type(v)),
    };
    let mut node = Vec::with_capacity(nodes);
    for i in 0..nodes {
        let (op, input) = match i {
            0 => ("Placeholder", vec![]),
            _ if i % 5 == 1 => ("Const", vec![]),
            _ => (
                "AddV2",
                vec![format!("n{}", i - 1), format!("n{}", i - 1 - (i % 5))],
            ),
        };
        let mut attr = std::collections::BTreeMap::new();
        attr.insert(
            if op == "Const" || op == "Placeholder" {
                "dtype"
            } else {
                "T"
            }
            .to_string(),
            dtype(1),
        );
        node.push(NodeDef {
            name: format!("n{i}"),
            op: op.to_string(),
            input,
            device: "/job:localhost/replica:0/task:0/device:CPU:0".to_string(),
            attr,
            ..Default::default()
        });
    }
    GraphDef {
        node,
        ..Default::default()
    }
}

fn build_echo_plugin() -> PathBuf {
    let source = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/echo_plugin.c");
    let out = std::env::temp_dir().join(format!("unbound-echo-plugin-{}.so", std::process::id()));
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let status = Command::new(cc)
        .args(["-shared", "-fPIC", "-O2", "-o"])
        .arg(&out)
        .arg(&source)
        .status()
        .expect("running cc");
    assert!(status.success(), "compiling {}", source.display());
    out
}
