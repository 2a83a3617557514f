//! A failed or interrupted `split` / `merge` never leaves a partial model under the final name
//! (nor, when it fails by itself, a temporary directory beside it); usage errors exit with 2.

mod common;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use prost::Message;
use unbound_proto::tensorflow::{
    attr_value, meta_graph_def::MetaInfoDef, tensor_shape_proto::Dim, AttrValue, GraphDef,
    MetaGraphDef, NodeDef, SavedModel, TensorProto, TensorShapeProto,
};

/// A SavedModel directory at `dir` holding `consts` float Const nodes of `bytes_each` bytes of
/// compressible (but not trivial) tensor data, plus a variables/ directory.
fn write_big_model(dir: &Path, consts: usize, bytes_each: usize) {
    let mut nodes = Vec::new();
    for i in 0..consts {
        let mut content = Vec::with_capacity(bytes_each);
        let mut x = 0x9e37_79b9u32.wrapping_mul(i as u32 + 1);
        while content.len() < bytes_each {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            // Floats in a narrow range: compressible, not constant.
            let v = (x % 1000) as f32 / 1000.0;
            content.extend_from_slice(&v.to_le_bytes());
        }
        content.truncate(bytes_each);
        let tensor = TensorProto {
            dtype: 1,
            tensor_shape: Some(TensorShapeProto {
                dim: vec![Dim {
                    size: (bytes_each / 4) as i64,
                    name: String::new(),
                }],
                unknown_rank: false,
            }),
            tensor_content: content.into(),
            ..Default::default()
        };
        let attr = [
            (
                "dtype".to_string(),
                AttrValue {
                    value: Some(attr_value::Value::Type(1)),
                },
            ),
            (
                "value".to_string(),
                AttrValue {
                    value: Some(attr_value::Value::Tensor(tensor)),
                },
            ),
        ]
        .into_iter()
        .collect();
        nodes.push(NodeDef {
            name: format!("const_{i}"),
            op: "Const".into(),
            attr,
            ..Default::default()
        });
    }
    let model = SavedModel {
        saved_model_schema_version: 1,
        meta_graphs: vec![MetaGraphDef {
            meta_info_def: Some(MetaInfoDef {
                tags: vec!["serve".into()],
                ..Default::default()
            }),
            graph_def: Some(GraphDef {
                node: nodes,
                ..Default::default()
            }),
            ..Default::default()
        }],
    };
    std::fs::create_dir_all(dir.join("variables")).unwrap();
    // A file to carry over (not a fake checkpoint: split verifies its input first).
    std::fs::write(dir.join("variables/notes.txt"), b"carried over").unwrap();
    std::fs::write(dir.join("saved_model.pb"), model.encode_to_vec()).unwrap();
}

/// Asserts `root` holds exactly `expected` (sorted names).
fn assert_entries(root: &Path, expected: &[&str], what: &str) {
    assert_eq!(
        entries(root),
        expected,
        "{what}: unexpected entries in {}",
        root.display()
    );
}

#[test]
fn split_whose_copy_fails_leaves_nothing() {
    // Tests run as root, so an unreadable file cannot be made with chmod; a dangling symlink
    // makes copying the source's other files fail after the model was written.
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    copy_dir(&model("tf2_multi_sig"), &src);
    let link = src.join("variables/dangling");
    std::os::unix::fs::symlink(tmp.path().join("nowhere"), &link).unwrap();
    let out_root = tmp.path().join("out");
    std::fs::create_dir(&out_root).unwrap();
    for max_size in ["1000", "1000000000"] {
        // Chunked (.cpb) and not chunked (.pb) outputs.
        let out_dir = out_root.join("split");
        let out = unbound([
            OsStr::new("split"),
            src.as_os_str(),
            out_dir.as_os_str(),
            OsStr::new("--max-size"),
            OsStr::new(max_size),
        ]);
        assert_clean_failure(
            &out,
            &[&link.display().to_string()],
            "split with a dangling symlink",
        );
        assert_entries(&out_root, &[], "split with a dangling symlink");
    }
    // The same source without the link splits (the control).
    std::fs::remove_file(&link).unwrap();
    let out_dir = out_root.join("split");
    let out = unbound([
        OsStr::new("split"),
        src.as_os_str(),
        out_dir.as_os_str(),
        OsStr::new("--max-size"),
        OsStr::new("1000"),
    ]);
    assert!(out.status.success(), "{}", describe(&out));
    assert_entries(&out_root, &["split"], "split");
}

