//! A `.cpb` whose graph nodes are two message chunks of 64 MiB or more, which merges stream
//! rather than decode whole (on both cores: `unbound_chunked`'s `ahead.rs`), or whose two
//! constants' values are bytes chunks that large. `verify` streams each once: the check of
//! its records leaves its decompression to the merge (`check_chunks_deferring`) and streams
//! what the merge did not (`check_deferred`), and the fingerprint takes each chunk's hash
//! from that stream (`StreamPrints`). What it reports must be what the
//! separate passes find: the fingerprint equal to the one computed on its own from the file,
//! and a damaged chunk refused.

use unbound_records::{Compression, RecordReader};
use unbound_savedmodel::fingerprint::{fingerprint_dir, write_fingerprint};
use unbound_savedmodel::verify::verify_dir;
use unbound_test_support::streamed_cpb::{self, Layout};

#[test]
fn verify_streams_a_large_chunk_once_and_finds_what_the_separate_passes_find() {
    for (compression, layout) in [
        (Compression::Zstd { level: 1 }, Layout::Nodes),
        (Compression::None, Layout::Nodes),
        (Compression::Zstd { level: 1 }, Layout::Values),
    ] {
        let dir = tempfile::tempdir().unwrap();
        streamed_cpb::write(dir.path(), compression, 2, layout).unwrap();
        let cpb = dir.path().join("saved_model.cpb");
        let reader = RecordReader::open(&cpb).unwrap();
        let largest = reader
            .chunks()
            .map(|c| c.unwrap().decoded_data_size)
            .max()
            .unwrap();
        assert!(largest >= 64 << 20, "no chunk to stream ({largest} bytes)");
        // The fingerprint computed on its own from the file, stored; verify must agree.
        let alone = fingerprint_dir(dir.path()).unwrap();
        write_fingerprint(dir.path(), &alone).unwrap();
        let report = verify_dir(dir.path());
        assert!(
            report.faults.is_empty(),
            "{compression:?} {layout:?}: {:?}",
            report.faults
        );
        assert!(
            report
                .checked
                .iter()
                .any(|c| c.contains("fingerprint.pb matches")),
            "{compression:?} {layout:?}: {:?}",
            report.checked
        );

        // A byte of the chunk changed: refused, whichever pass meets it first.
        let mut bytes = std::fs::read(&cpb).unwrap();
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0x40;
        std::fs::write(&cpb, &bytes).unwrap();
        let report = verify_dir(dir.path());
        assert!(
            !report.faults.is_empty(),
            "{compression:?} {layout:?}: a damaged chunk passed"
        );
    }
}

/// `merge` of a model of large values writes its canonical form without reading the values
/// into memory (`fingerprint/opaque_values.rs`): the very bytes of the canonical form made
/// of the whole model.
#[test]
fn merge_writes_the_canonical_form_of_a_model_of_values() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir(&src).unwrap();
    streamed_cpb::write(&src, Compression::Zstd { level: 1 }, 2, Layout::Nodes).unwrap();
    let out = dir.path().join("out");
    unbound_savedmodel::write::merge_dir(&src, &out, &mut |_, _| {}).unwrap();
    let desc = unbound_proto::descriptor_pool()
        .get_message_by_name("tensorflow.SavedModel")
        .unwrap();
    let schema = unbound_canonical::Schema::new(&desc);
    let whole = streamed_cpb::model(2).unwrap().to_vec().unwrap();
    let canonical = unbound_canonical::encode_to_vec(&schema, schema.root(), &[&whole]).unwrap();
    let written = std::fs::read(out.join("saved_model.pb")).unwrap();
    assert!(
        written == canonical,
        "merge did not write the canonical form"
    );
    let report = verify_dir(&out);
    assert!(report.faults.is_empty(), "{:?}", report.faults);
}

/// `merge` of a `.cpb` whose graph's chunks it streams, with a stored `fingerprint.pb`:
/// compared from the fields of the graph those streams set apart and the nodes `merge`
/// encodes once (`fingerprint/pending.rs`), it is accepted when it is the model's, and
/// refused when its graph hash is not.
#[test]
fn merge_compares_a_stored_fingerprint_from_the_streamed_graph() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir(&src).unwrap();
    streamed_cpb::write(&src, Compression::None, 2, Layout::Graph).unwrap();
    let alone = fingerprint_dir(&src).unwrap();
    write_fingerprint(&src, &alone).unwrap();
    let merged = dir.path().join("merged");
    unbound_savedmodel::write::merge_dir(&src, &merged, &mut |_, _| {}).unwrap();
    assert!(merged.join("saved_model.pb").is_file());

    let mut stale = alone.clone();
    stale.graph_def_program_hash ^= 1;
    write_fingerprint(&src, &stale).unwrap();
    let refused = dir.path().join("refused");
    let err = unbound_savedmodel::write::merge_dir(&src, &refused, &mut |_, _| {}).unwrap_err();
    assert!(err.to_string().contains("graph_def_program_hash"), "{err}");
    assert!(!refused.exists());
}
