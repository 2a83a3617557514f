//! Fingerprints of TensorFlow-made SavedModels against TensorFlow 2.21's own values: the
//! `fingerprint.pb` TensorFlow's Python save wrote, and `CreateFingerprintDef` run by the
//! interop harness (`merger_harness fingerprint`), for `.pb` models and for `.cpb` splits.

use std::path::{Path, PathBuf};

use unbound_savedmodel::fingerprint::canonical::{Encoder, Source};
use unbound_savedmodel::fingerprint::{
    fingerprint_dir, read_fingerprint, write_fingerprint, PRODUCER_CPB, PRODUCER_PB,
};
use unbound_savedmodel::write::{merge_dir, split_dir, write_model_dir, WriteOptions};
use unbound_test_support::testdata::{copy_dir, model as testdata};
use unbound_test_support::{descriptor, fingerprint_fields as hashes};
use unbound_wire::{Payload, WireField, WireMessage, WireValue};

#[test]
fn tf2_model_matches_the_fingerprint_tensorflow_saved() {
    let dir = testdata("tf2_multi_sig");
    let ours = fingerprint_dir(&dir).unwrap();
    let theirs = read_fingerprint(&dir).unwrap();
    assert_eq!(hashes(&ours), hashes(&theirs));
    assert_eq!(hashes(&ours)[5], PRODUCER_PB as u64);
    assert_ne!(ours.uuid, theirs.uuid);
    assert!(ours.uuid.len() >= 20 && ours.uuid.bytes().all(|b| b.is_ascii_digit()));
}

#[test]
fn tf1_model_matches_tensorflow() {
    // `merger_harness fingerprint testdata/models/tf1_large_consts` (TensorFlow 2.21).
    let ours = fingerprint_dir(&testdata("tf1_large_consts")).unwrap();
    assert_eq!(
        hashes(&ours),
        [
            5731778296566064998,
            3752475815895365541,
            17982758089025922183,
            0,
            15705411676348577676,
            4
        ]
    );
}

/// Splits at small sizes, as computed by TensorFlow for `unbound split` outputs (the `.cpb`
/// path hashes raw chunks, so these pin our splitter's output too). `tf2_multi_sig`, written
/// by TensorFlow's Python, is mostly not in canonical form: it is split from its canonical
/// form (`fingerprint::in_canonical_form`), as protobuf C++ would serialize it.
#[test]
fn cpb_splits_match_tensorflow() {
    let cases: [(&str, u64, [u64; 6]); 4] = [
        (
            "tf1_large_consts",
            2000,
            [
                9636868881702684450,
                11892508246071111234,
                2511447370828981844,
                17454850744699451884,
                15705411676348577676,
                2,
            ],
        ),
        (
            "tf1_large_consts",
            20000,
            [
                13745907153696047725,
                15344745069119144065,
                2511447370828981844,
                17454850744699451884,
                15705411676348577676,
                2,
            ],
        ),
        (
            "tf2_multi_sig",
            2000,
            [
                3736983871392955915,
                14164577886907479519,
                12452207982299823181,
                3458402271149004290,
                13818791686636189008,
                2,
            ],
        ),
        (
            "tf2_multi_sig",
            20000,
            [
                18373688977008606640,
                2710825989121739100,
                12452207982299823181,
                3458402271149004290,
                13818791686636189008,
                2,
            ],
        ),
    ];
    let tmp = tempfile::tempdir().unwrap();
    for (model, max, want) in cases {
        let out = tmp.path().join(format!("{model}.{max}"));
        let options = WriteOptions::default().with_max_size(max);
        split_dir(&testdata(model), &out, &options, &|_| {}).unwrap();
        let ours = fingerprint_dir(&out).unwrap();
        assert_eq!(hashes(&ours), want, "{model} split at {max}");
        assert_eq!(hashes(&ours)[5], PRODUCER_CPB as u64);
        // split wrote the same fingerprint.pb.
        let written = read_fingerprint(&out).unwrap();
        assert_eq!(
            hashes(&written),
            want,
            "fingerprint.pb of {model} split at {max}"
        );
    }
}

/// A copy of testdata `model` in `to` whose `saved_model.pb` is its deterministic
/// serialization (TensorFlow's Python writes maps in no set order), with the fingerprint of
/// that file.
fn canonical_copy(model: &str, to: &Path) -> PathBuf {
    copy_dir(&testdata(model), to);
    let pb = to.join("saved_model.pb");
    let bytes = bytes::Bytes::from(std::fs::read(&pb).unwrap());
    let desc = descriptor("tensorflow.SavedModel");
    let canonical = Encoder::new()
        .encode(&[Source::Raw(bytes.clone())], &desc)
        .unwrap()
        .to_vec()
        .unwrap();
    std::fs::write(&pb, &canonical).unwrap();
    assert!(Encoder::new().is_canonical(&bytes::Bytes::from(canonical), &desc));
    write_fingerprint(to, &fingerprint_dir(to).unwrap()).unwrap();
    to.to_path_buf()
}

