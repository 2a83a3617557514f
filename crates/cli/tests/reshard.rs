//! End-to-end tests of `unbound reshard` and `unbound vars --box` on checkpoints built here:
//! resharding a 2x4-sharded variable onto a 4x2 mesh and back gives the same values; bad
//! input (a truncated shard, a missing slice, overlapping slices, a checksum mismatch, a
//! layout that does not divide the shape, a rule matching nothing) exits 1 naming the key
//! and the fault, and leaves no output.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};

use unbound_bundle::{
    data_path, encode_tensor_name_slice, index_path, shape_to_proto, write_index, BundleWriter,
    ShardWriter, SliceSpec, Tensor,
};
use unbound_proto::tensorflow::{BundleEntryProto, DataType};

fn unbound(args: &[&dyn AsRef<std::ffi::OsStr>]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_unbound"))
        .args(args.iter().map(|a| a.as_ref()))
        .output()
        .unwrap()
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{:?}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

/// Exit 1 naming every needle, no panic, and nothing at `dst`.
fn fails_cleanly(out: &Output, needles: &[&str], dst: &Path) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    for n in needles {
        assert!(err.contains(n), "stderr lacks {n:?}: {err}");
    }
    let dir = dst.parent().unwrap();
    let left: Vec<_> = std::fs::read_dir(dir)
        .map(|d| d.map(|e| e.unwrap().file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "output left behind: {left:?}");
}

/// The values 0..128 as a float32 [8, 16] tensor's bytes, or a box of them.
fn values(rows: std::ops::Range<usize>, cols: std::ops::Range<usize>) -> Vec<u8> {
    let mut out = Vec::new();
    for r in rows {
        for c in cols.clone() {
            out.extend_from_slice(&((r * 16 + c) as f32).to_le_bytes());
        }
    }
    out
}

/// A checkpoint with `w` [8, 16] float32 stored as a 2x4 grid of slices over two shards,
/// and a whole string tensor.
fn sliced_checkpoint(prefix: &Path) {
    let mut w = BundleWriter::with_shards(prefix, 2).unwrap();
    for i in 0..2 {
        for j in 0..4 {
            let slice = SliceSpec::new(vec![(4 * i, Some(4)), (4 * j, Some(4))]);
            let t = Tensor::raw(
                DataType::DtFloat,
                vec![4, 4],
                values(
                    4 * i as usize..4 * i as usize + 4,
                    4 * j as usize..4 * j as usize + 4,
                ),
            );
            w.add_slice((i + j) as i32 % 2, "w", &[8, 16], &slice, &t)
                .unwrap();
        }
    }
    w.add("names", &Tensor::strings(vec![2], ["a", "bc"]))
        .unwrap();
    w.finish().unwrap();
}

#[test]
fn reshard_round_trips_and_boxes_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src/ckpt");
    sliced_checkpoint(&src);
    let listing = ok(&unbound(&[&"vars", &src]));
    assert!(listing.contains("grid 2x4"), "{listing}");
    let mid = dir.path().join("mid/ckpt");
    let text = ok(&unbound(&[
        &"reshard",
        &src,
        &mid,
        &"--mesh",
        &"x=4,y=2",
        &"--layout",
        &"w=y,unsharded",
    ]));
    assert!(text.contains("9 data shards"), "{text}");
    let listing = ok(&unbound(&[&"vars", &mid]));
    assert!(listing.contains("0,4:-@1 4,4:-@2; grid 2x1"), "{listing}");
    // Back to a 2x4 grid on the first mesh: the same values.
    let back = dir.path().join("back/ckpt");
    ok(&unbound(&[
        &"reshard",
        &mid,
        &back,
        &"--mesh",
        &"x=2,y=4",
        &"--default",
        &"x,y",
        &"--jobs",
        &"3",
    ]));
    for prefix in [&src, &mid, &back] {
        // Outputs are never overwritten: a fresh name per read.
        let npy = dir.path().join("w.npy");
        let _ = std::fs::remove_file(&npy);
        ok(&unbound(&[&"vars", prefix, &"w", &"--npy", &npy]));
        let a = unbound_bundle::npy::read_npy(&npy).unwrap();
        assert_eq!(a.data, values(0..8, 0..16));
        std::fs::remove_file(&npy).unwrap();
        ok(&unbound(&[
            &"vars",
            prefix,
            &"w",
            &"--box",
            &"8 16 2,4:3,10",
            &"--npy",
            &npy,
        ]));
        let a = unbound_bundle::npy::read_npy(&npy).unwrap();
        assert_eq!(
            (a.shape.clone(), a.data),
            (vec![4, 10], values(2..6, 3..13))
        );
    }
    // A dry run writes nothing and says where each slice goes.
    let dry = dir.path().join("dry/ckpt");
    let plan = ok(&unbound(&[
        &"reshard",
        &src,
        &dry,
        &"--mesh",
        &"x=8",
        &"--default",
        &"unsharded,x",
        &"--dry-run",
    ]));
    assert!(plan.contains("2x4 -> unsharded,x"), "{plan}");
    assert!(!dry.parent().unwrap().exists());
}

