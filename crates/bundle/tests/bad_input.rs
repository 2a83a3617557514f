//! Damaged bundles: a flipped data byte, a missing shard, a truncated index or data file,
//! bad entries, and random mutations. Every fault is an error naming the file (and the key
//! where there is one), never a panic.

use std::fs;
use std::path::{Path, PathBuf};

use prost::Message;
use unbound_bundle::{
    data_path, index_path, saved_model_prefix, sstable, verify_prefix, BundleReader, BundleWriter,
    Tensor,
};
use unbound_proto::tensorflow::{BundleEntryProto, DataType};

/// A copy of the TensorFlow-made `tf2_multi_sig` variables in a temporary directory.
fn tf2_copy() -> (tempfile::TempDir, PathBuf) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/models/tf2_multi_sig");
    let dir = tempfile::tempdir().unwrap();
    let vars = dir.path().join("variables");
    fs::create_dir(&vars).unwrap();
    for e in fs::read_dir(src.join("variables")).unwrap() {
        let e = e.unwrap();
        fs::copy(e.path(), vars.join(e.file_name())).unwrap();
    }
    let prefix = saved_model_prefix(dir.path());
    (dir, prefix)
}

fn var(name: &str) -> String {
    format!("{name}/.ATTRIBUTES/VARIABLE_VALUE")
}

/// Flips one byte of `path` at `offset`.
fn flip(path: &Path, offset: u64) {
    let mut b = fs::read(path).unwrap();
    b[offset as usize] ^= 0x01;
    fs::write(path, b).unwrap();
}

#[test]
fn flipped_data_byte_is_a_checksum_error_naming_file_and_key() {
    for (name, within) in [("w_f32", 5), ("vocab_str", 9), ("vocab_str", 1)] {
        let (_dir, prefix) = tf2_copy();
        let r = BundleReader::open(&prefix).unwrap();
        let entry = r.entry(var(name)).unwrap().clone();
        let data = data_path(&prefix, 0, 1);
        flip(&data, entry.offset as u64 + within);
        let r = BundleReader::open(&prefix).unwrap();
        let e = r.read(var(name)).unwrap_err().to_string();
        assert!(e.contains(&data.display().to_string()), "{e}");
        assert!(e.contains(&var(name)), "{e}");
        assert!(e.contains("checksum"), "{e}");
        // Other tensors still read, and verify reports exactly this one.
        r.read(var("count_i32")).unwrap();
        let faults = r.verify();
        assert_eq!(faults.len(), 1, "{faults:?}");
        assert_eq!(faults[0].key.as_deref(), Some(var(name).as_str()));
        assert_eq!(faults[0].file, data);
    }
}

#[test]
fn missing_shard_names_the_file() {
    let (_dir, prefix) = tf2_copy();
    let data = data_path(&prefix, 0, 1);
    fs::remove_file(&data).unwrap();
    let r = BundleReader::open(&prefix).unwrap();
    let e = r.read(var("w_f32")).unwrap_err().to_string();
    assert!(
        e.contains(&data.display().to_string()) && e.contains("cannot open"),
        "{e}"
    );
    let faults = r.verify();
    assert_eq!(faults.len(), 1, "{faults:?}");
    assert_eq!(faults[0].file, data);
    assert!(
        faults[0].to_string().contains("10 tensors stored there"),
        "{}",
        faults[0]
    );
}

#[test]
fn truncated_index_names_the_file() {
    let (_dir, prefix) = tf2_copy();
    let index = index_path(&prefix);
    let full = fs::read(&index).unwrap();
    for cut in [0, 1, 47, 48, full.len() / 2, full.len() - 1] {
        fs::write(&index, &full[..cut]).unwrap();
        let e = BundleReader::open(&prefix).unwrap_err().to_string();
        assert!(e.contains(&index.display().to_string()), "cut {cut}: {e}");
        let faults = verify_prefix(&prefix);
        assert_eq!(faults.len(), 1);
        assert_eq!(faults[0].file, index);
    }
    fs::remove_file(&index).unwrap();
    assert!(BundleReader::open(&prefix)
        .unwrap_err()
        .to_string()
        .contains("variables.index"));
}

