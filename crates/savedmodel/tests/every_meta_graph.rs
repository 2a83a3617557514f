//! The opt-in splitting of every MetaGraphDef's graph (`MetaGraphSplitting::Every`): on a
//! model of one MetaGraphDef it is TensorFlow's algorithm byte for byte; on a model holding the
//! same graph under two tag-sets it splits the second graph too, leaves no graph whole in the
//! root chunk, and merges back into the original; the writer refuses chunks protobuf could not
//! parse.

use bytes::Bytes;
use prost::Message;
use std::sync::Arc;
use unbound_chunked::{Chunk, FileChunks, MemoryChunks, Merger, SplitOutput};
use unbound_proto::tensorflow::proto_splitter::field_index::Kind;
use unbound_proto::tensorflow::SavedModel;
use unbound_savedmodel::dir::{read_saved_model, saved_model_descriptor};
use unbound_savedmodel::split::{
    message_chunk_over, split_saved_model_with, MetaGraphSplitting, SplitContext,
};
use unbound_savedmodel::write::{write_model_dir, WriteOptions};
use unbound_savedmodel::SavedModelError;
use unbound_savedmodel::MAX_PROTO_SIZE;
use unbound_test_support::testdata::model;
use unbound_wire::{Payload, RecordRef, WireField, WireMessage, WireValue};

const MODELS: [&str; 2] = ["tf1_large_consts", "tf2_multi_sig"];
const MAX_SIZES: [u64; 4] = [u64::MAX, 20000, 2000, 300];

fn decoded(name: &str) -> SavedModel {
    let bytes = read_saved_model(&model(name))
        .unwrap()
        .message
        .to_vec()
        .unwrap();
    SavedModel::decode(bytes.as_slice()).unwrap()
}

/// The model with a copy of its first MetaGraphDef appended under the tags `{serve, tpu}`.
fn with_copy(name: &str) -> SavedModel {
    let mut m = decoded(name);
    let mut copy = m.meta_graphs[0].clone();
    copy.meta_info_def.as_mut().unwrap().tags = vec!["serve".into(), "tpu".into()];
    m.meta_graphs.push(copy);
    m
}

fn wire(m: &SavedModel) -> WireMessage {
    WireMessage::parse(
        &Bytes::from(m.encode_to_vec()),
        Some(saved_model_descriptor().unwrap()),
    )
    .unwrap()
}

fn split(m: &SavedModel, max: u64, splitting: MetaGraphSplitting) -> SplitOutput {
    let mut ctx = SplitContext::new(max);
    split_saved_model_with(
        wire(m),
        &saved_model_descriptor().unwrap(),
        &mut ctx,
        splitting,
    )
    .unwrap()
}

fn chunk_bytes(out: &SplitOutput) -> Vec<Bytes> {
    out.chunks
        .iter()
        .map(|c| match c {
            Chunk::Message(m) => Bytes::from(m.to_vec().unwrap()),
            Chunk::SerializedMessage(p) | Chunk::Bytes(p) => p.bytes().unwrap(),
        })
        .collect()
}

fn merge(out: &SplitOutput) -> SavedModel {
    let source = MemoryChunks::new("split", chunk_bytes(out));
    let merged = Merger::new(&source)
        .merge(&saved_model_descriptor().unwrap(), &out.message)
        .unwrap();
    SavedModel::decode(merged.to_vec().unwrap().as_slice()).unwrap()
}

/// The MetaGraphDef index each chunked field's path starts in (`meta_graphs[i]...`).
fn meta_graph_of_fields(out: &SplitOutput) -> Vec<u64> {
    out.message
        .chunked_fields
        .iter()
        .map(|cf| {
            let tags: Vec<_> = cf.field_tag.iter().map(|t| t.kind.clone()).collect();
            assert_eq!(tags[0], Some(Kind::Field(2)), "not under meta_graphs");
            match tags[1] {
                Some(Kind::Index(i)) => i,
                ref other => panic!("meta_graphs without an index: {other:?}"),
            }
        })
        .collect()
}

