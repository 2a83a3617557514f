//! `unbound verify DIR` end to end: clean models pass (exit 0, summary line); every kind of
//! damage is reported on its own line naming the file and the fault (exit 1).

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;

use common::*;
use unbound_proto::tensorflow::proto_splitter::{chunk_info::Type as ChunkType, ChunkMetadata};

/// An edit of a `.cpb`'s metadata.
type Edit = Box<dyn Fn(&mut ChunkMetadata)>;

fn verify(dir: &Path) -> Output {
    unbound([Path::new("verify").as_os_str(), dir.as_os_str()])
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn assert_clean(dir: &Path) {
    let out = verify(dir);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(stdout(&out).starts_with("OK: "), "{}", describe(&out));
}

/// Asserts `verify` fails with exit 1 and some output line mentions `file` and every needle.
fn assert_caught(dir: &Path, file: &str, needles: &[&str]) {
    let out = verify(dir);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("problem"),
        "{}",
        describe(&out)
    );
    let text = stdout(&out);
    let hit = text.lines().any(|l| {
        l.contains(file)
            && needles
                .iter()
                .all(|n| l.to_lowercase().contains(&n.to_lowercase()))
    });
    assert!(
        hit,
        "no line naming {file} with {needles:?}\n{}",
        describe(&out)
    );
}

/// A copy of a TensorFlow-made model in a temporary directory.
fn copy_model(name: &str) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join(name);
    copy_dir(&model(name), &dir);
    (tmp, dir)
}

const DATA: &str = "variables/variables.data-00000-of-00001";
const INDEX: &str = "variables/variables.index";

#[test]
fn clean_models_pass() {
    assert_clean(&model("tf2_multi_sig"));
    assert_clean(&model("tf1_large_consts"));
    for compression in ["none", "zstd", "brotli"] {
        let tmp = tempfile::tempdir().unwrap();
        let f = fixture(compression);
        f.write_dir(tmp.path(), &f.cpb);
        assert_clean(tmp.path());
    }
}

#[test]
fn a_flipped_byte_in_a_variables_data_file_is_caught() {
    let (_tmp, dir) = copy_model("tf2_multi_sig");
    let path = dir.join(DATA);
    let mut bytes = fs::read(&path).unwrap();
    bytes[20] ^= 0x01;
    fs::write(&path, bytes).unwrap();
    assert_caught(&dir, DATA, &["checksum mismatch"]);
}

#[test]
fn a_missing_shard_is_caught() {
    let (_tmp, dir) = copy_model("tf1_large_consts");
    fs::remove_file(dir.join(DATA)).unwrap();
    assert_caught(&dir, DATA, &["data shard 0", "no such file"]);
}

#[test]
fn a_truncated_index_is_caught() {
    let (_tmp, dir) = copy_model("tf2_multi_sig");
    let path = dir.join(INDEX);
    let bytes = fs::read(&path).unwrap();
    fs::write(&path, &bytes[..bytes.len() - 30]).unwrap();
    assert_caught(&dir, INDEX, &[]);
}

#[test]
fn a_missing_index_is_caught_when_the_object_graph_has_variables() {
    let (_tmp, dir) = copy_model("tf2_multi_sig");
    fs::remove_file(dir.join(INDEX)).unwrap();
    assert_caught(&dir, INDEX, &["missing"]);
}

#[test]
fn a_corrupted_cpb_chunk_is_caught() {
    for compression in ["none", "zstd", "brotli"] {
        let tmp = tempfile::tempdir().unwrap();
        let f = fixture(compression);
        let mut cpb = f.cpb.clone();
        // A byte in the data of the first records chunk (after the 64-byte signature and the
        // 40-byte chunk header).
        cpb[64 + 40 + 100] ^= 0x10;
        f.write_dir(tmp.path(), &cpb);
        assert_caught(
            tmp.path(),
            "saved_model.cpb",
            &["Riegeli chunk at offset 64", "hash"],
        );
    }
}

#[test]
fn chunk_metadata_faults_are_caught() {
    let f = fixture("none");
    let cases: Vec<(&str, Edit)> = vec![
        (
            "size 1 in the metadata",
            Box::new(|m: &mut ChunkMetadata| m.chunks[1].size = 1),
        ),
        (
            "invalid chunk type 0",
            Box::new(|m: &mut ChunkMetadata| m.chunks[2].r#type = ChunkType::Unset as i32),
        ),
        (
            "chunk index 999 is out of range",
            Box::new(|m: &mut ChunkMetadata| {
                let tree = m.message.as_mut().unwrap();
                tree.chunked_fields[0].message.as_mut().unwrap().chunk_index = Some(999)
            }),
        ),
    ];
    for (needle, edit) in cases {
        let tmp = tempfile::tempdir().unwrap();
        let cpb = write_cpb(&f.chunks, f.metadata.clone(), |m| edit(m));
        f.write_dir(tmp.path(), &cpb);
        assert_caught(tmp.path(), "saved_model.cpb", &[needle]);
    }
}

#[test]
fn an_unparseable_model_or_fingerprint_is_caught() {
    let (_tmp, dir) = copy_model("tf2_multi_sig");
    let pb = dir.join("saved_model.pb");
    let bytes = fs::read(&pb).unwrap();
    fs::write(&pb, &bytes[..bytes.len() / 2]).unwrap();
    fs::write(dir.join("fingerprint.pb"), b"\xff\xff\xff").unwrap();
    assert_caught(&dir, "saved_model.pb", &[]);
    assert_caught(&dir, "fingerprint.pb", &["not a FingerprintDef"]);
}

#[test]
fn every_problem_is_reported() {
    let (_tmp, dir) = copy_model("tf2_multi_sig");
    let path = dir.join(DATA);
    let mut bytes = fs::read(&path).unwrap();
    bytes[20] ^= 0x01;
    bytes[200] ^= 0x01;
    fs::write(&path, bytes).unwrap();
    fs::write(dir.join("fingerprint.pb"), b"\xff").unwrap();
    let out = verify(&dir);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(
        text.lines().filter(|l| l.contains(DATA)).count() >= 2,
        "{text}"
    );
    assert!(text.contains("fingerprint.pb"), "{text}");
}

#[test]
fn not_a_saved_model_directory_is_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    assert_caught(
        tmp.path(),
        &tmp.path().display().to_string(),
        &["no saved_model"],
    );
}
