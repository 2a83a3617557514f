//! `unbound reshard` on hostile input (issue 30): a mesh of thousands of devices costs one
//! listing of the output directory, not one per shard (stale temporaries of every shard are
//! still removed); index entries TensorFlow lists as variables but reshard cannot place (a
//! slice key no tensor lists, one that does not decode) are refused naming them instead of
//! being dropped; safetensors device files that disagree (object graph, a replica's values,
//! a tensor without a layout) or whose header names a tensor twice or overlaps data ranges
//! are refused naming the file.

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

/// Exit 1 naming every needle, no panic, and no index at `dst`.
fn fails_cleanly(out: &Output, needles: &[&str], dst: &Path) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    for n in needles {
        assert!(err.contains(n), "stderr lacks {n:?}: {err}");
    }
    assert!(!index_path(dst).exists());
}

/// The bytes of `n` float32 values counting from `from`.
fn float_bytes(from: usize, n: usize) -> Vec<u8> {
    (from..from + n)
        .flat_map(|i| (i as f32).to_le_bytes())
        .collect()
}

/// A float32 tensor of `n` values counting from `from`.
fn floats(from: usize, n: usize) -> Tensor {
    Tensor::raw(DataType::DtFloat, vec![n as i64], float_bytes(from, n))
}

#[test]
fn a_mesh_of_thousands_of_devices_writes_every_shard_and_removes_stale_ones() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src/ckpt");
    let mut w = BundleWriter::create(&src).unwrap();
    w.add("w", &floats(0, 2048)).unwrap();
    w.finish().unwrap();
    let dst = dir.path().join("out/ckpt");
    std::fs::create_dir_all(dst.parent().unwrap()).unwrap();
    // Temporaries a killed writer (a process that no longer exists) left of two shards.
    let mut child = Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    let n = 2048;
    let stale: Vec<_> = [5, n]
        .iter()
        .map(|&i| {
            let name = data_path(&dst, i, n + 1);
            let name = name.file_name().unwrap().to_string_lossy().to_string();
            dst.with_file_name(format!(".{name}.unbound-tmp-{dead}-1"))
        })
        .collect();
    for s in &stale {
        std::fs::write(s, b"partial").unwrap();
    }
    let text = ok(&unbound(&[
        &"reshard",
        &src,
        &dst,
        &"--mesh",
        &format!("x={n}"),
        &"--layout",
        &"w=x",
        &"--json",
    ]));
    let report: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(report["num_shards"], n + 1);
    if Path::new("/proc/self").exists() {
        for s in &stale {
            assert!(!s.exists(), "{} was left", s.display());
        }
    }
    for i in [0, 1, n / 2, n] {
        assert!(data_path(&dst, i, n + 1).exists(), "shard {i}");
    }
    let npy = dir.path().join("w.npy");
    ok(&unbound(&[&"vars", &dst, &"w", &"--npy", &npy]));
    let back = unbound_bundle::npy::read_npy(&npy).unwrap();
    assert_eq!(back.data, float_bytes(0, 2048));
}

/// A checkpoint whose index holds `w` (two slices, listed) and the extra entry `key`
/// pointing at a third tensor's bytes.
fn checkpoint_with_extra_entry(prefix: &Path, key: &[u8]) {
    let mut shard = ShardWriter::create(prefix, 0, 1).unwrap();
    let mut entries = BTreeMap::new();
    let mut full = BundleEntryProto {
        dtype: DataType::DtFloat as i32,
        shape: Some(shape_to_proto(&[8])),
        ..Default::default()
    };
    for start in [0, 4] {
        let spec = SliceSpec::new(vec![(start, Some(4))]);
        let entry = shard.append_tensor(&floats(start as usize, 4)).unwrap();
        entries.insert(encode_tensor_name_slice(b"w", &spec), entry);
        full.slices.push(spec.to_proto());
    }
    entries.insert(b"w".to_vec(), full);
    entries.insert(key.to_vec(), shard.append_tensor(&floats(100, 4)).unwrap());
    shard.finish().unwrap().persist().unwrap();
    write_index(prefix, 1, &entries).unwrap();
}

#[test]
fn entries_tensorflow_lists_as_variables_are_refused_not_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let orphan = encode_tensor_name_slice(b"v", &SliceSpec::new(vec![(0, Some(4))]));
    let extra_of_w = encode_tensor_name_slice(b"w", &SliceSpec::new(vec![(2, Some(4))]));
    for (name, key, needle) in [
        ("orphan", orphan, "v[0,4]"),
        ("undecodable", b"\0\xffjunk".to_vec(), "\\x00\\xffjunk"),
        ("unlisted", extra_of_w, "w[2,4]"),
    ] {
        let src = dir.path().join(format!("{name}/ckpt"));
        checkpoint_with_extra_entry(&src, &key);
        let dst = dir.path().join(format!("out-{name}/ckpt"));
        let out = unbound(&[
            &"reshard",
            &src,
            &dst,
            &"--mesh",
            &"x=2",
            &"--default",
            &"x",
        ]);
        fails_cleanly(&out, &[needle, "ckpt.index", "TensorFlow lists"], &dst);
    }
    // Without the extra entry the same checkpoint reshards.
    let src = dir.path().join("fine/ckpt");
    checkpoint_with_extra_entry(&src, b"u");
    let dst = dir.path().join("out-fine/ckpt");
    ok(&unbound(&[
        &"reshard",
        &src,
        &dst,
        &"--mesh",
        &"x=2",
        &"--default",
        &"x",
    ]));
}