/// The `fingerprint.pb` a split writes is computed from the split in memory, taking the
/// graph's serialized nodes as canonical without a check when the source is canonical. At
/// every size, from most nodes chunked or edited (constants' values moved out, nodes and
/// functions moved whole, the library chunked) to nothing split, it equals the fingerprint of
/// the `.cpb` read back from disk, which checks every node; for sources canonical or not. The
/// same for the merge of each split.
#[test]
fn split_and_merge_write_the_fingerprints_of_their_outputs_read_back() {
    let tmp = tempfile::tempdir().unwrap();
    for model in ["tf1_large_consts", "tf2_multi_sig"] {
        let canonical = canonical_copy(model, &tmp.path().join(model));
        for src in [testdata(model), canonical] {
            for max in [200, 500, 1000, 2000, 3500, 5000, 8000, 12000, 20000, 40000] {
                let out = tmp.path().join(format!("{model}.{max}"));
                split_dir(
                    &src,
                    &out,
                    &WriteOptions::default().with_max_size(max),
                    &|_| {},
                )
                .unwrap();
                let written = read_fingerprint(&out).unwrap();
                let read_back = fingerprint_dir(&out).unwrap();
                assert_eq!(
                    hashes(&written),
                    hashes(&read_back),
                    "{} split at {max}",
                    src.display()
                );
                // Merged back: the fingerprint merge computes from the model in memory
                // (checking the graph's nodes once for both of its hashes) is the one of the
                // file it writes, read back, and the source's own.
                let merged = tmp.path().join(format!("{model}.{max}.merged"));
                merge_dir(&out, &merged, &mut |_, _| {}).unwrap();
                let written = read_fingerprint(&merged).unwrap();
                assert_eq!(hashes(&written), hashes(&fingerprint_dir(&merged).unwrap()));
                assert_eq!(hashes(&written), hashes(&fingerprint_dir(&src).unwrap()));
                std::fs::remove_dir_all(&out).unwrap();
                std::fs::remove_dir_all(&merged).unwrap();
            }
        }
    }
}

/// A model written by a command can hold built messages whose serialized parts were never
/// checked: here a node built from its bytes (as a merge builds a node whose constant came from
/// a chunk) gains an attribute whose value is not in canonical form (a length written in two
/// bytes). The fingerprint the writer stores must be the one of the file it wrote.
#[test]
fn a_built_node_with_a_non_canonical_attribute_fingerprints_as_its_file() {
    let tmp = tempfile::tempdir().unwrap();
    let src = canonical_copy("tf2_multi_sig", &tmp.path().join("src"));
    let desc = descriptor("tensorflow.SavedModel");
    let bytes = bytes::Bytes::from(std::fs::read(src.join("saved_model.pb")).unwrap());
    let mut model = WireMessage::parse(&bytes, Some(desc.clone())).unwrap();
    let field =
        |d: &prost_reflect::MessageDescriptor, name: &str| d.get_field_by_name(name).unwrap();
    let meta_fd = field(&desc, "meta_graphs");
    let meta_desc = descriptor("tensorflow.MetaGraphDef");
    let graph_fd = field(&meta_desc, "graph_def");
    let node_fd = field(&descriptor("tensorflow.GraphDef"), "node");
    let node = model
        .repeated_message_mut(&meta_fd, 0)
        .unwrap()
        .singular_message_mut(&graph_fd)
        .unwrap()
        .repeated_message_mut(&node_fd, 0)
        .unwrap();
    // attr { key: "zz" value { s: "x" } }, the value's length as 0x81 0x00.
    let entry: &[u8] = &[0x0a, 0x02, b'z', b'z', 0x12, 0x04, 0x12, 0x81, 0x00, b'x'];
    node.fields.push(WireField {
        number: 5,
        value: WireValue::Bytes(Payload::Inline(bytes::Bytes::from_static(entry))),
    });
    let out = tmp.path().join("out");
    write_model_dir(
        &src,
        &out,
        model,
        &WriteOptions::default().with_max_size(1 << 30),
    )
    .unwrap();
    let stored = read_fingerprint(&out).unwrap();
    let from_file = fingerprint_dir(&out).unwrap();
    assert_eq!(hashes(&stored), hashes(&from_file));
}

