//! Prints the output properties static inference gives every node of a MetaGraphDef, one line
//! per output: `node<TAB>port<TAB>dtype<TAB>dims`, dims comma-separated (`-1` unknown), empty for
//! a scalar, `?` for an unknown rank. `interop/grappler/shapes_check.sh` compares these lines
//! with TensorFlow's `GraphProperties::InferStatically` on the same graph.
//!
//! ```text
//! cargo run --release -p unbound-graph --example infer_shapes -- META_GRAPH.pb
//! ```

use std::process::ExitCode;

use prost::Message;
use unbound_graph::ops::OpLibrary;
use unbound_graph::properties::{GraphProperties, InferOptions};
use unbound_proto::tensorflow::MetaGraphDef;

fn main() -> ExitCode {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: infer_shapes META_GRAPH.pb");
        return ExitCode::from(2);
    };
    let meta = match std::fs::read(&path)
        .map_err(|e| e.to_string())
        .and_then(|b| MetaGraphDef::decode(b.as_slice()).map_err(|e| e.to_string()))
    {
        Ok(meta) => meta,
        Err(e) => {
            eprintln!("infer_shapes: {path}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let graph = meta.graph_def.unwrap_or_default();
    let stripped = meta.meta_info_def.and_then(|m| m.stripped_op_list);
    let ops = OpLibrary::new(graph.library.as_ref(), stripped.as_ref());
    let props = match GraphProperties::infer(&graph, &ops, &[], InferOptions::default()) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("infer_shapes: {path}: {e}");
            return ExitCode::FAILURE;
        }
    };
    for node in &graph.node {
        for (port, p) in props.output_properties(&node.name).iter().enumerate() {
            let dims = match &p.shape {
                Some(s) if !s.unknown_rank => {
                    let d: Vec<String> = s.dim.iter().map(|d| d.size.to_string()).collect();
                    d.join(",")
                }
                _ => "?".to_string(),
            };
            println!("{}\t{port}\t{}\t{dims}", node.name, p.dtype);
        }
    }
    ExitCode::SUCCESS
}
