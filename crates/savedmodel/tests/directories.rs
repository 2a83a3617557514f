//! Whole SavedModel directories: split and merge carry every other file over, the round trip
//! gives the original model in its canonical form (the bytes protobuf C++ writes for it, which
//! TensorFlow's Merger writes too), and `.pbtxt` models are read.

use std::fs;
use std::path::Path;

use prost::Message;
use unbound_savedmodel::dir::read_saved_model;
use unbound_savedmodel::write::{merge_dir, split_dir, WriteOptions};
use unbound_test_support::testdata::model as testdata;

/// The canonical form (protobuf C++'s deterministic serialization) of the SavedModel `bytes`.
fn canonical(bytes: &[u8]) -> Vec<u8> {
    let desc = unbound_savedmodel::dir::saved_model_descriptor().unwrap();
    let schema = unbound_canonical::Schema::new(&desc);
    unbound_canonical::encode_to_vec(&schema, schema.root(), &[bytes]).unwrap()
}

fn files(root: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(root).unwrap().display().to_string();
                out.push((rel, fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn split_then_merge_restores_the_model_bytes_and_carries_files_over() {
    let src = testdata("tf1_large_consts");
    let tmp = tempfile::tempdir().unwrap();
    let split = tmp.path().join("split");
    let merged = tmp.path().join("merged");
    let report = split_dir(
        &src,
        &split,
        &WriteOptions::default().with_max_size(20_000),
        &|_| {},
    )
    .unwrap();
    assert!(report.written.chunked);
    assert!(split.join("saved_model.cpb").is_file());
    assert!(!split.join("saved_model.pb").exists());
    merge_dir(&split, &merged, &mut |_, _| {}).unwrap();
    let original = files(&src);
    // merge writes a fresh fingerprint.pb (tests/fingerprint.rs checks it).
    let round_trip: Vec<_> = files(&merged)
        .into_iter()
        .filter(|(n, _)| n != "fingerprint.pb")
        .collect();
    // Everything but the fingerprint (describes the old file) comes back byte for byte, the
    // model in its canonical form: TensorFlow's Python wrote this one otherwise (map entries
    // without their default keys), as the first assertion shows.
    let expected: Vec<_> = original
        .into_iter()
        .filter(|(n, _)| n != "fingerprint.pb")
        .map(|(n, bytes)| {
            if n == "saved_model.pb" {
                assert_ne!(
                    canonical(&bytes),
                    bytes,
                    "the test wants a non-canonical model"
                );
                (n, canonical(&bytes))
            } else {
                (n, bytes)
            }
        })
        .collect();
    assert_eq!(
        round_trip.iter().map(|f| &f.0).collect::<Vec<_>>(),
        expected.iter().map(|f| &f.0).collect::<Vec<_>>()
    );
    assert_eq!(round_trip, expected);
    // No temporary directories are left beside the outputs.
    assert_eq!(fs::read_dir(tmp.path()).unwrap().count(), 2);
}

#[test]
fn existing_output_is_refused_untouched() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    fs::create_dir(&out).unwrap();
    fs::write(out.join("keep"), b"mine").unwrap();
    let err = merge_dir(&testdata("tf2_multi_sig"), &out, &mut |_, _| {}).unwrap_err();
    assert!(err.to_string().contains("already exists"), "{err}");
    assert_eq!(fs::read(out.join("keep")).unwrap(), b"mine");
}

#[test]
fn pbtxt_models_are_read() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("m");
    fs::create_dir(&dir).unwrap();
    let bytes = fs::read(testdata("tf2_multi_sig").join("saved_model.pb")).unwrap();
    let desc = unbound_savedmodel::dir::saved_model_descriptor().unwrap();
    let dynamic = prost_reflect::DynamicMessage::decode(desc, bytes.as_slice()).unwrap();
    fs::write(dir.join("saved_model.pbtxt"), dynamic.to_text_format()).unwrap();
    let read = read_saved_model(&dir).unwrap();
    let ours =
        unbound_proto::tensorflow::SavedModel::decode(read.message.to_vec().unwrap().as_slice())
            .unwrap();
    let theirs = unbound_proto::tensorflow::SavedModel::decode(bytes.as_slice()).unwrap();
    assert_eq!(ours, theirs);
}

/// A split into chunks fingerprints its output from the split in memory, made while the
/// source was verified (the merge of the graph taking the chunks' fields as they are held):
/// the fingerprint.pb written is what a fresh computation from the `.cpb` file gives, at
/// sizes that put the nodes in several chunks, in one, or leave most of them in the root.
#[test]
fn a_split_into_chunks_writes_the_fingerprint_a_fresh_computation_gives() {
    use unbound_savedmodel::fingerprint::{fingerprint_dir, read_fingerprint};
    for model in ["tf2_multi_sig", "tf1_large_consts"] {
        for max_size in [2_000, 10_000, 40_000] {
            let tmp = tempfile::tempdir().unwrap();
            let out = tmp.path().join("out");
            let src = testdata(model);
            split_dir(
                &src,
                &out,
                &WriteOptions::default().with_max_size(max_size),
                &|_| {},
            )
            .unwrap();
            assert!(out.join("saved_model.cpb").exists(), "{model} {max_size}");
            let mut written = read_fingerprint(&out).unwrap();
            let mut fresh = fingerprint_dir(&out).unwrap();
            written.uuid.clear();
            fresh.uuid.clear();
            assert_eq!(written, fresh, "{model} at {max_size}");
        }
    }
}

/// A split with nothing to split writes the model's bytes again and reuses the fingerprint
/// verify computed for them: the fingerprint.pb written is what a fresh computation gives
/// (but its own uuid), for a model with a checkpoint and one without.
#[test]
fn a_split_with_nothing_to_split_writes_the_fingerprint_a_fresh_computation_gives() {
    use unbound_savedmodel::fingerprint::{fingerprint_dir, read_fingerprint};
    for model in ["tf2_multi_sig", "tf1_large_consts"] {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("out");
        let src = testdata(model);
        split_dir(
            &src,
            &out,
            &WriteOptions::default().with_max_size(1 << 30),
            &|_| {},
        )
        .unwrap();
        assert_eq!(
            fs::read(out.join("saved_model.pb")).unwrap(),
            fs::read(src.join("saved_model.pb")).unwrap()
        );
        let mut written = read_fingerprint(&out).unwrap();
        let mut fresh = fingerprint_dir(&out).unwrap();
        assert_ne!(written.uuid, fresh.uuid);
        assert!(!written.uuid.is_empty());
        written.uuid.clear();
        fresh.uuid.clear();
        assert_eq!(written, fresh, "{model}");
    }
}

/// A `.cpb` split again with a maximum it fits under is written as one `saved_model.pb`
/// holding the merged model, never the `.cpb` file's own bytes under the `.pb` name (which an
/// earlier version wrote, reusing the `.cpb`'s fingerprint for a copy): it verifies, reads
/// back as the source model, and its fingerprint is a fresh computation's.
#[test]
fn a_cpb_with_nothing_left_to_split_is_written_as_its_merged_model() {
    use unbound_savedmodel::fingerprint::{fingerprint_dir, read_fingerprint};
    use unbound_savedmodel::verify::verify_dir;
    for model in ["tf2_multi_sig", "tf1_large_consts"] {
        let tmp = tempfile::tempdir().unwrap();
        let (chunked, out) = (tmp.path().join("chunked"), tmp.path().join("out"));
        let src = testdata(model);
        split_dir(
            &src,
            &chunked,
            &WriteOptions::default().with_max_size(10_000),
            &|_| {},
        )
        .unwrap();
        assert!(chunked.join("saved_model.cpb").exists(), "{model}");
        split_dir(
            &chunked,
            &out,
            &WriteOptions::default().with_max_size(1 << 30),
            &|_| {},
        )
        .unwrap();
        assert_eq!(
            fs::read(out.join("saved_model.pb")).unwrap(),
            canonical(&fs::read(src.join("saved_model.pb")).unwrap()),
            "{model}"
        );
        let report = verify_dir(&out);
        assert!(report.faults.is_empty(), "{model}: {:?}", report.faults);
        let mut written = read_fingerprint(&out).unwrap();
        let mut fresh = fingerprint_dir(&out).unwrap();
        written.uuid.clear();
        fresh.uuid.clear();
        assert_eq!(written, fresh, "{model}");
    }
}