/// Issue 29's silent wrong answer: `tf2_multi_sig` with `1a 00 0a 00` appended (an empty
/// unknown field 3, then field 1, an int64, as length-delimited: protobuf keeps it as unknown,
/// after field 3). Whatever merge writes, its `fingerprint.pb` is that of the file written,
/// which parses to the input's message: the input's fingerprint.
#[test]
fn merge_of_a_model_with_a_known_number_of_another_wire_type_fingerprints_what_it_wrote() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    copy_dir(&testdata("tf2_multi_sig"), &src);
    std::fs::remove_file(src.join("fingerprint.pb")).unwrap();
    let mut bytes = std::fs::read(src.join("saved_model.pb")).unwrap();
    bytes.extend_from_slice(&[0x1a, 0x00, 0x0a, 0x00]);
    std::fs::write(src.join("saved_model.pb"), &bytes).unwrap();
    let merged = tmp.path().join("merged");
    merge_dir(&src, &merged, &mut |_, _| {}).unwrap();
    let stored = read_fingerprint(&merged).unwrap();
    assert_eq!(hashes(&stored), hashes(&fingerprint_dir(&merged).unwrap()));
    assert_eq!(hashes(&stored), hashes(&fingerprint_dir(&src).unwrap()));
    // Written losslessly, in canonical form: the unknown fields keep their order, after the
    // known ones.
    let written = std::fs::read(merged.join("saved_model.pb")).unwrap();
    assert_eq!(written, canonical(&bytes));
    assert!(written.ends_with(&[0x1a, 0x00, 0x0a, 0x00]));
}

/// The canonical form (protobuf C++'s deterministic serialization) of the SavedModel `bytes`.
fn canonical(bytes: &[u8]) -> Vec<u8> {
    let desc = unbound_savedmodel::dir::saved_model_descriptor().unwrap();
    let schema = unbound_canonical::Schema::new(&desc);
    unbound_canonical::encode_to_vec(&schema, schema.root(), &[bytes]).unwrap()
}

/// A `.pb` whose fields come out of field-number order (the schema version after the meta
/// graphs, as another writer may put it) is merged to its canonical form, the one its
/// original's fields in order have too, fingerprinted as TensorFlow fingerprinted the original.
#[test]
fn merge_writes_the_canonical_form_of_a_model_out_of_field_order() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    copy_dir(&testdata("tf2_multi_sig"), &src);
    std::fs::remove_file(src.join("fingerprint.pb")).unwrap();
    let original = std::fs::read(src.join("saved_model.pb")).unwrap();
    // saved_model_schema_version = 1 (field 1, a varint) comes first.
    assert_eq!(&original[..2], &[0x08, 0x01]);
    let mut moved = original[2..].to_vec();
    moved.extend_from_slice(&[0x08, 0x01]);
    std::fs::write(src.join("saved_model.pb"), &moved).unwrap();
    let merged = tmp.path().join("merged");
    merge_dir(&src, &merged, &mut |_, _| {}).unwrap();
    let written = std::fs::read(merged.join("saved_model.pb")).unwrap();
    assert_eq!(written, canonical(&original));
    assert_ne!(written, moved);
    let stored = read_fingerprint(&merged).unwrap();
    let tensorflows = read_fingerprint(&testdata("tf2_multi_sig")).unwrap();
    assert_eq!(hashes(&stored), hashes(&tensorflows));
}

#[test]
fn merge_writes_the_fingerprint_of_the_merged_model() {
    let tmp = tempfile::tempdir().unwrap();
    let split = tmp.path().join("split");
    let merged = tmp.path().join("merged");
    let src = testdata("tf2_multi_sig");
    split_dir(
        &src,
        &split,
        &WriteOptions::default().with_max_size(5000),
        &|_| {},
    )
    .unwrap();
    merge_dir(&split, &merged, &mut |_, _| {}).unwrap();
    let written = read_fingerprint(&merged).unwrap();
    // The merged model is the original one: TensorFlow's own fingerprint.
    assert_eq!(hashes(&written), hashes(&read_fingerprint(&src).unwrap()));
}

fn varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends a length-delimited field.
fn put(out: &mut Vec<u8>, number: u32, body: &[u8]) {
    varint(u64::from(number) << 3 | 2, out);
    varint(body.len() as u64, out);
    out.extend_from_slice(body);
}