#[test]
fn truncated_data_names_file_and_key() {
    let (_dir, prefix) = tf2_copy();
    let data = data_path(&prefix, 0, 1);
    let r = BundleReader::open(&prefix).unwrap();
    let last = r
        .keys()
        .map(|k| (k.to_vec(), r.entry(k).unwrap().clone()))
        .max_by_key(|(_, e)| e.offset)
        .unwrap();
    let len = fs::metadata(&data).unwrap().len();
    fs::OpenOptions::new()
        .write(true)
        .open(&data)
        .unwrap()
        .set_len(len - 3)
        .unwrap();
    let r = BundleReader::open(&prefix).unwrap();
    let e = r.read(&last.0).unwrap_err().to_string();
    assert!(
        e.contains("truncated") && e.contains(&data.display().to_string()),
        "{e}"
    );
    assert_eq!(r.verify().len(), 1);
}

/// Rewrites the bundle's index with `edit` applied to the entry of `key`.
fn edit_entry(prefix: &Path, key: &str, edit: impl Fn(&mut BundleEntryProto)) {
    let index = index_path(prefix);
    let table = sstable::read_table(&fs::read(&index).unwrap().into()).unwrap();
    let mut t = sstable::TableBuilder::new();
    for row in table {
        if row.key == key.as_bytes() {
            let mut e = BundleEntryProto::decode(row.value).unwrap();
            edit(&mut e);
            t.add(&row.key, &e.encode_to_vec());
        } else {
            t.add(&row.key, &row.value);
        }
    }
    fs::write(&index, t.finish()).unwrap();
}

#[test]
fn inconsistent_entries_are_errors() {
    type Edit = fn(&mut BundleEntryProto);
    let cases: &[(&str, Edit, &str)] = &[
        ("w_f32", |e| e.offset = i64::MAX - 2, "truncated"),
        ("w_f32", |e| e.offset = -1, "negative"),
        ("w_f32", |e| e.size = 47, "does not match shape"),
        ("w_f32", |e| e.shard_id = 3, "shard 3"),
        ("w_f32", |e| e.dtype = 0, "unknown dtype"),
        ("w_f32", |e| e.dtype = 999, "unknown dtype"),
        (
            "w_f32",
            |e| e.shape.as_mut().unwrap().dim[0].size = -4,
            "invalid shape",
        ),
        (
            "w_f32",
            |e| e.shape.as_mut().unwrap().dim[0].size = i64::MAX,
            "invalid shape",
        ),
        ("w_f32", |e| e.crc32c ^= 1, "checksum"),
        (
            "vocab_str",
            |e| e.shape.as_mut().unwrap().dim[0].size = 1 << 50,
            "cannot fit",
        ),
        ("vocab_str", |e| e.size -= 1, "add up"),
        (
            "w_f32",
            |e| {
                e.slices.push(Default::default());
            },
            "rank",
        ),
    ];
    for (name, edit, needle) in cases {
        let (_dir, prefix) = tf2_copy();
        edit_entry(&prefix, &var(name), *edit);
        let r = BundleReader::open(&prefix).unwrap();
        let e = r.read(var(name)).unwrap_err().to_string();
        assert!(
            e.contains(needle) && e.contains(&var(name)),
            "{needle}: {e}"
        );
        let faults = r.verify();
        assert_eq!(faults.len(), 1, "{needle}: {faults:?}");
    }
}

#[test]
fn missing_slice_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("p");
    let mut w = BundleWriter::create(&prefix).unwrap();
    let half = unbound_bundle::SliceSpec::new(vec![(0, Some(1))]);
    w.add_slice(
        0,
        "v",
        &[2],
        &half,
        &Tensor::raw(DataType::DtInt8, vec![1], vec![7]),
    )
    .unwrap();
    w.finish().unwrap();
    let r = BundleReader::open(&prefix).unwrap();
    let e = r.read("v").unwrap_err().to_string();
    assert!(e.contains("cover 1 of its 2 elements"), "{e}");
    assert_eq!(r.verify().len(), 1);
}

