//! The GraphDef splitter reproduces the chunk layouts TensorFlow's Python splitter makes for
//! its own test data (`split_graph_def_gen.py`: lots of nodes, large nodes, large constants),
//! and every split merges back into the original graph.

use bytes::Bytes;
use prost::Message;
use unbound_chunked::{Chunk, MemoryChunks, Merger, SplitOutput};
use unbound_proto::tensorflow::proto_splitter::field_index::Kind;
use unbound_proto::tensorflow::{
    attr_value, AttrValue, FunctionDef, FunctionDefLibrary, GradientDef, GraphDef, NodeDef,
    TensorProto,
};
use unbound_savedmodel::split::{split_graph_def_root, SplitContext};
use unbound_wire::WireMessage;

fn graph_desc() -> prost_reflect::MessageDescriptor {
    unbound_proto::descriptor_pool()
        .get_message_by_name("tensorflow.GraphDef")
        .unwrap()
}

/// A Const node whose serialized size is exactly `size` bytes (padding its name).
fn const_node(i: usize, size: usize, content: usize) -> NodeDef {
    let tensor = TensorProto {
        dtype: 1,
        tensor_content: Bytes::from(vec![i as u8; content]),
        ..Default::default()
    };
    let mut node = NodeDef {
        name: format!("c{i}"),
        op: "Const".into(),
        attr: [(
            "value".to_string(),
            AttrValue {
                value: Some(attr_value::Value::Tensor(tensor)),
            },
        )]
        .into(),
        ..Default::default()
    };
    let base = node.encoded_len();
    assert!(base <= size, "node {i}: {base} > {size}");
    // Name length changes by the padding; the length prefix stays one byte below 128.
    node.name.push_str(&"_".repeat(size - base));
    assert_eq!(node.encoded_len(), size);
    node
}

fn split(graph: &GraphDef, max: u64) -> (SplitOutput, Vec<String>) {
    let bytes = Bytes::from(graph.encode_to_vec());
    let wire = WireMessage::parse(&bytes, Some(graph_desc())).unwrap();
    let mut ctx = SplitContext::new(max);
    let out = split_graph_def_root(wire, &graph_desc(), &mut ctx).unwrap();
    (out, ctx.warnings)
}

/// Tags of each chunked field, as text: `field`, `[index]`, `{key}`.
fn tags(out: &SplitOutput) -> Vec<(String, u64)> {
    out.message
        .chunked_fields
        .iter()
        .map(|cf| {
            let t: Vec<String> = cf
                .field_tag
                .iter()
                .map(|t| match t.kind.as_ref().unwrap() {
                    Kind::Field(f) => f.to_string(),
                    Kind::Index(i) => format!("[{i}]"),
                    Kind::MapKey(_) => "{key}".into(),
                })
                .collect();
            (
                t.join("."),
                cf.message.as_ref().unwrap().chunk_index.unwrap(),
            )
        })
        .collect()
}

fn merge(out: &SplitOutput) -> GraphDef {
    let chunks: Vec<Bytes> = out
        .chunks
        .iter()
        .map(|c| match c {
            Chunk::Message(m) => Bytes::from(m.to_vec().unwrap()),
            Chunk::SerializedMessage(p) | Chunk::Bytes(p) => p.bytes().unwrap(),
        })
        .collect();
    let source = MemoryChunks::new("split", chunks);
    let merged = Merger::new(&source)
        .merge(&graph_desc(), &out.message)
        .unwrap();
    GraphDef::decode(merged.to_vec().unwrap().as_slice()).unwrap()
}

fn node_count(chunk: &Chunk) -> usize {
    match chunk {
        Chunk::Message(m) => m.fields.iter().filter(|f| f.number == 1).count(),
        _ => 0,
    }
}

#[test]
fn lots_of_nodes_split_into_runs() {
    let graph = GraphDef {
        node: (0..15).map(|i| const_node(i, 95, 40)).collect(),
        ..Default::default()
    };
    let (out, warnings) = split(&graph, 500);
    assert!(warnings.is_empty());
    // Base keeps nodes [0:5]; two run chunks with empty tags hold [5:10] and [10:15].
    assert_eq!(tags(&out), vec![("".into(), 1), ("".into(), 2)]);
    let counts: Vec<usize> = out.chunks.iter().map(node_count).collect();
    assert_eq!(counts, vec![5, 5, 5]);
    assert_eq!(merge(&out), graph);
}