/// A SavedModel whose object graph has one concrete function `name` with `signature` as its
/// `canonicalized_input_signature`.
fn model_with_function(name: &str, signature: &[u8]) -> Vec<u8> {
    let mut function = Vec::new();
    put(&mut function, 3, signature);
    let mut entry = Vec::new();
    put(&mut entry, 1, name.as_bytes());
    put(&mut entry, 2, &function);
    // SavedModel.meta_graphs > MetaGraphDef.object_graph_def > concrete_functions entry.
    nested(&[2, 7, 2], &entry)
}

/// `inner` as the only field at the end of the path of length-delimited field `numbers`,
/// outermost first.
fn nested(numbers: &[u32], inner: &[u8]) -> Vec<u8> {
    numbers.iter().rev().fold(inner.to_vec(), |body, &number| {
        let mut out = Vec::new();
        put(&mut out, number, &body);
        out
    })
}

fn write_model(root: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("saved_model.pb"), bytes).unwrap();
    dir
}

#[test]
fn absurd_nesting_is_an_error_not_a_crash() {
    // StructuredValue.list_value (51) -> ListValue.values (1) -> ..., 20000 levels deep.
    let mut value = Vec::new();
    for _ in 0..20_000 {
        let mut list = Vec::new();
        put(&mut list, 1, &value);
        value.clear();
        put(&mut value, 51, &list);
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = write_model(tmp.path(), "deep", &model_with_function("f_1", &value));
    let err = fingerprint_dir(&dir).unwrap_err().to_string();
    assert!(err.contains("nesting deeper than"), "{err}");
}

#[test]
fn models_tensorflow_cannot_fingerprint_are_refused_clearly() {
    let tmp = tempfile::tempdir().unwrap();
    // A concrete function name without a UID suffix (TensorFlow's GetSuffixUID fails).
    let dir = write_model(
        tmp.path(),
        "no_uid",
        &model_with_function("no_uid_here", b""),
    );
    let err = fingerprint_dir(&dir).unwrap_err().to_string();
    assert!(
        err.contains("saved_model.pb") && err.contains("\"no_uid_here\""),
        "{err}"
    );
    // split refuses too, and leaves nothing behind.
    let out = tmp.path().join("out");
    let err = split_dir(
        &dir,
        &out,
        &WriteOptions::default().with_max_size(1 << 30),
        &|_| {},
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("cannot fingerprint"), "{err}");
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 1);
    // So do a split into chunks and verify, whose checks skip the hashes of a canonical model
    // with no fingerprint.pb to compare, but not the ones that fail here.
    assert!(!dir.join("fingerprint.pb").exists());
    let err = split_dir(
        &dir,
        &out,
        &WriteOptions::default().with_max_size(1),
        &|_| {},
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("cannot fingerprint"), "{err}");
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 1);
    let faults = unbound_savedmodel::verify::verify_dir(&dir).faults;
    assert!(
        faults.iter().any(|f| f.fault.contains("\"no_uid_here\"")),
        "{faults:?}"
    );
    // No meta graph at all.
    let dir = write_model(tmp.path(), "empty", b"");
    let err = fingerprint_dir(&dir).unwrap_err().to_string();
    assert!(err.contains("no meta graph"), "{err}");
    // Neither saved_model.pb nor .cpb.
    let err = fingerprint_dir(tmp.path()).unwrap_err().to_string();
    assert!(err.contains("neither"), "{err}");
}

/// A canonical model whose graph has a call node without its function (`SimpleDelete` has
/// nothing to regularize, and TensorFlow reads past the end of the attr map): `fingerprint`
/// refuses it, and so do `verify` and a split into chunks, though with no fingerprint.pb to
/// compare they hash nothing of a canonical model.
#[test]
fn a_call_node_without_its_function_is_refused_without_a_stored_fingerprint() {
    let mut node = Vec::new();
    put(&mut node, 1, b"call");
    put(&mut node, 2, b"StatefulPartitionedCall");
    // SavedModel.meta_graphs > MetaGraphDef.graph_def > GraphDef.node.
    let model = nested(&[2, 2, 1], &node);
    let tmp = tempfile::tempdir().unwrap();
    let dir = write_model(tmp.path(), "no_f", &model);
    let err = fingerprint_dir(&dir).unwrap_err().to_string();
    assert!(err.contains("has no attr \"f\""), "{err}");
    let faults = unbound_savedmodel::verify::verify_dir(&dir).faults;
    assert!(
        faults.iter().any(|f| f.fault.contains("has no attr \"f\"")),
        "{faults:?}"
    );
    let out = tmp.path().join("out");
    let err = split_dir(
        &dir,
        &out,
        &WriteOptions::default().with_max_size(1),
        &|_| {},
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("has no attr \"f\""), "{err}");
    assert!(!out.exists());
}
