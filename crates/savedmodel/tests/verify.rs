//! `verify_dir` in the library: the object graphs' variables must be in the bundle, assets
//! must exist, and a clean model reports what it checked.

use std::fs;

use unbound_bundle::{BundleReader, BundleWriter};
use unbound_savedmodel::verify::verify_dir;
use unbound_test_support::testdata::{copy_dir, model as testdata};

#[test]
fn a_clean_model_reports_what_was_checked() {
    let report = verify_dir(&testdata("tf2_multi_sig"));
    assert!(report.faults.is_empty(), "{:?}", report.faults);
    let summary = report.checked.join("; ");
    assert!(summary.contains("saved_model.pb parses"), "{summary}");
    assert!(summary.contains("variables: 10 keys"), "{summary}");
    assert!(
        summary.contains("fingerprint.pb matches the model and checkpoint"),
        "{summary}"
    );
}

#[test]
fn a_variable_missing_from_the_bundle_is_caught() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("m");
    copy_dir(&testdata("tf2_multi_sig"), &dir);
    // The rewritten index no longer matches the fingerprint's checkpoint hash: not the
    // fault looked for here.
    fs::remove_file(dir.join("fingerprint.pb")).unwrap();
    // Rewrite the bundle without w_f32's value.
    let prefix = dir.join("variables/variables");
    let reader = BundleReader::open(&prefix).unwrap();
    let tensors: Vec<(String, _)> = reader
        .tensor_keys()
        .map(|k| String::from_utf8(k.to_vec()).unwrap())
        .filter(|k| k != "w_f32/.ATTRIBUTES/VARIABLE_VALUE")
        .map(|k| {
            let t = reader.read(&k).unwrap();
            (k, t)
        })
        .collect();
    drop(reader);
    fs::remove_dir_all(dir.join("variables")).unwrap();
    fs::create_dir_all(dir.join("variables")).unwrap();
    let mut w = BundleWriter::create(&prefix).unwrap();
    for (k, t) in &tensors {
        w.add(k, t).unwrap();
    }
    w.finish().unwrap();
    let report = verify_dir(&dir);
    let lines: Vec<String> = report.faults.iter().map(|f| f.to_string()).collect();
    // Named by the checkpoint's object graph, and by the SavedModel's object graph.
    assert!(
        lines.iter().any(|l| l.contains("variables.index")
            && l.contains("w_f32/.ATTRIBUTES/VARIABLE_VALUE")
            && l.contains("object graph names")),
        "{lines:#?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("variable w_f32 (") && l.contains("is not in the bundle")),
        "{lines:#?}"
    );
    assert_eq!(lines.len(), 2, "{lines:#?}");
}

#[test]
fn a_missing_asset_is_caught() {
    use prost::Message;
    use unbound_proto::tensorflow::{AssetFileDef, SavedModel};
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("m");
    copy_dir(&testdata("tf1_large_consts"), &dir);
    let pb = dir.join("saved_model.pb");
    let mut model = SavedModel::decode(fs::read(&pb).unwrap().as_slice()).unwrap();
    model.meta_graphs[0].asset_file_def.push(AssetFileDef {
        tensor_info: None,
        filename: "vocab.txt".into(),
    });
    fs::write(&pb, model.encode_to_vec()).unwrap();
    let report = verify_dir(&dir);
    assert_eq!(report.faults.len(), 1, "{:?}", report.faults);
    assert!(report.faults[0].file.ends_with("assets/vocab.txt"));
    fs::create_dir_all(dir.join("assets")).unwrap();
    fs::write(dir.join("assets/vocab.txt"), "a\nb\n").unwrap();
    assert!(verify_dir(&dir).faults.is_empty());
}
