//! Shared helpers for the end-to-end tests of the `unbound` binary: running it, a valid
//! `.cpb` SavedModel to damage, rewriting a `.cpb` with edited metadata, and checking that a
//! failed command exited cleanly and left nothing behind. The chunk-file builders, the
//! HighwayHash helper and the test data paths come from `unbound-test-support`, re-exported.

// Each test binary uses a different part of this module.
#![allow(dead_code, unused_imports)]

pub mod plugins;

pub use unbound_test_support::chunks::{write_cpb, write_records};
pub use unbound_test_support::highway;
pub use unbound_test_support::testdata::{copy_dir, model, repo_root};

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use bytes::Bytes;
use prost::Message;
use unbound_proto::tensorflow::proto_splitter::ChunkMetadata;
use unbound_records::RecordReader;

/// The built binary.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_unbound")
}

/// Runs `unbound` with `args`.
pub fn unbound<I, S>(args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    Command::new(bin())
        .args(args)
        .output()
        .expect("the unbound binary runs")
}

/// Stdout and stderr as text, for assertion messages.
pub fn describe(out: &Output) -> String {
    format!(
        "status {:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Asserts `out` is a clean failure (exit code 1, no panic) whose stderr contains every one
/// of `needles`.
pub fn assert_clean_failure(out: &Output, needles: &[&str], what: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{what}: expected exit code 1\n{}",
        describe(out)
    );
    assert!(
        !stderr.contains("panicked"),
        "{what}: panicked\n{}",
        describe(out)
    );
    assert!(
        stderr.starts_with("unbound: error: "),
        "{what}: error not reported as such\n{}",
        describe(out)
    );
    for needle in needles {
        assert!(
            stderr.contains(needle),
            "{what}: stderr does not mention {needle:?}\n{}",
            describe(out)
        );
    }
}

/// The names in `dir` (sorted).
pub fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A valid chunked SavedModel made by `unbound split` from TensorFlow's `tf1_large_consts`
/// with chunks small enough to hold MESSAGE and BYTES chunks, held in memory.
pub struct Fixture {
    /// Bytes of its `saved_model.cpb`.
    pub cpb: Vec<u8>,
    /// Its other files (relative path, content).
    pub other_files: Vec<(PathBuf, Vec<u8>)>,
    /// The chunk records in order (the metadata record excluded).
    pub chunks: Vec<Bytes>,
    /// The decoded metadata.
    pub metadata: ChunkMetadata,
    /// The original `saved_model.pb`.
    pub original_pb: Vec<u8>,
}

impl Fixture {
    /// Writes the SavedModel directory to `dir`, with `cpb` as its `saved_model.cpb`.
    pub fn write_dir(&self, dir: &Path, cpb: &[u8]) {
        for (rel, content) in &self.other_files {
            let path = dir.join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, content).unwrap();
        }
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join("saved_model.cpb"), cpb).unwrap();
    }
}

/// The fixture for `compression` (made once per test process).
pub fn fixture(compression: &str) -> &'static Fixture {
    static NONE: OnceLock<Fixture> = OnceLock::new();
    static BROTLI: OnceLock<Fixture> = OnceLock::new();
    static ZSTD: OnceLock<Fixture> = OnceLock::new();
    static SNAPPY: OnceLock<Fixture> = OnceLock::new();
    let cell = match compression {
        "none" => &NONE,
        "brotli" => &BROTLI,
        "zstd" => &ZSTD,
        "snappy" => &SNAPPY,
        other => panic!("unknown compression {other}"),
    };
    cell.get_or_init(|| make_fixture(compression))
}

fn make_fixture(compression: &str) -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("split");
    let src = model("tf1_large_consts");
    let out = unbound([
        OsStr::new("split"),
        src.as_os_str(),
        dir.as_os_str(),
        OsStr::new("--max-size"),
        OsStr::new("20000"),
        OsStr::new("--compression"),
        OsStr::new(compression),
    ]);
    assert!(
        out.status.success(),
        "fixture split failed\n{}",
        describe(&out)
    );
    let cpb = std::fs::read(dir.join("saved_model.cpb")).expect("split wrote a .cpb");
    let mut other_files = Vec::new();
    collect_files(&dir, Path::new(""), &mut other_files);
    other_files.retain(|(p, _)| p != Path::new("saved_model.cpb"));
    let reader = RecordReader::from_bytes(Bytes::from(cpb.clone()), "fixture").unwrap();
    let mut records: Vec<Bytes> = reader
        .records()
        .map(|r| r.map(|(_, b)| b))
        .collect::<Result<_, _>>()
        .unwrap();
    let metadata = ChunkMetadata::decode(records.pop().unwrap()).unwrap();
    assert!(metadata.chunks.len() >= 4, "the fixture has several chunks");
    Fixture {
        cpb,
        other_files,
        chunks: records,
        metadata,
        original_pb: std::fs::read(src.join("saved_model.pb")).unwrap(),
    }
}

fn collect_files(root: &Path, rel: &Path, out: &mut Vec<(PathBuf, Vec<u8>)>) {
    for entry in std::fs::read_dir(root.join(rel)).unwrap() {
        let entry = entry.unwrap();
        let rel = rel.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            collect_files(root, &rel, out);
        } else {
            out.push((rel, std::fs::read(entry.path()).unwrap()));
        }
    }
}