#[test]
fn merge_whose_copy_fails_leaves_nothing() {
    let fx = fixture("none");
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    fx.write_dir(&src, &fx.cpb);
    let link = src.join("variables/dangling");
    std::os::unix::fs::symlink(tmp.path().join("nowhere"), &link).unwrap();
    let out_root = tmp.path().join("out");
    std::fs::create_dir(&out_root).unwrap();
    let out_dir = out_root.join("merged");
    let out = unbound([OsStr::new("merge"), src.as_os_str(), out_dir.as_os_str()]);
    assert_clean_failure(
        &out,
        &[&link.display().to_string()],
        "merge with a dangling symlink",
    );
    assert_entries(&out_root, &[], "merge with a dangling symlink");
    std::fs::remove_file(&link).unwrap();
    let out = unbound([OsStr::new("merge"), src.as_os_str(), out_dir.as_os_str()]);
    assert!(out.status.success(), "{}", describe(&out));
    assert_entries(&out_root, &["merged"], "merge");
}

#[test]
fn existing_output_is_refused_and_left_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let out_dir = tmp.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    std::fs::write(out_dir.join("keep"), b"mine").unwrap();
    let out = unbound([
        OsStr::new("split"),
        model("tf2_multi_sig").as_os_str(),
        out_dir.as_os_str(),
    ]);
    assert_clean_failure(
        &out,
        &[&out_dir.display().to_string(), "exists"],
        "split onto an existing dir",
    );
    assert_entries(tmp.path(), &["out"], "split onto an existing dir");
    assert_entries(&out_dir, &["keep"], "split onto an existing dir");
    assert_eq!(std::fs::read(out_dir.join("keep")).unwrap(), b"mine");
}

#[test]
fn split_of_a_source_with_a_fifo_fails_instead_of_hanging() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    copy_dir(&model("tf2_multi_sig"), &src);
    let fifo = src.join("variables/pipe");
    let status = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(status.success());
    let out_root = tmp.path().join("out");
    std::fs::create_dir(&out_root).unwrap();
    let mut child = Command::new(bin())
        .args([
            OsStr::new("split"),
            src.as_os_str(),
            out_root.join("split").as_os_str(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!(
                "split still running after 10 s: it blocks opening the FIFO {}",
                fifo.display()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(1));
    assert_entries(&out_root, &[], "split with a FIFO");
}

/// The temporary directories beside `out` (named after it).
fn temp_dirs_for(out: &Path) -> Vec<String> {
    let name = out.file_name().unwrap().to_string_lossy().into_owned();
    entries(out.parent().unwrap())
        .into_iter()
        .filter(|e| e != &name && e.contains(&name))
        .collect()
}

/// A split of a generated model large enough to take a while, started and seen writing (its
/// temporary directory exists) for 300 ms. Returns the child, the temp dir guard, the directory
/// holding the output and the output path.
fn split_seen_writing(stderr: Stdio) -> (std::process::Child, tempfile::TempDir, PathBuf, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    // 3 × 24 MiB of compressible tensors; brotli in a debug build takes many seconds on them.
    write_big_model(&src, 3, 24 << 20);
    let out_root = tmp.path().join("out");
    std::fs::create_dir(&out_root).unwrap();
    let out_dir = out_root.join("split");
    let mut child = Command::new(bin())
        .args([
            OsStr::new("split"),
            src.as_os_str(),
            out_dir.as_os_str(),
            OsStr::new("--max-size"),
            OsStr::new("1000000"),
            OsStr::new("--compression"),
            OsStr::new("brotli"),
        ])
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while temp_dirs_for(&out_dir).is_empty() {
        assert!(
            child.try_wait().unwrap().is_none(),
            "split ended before it was seen writing"
        );
        assert!(Instant::now() < deadline, "split never started writing");
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        child.try_wait().unwrap().is_none(),
        "split finished before it could be stopped: make the model bigger"
    );
    (child, tmp, out_root, out_dir)
}

#[test]
fn kill_9_during_split_leaves_no_output() {
    let (mut child, _tmp, out_root, out_dir) = split_seen_writing(Stdio::null());
    child.kill().unwrap(); // SIGKILL
    let status = child.wait().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9),
        "killed by SIGKILL"
    );
    assert!(
        !out_dir.exists(),
        "a killed split left {}",
        out_dir.display()
    );
    // What may remain is the temporary directory, under a hidden name.
    for left in entries(&out_root) {
        assert!(
            left.starts_with('.') && left.contains("tmp"),
            "unexpected {left} after the kill"
        );
    }
}

