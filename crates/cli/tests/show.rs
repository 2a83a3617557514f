//! `unbound show DIR [--json]` end to end on the TensorFlow-made models and a `.cpb` split.

mod common;

use std::ffi::OsStr;
use std::path::Path;

use common::*;
use serde_json::Value;

fn show(dir: &Path, json: bool) -> String {
    let mut args = vec![OsStr::new("show"), dir.as_os_str()];
    if json {
        args.push(OsStr::new("--json"));
    }
    let out = unbound(args);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    String::from_utf8(out.stdout).unwrap()
}

/// `expected.json`'s signature shape from ours: per tensor only dtype, name and shape.
fn signatures(info: &Value) -> Value {
    let mut sigs = info["meta_graphs"][0]["signatures"].clone();
    for sig in sigs.as_object_mut().unwrap().values_mut() {
        let sig = sig.as_object_mut().unwrap();
        sig.remove("defaults");
        for side in ["inputs", "outputs"] {
            for t in sig[side].as_object_mut().unwrap().values_mut() {
                let t = t.as_object_mut().unwrap();
                t.retain(|k, _| ["dtype", "name", "shape"].contains(&k.as_str()));
            }
        }
    }
    sigs
}

#[test]
fn json_carries_tensorflows_signatures_for_pb_and_cpb() {
    for name in ["tf2_multi_sig", "tf1_large_consts"] {
        let expected: Value = serde_json::from_str(
            &std::fs::read_to_string(model(&format!("{name}.expected.json"))).unwrap(),
        )
        .unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let split = tmp.path().join("split");
        let out = unbound([
            OsStr::new("split"),
            model(name).as_os_str(),
            split.as_os_str(),
            OsStr::new("--max-size"),
            OsStr::new("2000"),
        ]);
        assert!(out.status.success(), "{}", describe(&out));
        for (dir, format) in [(model(name), "pb"), (split, "cpb")] {
            let info: Value = serde_json::from_str(&show(&dir, true)).unwrap();
            assert_eq!(info["format"], format);
            assert_eq!(signatures(&info), expected["signatures"], "{name} {format}");
            assert_eq!(info["meta_graphs"][0]["tags"], expected["tags"]);
            assert_eq!(
                info["meta_graphs"][0]["graph_nodes"],
                expected["graph"]["nodes"]
            );
            let keys: Vec<&str> = info["checkpoint"]["keys"]
                .as_array()
                .unwrap()
                .iter()
                .map(|k| k["key"].as_str().unwrap())
                .collect();
            let want: Vec<&str> = expected["variables"]
                .as_object()
                .unwrap()
                .keys()
                .map(String::as_str)
                .collect();
            assert_eq!(keys, want);
        }
    }
}

#[test]
fn text_lists_signatures_like_saved_model_cli() {
    let text = show(&model("tf1_large_consts"), false);
    assert!(text.contains(
        "MetaGraphDef with tag-set: 'serve' contains the following SignatureDefs:\n\n\
         signature_def['serving_default']:\n  \
         The given SavedModel SignatureDef contains the following input(s):\n    \
         inputs['x'] tensor_info:\n        dtype: DT_FLOAT\n        shape: (-1, 16)\n        \
         name: x:0\n"
    ));
    assert!(text.contains("Format: .pb (saved_model.pb, 349073 bytes)"));
}

#[test]
fn a_directory_without_a_model_is_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    let out = unbound([OsStr::new("show"), tmp.path().as_os_str()]);
    assert_clean_failure(&out, &["no saved_model.cpb"], "show of an empty directory");
}