#[test]
fn large_nodes_become_their_own_chunks() {
    let sizes = [50, 95, 95, 95, 50, 95];
    let graph = GraphDef {
        node: sizes
            .iter()
            .enumerate()
            .map(|(i, &s)| const_node(i, s, 10))
            .collect(),
        ..Default::default()
    };
    let (out, _) = split(&graph, 200);
    assert_eq!(
        tags(&out),
        vec![
            ("1.[1]".into(), 1),
            ("1.[2]".into(), 2),
            ("1.[3]".into(), 3),
            ("1.[5]".into(), 4)
        ]
    );
    // Chunked nodes leave empty placeholders in the base.
    let Chunk::Message(base) = &out.chunks[0] else {
        panic!("base is a message")
    };
    assert_eq!(base.fields.iter().filter(|f| f.number == 1).count(), 6);
    assert_eq!(merge(&out), graph);
}

#[test]
fn large_constants_move_to_bytes_chunks() {
    let sizes = [50, 50, 1000, 50, 1000];
    let graph = GraphDef {
        node: sizes
            .iter()
            .enumerate()
            .map(|(i, &s)| const_node(i, s, if s > 500 { 900 } else { 10 }))
            .collect(),
        ..Default::default()
    };
    let (out, _) = split(&graph, 500);
    assert_eq!(
        tags(&out),
        vec![
            ("1.[2].5.{key}.8.4".into(), 1),
            ("1.[4].5.{key}.8.4".into(), 2)
        ]
    );
    assert!(matches!(&out.chunks[1], Chunk::Bytes(p) if p.len() == 900));
    assert_eq!(merge(&out), graph);
}

#[test]
fn library_larger_than_nodes_is_split_first_and_may_move_whole() {
    let function = |i: usize, nodes: usize| FunctionDef {
        node_def: (0..nodes)
            .map(|j| const_node(100 * i + j, 90, 30))
            .collect(),
        ..Default::default()
    };
    let graph = GraphDef {
        node: (0..3).map(|i| const_node(i, 60, 10)).collect(),
        library: Some(FunctionDefLibrary {
            function: vec![function(1, 2), function(2, 12), function(3, 2)],
            ..Default::default()
        }),
        ..Default::default()
    };
    let (out, _) = split(&graph, 600);
    let t = tags(&out);
    // The library is the larger section, so it is split first: function 1 (above the maximum)
    // has its node_def list cut into a run chunk of FunctionDef type (tag: the function itself),
    // then the function list is cut into runs of FunctionDefLibrary type (tag: library).
    assert_eq!(
        t,
        vec![("2.1.[1]".into(), 1), ("2".into(), 2), ("2".into(), 3)]
    );
    assert_eq!(merge(&out), graph);
    for max in [150, 300, 1000, 5000] {
        assert_eq!(merge(&split(&graph, max).0), graph, "max {max}");
    }
}

#[test]
fn library_still_too_large_moves_whole_to_index_1() {
    // Gradients are not split, so the library stays above the maximum and moves whole.
    let graph = GraphDef {
        node: (0..3).map(|i| const_node(i, 60, 10)).collect(),
        library: Some(FunctionDefLibrary {
            gradient: (0..40)
                .map(|i| GradientDef {
                    function_name: format!("function_{i}"),
                    gradient_func: format!("gradient_{i}"),
                })
                .collect(),
            ..Default::default()
        }),
        ..Default::default()
    };
    let (out, _) = split(&graph, 400);
    let t = tags(&out);
    assert_eq!(t.last(), Some(&("2".to_string(), 1)), "{t:?}");
    assert_eq!(merge(&out), graph);
}

#[test]
fn oversized_non_const_node_is_chunked_whole_with_a_warning() {
    let mut big = NodeDef {
        name: "big".into(),
        op: "MatMul".into(),
        ..Default::default()
    };
    big.input = (0..50).map(|i| format!("input_{i}")).collect();
    let graph = GraphDef {
        node: vec![big, const_node(1, 60, 10)],
        ..Default::default()
    };
    let (out, warnings) = split(&graph, 100);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("\"big\""));
    assert!(tags(&out).iter().any(|(p, _)| p == "1.[0]"));
    assert_eq!(merge(&out), graph);
}
