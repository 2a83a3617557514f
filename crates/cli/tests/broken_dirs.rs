//! SavedModel directories that are broken without any one file being unreadable, end to end:
//! `verify` must fail naming the file and the fault, and `split` and `merge` must refuse what
//! verify rejects. Also the smaller rules: which model file is read when there are several
//! (said on stderr), outputs are never overwritten, OUT may not be inside DIR, and stale
//! temporaries of killed runs are removed and reported.

mod common;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Output;

use common::{copy_dir, describe, model, unbound};
use unbound_proto::tensorflow::proto_splitter::ChunkMetadata;

fn run(args: &[&dyn AsRef<OsStr>]) -> Output {
    unbound(args.iter().map(|a| a.as_ref()))
}

/// Exit 1, no panic, and stdout+stderr mention every needle.
fn rejects(out: &Output, needles: &[&str], what: &str) {
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(1), "{what}\n{}", describe(out));
    assert!(!all.contains("panicked"), "{what}\n{}", describe(out));
    for n in needles {
        assert!(all.contains(n), "{what}: no {n:?}\n{}", describe(out));
    }
}

/// verify, split and merge all reject `dir`, each naming `file` and `needles`.
fn all_reject(dir: &Path, file: &Path, needles: &[&str], what: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let file = file.display().to_string();
    let mut with_file = vec![file.as_str()];
    with_file.extend_from_slice(needles);
    rejects(
        &run(&[&"verify", &dir]),
        &with_file,
        &format!("{what}: verify"),
    );
    for cmd in ["split", "merge"] {
        let out_dir = tmp.path().join(cmd);
        let out = run(&[&cmd, &dir, &out_dir]);
        rejects(&out, &with_file, &format!("{what}: {cmd}"));
        assert!(!out_dir.exists(), "{what}: {cmd} wrote its output");
        // Nor left what it began (split copies a `.pb` into its output while verifying).
        let left = common::entries(tmp.path());
        assert!(left.is_empty(), "{what}: {cmd} left {left:?}");
    }
}

fn copy_model(name: &str, tmp: &Path) -> PathBuf {
    let dir = tmp.join(name);
    copy_dir(&model(name), &dir);
    dir
}

fn split_copy(tmp: &Path) -> PathBuf {
    let dir = tmp.join("cpb");
    let out = run(&[
        &"split",
        &model("tf2_multi_sig"),
        &dir,
        &"--max-size",
        &"1000",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    dir
}

#[test]
fn a_model_changed_after_its_fingerprint_is_caught() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = copy_model("tf2_multi_sig", tmp.path());
    let pb = dir.join("saved_model.pb");
    let mut bytes = std::fs::read(&pb).unwrap();
    // A byte inside a string: the model still parses, its checksum changes.
    let at = bytes
        .windows(15)
        .position(|w| w == b"serving_default")
        .unwrap();
    bytes[at + 3] ^= 1;
    std::fs::write(&pb, bytes).unwrap();
    all_reject(
        &dir,
        &dir.join("fingerprint.pb"),
        &[
            "saved_model_checksum",
            "changed after the fingerprint was written",
        ],
        "flipped model byte",
    );
}

#[test]
fn a_model_without_a_meta_graph_is_caught() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = copy_model("tf1_large_consts", tmp.path());
    let pb = dir.join("saved_model.pb");
    std::fs::write(&pb, b"").unwrap();
    all_reject(&dir, &pb, &["no MetaGraphDef"], "0-byte saved_model.pb");

    // A .cpb whose only record is the metadata.
    let dir = split_copy(tmp.path());
    let cpb = dir.join("saved_model.cpb");
    let metadata = ChunkMetadata::default();
    std::fs::write(&cpb, common::write_cpb(&[], metadata, |_| {})).unwrap();
    std::fs::remove_file(dir.join("fingerprint.pb")).unwrap();
    all_reject(&dir, &cpb, &["no MetaGraphDef"], "metadata-only .cpb");
}

#[test]
fn a_deleted_index_beside_its_data_shard_is_caught() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = copy_model("tf1_large_consts", tmp.path());
    let index = dir.join("variables/variables.index");
    std::fs::remove_file(&index).unwrap();
    all_reject(
        &dir,
        &index,
        &["missing, but the data shard"],
        "deleted index",
    );
    // vars never says "no variables" then.
    let out = run(&[&"vars", &dir]);
    rejects(
        &out,
        &[&index.display().to_string(), "missing, but the data shard"],
        "vars",
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("no variables"));
}

#[test]
fn appended_shard_bytes_and_index_padding_are_caught() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = copy_model("tf1_large_consts", tmp.path());
    let shard = dir.join("variables/variables.data-00000-of-00001");
    let mut bytes = std::fs::read(&shard).unwrap();
    bytes.extend_from_slice(b"xyz");
    std::fs::write(&shard, bytes).unwrap();
    all_reject(
        &dir,
        &shard,
        &["3 bytes after the end of the last tensor"],
        "appended bytes",
    );

    let dir = tmp.path().join("padding");
    copy_dir(&model("tf1_large_consts"), &dir);
    let index = dir.join("variables/variables.index");
    let mut bytes = std::fs::read(&index).unwrap();
    // The footer: two block handles (a few bytes each), zero padding, an 8-byte magic.
    let at = bytes.len() - 10;
    bytes[at] ^= 0x40;
    std::fs::write(&index, bytes).unwrap();
    all_reject(&dir, &index, &["footer's padding"], "index padding");
}

