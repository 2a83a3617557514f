//! The rules every command follows for what it reads, end to end (issue 30): a file it reads
//! is a regular file once symbolic links are followed (a FIFO or `/dev/zero` is refused by
//! name, never read), a plugin is checked before the loader sees it, symbolic links to files
//! and directories are followed alike by every command, a command that writes a model refuses
//! one `verify` rejects, and what stands in for an unreadable checkpoint index is said aloud.

#![cfg(unix)]

mod common;

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::plugins::build_plugin;
use common::*;

/// Runs `unbound` with `args`, killing it after 20 s (a command that blocks on a FIFO must
/// fail the test, not hang it).
fn unbound_timed(args: &[&std::ffi::OsStr]) -> Output {
    let mut child = Command::new(bin())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the unbound binary runs");
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(20) {
            child.kill().unwrap();
            panic!("unbound {args:?} ran 20 s: it blocked on its input");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// A copy of `testdata/models/tf2_multi_sig` at `dir/model`.
fn model_copy(dir: &Path) -> PathBuf {
    let m = dir.join("model");
    copy_dir(&model("tf2_multi_sig"), &m);
    m
}

/// Makes a FIFO at `path`.
fn mkfifo(path: &Path) {
    let status = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(status.success(), "mkfifo {}", path.display());
}

#[test]
fn a_truncated_or_special_plugin_is_refused_before_loading() {
    let plugin = build_plugin("identity_remover");
    let bytes = std::fs::read(&plugin).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let src = model("tf2_multi_sig");
    for cut in [1000, 64, bytes.len() / 2, bytes.len() - 1] {
        let cut_plugin = tmp.path().join(format!("cut-{cut}.so"));
        std::fs::write(&cut_plugin, &bytes[..cut]).unwrap();
        for isolate in [false, true] {
            let out_dir = tmp.path().join("out");
            let mut args = vec![
                "optimize".as_ref(),
                src.as_os_str(),
                out_dir.as_os_str(),
                "--plugin".as_ref(),
                cut_plugin.as_os_str(),
            ];
            if isolate {
                args.push("--isolate".as_ref());
            }
            let out = unbound_timed(&args);
            assert_clean_failure(
                &out,
                &[&cut_plugin.display().to_string(), "truncated"],
                &format!("plugin cut to {cut} bytes (isolate: {isolate})"),
            );
            assert!(!out_dir.exists());
        }
    }
    let fifo = tmp.path().join("fifo.so");
    mkfifo(&fifo);
    let text = tmp.path().join("text.so");
    std::fs::write(&text, "not a plugin").unwrap();
    for (path, fault) in [
        (PathBuf::from("/dev/zero"), "not a regular file"),
        (fifo, "not a regular file (a FIFO)"),
        (tmp.path().to_path_buf(), "not a regular file (a directory)"),
        (text, "not an ELF file"),
    ] {
        let out_dir = tmp.path().join("out");
        let out = unbound_timed(&[
            "optimize".as_ref(),
            src.as_os_str(),
            out_dir.as_os_str(),
            "--plugin".as_ref(),
            path.as_os_str(),
        ]);
        assert_clean_failure(&out, &[&path.display().to_string(), fault], fault);
    }
}

/// `--plugin-dir` takes every `*.so` in the directory that is not a directory itself: a FIFO
/// so named is refused by name, as `--plugin` refuses it, not skipped without a word.
#[test]
fn a_special_file_in_a_plugin_directory_is_refused_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("plugins");
    std::fs::create_dir(&dir).unwrap();
    let fifo = dir.join("fifo.so");
    mkfifo(&fifo);
    let src = model("tf2_multi_sig");
    let out_dir = tmp.path().join("out");
    let out = unbound_timed(&[
        "optimize".as_ref(),
        src.as_os_str(),
        out_dir.as_os_str(),
        "--plugin-dir".as_ref(),
        dir.as_os_str(),
    ]);
    assert_clean_failure(
        &out,
        &[&fifo.display().to_string(), "not a regular file (a FIFO)"],
        "a FIFO in --plugin-dir",
    );
    assert!(!out_dir.exists());
}

#[test]
fn a_special_topology_file_is_refused_naming_the_argument() {
    let tmp = tempfile::tempdir().unwrap();
    let src = model("tf2_multi_sig");
    let fifo = tmp.path().join("topology");
    mkfifo(&fifo);
    let zero_link = tmp.path().join("zero");
    symlink("/dev/zero", &zero_link).unwrap();
    for path in [fifo, PathBuf::from("/dev/zero"), zero_link] {
        let out_dir = tmp.path().join("out");
        let out = unbound_timed(&[
            "export-tpu".as_ref(),
            src.as_os_str(),
            out_dir.as_os_str(),
            "--topology".as_ref(),
            path.as_os_str(),
        ]);
        assert_clean_failure(
            &out,
            &[
                "--topology",
                &path.display().to_string(),
                "not a regular file",
            ],
            "special topology file",
        );
        assert!(!out_dir.exists());
    }
}

/// Turns the first byte of `serving_default` in the model file into 0xff: the model still
/// parses, but one of its strings is not UTF-8, which verify rejects.
fn break_utf8(model_dir: &Path) {
    let pb = model_dir.join("saved_model.pb");
    let mut bytes = std::fs::read(&pb).unwrap();
    let at = bytes
        .windows(15)
        .position(|w| w == b"serving_default")
        .unwrap();
    bytes[at] = 0xff;
    std::fs::write(&pb, bytes).unwrap();
}

#[test]
fn every_writer_refuses_a_model_verify_rejects() {
    let plugin = build_plugin("identity_remover");
    let tmp = tempfile::tempdir().unwrap();
    let not_utf8 = tmp.path().join("not_utf8");
    copy_dir(&model("tf2_multi_sig"), &not_utf8);
    break_utf8(&not_utf8);
    let no_data = tmp.path().join("no_data");
    copy_dir(&model("tf2_multi_sig"), &no_data);
    std::fs::remove_file(no_data.join("variables/variables.data-00000-of-00001")).unwrap();
    for (src, fault) in [
        (&not_utf8, "not valid UTF-8"),
        (&no_data, "variables.data-00000-of-00001"),
    ] {
        let verify = unbound(["verify".as_ref(), src.as_os_str()]);
        assert_eq!(verify.status.code(), Some(1), "{}", describe(&verify));
        let out_dir = tmp.path().join("out");
        let o = out_dir.as_os_str();
        let writers: Vec<Vec<&std::ffi::OsStr>> = vec![
            vec!["split".as_ref(), src.as_os_str(), o],
            vec!["merge".as_ref(), src.as_os_str(), o],
            vec![
                "tags".as_ref(),
                src.as_os_str(),
                o,
                "--duplicate".as_ref(),
                "serve=serve,tpu".as_ref(),
            ],
            vec!["export-tpu".as_ref(), src.as_os_str(), o],
            vec![
                "export-tpu".as_ref(),
                src.as_os_str(),
                o,
                "--to-cpu".as_ref(),
            ],
            vec![
                "optimize".as_ref(),
                src.as_os_str(),
                o,
                "--plugin".as_ref(),
                plugin.as_os_str(),
            ],
        ];
        for args in writers {
            let out = unbound_timed(&args);
            assert_clean_failure(
                &out,
                &[&src.display().to_string(), "does not verify", fault],
                &format!("{args:?}"),
            );
            assert!(!out_dir.exists(), "{args:?} wrote {}", out_dir.display());
        }
    }
}

#[test]
fn symlinks_to_files_and_directories_are_followed_by_every_command() {
    let tmp = tempfile::tempdir().unwrap();
    let m = model_copy(tmp.path());
    // A shared variable store, and an asset file kept elsewhere.
    let store = tmp.path().join("store");
    std::fs::rename(m.join("variables"), &store).unwrap();
    symlink(&store, m.join("variables")).unwrap();
    let shard = tmp.path().join("shard");
    let shard_name = "variables.data-00000-of-00001";
    std::fs::rename(store.join(shard_name), &shard).unwrap();
    symlink(&shard, store.join(shard_name)).unwrap();
    let model_file = tmp.path().join("model.pb");
    std::fs::rename(m.join("saved_model.pb"), &model_file).unwrap();
    symlink(&model_file, m.join("saved_model.pb")).unwrap();
    // What show reports of the variables is what it reports of the original.
    let show_json = |dir: &Path| {
        let out = unbound(["show".as_ref(), dir.as_os_str(), "--json".as_ref()]);
        assert!(out.status.success(), "{}", describe(&out));
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let (linked, original) = (show_json(&m), show_json(&model("tf2_multi_sig")));
    for field in ["variables_bytes", "variables_files"] {
        assert_eq!(linked[field], original[field], "{field}");
    }
    for command in ["verify", "show", "fingerprint", "vars"] {
        let out = unbound([command.as_ref(), m.as_os_str()]);
        assert!(out.status.success(), "{command}: {}", describe(&out));
    }
    let split = tmp.path().join("split");
    let out = unbound([
        "split".as_ref(),
        m.as_os_str(),
        split.as_os_str(),
        "--max-size".as_ref(),
        "2000".as_ref(),
    ]);
    assert!(out.status.success(), "split: {}", describe(&out));
    let merged = tmp.path().join("merged");
    let out = unbound(["merge".as_ref(), m.as_os_str(), merged.as_os_str()]);
    assert!(out.status.success(), "merge: {}", describe(&out));
    for copy in [&split, &merged] {
        let variables = std::fs::symlink_metadata(copy.join("variables")).unwrap();
        assert!(
            variables.is_dir(),
            "the copy holds the variables themselves"
        );
        assert_eq!(
            std::fs::read(copy.join("variables/variables.index")).unwrap(),
            std::fs::read(store.join("variables.index")).unwrap()
        );
        let out = unbound(["verify".as_ref(), copy.as_os_str()]);
        assert!(out.status.success(), "{}", describe(&out));
    }
    let tags = tmp.path().join("tags");
    let out = unbound([
        "tags".as_ref(),
        m.as_os_str(),
        tags.as_os_str(),
        "--duplicate".as_ref(),
        "serve=serve,tpu".as_ref(),
    ]);
    assert!(out.status.success(), "tags: {}", describe(&out));
}

#[test]
fn a_symlink_loop_or_to_a_special_file_is_refused_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let m = model_copy(tmp.path());
    std::fs::create_dir(m.join("assets")).unwrap();
    let link = m.join("assets/loop");
    symlink(&m, &link).unwrap();
    let out_dir = tmp.path().join("out");
    let out = unbound(["merge".as_ref(), m.as_os_str(), out_dir.as_os_str()]);
    assert_clean_failure(
        &out,
        &[&link.display().to_string(), "a loop"],
        "a symlink loop",
    );
    assert!(!out_dir.exists());
    std::fs::remove_file(&link).unwrap();
    let zero = m.join("assets/zero");
    symlink("/dev/zero", &zero).unwrap();
    let out = unbound_timed(&["split".as_ref(), m.as_os_str(), out_dir.as_os_str()]);
    assert_clean_failure(
        &out,
        &[&zero.display().to_string(), "not a regular file"],
        "a symlink to /dev/zero",
    );
    assert!(!out_dir.exists());
}

#[test]
fn an_unreadable_checkpoint_index_is_warned_of_by_name() {
    let tmp = tempfile::tempdir().unwrap();
    let m = model_copy(tmp.path());
    let index = m.join("variables/variables.index");
    std::fs::remove_file(&index).unwrap();
    mkfifo(&index);
    let out = unbound_timed(&["fingerprint".as_ref(), m.as_os_str()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(
        stdout.contains("checkpoint_hash: 0\n"),
        "{}",
        describe(&out)
    );
    assert!(
        stderr.contains(&format!(
            "unbound: warning: {}: not a regular file (a FIFO)",
            index.display()
        )) && stderr.contains("checkpoint_hash is 0"),
        "{}",
        describe(&out)
    );
    std::fs::remove_file(&index).unwrap();
    symlink("/dev/zero", &index).unwrap();
    let out = unbound_timed(&["show".as_ref(), m.as_os_str()]);
    assert!(out.status.success(), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("unbound: warning: {}", index.display())),
        "{}",
        describe(&out)
    );
    // A model without variables is the usual case: no warning.
    std::fs::remove_dir_all(m.join("variables")).unwrap();
    let out = unbound(["fingerprint".as_ref(), m.as_os_str()]);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(out.stderr.is_empty(), "{}", describe(&out));
}

#[test]
fn export_to_cpu_refuses_the_options_it_cannot_honour() {
    let tmp = tempfile::tempdir().unwrap();
    let src = model("tf2_multi_sig");
    let out_dir = tmp.path().join("out");
    for option in [["--tags", "serve"], ["--source-tags", "serve"]] {
        let out = unbound([
            "export-tpu".as_ref(),
            src.as_os_str(),
            out_dir.as_os_str(),
            "--to-cpu".as_ref(),
            option[0].as_ref(),
            option[1].as_ref(),
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
        assert!(
            stderr.contains("'--to-cpu' cannot be used with") && stderr.contains(option[0]),
            "{}",
            describe(&out)
        );
        assert!(!out_dir.exists());
    }
    let out = unbound([
        "export-tpu".as_ref(),
        src.as_os_str(),
        out_dir.as_os_str(),
        "--to-cpu".as_ref(),
    ]);
    assert!(out.status.success(), "{}", describe(&out));
}

#[test]
fn split_and_merge_without_variables_point_to_proto_merge() {
    let tmp = tempfile::tempdir().unwrap();
    let m = model_copy(tmp.path());
    std::fs::remove_dir_all(m.join("variables")).unwrap();
    for command in ["split", "merge"] {
        let out_dir = tmp.path().join("out");
        let out = unbound([command.as_ref(), m.as_os_str(), out_dir.as_os_str()]);
        assert_clean_failure(
            &out,
            &[
                &m.join("variables/variables.index").display().to_string(),
                "unbound proto merge --type tensorflow.SavedModel",
            ],
            command,
        );
    }
}