#[test]
fn one_meta_graph_splits_exactly_as_tensorflow_does() {
    for name in MODELS {
        let m = decoded(name);
        assert_eq!(m.meta_graphs.len(), 1);
        for max in MAX_SIZES {
            let first = split(&m, max, MetaGraphSplitting::First);
            let every = split(&m, max, MetaGraphSplitting::Every);
            assert_eq!(every.message, first.message, "{name} at {max}: metadata");
            assert_eq!(
                chunk_bytes(&every),
                chunk_bytes(&first),
                "{name} at {max}: chunks"
            );
        }
    }
}

#[test]
fn the_second_graph_is_split_too_and_merges_back() {
    for name in MODELS {
        let m = with_copy(name);
        for max in [20000, 2000, 300] {
            let first = split(&m, max, MetaGraphSplitting::First);
            let every = split(&m, max, MetaGraphSplitting::Every);
            assert_eq!(merge(&every), m, "{name} at {max}: merged");
            assert_eq!(merge(&first), m, "{name} at {max}: merged (TensorFlow's)");
            let graph_size = m.meta_graphs[1].graph_def.as_ref().unwrap().encoded_len() as u64;
            // TensorFlow's algorithm leaves the second graph whole in the root chunk; here both
            // graphs have chunks of their own and the root holds neither.
            let root = |out: &SplitOutput| out.chunks[0].len();
            assert!(root(&first) > graph_size, "{name} at {max}");
            assert!(root(&every) < graph_size, "{name} at {max}");
            assert!(!meta_graph_of_fields(&first).contains(&1));
            let metas = meta_graph_of_fields(&every);
            assert!(metas.contains(&0) && metas.contains(&1), "{name} at {max}");
            // The second graph is laid out as the first: as many chunked fields each.
            let count = |i| metas.iter().filter(|&&m| m == i).count();
            assert_eq!(count(0), count(1), "{name} at {max}: {metas:?}");
        }
    }
}

#[test]
fn a_model_under_the_maximum_is_not_split() {
    let m = with_copy("tf2_multi_sig");
    let out = split(&m, u64::MAX, MetaGraphSplitting::Every);
    assert!(out.message.chunked_fields.is_empty());
    assert_eq!(out.chunks.len(), 1);
}

#[test]
fn message_chunks_past_the_limit_are_found() {
    let m = with_copy("tf1_large_consts");
    let out = split(&m, 2000, MetaGraphSplitting::Every);
    assert_eq!(message_chunk_over(&out, MAX_PROTO_SIZE), None);
    // The root is a message chunk; a limit below its size names it.
    let root = out.chunks[0].len();
    assert_eq!(message_chunk_over(&out, root - 1), Some((0, root)));
    // Bytes chunks (constants' tensor_content) are never parsed, so never reported.
    let largest_bytes = out
        .chunks
        .iter()
        .filter(|c| matches!(c, Chunk::Bytes(_)))
        .map(Chunk::len)
        .max()
        .expect("constants split out at 2000 bytes");
    let largest_message = out
        .chunks
        .iter()
        .filter(|c| !matches!(c, Chunk::Bytes(_)))
        .map(Chunk::len)
        .max()
        .unwrap();
    if largest_bytes > largest_message {
        assert_eq!(message_chunk_over(&out, largest_message), None);
    }
}