#[test]
fn a_garbage_pb_beside_a_valid_cpb_is_named_everywhere() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = split_copy(tmp.path());
    let pb = dir.join("saved_model.pb");
    std::fs::write(&pb, b"\xff\xff\xff garbage").unwrap();
    let note = format!("{} is not read", pb.display());
    for cmd in [&["show"][..], &["fingerprint"], &["vars"]] {
        let mut args: Vec<&dyn AsRef<OsStr>> = cmd.iter().map(|c| c as &dyn AsRef<OsStr>).collect();
        args.push(&dir);
        let out = run(&args);
        assert_eq!(out.status.code(), Some(0), "{cmd:?}\n{}", describe(&out));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(&note),
            "{cmd:?}: no note\n{}",
            describe(&out)
        );
    }
    all_reject(
        &dir,
        &pb,
        &["malformed protobuf"],
        "garbage .pb beside .cpb",
    );
}

#[test]
fn outputs_are_never_overwritten_nor_inside_the_input() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = copy_model("tf2_multi_sig", tmp.path());
    // OUT inside DIR.
    let inside = dir.join("sub");
    let out = run(&[&"split", &dir, &inside]);
    rejects(
        &out,
        &["inside the SavedModel directory"],
        "split DIR DIR/sub",
    );
    assert!(!inside.exists());
    let names: Vec<String> = common::entries(&dir);
    assert!(
        names.iter().all(|n| !n.contains("unbound-tmp")),
        "{names:?}"
    );
    // An existing output, for every writing command.
    let existing = tmp.path().join("existing");
    std::fs::write(&existing, b"keep me").unwrap();
    let pb = dir.join("saved_model.pb");
    let prefix = dir.join("saved_model");
    let cases: Vec<Vec<&dyn AsRef<OsStr>>> = vec![
        vec![&"split", &dir, &existing],
        vec![&"merge", &dir, &existing],
        vec![&"vars", &dir, &"w_f32", &"--npy", &existing],
        vec![
            &"proto",
            &"merge",
            &"--type",
            &"tensorflow.SavedModel",
            &prefix,
            &existing,
        ],
    ];
    for args in cases {
        let out = run(&args);
        rejects(&out, &["existing", "already exists"], "existing output");
        assert_eq!(std::fs::read(&existing).unwrap(), b"keep me");
    }
    let out_prefix = tmp.path().join("existing");
    let out = run(&[
        &"proto",
        &"split",
        &"--type",
        &"tensorflow.SavedModel",
        &pb,
        &out_prefix.with_extension(""),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let again = run(&[
        &"proto",
        &"split",
        &"--type",
        &"tensorflow.SavedModel",
        &pb,
        &out_prefix.with_extension(""),
    ]);
    rejects(&again, &["already exists"], "proto split twice");
}

#[test]
fn stale_temporaries_of_killed_runs_are_removed_and_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let out_dir = tmp.path().join("out");
    // A process that is surely gone.
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    let ours = unbound_io::temp_path_for(&out_dir);
    let name = ours
        .file_name()
        .unwrap()
        .to_string_lossy()
        .replace(&format!("-{}-", std::process::id()), &format!("-{dead}-"));
    let stale = tmp.path().join(name);
    std::fs::create_dir(&stale).unwrap();
    std::fs::write(stale.join("saved_model.pb"), b"half written").unwrap();
    let out = run(&[&"merge", &model("tf2_multi_sig"), &out_dir]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(!stale.exists(), "the stale temporary is still there");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr.lines().filter(|l| l.contains("removed")).collect();
    assert_eq!(lines.len(), 1, "{}", describe(&out));
    assert!(
        lines[0].contains(&stale.display().to_string()),
        "{}",
        describe(&out)
    );
}

/// A `.cpb` whose stored `fingerprint.pb` does not hash its graph: `merge` completes the
/// fingerprint from the canonical form of the graph's nodes it writes (rather than encoding
/// them a second time) and must still compare that hash, refusing before anything is kept.
#[test]
fn a_cpb_whose_stored_graph_hash_is_stale_is_caught() {
    use prost::Message;
    use unbound_proto::tensorflow::FingerprintDef;
    let tmp = tempfile::tempdir().unwrap();
    let dir = split_copy(tmp.path());
    let path = dir.join("fingerprint.pb");
    let mut stored = FingerprintDef::decode(&std::fs::read(&path).unwrap()[..]).unwrap();
    stored.graph_def_program_hash ^= 1;
    std::fs::write(&path, stored.encode_to_vec()).unwrap();
    all_reject(
        &dir,
        &path,
        &[
            "graph_def_program_hash",
            "changed after the fingerprint was written",
        ],
        "stale graph hash of a .cpb",
    );
}
