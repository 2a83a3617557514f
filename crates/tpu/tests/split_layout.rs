//! Exports written split: every MetaGraphDef's graph gets chunks of its own (not only the
//! first one's, as in TensorFlow's algorithm), and the split output reads back as the same
//! model as the unsplit one.

use std::path::Path;

use prost::Message;
use unbound_proto::tensorflow::proto_splitter::field_index::Kind;
use unbound_proto::tensorflow::proto_splitter::ChunkMetadata;
use unbound_proto::tensorflow::SavedModel;
use unbound_savedmodel::dir::read_saved_model;
use unbound_test_support::testdata::model;
use unbound_tpu::export::{export_cpu, export_tpu, ExportOptions};
use unbound_tpu::options::TpuOptions;
use unbound_tpu::tags::{edit_tags, TagEdit};

/// Small enough that each graph of tf2_multi_sig is split into several chunks.
const SMALL: u64 = 2000;

fn options(max_size: u64) -> ExportOptions {
    ExportOptions {
        functions: vec!["serving_default".into()],
        tags: vec!["serve".into(), "tpu".into()],
        source_tags: None,
        tpu_only: false,
        tpu: TpuOptions::default(),
        batch: Vec::new(),
        dry_run: false,
        max_size,
        writer: Default::default(),
    }
}

fn read(dir: &Path) -> (SavedModel, Option<ChunkMetadata>) {
    let file = read_saved_model(dir).unwrap();
    let bytes = file.message.to_vec().unwrap();
    (SavedModel::decode(bytes.as_slice()).unwrap(), file.metadata)
}

/// How many chunked fields lie under `meta_graphs[i].graph_def`, for each `i`.
fn graph_chunks(metadata: &ChunkMetadata, count: usize) -> Vec<usize> {
    let mut per = vec![0; count];
    for cf in &metadata.message.as_ref().unwrap().chunked_fields {
        let kinds: Vec<_> = cf.field_tag.iter().map(|t| t.kind.clone()).collect();
        if let [Some(Kind::Field(2)), Some(Kind::Index(i)), Some(Kind::Field(2)), ..] =
            kinds.as_slice()
        {
            per[*i as usize] += 1;
        }
    }
    per
}

/// The split and unsplit outputs are the same model; every graph has chunks; the root chunk
/// holds no whole graph.
fn check_split(split: &Path, whole: &Path) {
    let (a, metadata) = read(split);
    let (b, none) = read(whole);
    assert!(none.is_none(), "{} should be one .pb", whole.display());
    assert_eq!(a, b);
    let metadata = metadata.expect("a .cpb");
    let per = graph_chunks(&metadata, a.meta_graphs.len());
    assert!(
        per.iter().all(|&n| n > 0),
        "chunked fields per graph: {per:?}"
    );
    let smallest_graph = a
        .meta_graphs
        .iter()
        .map(|m| m.graph_def.as_ref().unwrap().encoded_len() as u64)
        .min()
        .unwrap();
    assert!(metadata.chunks[0].size < smallest_graph);
}

#[test]
fn an_export_written_split_splits_both_graphs() {
    let src = model("tf2_multi_sig");
    let tmp = tempfile::tempdir().unwrap();
    let (split, whole) = (tmp.path().join("split"), tmp.path().join("whole"));
    let report = export_tpu(&src, &split, &options(SMALL)).unwrap();
    assert!(report.written.unwrap().chunked);
    export_tpu(&src, &whole, &options(u64::MAX)).unwrap();
    check_split(&split, &whole);

    // The reverse rewrite of the split export, written split again.
    let (cpu_split, cpu_whole) = (tmp.path().join("cpu_split"), tmp.path().join("cpu_whole"));
    export_cpu(&split, &cpu_split, false, false, SMALL, Default::default()).unwrap();
    export_cpu(
        &whole,
        &cpu_whole,
        false,
        false,
        u64::MAX,
        Default::default(),
    )
    .unwrap();
    check_split(&cpu_split, &cpu_whole);
}

#[test]
fn a_duplicated_tag_set_written_split_splits_both_graphs() {
    let src = model("tf2_multi_sig");
    let tmp = tempfile::tempdir().unwrap();
    let edit = [TagEdit::Duplicate {
        from: vec!["serve".into()],
        to: vec!["serve".into(), "tpu".into()],
    }];
    let (split, whole) = (tmp.path().join("split"), tmp.path().join("whole"));
    edit_tags(&src, &split, &edit, SMALL, Default::default()).unwrap();
    edit_tags(&src, &whole, &edit, u64::MAX, Default::default()).unwrap();
    check_split(&split, &whole);
}