#[test]
fn bad_layouts_and_rules_fail_without_output() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src/ckpt");
    sliced_checkpoint(&src);
    let dst = dir.path().join("out/ckpt");
    let out = unbound(&[
        &"reshard",
        &src,
        &dst,
        &"--mesh",
        &"x=3",
        &"--layout",
        &"w=x,unsharded",
    ]);
    fails_cleanly(&out, &["variable w", "does not divide"], &dst);
    let out = unbound(&[
        &"reshard",
        &src,
        &dst,
        &"--mesh",
        &"x=2,y=4",
        &"--layout",
        &"nothing.*=x",
    ]);
    fails_cleanly(&out, &["nothing.*=x", "matches no"], &dst);
    let out = unbound(&[
        &"reshard",
        &src,
        &dst,
        &"--mesh",
        &"x=8",
        &"--layout",
        &"w=x",
    ]);
    fails_cleanly(&out, &["variable w", "rank"], &dst);
    // A grid the mesh cannot hold, with no layout given.
    let out = unbound(&[&"reshard", &src, &dst, &"--mesh", &"x=8"]);
    fails_cleanly(
        &out,
        &[
            "  w (rank 2)",
            "2x4 grid",
            "--layout 'w=",
            "--default replicated",
        ],
        &dst,
    );
}

#[test]
fn damaged_sources_fail_without_output() {
    let dir = tempfile::tempdir().unwrap();
    let args = |src: &Path, dst: &Path| {
        unbound(&[
            &"reshard",
            &src,
            &dst,
            &"--mesh",
            &"x=2",
            &"--default",
            &"x,unsharded",
        ])
    };
    // Truncated shard.
    let src = dir.path().join("trunc/ckpt");
    sliced_checkpoint(&src);
    let shard = data_path(&src, 1, 2);
    let len = std::fs::metadata(&shard).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&shard)
        .unwrap()
        .set_len(len - 10)
        .unwrap();
    let dst = dir.path().join("o1/ckpt");
    fails_cleanly(&args(&src, &dst), &["tensor w[", "truncated"], &dst);
    // Checksum mismatch.
    let src = dir.path().join("crc/ckpt");
    sliced_checkpoint(&src);
    let shard = data_path(&src, 0, 2);
    let mut bytes = std::fs::read(&shard).unwrap();
    bytes[5] ^= 0x40;
    std::fs::write(&shard, bytes).unwrap();
    let dst = dir.path().join("o2/ckpt");
    fails_cleanly(&args(&src, &dst), &["tensor w[", "checksum mismatch"], &dst);
    // A slice missing, and overlapping slices: indexes made by hand.
    for (name, slices, needle) in [
        ("gap", vec![(0, 4), (5, 3)], "a slice is missing"),
        ("overlap", vec![(0, 5), (4, 4)], "overlap"),
    ] {
        let src = dir.path().join(format!("{name}/ckpt"));
        let mut shard = ShardWriter::create(&src, 0, 1).unwrap();
        let mut entries = BTreeMap::new();
        let mut full = BundleEntryProto {
            dtype: DataType::DtFloat as i32,
            shape: Some(shape_to_proto(&[8, 16])),
            ..Default::default()
        };
        for (start, len) in slices {
            let spec = SliceSpec::new(vec![(start, Some(len)), (0, None)]);
            let t = Tensor::raw(
                DataType::DtFloat,
                vec![len, 16],
                values(start as usize..(start + len) as usize, 0..16),
            );
            entries.insert(
                encode_tensor_name_slice(b"w", &spec),
                shard.append_tensor(&t).unwrap(),
            );
            full.slices.push(spec.to_proto());
        }
        entries.insert(b"w".to_vec(), full);
        shard.finish().unwrap().persist().unwrap();
        write_index(&src, 1, &entries).unwrap();
        assert!(index_path(&src).exists());
        let dst = dir.path().join(format!("o-{name}/ckpt"));
        fails_cleanly(&args(&src, &dst), &[" w: ", needle], &dst);
        let npy = dir.path().join(format!("npy-{name}/w.npy"));
        std::fs::create_dir_all(npy.parent().unwrap()).unwrap();
        let out = unbound(&[&"vars", &src, &"w", &"--box", &"8 16 0,8:-", &"--npy", &npy]);
        fails_cleanly(&out, &["tensor w", needle], &npy);
    }
}

