//! Our deterministic serialization against protobuf C++'s (`SetSerializationDeterministic`),
//! byte for byte, on TensorFlow-made SavedModels and on `.cpb` splits of them.
//!
//! The oracle is the interop harness (`merger_harness read`, which merges with TensorFlow's
//! Merger and serializes deterministically). It runs when `UNBOUND_MERGER_HARNESS` names the
//! harness binary (`interop/fingerprint_check.sh` sets it); otherwise the test only says so.

use std::path::{Path, PathBuf};
use std::process::Command;

use unbound_savedmodel::dir::{read_saved_model, saved_model_descriptor};
use unbound_savedmodel::fingerprint::canonical::{Encoder, Source};
use unbound_savedmodel::write::{split_dir, WriteOptions};
use unbound_test_support::testdata::model as testdata;

fn check(harness: &Path, dir: &Path, work: &Path) {
    let out = work.join("tf.pb");
    let status = Command::new(harness)
        .arg("read")
        .arg("--type")
        .arg("tensorflow.SavedModel")
        .arg(dir.join("saved_model"))
        .arg(&out)
        .env("TF_CPP_MIN_LOG_LEVEL", "2")
        .stderr(std::process::Stdio::null())
        .status()
        .expect("run the harness");
    assert!(status.success(), "harness read {}", dir.display());
    let theirs = std::fs::read(&out).unwrap();
    let model = read_saved_model(dir).unwrap().message;
    let ours = Encoder::new()
        .encode(&[Source::Ref(&model)], &saved_model_descriptor().unwrap())
        .unwrap()
        .to_vec()
        .unwrap();
    assert_eq!(ours.len(), theirs.len(), "{}: length", dir.display());
    if let Some(at) = ours.iter().zip(&theirs).position(|(a, b)| a != b) {
        panic!("{}: first difference at byte {at}", dir.display());
    }
}

#[test]
fn deterministic_serialization_equals_protobuf_cpp() {
    let Some(harness) = std::env::var_os("UNBOUND_MERGER_HARNESS") else {
        eprintln!("UNBOUND_MERGER_HARNESS not set: skipped (run interop/fingerprint_check.sh)");
        return;
    };
    let harness = PathBuf::from(harness);
    let tmp = tempfile::tempdir().unwrap();
    let mut checked = 0;
    for model in ["tf2_multi_sig", "tf1_large_consts"] {
        check(&harness, &testdata(model), tmp.path());
        checked += 1;
        for max in [20_000, 2_000, 300] {
            let out = tmp.path().join(format!("{model}.{max}"));
            split_dir(
                &testdata(model),
                &out,
                &WriteOptions::default().with_max_size(max),
                &|_| {},
            )
            .unwrap();
            check(&harness, &out, tmp.path());
            checked += 1;
        }
    }
    eprintln!("deterministic serialization: {checked} models equal to protobuf C++");
}