#[test]
fn random_index_and_data_damage_never_panics() {
    let (_dir, prefix) = tf2_copy();
    let index = index_path(&prefix);
    let data = data_path(&prefix, 0, 1);
    let (index_bytes, data_bytes) = (fs::read(&index).unwrap(), fs::read(&data).unwrap());
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for round in 0..400 {
        let (mut i, mut d) = (index_bytes.clone(), data_bytes.clone());
        for _ in 0..1 + round % 4 {
            let target = if next() % 3 == 0 { &mut d } else { &mut i };
            let at = (next() as usize) % target.len();
            target[at] = next() as u8;
        }
        fs::write(&index, &i).unwrap();
        fs::write(&data, &d).unwrap();
        if let Ok(r) = BundleReader::open(&prefix) {
            let keys: Vec<Vec<u8>> = r.keys().map(<[u8]>::to_vec).collect();
            for k in keys {
                let _ = r.read(&k);
            }
            let _ = r.verify();
            let _ = r.object_graph();
        }
    }
}

#[test]
fn streaming_a_multi_piece_tensor_checks_the_checksum_at_the_end() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("big");
    let bytes: Vec<u8> = (0..(7u32 << 19)).map(|i| (i * 7 + i / 251) as u8).collect();
    let mut w = BundleWriter::create(&prefix).unwrap();
    w.add(
        "pad",
        &Tensor::raw(DataType::DtInt8, vec![3], vec![1, 2, 3]),
    )
    .unwrap();
    w.add(
        "big",
        &Tensor::raw(DataType::DtUint8, vec![bytes.len() as i64], bytes.clone()),
    )
    .unwrap();
    w.finish().unwrap();
    let r = BundleReader::open(&prefix).unwrap();
    let mut pieces = 0;
    let mut out = Vec::new();
    let n = r
        .for_each_raw_chunk("big", |p| {
            pieces += 1;
            out.extend_from_slice(p);
            Ok::<_, unbound_bundle::BundleError>(())
        })
        .unwrap();
    assert_eq!((n as usize, pieces), (bytes.len(), 4));
    assert_eq!(out, bytes);
    // A flipped byte in the last piece: every piece is delivered, then the error.
    let offset = r.entry("big").unwrap().offset as u64;
    flip(&data_path(&prefix, 0, 1), offset + bytes.len() as u64 - 2);
    let r = BundleReader::open(&prefix).unwrap();
    let mut seen = 0;
    let e = r
        .copy_raw_to("big", &mut std::io::sink())
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(e.contains("checksum") && e.contains("big"), "{e}");
    r.for_each_raw_chunk("big", |p| {
        seen += p.len();
        Ok::<_, unbound_bundle::BundleError>(())
    })
    .unwrap_err();
    assert_eq!(seen, bytes.len());
}

#[test]
fn mapped_gives_the_stored_bytes_and_checks_the_checksum_only_when_asked() {
    let (_dir, prefix) = tf2_copy();
    let r = BundleReader::open(&prefix).unwrap();
    let read = r.read(var("w_f32")).unwrap();
    let mapped = r.mapped(var("w_f32"), true).unwrap();
    assert_eq!(read.as_raw(), Some(&mapped));
    // A copy: the mapping itself would see the flip below.
    let mapped = mapped.to_vec();
    let entry = r.entry(var("w_f32")).unwrap().clone();
    let data = data_path(&prefix, 0, 1);
    flip(&data, entry.offset as u64 + 2);
    let r = BundleReader::open(&prefix).unwrap();
    let e = r.mapped(var("w_f32"), true).unwrap_err().to_string();
    assert!(
        e.contains(&data.display().to_string()) && e.contains("checksum"),
        "{e}"
    );
    let unverified = r.mapped(var("w_f32"), false).unwrap();
    assert_eq!(unverified.len(), mapped.len());
    assert_ne!(unverified.as_ref(), mapped.as_slice());
    assert!(matches!(
        r.mapped("no such key", true),
        Err(unbound_bundle::BundleError::NotFound { .. })
    ));
}