/// A checkpoint with `w` as in [`sliced_checkpoint`] and a whole int64 scalar `step` (no
/// strings, so safetensors can hold it).
fn numeric_checkpoint(prefix: &Path) {
    let mut w = BundleWriter::with_shards(prefix, 2).unwrap();
    for i in 0..2 {
        for j in 0..4 {
            let slice = SliceSpec::new(vec![(4 * i, Some(4)), (4 * j, Some(4))]);
            let r = 4 * i as usize;
            let c = 4 * j as usize;
            let t = Tensor::raw(DataType::DtFloat, vec![4, 4], values(r..r + 4, c..c + 4));
            w.add_slice(j as i32 % 2, "w", &[8, 16], &slice, &t)
                .unwrap();
        }
    }
    w.add(
        "step",
        &Tensor::raw(DataType::DtInt64, vec![], 7i64.to_le_bytes().to_vec()),
    )
    .unwrap();
    w.finish().unwrap();
}

/// A safetensors file parsed here, independently of the crate: its JSON header and data.
fn parse_safetensors(path: &Path) -> (serde_json::Value, Vec<u8>) {
    let bytes = std::fs::read(path).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    (header, bytes[8 + n..].to_vec())
}

/// The bytes of tensor `name` of a parsed safetensors file.
fn tensor_bytes<'a>(header: &serde_json::Value, data: &'a [u8], name: &str) -> &'a [u8] {
    let offsets = &header[name]["data_offsets"];
    let (a, b) = (
        offsets[0].as_u64().unwrap() as usize,
        offsets[1].as_u64().unwrap() as usize,
    );
    &data[a..b]
}

#[test]
fn safetensors_per_device_and_back() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src/ckpt");
    numeric_checkpoint(&src);
    let st = dir.path().join("st");
    let text = ok(&unbound(&[
        &"reshard",
        &src,
        &"--to",
        &"safetensors",
        &st,
        &"--mesh",
        &"x=2,y=4",
        &"--default",
        &"x,y",
    ]));
    assert!(text.contains("8 safetensors files"), "{text}");
    let mut names: Vec<String> = std::fs::read_dir(&st)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    names.sort();
    let want: Vec<String> = (0..8)
        .map(|i| format!("device_{i:04}.safetensors"))
        .collect();
    assert_eq!(names, want);
    // Mesh position 5 on x=2,y=4 is x=1, y=1: rows 4..8, columns 4..8 of w.
    let (header, data) = parse_safetensors(&st.join("device_0005.safetensors"));
    assert_eq!(header["w"]["dtype"], "F32");
    assert_eq!(header["w"]["shape"], serde_json::json!([4, 4]));
    assert_eq!(tensor_bytes(&header, &data, "w"), values(4..8, 4..8));
    assert_eq!(header["step"]["dtype"], "I64");
    assert_eq!(tensor_bytes(&header, &data, "step"), 7i64.to_le_bytes());
    let meta = &header["__metadata__"];
    assert_eq!(meta["unbound.device"], "5");
    assert!(meta["unbound.mesh"].as_str().unwrap().contains("x=2,y=4"));
    let layouts: serde_json::Value =
        serde_json::from_str(meta["unbound.layouts"].as_str().unwrap()).unwrap();
    assert_eq!(layouts["w"], serde_json::json!(["x", "y"]));
    assert_eq!(layouts["step"], serde_json::json!([]));
    // An existing output directory is refused.
    let again = unbound(&[
        &"reshard",
        &src,
        &"--to",
        &"safetensors",
        &st,
        &"--mesh",
        &"x=2,y=4",
    ]);
    assert_eq!(again.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&again.stderr).contains("exists"));

    // Back to a checkpoint with another layout: the same values.
    let back = dir.path().join("back/ckpt");
    ok(&unbound(&[
        &"reshard",
        &"--from",
        &"safetensors",
        &st,
        &back,
        &"--mesh",
        &"x=4,y=2",
        &"--layout",
        &"w=y,unsharded",
    ]));
    let listing = ok(&unbound(&[&"vars", &back]));
    assert!(listing.contains("grid 2x1"), "{listing}");
    let npy = dir.path().join("w.npy");
    ok(&unbound(&[&"vars", &back, &"w", &"--npy", &npy]));
    assert_eq!(
        unbound_bundle::npy::read_npy(&npy).unwrap().data,
        values(0..8, 0..16)
    );
    let npy = dir.path().join("step.npy");
    ok(&unbound(&[&"vars", &back, &"step", &"--npy", &npy]));
    assert_eq!(
        unbound_bundle::npy::read_npy(&npy).unwrap().data,
        7i64.to_le_bytes()
    );
    // No staging directory is left beside the output.
    let left: Vec<_> = std::fs::read_dir(back.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .filter(|n| !n.starts_with("ckpt."))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn plain_safetensors_are_whole_and_strings_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    // A plain file as PyTorch writes it: no metadata, one float32 [2, 3] tensor.
    let plain = dir.path().join("plain");
    std::fs::create_dir(&plain).unwrap();
    let header = br#"{"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}}"#;
    let mut file = (header.len() as u64).to_le_bytes().to_vec();
    file.extend_from_slice(header);
    file.extend_from_slice(&values(0..1, 0..6));
    std::fs::write(plain.join("model.safetensors"), &file).unwrap();
    let out = dir.path().join("out/ckpt");
    ok(&unbound(&[
        &"reshard",
        &"--from",
        &"safetensors",
        &plain,
        &out,
        &"--mesh",
        &"x=2",
        &"--layout",
        &"a=x,unsharded",
    ]));
    let npy = dir.path().join("a.npy");
    ok(&unbound(&[&"vars", &out, &"a", &"--npy", &npy]));
    let a = unbound_bundle::npy::read_npy(&npy).unwrap();
    assert_eq!((a.shape, a.data), (vec![2, 3], values(0..1, 0..6)));

    // A truncated file: exit 1 naming it.
    std::fs::write(plain.join("model.safetensors"), &file[..file.len() - 4]).unwrap();
    let bad = dir.path().join("bad/ckpt");
    let out = unbound(&[
        &"reshard",
        &"--from",
        &"safetensors",
        &plain,
        &bad,
        &"--mesh",
        &"x=2",
    ]);
    fails_cleanly(&out, &["model.safetensors"], &bad);

    // Strings have no safetensors dtype: the key is named, nothing is written.
    let src = dir.path().join("src/ckpt");
    sliced_checkpoint(&src);
    let st = dir.path().join("st/out");
    let out = unbound(&[
        &"reshard",
        &src,
        &"--to",
        &"safetensors",
        &st,
        &"--mesh",
        &"x=2,y=4",
    ]);
    fails_cleanly(&out, &["names", "no string dtype"], &st);
}

