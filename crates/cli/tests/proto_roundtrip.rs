//! `unbound proto split` then `unbound proto merge` gives back the message, for the types with
//! their own splitters and for others (the generic splitter).

mod common;

use std::ffi::OsStr;
use std::path::Path;

use common::*;
use prost::Message;
use unbound_proto::tensorflow::{attr_value, AttrValue, GraphDef, NodeDef, TensorProto};

/// Splits `input` as `type_name` with `max_size` and `compression`, merges it back, returns
/// the merged bytes and whether a `.cpb` was written.
fn split_merge(
    dir: &Path,
    type_name: &str,
    input: &Path,
    max_size: u64,
    compression: &str,
) -> (Vec<u8>, bool) {
    let prefix = dir.join(format!("split-{max_size}-{compression}"));
    let max = max_size.to_string();
    let out = unbound([
        OsStr::new("proto"),
        OsStr::new("split"),
        OsStr::new("--type"),
        OsStr::new(type_name),
        input.as_os_str(),
        prefix.as_os_str(),
        OsStr::new("--max-size"),
        OsStr::new(&max),
        OsStr::new("--compression"),
        OsStr::new(compression),
    ]);
    assert!(out.status.success(), "{}", describe(&out));
    let chunked = Path::new(&format!("{}.cpb", prefix.display())).exists();
    let merged = dir.join(format!("merged-{max_size}-{compression}.pb"));
    let out = unbound([
        OsStr::new("proto"),
        OsStr::new("merge"),
        OsStr::new("--type"),
        OsStr::new(type_name),
        prefix.as_os_str(),
        merged.as_os_str(),
    ]);
    assert!(out.status.success(), "{}", describe(&out));
    (std::fs::read(&merged).unwrap(), chunked)
}

#[test]
fn frozen_graph_round_trips() {
    let input = model("frozen_graph.pb");
    let original = GraphDef::decode(std::fs::read(&input).unwrap().as_slice()).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let mut saw_chunked = false;
    for max_size in [100, 400, 1 << 30] {
        for compression in ["none", "brotli", "zstd", "snappy"] {
            let (merged, chunked) = split_merge(
                tmp.path(),
                "tensorflow.GraphDef",
                &input,
                max_size,
                compression,
            );
            saw_chunked |= chunked;
            let got = GraphDef::decode(merged.as_slice()).unwrap();
            assert_eq!(got, original, "max {max_size} {compression}");
        }
    }
    assert!(saw_chunked, "small maximum sizes chunk the graph");
}

/// A Const node whose tensor holds `content_len` bytes of tensor_content and `half_vals`
/// packed half_val entries.
fn const_node(content_len: usize, half_vals: usize) -> NodeDef {
    let tensor = TensorProto {
        dtype: 19,
        tensor_content: (0..content_len)
            .map(|i| (i * 7 % 251) as u8)
            .collect::<Vec<u8>>()
            .into(),
        half_val: (0..half_vals as i32).map(|i| i % 100).collect(),
        ..Default::default()
    };
    NodeDef {
        name: "c".into(),
        op: "Const".into(),
        attr: [(
            "value".to_string(),
            AttrValue {
                value: Some(attr_value::Value::Tensor(tensor)),
            },
        )]
        .into_iter()
        .collect(),
        ..Default::default()
    }
}

#[test]
fn node_def_round_trips_through_the_generic_splitter() {
    // The tensor bytes become a BYTES chunk under attr["value"]; what is left stays inline.
    let tmp = tempfile::tempdir().unwrap();
    let node = const_node(3000, 10);
    let input = tmp.path().join("node.pb");
    std::fs::write(&input, node.encode_to_vec()).unwrap();
    let (merged, chunked) = split_merge(tmp.path(), "tensorflow.NodeDef", &input, 1000, "zstd");
    assert!(chunked);
    assert_eq!(NodeDef::decode(merged.as_slice()).unwrap(), node);
}

#[test]
fn node_def_with_a_large_tensor_message_keeps_its_tensor_content() {
    // Here the rest of the tensor (400 half_val) is itself large enough to be moved into a
    // MESSAGE chunk at attr["value"].tensor, after its tensor_content went to a BYTES chunk at
    // attr["value"].tensor.tensor_content: merged in metadata order, the MESSAGE chunk's empty
    // tensor_content comes last and wins.
    let tmp = tempfile::tempdir().unwrap();
    let node = const_node(3000, 400);
    let input = tmp.path().join("node.pb");
    std::fs::write(&input, node.encode_to_vec()).unwrap();
    let (merged, chunked) = split_merge(tmp.path(), "tensorflow.NodeDef", &input, 1000, "zstd");
    assert!(chunked);
    let got = NodeDef::decode(merged.as_slice()).unwrap();
    let content = |n: &NodeDef| match &n.attr["value"].value {
        Some(attr_value::Value::Tensor(t)) => t.tensor_content.len(),
        _ => usize::MAX,
    };
    assert_eq!(content(&got), 3000, "tensor_content lost");
    assert_eq!(got, node);
}