#[test]
fn the_writer_splits_every_graph_when_asked() {
    let m = with_copy("tf2_multi_sig");
    let tmp = tempfile::tempdir().unwrap();
    let src = model("tf2_multi_sig");
    for (splitting, dir) in [
        (MetaGraphSplitting::First, "first"),
        (MetaGraphSplitting::Every, "every"),
    ] {
        let out = tmp.path().join(dir);
        let report = write_model_dir(
            &src,
            &out,
            wire(&m),
            &WriteOptions::default()
                .with_max_size(2000)
                .with_splitting(splitting),
        )
        .unwrap();
        assert!(report.written.chunked);
        let back = read_saved_model(&out).unwrap().message.to_vec().unwrap();
        assert_eq!(SavedModel::decode(back.as_slice()).unwrap(), m, "{dir}");
        assert!(out.join("fingerprint.pb").is_file());
    }
    // TensorFlow's layout keeps the second graph in the root chunk; the other does not.
    let root_size = |d: &str| {
        let (_, metadata) = FileChunks::open(&tmp.path().join(d).join("saved_model.cpb")).unwrap();
        metadata.chunks[0].size
    };
    let graph_size = m.meta_graphs[1].graph_def.as_ref().unwrap().encoded_len() as u64;
    assert!(root_size("first") > graph_size);
    assert!(root_size("every") < graph_size);
}

/// A record file whose records are never to be read: the refusal below must come before any
/// byte is.
#[derive(Debug)]
struct Unreadable;

impl unbound_wire::RecordSource for Unreadable {
    fn name(&self) -> &str {
        "unreadable"
    }
    fn read_record(&self, _: u64) -> Result<Bytes, unbound_wire::SourceError> {
        Err("read".into())
    }
    fn copy_record_to(
        &self,
        _: u64,
        _: &mut dyn std::io::Write,
    ) -> Result<u64, unbound_wire::SourceError> {
        Err("read".into())
    }
    fn decoding_is_costly(&self, _: u64) -> bool {
        false
    }
}

/// A message of type `name` with `fields`.
fn message(name: &str, fields: Vec<(u32, WireValue)>) -> WireMessage {
    let mut m = WireMessage::new(Some(unbound_test_support::descriptor(name)));
    m.fields = fields
        .into_iter()
        .map(|(number, value)| WireField { number, value })
        .collect();
    m
}

fn text(s: &str) -> WireValue {
    WireValue::Bytes(Payload::Inline(Bytes::from(s.to_string())))
}

#[test]
fn a_message_chunk_past_2_gib_is_refused_before_writing() {
    // The second MetaGraphDef's graph holds a 3 GiB node that is not a Const (its device string
    // is a lazy record of that size): split, it is a message chunk of its own, which protobuf
    // could not parse.
    let big = WireValue::Bytes(Payload::Record(RecordRef {
        reader: Arc::new(Box::new(Unreadable)),
        position: 0,
        len: 3 << 30,
    }));
    let node = message(
        "tensorflow.NodeDef",
        vec![(1, text("big")), (2, text("Foo")), (4, big)],
    );
    let graph = |nodes: Vec<WireMessage>| {
        message(
            "tensorflow.GraphDef",
            nodes
                .into_iter()
                .map(|n| (1, WireValue::Message(n)))
                .collect(),
        )
    };
    let small = message(
        "tensorflow.NodeDef",
        vec![(1, text("x")), (2, text("NoOp"))],
    );
    let meta =
        |g: WireMessage| message("tensorflow.MetaGraphDef", vec![(2, WireValue::Message(g))]);
    let saved_model = message(
        "tensorflow.SavedModel",
        vec![
            (2, WireValue::Message(meta(graph(vec![small])))),
            (2, WireValue::Message(meta(graph(vec![node])))),
        ],
    );
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let err = write_model_dir(
        &model("tf2_multi_sig"),
        &out,
        saved_model,
        &WriteOptions::default()
            .with_max_size(1 << 30)
            .with_splitting(MetaGraphSplitting::Every),
    )
    .unwrap_err();
    match &err {
        SavedModelError::UnparsableChunk { path, size, .. } => {
            assert_eq!(path, &out.join("saved_model.cpb"));
            assert!(*size > 3 << 30, "{err}");
        }
        other => panic!("expected UnparsableChunk, got {other}"),
    }
    assert!(err.to_string().contains("past protobuf's limit"), "{err}");
    assert!(!out.exists());
}
