//! Writing bundles and reading them back: every dtype, strings and variants, partitioned
//! tensors (numeric and string) over several shards, large indexes, writer refusals, and
//! no files left behind by an unfinished writer.

use bytes::Bytes;
use unbound_bundle::{
    decode_tensor_name_slice, index_path, is_slice_key, BundleReader, BundleWriter, SliceSpec,
    Tensor, TensorData,
};
use unbound_proto::tensorflow::DataType;

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// Every fixed-size dtype with its element size.
const FIXED: &[(DataType, usize)] = &[
    (DataType::DtFloat, 4),
    (DataType::DtDouble, 8),
    (DataType::DtInt32, 4),
    (DataType::DtUint8, 1),
    (DataType::DtInt16, 2),
    (DataType::DtInt8, 1),
    (DataType::DtComplex64, 8),
    (DataType::DtInt64, 8),
    (DataType::DtBool, 1),
    (DataType::DtQint8, 1),
    (DataType::DtQuint8, 1),
    (DataType::DtQint32, 4),
    (DataType::DtBfloat16, 2),
    (DataType::DtQint16, 2),
    (DataType::DtQuint16, 2),
    (DataType::DtUint16, 2),
    (DataType::DtComplex128, 16),
    (DataType::DtHalf, 2),
    (DataType::DtUint32, 4),
    (DataType::DtUint64, 8),
    (DataType::DtFloat8E5m2, 1),
    (DataType::DtFloat8E4m3fn, 1),
    (DataType::DtInt4, 1),
];

#[test]
fn every_dtype_round_trips_over_two_shards() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("ckpt/variables");
    let mut w = BundleWriter::with_shards(&prefix, 2).unwrap();
    let mut expected = Vec::new();
    for (i, &(dt, size)) in FIXED.iter().enumerate() {
        let t = Tensor::raw(dt, vec![2, 3], pattern(6 * size, i as u8));
        let key = format!("v/{}", dt.as_str_name());
        w.add_to_shard((i % 2) as i32, &key, &t).unwrap();
        expected.push((key, t));
    }
    let extra = [
        (
            "scalar",
            Tensor::raw(DataType::DtInt64, vec![], 42i64.to_le_bytes().to_vec()),
        ),
        (
            "empty",
            Tensor::raw(DataType::DtFloat, vec![0, 5], Vec::new()),
        ),
        (
            "strings",
            Tensor::strings(vec![2, 2], [&b"a"[..], b"", b"\x00\xff\x00", &[b'x'; 300]]),
        ),
        ("no_strings", Tensor::strings(vec![0], Vec::<Bytes>::new())),
        ("scalar_string", Tensor::strings(vec![], [&b"hello"[..]])),
        (
            "variants",
            Tensor::variants(vec![2], [&b"\x0a\x04name"[..], b""]),
        ),
    ];
    for (i, (key, t)) in extra.into_iter().enumerate() {
        w.add_to_shard((i % 2) as i32, key, &t).unwrap();
        expected.push((key.to_string(), t));
    }
    w.finish().unwrap();
    let names: Vec<String> = std::fs::read_dir(prefix.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let mut names = names;
    names.sort();
    assert_eq!(
        names,
        [
            "variables.data-00000-of-00002",
            "variables.data-00001-of-00002",
            "variables.index"
        ]
    );

    let r = BundleReader::open(&prefix).unwrap();
    assert_eq!(r.num_shards(), 2);
    assert_eq!(r.tensor_keys().count(), expected.len());
    for (key, t) in &expected {
        assert_eq!(&r.read(key).unwrap(), t, "{key}");
    }
    assert!(r.verify().is_empty(), "{:?}", r.verify());
}