#[test]
fn dry_run_reports_read_amplification() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src/ckpt");
    numeric_checkpoint(&src);
    let dry = |mesh: &str, default: &str| -> serde_json::Value {
        let out = ok(&unbound(&[
            &"reshard",
            &src,
            &dir.path().join("dry/ckpt"),
            &"--mesh",
            &mesh,
            &"--default",
            &default,
            &"--dry-run",
            &"--json",
        ]));
        serde_json::from_str(&out).unwrap()
    };
    // The same 2x4 grid: every slice is one stored piece read once, nothing more.
    let same = dry("x=2,y=4", "x,y");
    assert_eq!(same["bytes"], 8 * 16 * 4 + 8);
    assert_eq!(same["read"], same["bytes"]);
    assert_eq!(same["checksum_read"], 0);
    assert_eq!(same["read_amplification"], 1.0);
    for s in same["shards"].as_array().unwrap() {
        assert_eq!(s["read"], s["bytes"], "{s}");
    }
    // Columns of 2 out of pieces 4 wide: each small run is gathered with the span around
    // it, 56 bytes for 32 (rows of 16 bytes: 3 * 16 + 8). The two spans of each piece
    // overlap, so its checksum needs it read once more in full: all 512 bytes of w.
    let cut = dry("x=8", "unsharded,x");
    assert_eq!(cut["checksum_read"], 512);
    for s in &cut["shards"].as_array().unwrap()[1..] {
        assert_eq!(
            (s["bytes"].as_u64(), s["read"].as_u64()),
            (Some(64), Some(112))
        );
    }
    let total = cut["read_amplification"].as_f64().unwrap();
    assert!(
        (total - (8.0 * 112.0 + 8.0 + 512.0) / (8.0 * 64.0 + 8.0)).abs() < 1e-9,
        "{total}"
    );
    // Text: totals and each shard.
    let text = ok(&unbound(&[
        &"reshard",
        &src,
        &dir.path().join("dry/ckpt"),
        &"--mesh",
        &"x=8",
        &"--default",
        &"unsharded,x",
        &"--dry-run",
    ]));
    assert!(
        text.contains("(512 to check checksums), read amplification 2.72"),
        "{text}"
    );
    assert!(
        text.contains("shard 1: 1 entries, 64 bytes, reads 112 bytes (amplification 1.75)"),
        "{text}"
    );
}
