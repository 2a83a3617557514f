//! `unbound tags` and `unbound export-tpu` end to end: what they print, their JSON, and their
//! refusals (exit 1, a message naming the directory and the fault, nothing written).

mod common;

use common::*;
use unbound_test_support::testdata::model;

#[test]
fn tags_lists_and_edits_tag_sets() {
    let src = model("tf2_multi_sig");
    let out = unbound(["tags".as_ref(), src.as_os_str()]);
    let out_text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(out_text, "serve\n");
    let tmp = tempfile::tempdir().unwrap();
    let dup = tmp.path().join("dup");
    let out = unbound([
        "tags".as_ref(),
        src.as_os_str(),
        dup.as_os_str(),
        "--duplicate".as_ref(),
        "serve=serve,tpu".as_ref(),
        "--json".as_ref(),
    ]);
    assert!(out.status.success(), "{}", describe(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        json["tag_sets"],
        serde_json::json!([["serve"], ["serve", "tpu"]])
    );
    let again = tmp.path().join("again");
    let out = unbound([
        "tags".as_ref(),
        dup.as_os_str(),
        again.as_os_str(),
        "--duplicate".as_ref(),
        "serve=tpu,serve".as_ref(),
    ]);
    assert_clean_failure(
        &out,
        &["a MetaGraphDef tagged {tpu,serve} already exists"],
        "duplicate tag-set",
    );
    assert!(!again.exists());
}

#[test]
fn export_tpu_reports_writes_and_refuses() {
    let src = model("tf2_multi_sig");
    let tmp = tempfile::tempdir().unwrap();
    let out_dir = tmp.path().join("tpu");
    let out = unbound([
        "export-tpu".as_ref(),
        src.as_os_str(),
        "--dry-run".as_ref(),
        "--function".as_ref(),
        "serving_default".as_ref(),
        "--json".as_ref(),
    ]);
    assert!(out.status.success(), "{}", describe(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["written"], serde_json::Value::Null);
    assert_eq!(
        json["tag_sets"],
        serde_json::json!([["serve"], ["serve", "tpu"]])
    );
    assert_eq!(
        json["functions"][0]["function"],
        "__inference_signature_wrapper_predict_48"
    );

    let out = unbound([
        "export-tpu".as_ref(),
        src.as_os_str(),
        out_dir.as_os_str(),
        "--function".as_ref(),
        "serving_default".as_ref(),
    ]);
    assert!(out.status.success(), "{}", describe(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("MetaGraphDef {serve} -> {serve,tpu} (keeping {serve})"),
        "{text}"
    );
    assert!(text.contains("TPUPartitionedCall"), "{text}");
    assert!(out_dir.join("saved_model.pb").is_file());
    assert!(out_dir.join("variables").is_dir());
    assert!(out_dir.join("fingerprint.pb").is_file());

    let refused = tmp.path().join("refused");
    let out = unbound([
        "export-tpu".as_ref(),
        out_dir.as_os_str(),
        refused.as_os_str(),
    ]);
    assert_clean_failure(
        &out,
        &["a MetaGraphDef tagged {serve,tpu} already exists"],
        "existing tag-set",
    );
    let out = unbound([
        "export-tpu".as_ref(),
        src.as_os_str(),
        refused.as_os_str(),
        "--function".as_ref(),
        "nope".as_ref(),
    ]);
    assert_clean_failure(
        &out,
        &["tf2_multi_sig", "\"nope\"", "serving_default"],
        "unknown function",
    );
    let out = unbound([
        "export-tpu".as_ref(),
        src.as_os_str(),
        refused.as_os_str(),
        "--source-tags".as_ref(),
        "train".as_ref(),
    ]);
    assert_clean_failure(
        &out,
        &["no MetaGraphDef is tagged {train}"],
        "unknown source tag-set",
    );
    assert!(!refused.exists());

    let cpu = tmp.path().join("cpu");
    let out = unbound([
        "export-tpu".as_ref(),
        "--to-cpu".as_ref(),
        out_dir.as_os_str(),
        cpu.as_os_str(),
    ]);
    assert!(out.status.success(), "{}", describe(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("MetaGraphDef {serve,tpu}: 1 TPUPartitionedCall -> StatefulPartitionedCall"),
        "{text}"
    );
}
