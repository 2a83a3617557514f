//! `unbound externalize` end to end: the dry run's report, the output (verified, smaller, its
//! constants in the checkpoint beside the model's own variables), the same output from a
//! `.pb` and from a `.cpb` of it, and refusals. TensorFlow's loaders on the output are checked
//! by interop/externalize/check.sh.

mod common;

use common::*;
use unbound_test_support::testdata::model;

fn json(out: &std::process::Output) -> serde_json::Value {
    assert!(out.status.success(), "{}", describe(out));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn dry_run_lists_what_moves_and_writes_nothing() {
    let src = model("tf1_large_consts");
    let tmp = tempfile::tempdir().unwrap();
    let out_dir = tmp.path().join("out");
    let report = json(&unbound([
        "externalize".as_ref(),
        src.as_os_str(),
        out_dir.as_os_str(),
        "--min-size".as_ref(),
        "1K".as_ref(),
        "--dry-run".as_ref(),
        "--json".as_ref(),
    ]));
    assert!(!out_dir.exists());
    assert_eq!(report["written"], false);
    let moved = report["moved"].as_array().unwrap();
    let find = |node: &str| moved.iter().find(|m| m["node"] == node).cloned();
    let big = find("const_200k").expect("const_200k moves");
    assert_eq!(big["function"], serde_json::Value::Null);
    assert_eq!(big["dtype"], "float32");
    assert_eq!(big["shape"], serde_json::json!([16, 3200]));
    assert_eq!(big["bytes"], 204800);
    assert_eq!(big["variable"], "externalized/const_200k");
    let in_function = find("fn_const_4k").expect("the function's constant moves");
    assert!(in_function["function"]
        .as_str()
        .unwrap()
        .starts_with("__inference_scale_and_shift"));
    assert!(report["model_bytes_after"].as_u64() < report["model_bytes_before"].as_u64());
    // Text: one line per constant, then the sizes.
    let out = unbound([
        "externalize".as_ref(),
        src.as_os_str(),
        out_dir.as_os_str(),
        "--min-size".as_ref(),
        "100000".as_ref(),
        "--dry-run".as_ref(),
    ]);
    assert!(out.status.success(), "{}", describe(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with(
            "would move const_200k float32[16,3200] 204800 bytes -> externalized/const_200k\n"
        ),
        "{text}"
    );
    assert!(text.contains("would write"), "{text}");
    assert!(!out_dir.exists());
}

#[test]
fn output_verifies_and_holds_the_values_beside_the_variables() {
    let src = model("tf1_large_consts");
    let tmp = tempfile::tempdir().unwrap();
    let out_dir = tmp.path().join("out");
    let report = json(&unbound([
        "externalize".as_ref(),
        src.as_os_str(),
        out_dir.as_os_str(),
        "--min-size".as_ref(),
        "1000".as_ref(),
        "--json".as_ref(),
    ]));
    assert_eq!(report["written"], true);
    let out = unbound(["verify".as_ref(), out_dir.as_os_str()]);
    assert!(out.status.success(), "{}", describe(&out));
    let size = std::fs::metadata(out_dir.join("saved_model.pb"))
        .unwrap()
        .len();
    assert!(size < 20_000, "saved_model.pb is {size} bytes");
    let vars = json(&unbound([
        "vars".as_ref(),
        out_dir.as_os_str(),
        "--json".as_ref(),
    ]));
    let text = vars.to_string();
    assert!(text.contains("externalized/const_200k"), "{text}");
    // The model's own variables are still there.
    let before = json(&unbound([
        "vars".as_ref(),
        src.as_os_str(),
        "--json".as_ref(),
    ]));
    for v in before["variables"].as_array().unwrap() {
        let key = v["key"].as_str().unwrap();
        assert!(text.contains(key), "{key} is missing");
    }
    // The same source as a .cpb gives the same model, byte for byte.
    let split = tmp.path().join("split");
    let out = unbound([
        "split".as_ref(),
        src.as_os_str(),
        split.as_os_str(),
        "--max-size".as_ref(),
        "5000".as_ref(),
    ]);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(split.join("saved_model.cpb").exists());
    let from_cpb = tmp.path().join("from_cpb");
    let out = unbound([
        "externalize".as_ref(),
        split.as_os_str(),
        from_cpb.as_os_str(),
        "--min-size".as_ref(),
        "1000".as_ref(),
    ]);
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(
        std::fs::read(out_dir.join("saved_model.pb")).unwrap(),
        std::fs::read(from_cpb.join("saved_model.pb")).unwrap()
    );
}

#[test]
fn refusals_write_nothing() {
    let src = model("tf1_large_consts");
    let tmp = tempfile::tempdir().unwrap();
    let existing = tmp.path().join("existing");
    std::fs::create_dir(&existing).unwrap();
    let out = unbound([
        "externalize".as_ref(),
        src.as_os_str(),
        existing.as_os_str(),
    ]);
    assert_clean_failure(&out, &["exists"], "existing output");
    assert!(entries(&existing).is_empty());
    let out = unbound([
        "externalize".as_ref(),
        src.as_os_str(),
        tmp.path().join("x").as_os_str(),
        "--min-size".as_ref(),
        "lots".as_ref(),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let missing = tmp.path().join("missing");
    let out = unbound([
        "externalize".as_ref(),
        missing.as_os_str(),
        tmp.path().join("y").as_os_str(),
    ]);
    assert_clean_failure(&out, &["missing"], "missing source");
    assert!(!tmp.path().join("y").exists());
}