/// Rewrites the safetensors file `path` with `edit` applied to its JSON header and data.
fn rewrite_safetensors(path: &Path, edit: impl FnOnce(&mut serde_json::Value, &mut Vec<u8>)) {
    let bytes = std::fs::read(path).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let mut header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    let mut data = bytes[8 + n..].to_vec();
    edit(&mut header, &mut data);
    let text = serde_json::to_vec(&header).unwrap();
    let mut out = (text.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(&text);
    out.extend_from_slice(&data);
    std::fs::write(path, out).unwrap();
}

/// Device files for mesh x=4 of a checkpoint holding `w` (sharded) and `b` (replicated).
fn device_files(dir: &Path, name: &str) -> std::path::PathBuf {
    let src = dir.join(format!("{name}-src/ckpt"));
    let mut w = BundleWriter::create(&src).unwrap();
    w.add("w", &floats(0, 8)).unwrap();
    w.add("b", &floats(50, 3)).unwrap();
    w.finish().unwrap();
    let st = dir.join(name);
    ok(&unbound(&[
        &"reshard",
        &src,
        &"--to",
        &"safetensors",
        &st,
        &"--mesh",
        &"x=4",
        &"--layout",
        &"w=x",
    ]));
    st
}

#[test]
fn safetensors_device_files_are_cross_checked() {
    let dir = tempfile::tempdir().unwrap();
    let from = |st: &Path, dst: &Path| {
        unbound(&[
            &"reshard",
            &"--from",
            &"safetensors",
            &st,
            &dst,
            &"--mesh",
            &"x=2",
            &"--layout",
            &"w=x",
        ])
    };
    let st = device_files(dir.path(), "fine");
    ok(&from(&st, &dir.path().join("out-fine/ckpt")));

    let st = device_files(dir.path(), "graph");
    rewrite_safetensors(&st.join("device_0002.safetensors"), |h, _| {
        h["__metadata__"]["unbound.object_graph"] = "0a00".into();
    });
    let dst = dir.path().join("out-graph/ckpt");
    fails_cleanly(
        &from(&st, &dst),
        &["device_0002.safetensors", "object graph"],
        &dst,
    );

    let st = device_files(dir.path(), "replica");
    rewrite_safetensors(&st.join("device_0003.safetensors"), |h, data| {
        let at = h["b"]["data_offsets"][0].as_u64().unwrap() as usize;
        data[at] ^= 1;
    });
    let dst = dir.path().join("out-replica/ckpt");
    fails_cleanly(
        &from(&st, &dst),
        &[
            "device_0003.safetensors",
            "\"b\"",
            "replica",
            "values differ",
        ],
        &dst,
    );

    let st = device_files(dir.path(), "extra");
    rewrite_safetensors(&st.join("device_0001.safetensors"), |h, data| {
        let end = data.len();
        h["z"] = serde_json::json!({"dtype": "F32", "shape": [1], "data_offsets": [end, end + 4]});
        data.extend_from_slice(&[0; 4]);
    });
    let dst = dir.path().join("out-extra/ckpt");
    fails_cleanly(
        &from(&st, &dst),
        &["device_0001.safetensors", "\"z\"", "no layout"],
        &dst,
    );
}

#[test]
fn safetensors_headers_naming_a_tensor_twice_or_overlapping_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let entry = |name: &str, a: u64, b: u64| {
        format!(r#""{name}":{{"dtype":"F32","shape":[2],"data_offsets":[{a},{b}]}}"#)
    };
    for (case, header, needle) in [
        (
            "twice",
            format!("{{{},{}}}", entry("a", 0, 8), entry("a", 0, 8)),
            "twice",
        ),
        (
            "meta",
            format!(
                r#"{{"__metadata__":{{}},"__metadata__":{{}},{}}}"#,
                entry("a", 0, 8)
            ),
            "twice",
        ),
        (
            "overlap",
            format!("{{{},{}}}", entry("a", 0, 8), entry("b", 4, 12)),
            "overlap",
        ),
    ] {
        let st = dir.path().join(case);
        std::fs::create_dir_all(&st).unwrap();
        let mut file = (header.len() as u64).to_le_bytes().to_vec();
        file.extend_from_slice(header.as_bytes());
        file.extend_from_slice(&[0; 8]);
        std::fs::write(st.join("model.safetensors"), file).unwrap();
        let dst = dir.path().join(format!("out-{case}/ckpt"));
        let out = unbound(&[
            &"reshard",
            &"--from",
            &"safetensors",
            &st,
            &dst,
            &"--mesh",
            &"x=2",
        ]);
        fails_cleanly(&out, &["model.safetensors", needle], &dst);
    }
}