#[test]
fn partitioned_tensors_assemble_from_slices() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("p");
    let mut w = BundleWriter::with_shards(&prefix, 2).unwrap();
    // A 4x6 float tensor with values 0..24, in three slices: rows 0-1, rows 2-3 columns 0-2,
    // rows 2-3 columns 3-5, across both shards.
    let full: Vec<f32> = (0..24).map(|v| v as f32).collect();
    let take = |rows: std::ops::Range<usize>, cols: std::ops::Range<usize>| -> Vec<u8> {
        let mut out = Vec::new();
        for r in rows {
            for c in cols.clone() {
                out.extend_from_slice(&full[r * 6 + c].to_le_bytes());
            }
        }
        out
    };
    let s1 = SliceSpec::new(vec![(0, Some(2)), (0, None)]);
    let s2 = SliceSpec::new(vec![(2, Some(2)), (0, Some(3))]);
    let s3 = SliceSpec::new(vec![(2, Some(2)), (3, Some(3))]);
    let key = "layer/kernel/.ATTRIBUTES/VARIABLE_VALUE";
    w.add_slice(
        0,
        key,
        &[4, 6],
        &s1,
        &Tensor::raw(DataType::DtFloat, vec![2, 6], take(0..2, 0..6)),
    )
    .unwrap();
    w.add_slice(
        1,
        key,
        &[4, 6],
        &s2,
        &Tensor::raw(DataType::DtFloat, vec![2, 3], take(2..4, 0..3)),
    )
    .unwrap();
    w.add_slice(
        0,
        key,
        &[4, 6],
        &s3,
        &Tensor::raw(DataType::DtFloat, vec![2, 3], take(2..4, 3..6)),
    )
    .unwrap();
    // A partitioned string vector.
    let words = SliceSpec::new(vec![(0, Some(1))]);
    let rest = SliceSpec::new(vec![(1, Some(2))]);
    w.add_slice(
        1,
        "words",
        &[3],
        &words,
        &Tensor::strings(vec![1], [&b"zero"[..]]),
    )
    .unwrap();
    w.add_slice(
        0,
        "words",
        &[3],
        &rest,
        &Tensor::strings(vec![2], [&b"one"[..], b"two"]),
    )
    .unwrap();
    // A "slice" covering everything is stored as a plain tensor.
    let whole = SliceSpec::new(vec![(0, Some(2))]);
    w.add_slice(
        0,
        "whole",
        &[2],
        &whole,
        &Tensor::raw(DataType::DtInt8, vec![2], vec![1, 2]),
    )
    .unwrap();
    // Refusals: overlapping, duplicate, wrong shape, out of range, mismatched dtype.
    let overlapping = SliceSpec::new(vec![(1, Some(2)), (0, None)]);
    let t26 = Tensor::raw(DataType::DtFloat, vec![2, 6], take(0..2, 0..6));
    assert!(w.add_slice(0, key, &[4, 6], &overlapping, &t26).is_err());
    assert!(w.add_slice(0, key, &[4, 6], &s1, &t26).is_err());
    assert!(w.add_slice(0, key, &[4, 6], &s2, &t26).is_err());
    let outside = SliceSpec::new(vec![(3, Some(2)), (0, None)]);
    assert!(w.add_slice(0, key, &[4, 6], &outside, &t26).is_err());
    let ints = Tensor::raw(DataType::DtInt32, vec![1, 6], vec![0; 24]);
    let last_row = SliceSpec::new(vec![(3, Some(1)), (0, None)]);
    assert!(w.add_slice(0, key, &[4, 6], &last_row, &ints).is_err());
    w.finish().unwrap();

    let r = BundleReader::open(&prefix).unwrap();
    let tensor_keys: Vec<&[u8]> = r.tensor_keys().collect();
    assert_eq!(tensor_keys, vec![key.as_bytes(), b"whole", b"words"]);
    let slice_keys: Vec<String> = r
        .keys()
        .filter(|k| is_slice_key(k))
        .map(|k| {
            let (name, spec) = decode_tensor_name_slice(k).unwrap();
            format!("{}[{spec}]", String::from_utf8(name).unwrap())
        })
        .collect();
    assert_eq!(slice_keys.len(), 5);
    assert!(
        slice_keys.contains(&format!("{key}[0,2:-]")),
        "{slice_keys:?}"
    );
    let entry = r.entry(key).unwrap();
    assert_eq!((entry.slices.len(), entry.size), (3, 0));
    let t = r.read(key).unwrap();
    assert_eq!(t.shape, vec![4, 6]);
    assert_eq!(t.as_raw().unwrap().to_vec(), take(0..4, 0..6));
    let mut streamed = Vec::new();
    r.copy_raw_to(key, &mut streamed).unwrap();
    assert_eq!(streamed, take(0..4, 0..6));
    assert_eq!(r.stored_bytes(key), Some(96));
    assert_eq!(
        r.read("words").unwrap().data,
        TensorData::Strings(vec!["zero".into(), "one".into(), "two".into()])
    );
    assert!(r.entry("whole").unwrap().slices.is_empty());
    assert!(r.verify().is_empty(), "{:?}", r.verify());
}

#[test]
fn index_spanning_many_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("many");
    let mut w = BundleWriter::create(&prefix).unwrap();
    // About 20000 entries of ~70 bytes: several 256 KiB index blocks.
    for i in 0..20_000u32 {
        let key = format!(
            "model/block_{:05}/dense/kernel/.ATTRIBUTES/VARIABLE_VALUE",
            i
        );
        w.add(
            &key,
            &Tensor::raw(DataType::DtInt32, vec![1], i.to_le_bytes().to_vec()),
        )
        .unwrap();
    }
    w.finish().unwrap();
    assert!(std::fs::metadata(index_path(&prefix)).unwrap().len() > 3 * 262_144);
    let r = BundleReader::open(&prefix).unwrap();
    assert_eq!(r.keys().count(), 20_000);
    let t = r
        .read("model/block_12345/dense/kernel/.ATTRIBUTES/VARIABLE_VALUE")
        .unwrap();
    assert_eq!(t.as_raw().unwrap().to_vec(), 12345u32.to_le_bytes());
}

#[test]
fn writer_refusals_and_cleanup() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("x");
    let mut w = BundleWriter::create(&prefix).unwrap();
    let t = Tensor::raw(DataType::DtFloat, vec![2], vec![0; 8]);
    w.add("a", &t).unwrap();
    assert!(w
        .add("a", &t)
        .unwrap_err()
        .to_string()
        .contains("duplicate"));
    assert!(w.add("", &t).is_err());
    assert!(w.add("\0x", &t).is_err());
    assert!(w.add_to_shard(1, "b", &t).is_err());
    assert!(w
        .add(
            "short",
            &Tensor::raw(DataType::DtFloat, vec![3], vec![0; 8])
        )
        .unwrap_err()
        .to_string()
        .contains("8 bytes"));
    assert!(w
        .add("strs", &Tensor::strings(vec![3], [&b"a"[..]]))
        .is_err());
    let invalid = Tensor {
        dtype: 0,
        shape: vec![],
        data: TensorData::Raw(Bytes::new()),
    };
    assert!(w.add("invalid", &invalid).is_err());
    assert!(BundleWriter::with_shards(&prefix, 0).is_err());
    // Dropped unfinished: no file left behind, not even temporaries.
    drop(w);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}
