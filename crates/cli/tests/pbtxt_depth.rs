//! A `saved_model.pbtxt` whose messages nest far past protobuf's recursion limit (issue 30):
//! every command that reads it exits 1 naming the file and the depth, never overflowing the
//! stack in the text parser; text nested within the limit still reaches the parser.

mod common;

use common::{assert_clean_failure, unbound};

#[test]
fn text_nested_past_the_limit_is_refused_before_parsing() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("m");
    std::fs::create_dir(&model).unwrap();
    let deep = format!(
        "meta_graphs {{ graph_def {{ library {{ function {{{}",
        " signature {".repeat(200_000)
    );
    std::fs::write(model.join("saved_model.pbtxt"), deep).unwrap();
    let out = unbound(["show", model.to_str().unwrap()]);
    assert_clean_failure(
        &out,
        &["saved_model.pbtxt", "nested more than 100 deep"],
        "show",
    );
    // verify lists its problems on stdout and names the directory on stderr.
    let out = unbound(["verify", model.to_str().unwrap()]);
    assert_clean_failure(&out, &["1 problem found"], "verify");
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        report.contains("saved_model.pbtxt") && report.contains("nested more than 100 deep"),
        "{report}"
    );
    // Within the limit, the parser judges the text (here: an unknown field), no depth error.
    let shallow = "meta_graphs { graph_def { no_such_field: 1 } }";
    std::fs::write(model.join("saved_model.pbtxt"), shallow).unwrap();
    let out = unbound(["show", model.to_str().unwrap()]);
    assert_clean_failure(&out, &["saved_model.pbtxt"], "shallow");
    assert!(!String::from_utf8_lossy(&out.stderr).contains("nested more than"));
}