#[test]
fn usage_errors_exit_2() {
    let m = model("tf2_multi_sig");
    let m = m.to_str().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let o = out.to_str().unwrap();
    let cases: Vec<Vec<&str>> = vec![
        vec![],
        vec!["no-such-command"],
        vec!["split"],
        vec!["split", m],
        vec!["split", m, o, "--max-size", "lots"],
        vec!["split", m, o, "--max-size", "-5"],
        vec!["split", m, o, "--compression", "lzma"],
        vec!["split", m, o, "--no-such-flag"],
        vec!["merge", m],
        vec!["merge", m, o, "extra"],
        vec!["inspect"],
        vec!["inspect", "a.cpb", "--jsonn"],
        vec!["proto"],
        vec!["proto", "split", "in.pb", "prefix"],
        vec!["proto", "merge", "--type", "tensorflow.GraphDef", "prefix"],
    ];
    for args in cases {
        let result = unbound(&args);
        assert_eq!(
            result.status.code(),
            Some(2),
            "{args:?}\n{}",
            describe(&result)
        );
        let stderr = String::from_utf8_lossy(&result.stderr);
        assert!(
            !stderr.contains("panicked"),
            "{args:?}\n{}",
            describe(&result)
        );
        assert!(!stderr.is_empty(), "{args:?}: no usage message");
        assert!(!out.exists(), "{args:?} created the output");
    }
    // --help and --version are not errors.
    for args in [vec!["--help"], vec!["--version"], vec!["split", "--help"]] {
        let result = unbound(&args);
        assert_eq!(
            result.status.code(),
            Some(0),
            "{args:?}\n{}",
            describe(&result)
        );
    }
}

#[test]
fn zero_max_size_is_a_usage_error() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let m = model("tf2_multi_sig");
    let result = unbound([
        OsStr::new("split"),
        m.as_os_str(),
        out.as_os_str(),
        OsStr::new("--max-size"),
        OsStr::new("0"),
    ]);
    assert_eq!(result.status.code(), Some(2), "{}", describe(&result));
    let result = unbound([
        OsStr::new("proto"),
        OsStr::new("split"),
        OsStr::new("--type"),
        OsStr::new("tensorflow.GraphDef"),
        model("frozen_graph.pb").as_os_str(),
        out.as_os_str(),
        OsStr::new("--max-size"),
        OsStr::new("0"),
    ]);
    assert_eq!(result.status.code(), Some(2), "{}", describe(&result));
}

#[test]
fn unknown_type_and_missing_files_exit_1() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("missing");
    let out = tmp.path().join("out");
    let cases: Vec<(Vec<&OsStr>, Vec<String>)> = vec![
        (
            vec![OsStr::new("merge"), missing.as_os_str(), out.as_os_str()],
            vec![missing.display().to_string()],
        ),
        (
            vec![OsStr::new("split"), missing.as_os_str(), out.as_os_str()],
            vec![missing.display().to_string()],
        ),
        (
            vec![OsStr::new("inspect"), missing.as_os_str()],
            vec![missing.display().to_string()],
        ),
        (
            vec![
                OsStr::new("proto"),
                OsStr::new("merge"),
                OsStr::new("--type"),
                OsStr::new("tensorflow.NoSuchMessage"),
                missing.as_os_str(),
                out.as_os_str(),
            ],
            vec!["tensorflow.NoSuchMessage".into()],
        ),
        (
            vec![
                OsStr::new("proto"),
                OsStr::new("merge"),
                OsStr::new("--type"),
                OsStr::new("tensorflow.GraphDef"),
                missing.as_os_str(),
                out.as_os_str(),
            ],
            vec![missing.display().to_string()],
        ),
        (
            // A directory without a model.
            vec![OsStr::new("merge"), tmp.path().as_os_str(), out.as_os_str()],
            vec![tmp.path().display().to_string(), "saved_model".into()],
        ),
    ];
    for (args, needles) in cases {
        let result = unbound(&args);
        let needles: Vec<&str> = needles.iter().map(String::as_str).collect();
        assert_clean_failure(&result, &needles, &format!("{args:?}"));
        assert!(!out.exists(), "{args:?} created the output");
    }
}

#[test]
fn sigterm_during_split_removes_the_temporary_output() {
    let (child, _tmp, out_root, out_dir) = split_seen_writing(Stdio::piped());
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "exit code after SIGTERM");
    assert!(String::from_utf8_lossy(&out.stderr).contains("interrupted"));
    assert!(!out_dir.exists());
    assert_entries(&out_root, &[], "after SIGTERM");
}
