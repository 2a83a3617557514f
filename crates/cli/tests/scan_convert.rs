//! End-to-end tests of `unbound scan` (exit codes, where each op is) and `unbound convert`
//! (a TensorFlow-made SavedModel's variables to safetensors and back, byte for byte; dry run
//! and JSON; strings refused, nothing written).

mod common;

use common::{describe, model, unbound};
use unbound_bundle::{saved_model_prefix, BundleReader, BundleWriter, Tensor};
use unbound_proto::tensorflow::DataType;

#[test]
fn scan_exits_1_only_when_a_denylisted_op_is_found() {
    let dir = model("tf2_multi_sig");
    let out = unbound(["scan".as_ref(), dir.as_os_str()]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stdout)
        .contains("does not contain the denylisted ops: PrintV2, ReadFile, WriteFile"));
    let out = unbound([
        "scan".as_ref(),
        dir.as_os_str(),
        "--op-denylist".as_ref(),
        "StatefulPartitionedCall,NoSuchOp".as_ref(),
        "--json".as_ref(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["found"], true);
    let f = &json["meta_graphs"][0]["findings"][0];
    assert_eq!(f["op"], "StatefulPartitionedCall");
    assert!(f["node"].as_str().is_some_and(|n| !n.is_empty()));
    let out = unbound([
        "scan".as_ref(),
        dir.as_os_str(),
        "--tags".as_ref(),
        "train".as_ref(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no MetaGraphDef has the tag set"));
}

#[test]
fn convert_round_trips_a_saved_models_variables() {
    let dir = model("tf1_large_consts");
    let tmp = tempfile::tempdir().unwrap();
    let st = tmp.path().join("st");
    let dry = unbound([
        "convert".as_ref(),
        dir.as_os_str(),
        st.as_os_str(),
        "--dry-run".as_ref(),
    ]);
    assert!(dry.status.success(), "{}", describe(&dry));
    assert!(String::from_utf8_lossy(&dry.stdout).contains("would convert"));
    assert!(!st.exists());
    let out = unbound([
        "convert".as_ref(),
        dir.as_os_str(),
        st.as_os_str(),
        "--json".as_ref(),
    ]);
    assert!(out.status.success(), "{}", describe(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["to"], "safetensors");
    assert!(st.join("model.safetensors").is_file());
    let back = tmp.path().join("back");
    let out = unbound(["convert".as_ref(), st.as_os_str(), back.as_os_str()]);
    assert!(out.status.success(), "{}", describe(&out));
    let src = BundleReader::open(&saved_model_prefix(&dir)).unwrap();
    let got = BundleReader::open(&back).unwrap();
    for key in src.tensor_keys() {
        let (a, b) = (src.read(key).unwrap(), got.read(key).unwrap());
        assert_eq!(a.dtype, b.dtype);
        assert_eq!(a.shape, b.shape);
        assert_eq!(a.data, b.data, "{}", String::from_utf8_lossy(key));
    }
    // Again onto the same output: refused.
    let out = unbound(["convert".as_ref(), st.as_os_str(), back.as_os_str()]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
}

#[test]
fn convert_refuses_strings_and_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let prefix = tmp.path().join("ck");
    let mut w = BundleWriter::create(&prefix).unwrap();
    w.add("vocab", &Tensor::strings(vec![1], ["x"])).unwrap();
    w.add(
        "c",
        &Tensor::raw(DataType::DtComplex64, vec![1], vec![0u8; 8]),
    )
    .unwrap();
    w.finish().unwrap();
    let st = tmp.path().join("st");
    let out = unbound(["convert".as_ref(), prefix.as_os_str(), st.as_os_str()]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("vocab") && err.contains("tensor c:"), "{err}");
    assert!(!st.exists());
    // A TensorFlow-made model with a string variable (and every other dtype).
    let out = unbound([
        "convert".as_ref(),
        model("tf2_multi_sig").as_os_str(),
        st.as_os_str(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("vocab_str/.ATTRIBUTES/VARIABLE_VALUE: safetensors has no string dtype"),
        "{err}"
    );
    assert!(!st.exists());
}
