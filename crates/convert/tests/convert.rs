//! Conversions both ways on checkpoints written here (every safetensors dtype, a partitioned
//! variable), PyTorch DCP's layout, and hostile safetensors files refused naming the fault.

use std::collections::HashMap;
use std::path::Path;

use safetensors::{Dtype, SafeTensors};
use unbound_bundle::{BundleReader, BundleWriter, SliceSpec, Tensor, TensorData};
use unbound_convert::{convert, ConvertError, ConvertOptions, Names, Target};
use unbound_proto::tensorflow::DataType;

fn opts(to: Target) -> ConvertOptions {
    ConvertOptions {
        to: Some(to),
        ..ConvertOptions::default()
    }
}

fn bytes(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// A checkpoint of every dtype safetensors has, plus a variable in three slices.
fn checkpoint(prefix: &Path) -> HashMap<String, Vec<u8>> {
    let mut w = BundleWriter::create(prefix).unwrap();
    let mut want = HashMap::new();
    let dtypes = [
        (DataType::DtFloat, 4),
        (DataType::DtDouble, 8),
        (DataType::DtHalf, 2),
        (DataType::DtBfloat16, 2),
        (DataType::DtInt8, 1),
        (DataType::DtInt16, 2),
        (DataType::DtInt32, 4),
        (DataType::DtInt64, 8),
        (DataType::DtUint8, 1),
        (DataType::DtUint16, 2),
        (DataType::DtUint32, 4),
        (DataType::DtUint64, 8),
        (DataType::DtFloat8E5m2, 1),
        (DataType::DtFloat8E4m3fn, 1),
    ];
    for (i, (dt, size)) in dtypes.into_iter().enumerate() {
        let b = bytes(6 * size, i as u8);
        let key = format!("v{i:02}");
        w.add(&key, &Tensor::raw(dt, vec![2, 3], b.clone()))
            .unwrap();
        want.insert(key, b);
    }
    let flags: Vec<u8> = (0..5).map(|i| (i % 2) as u8).collect();
    w.add(
        "flags",
        &Tensor::raw(DataType::DtBool, vec![5], flags.clone()),
    )
    .unwrap();
    want.insert("flags".into(), flags);
    // A 6x4 float32 in three row slices.
    let full = bytes(6 * 4 * 4, 7);
    for r in 0..3 {
        let part = full[r * 32..(r + 1) * 32].to_vec();
        let slice = SliceSpec::new(vec![((r * 2) as i64, Some(2)), (0, None)]);
        w.add_slice(
            0,
            "part",
            &[6, 4],
            &slice,
            &Tensor::raw(DataType::DtFloat, vec![2, 4], part),
        )
        .unwrap();
    }
    want.insert("part".into(), full);
    w.finish().unwrap();
    want
}

fn read_st(dir: &Path) -> HashMap<String, (Dtype, Vec<u8>)> {
    let mut out = HashMap::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "safetensors") {
            let data = std::fs::read(&p).unwrap();
            let st = SafeTensors::deserialize(&data).unwrap();
            for (name, view) in st.tensors() {
                out.insert(name, (view.dtype(), view.data().to_vec()));
            }
        }
    }
    out
}

#[test]
fn every_dtype_and_slices_round_trip_bit_for_bit() {
    let dir = tempfile::tempdir().unwrap();
    let want = checkpoint(&dir.path().join("ck"));
    let st = dir.path().join("st");
    let mut o = opts(Target::Safetensors);
    o.max_shard_size = 50;
    let r = convert(&dir.path().join("ck"), &st, &o, &|_| {}).unwrap();
    assert!(r.files.len() > 1);
    assert!(st.join("model.safetensors.index.json").is_file());
    let got = read_st(&st);
    assert_eq!(got.len(), want.len());
    for (k, v) in &want {
        assert_eq!(&got[k].1, v, "{k}");
    }
    assert_eq!(got["v03"].0, Dtype::BF16);
    assert_eq!(got["flags"].0, Dtype::BOOL);
    // And back, with two data shards.
    let back = dir.path().join("back");
    let mut o = opts(Target::Tf);
    o.jobs = 2;
    let r = convert(&st, &back, &o, &|_| {}).unwrap();
    assert_eq!(r.files.len(), 2);
    let reader = BundleReader::open(&back).unwrap();
    for (k, v) in &want {
        let t = reader.read(k).unwrap();
        let TensorData::Raw(b) = t.data else { panic!() };
        assert_eq!(&b[..], &v[..], "{k}");
    }
    assert!(unbound_bundle::verify_prefix(&back).is_empty());
    // One file when everything fits, named as Hugging Face names it.
    let one = dir.path().join("one");
    convert(
        &dir.path().join("ck"),
        &one,
        &opts(Target::Safetensors),
        &|_| {},
    )
    .unwrap();
    let names: Vec<_> = std::fs::read_dir(&one)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["model.safetensors"]);
    // The output exists: refused.
    let err = convert(
        &dir.path().join("ck"),
        &one,
        &opts(Target::Safetensors),
        &|_| {},
    );
    assert!(matches!(err, Err(ConvertError::Exists { .. })));
}

#[test]
fn strings_are_refused_naming_the_key_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("ck");
    let mut w = BundleWriter::create(&prefix).unwrap();
    w.add("words", &Tensor::strings(vec![2], ["a", "b"]))
        .unwrap();
    w.add("x", &Tensor::raw(DataType::DtFloat, vec![1], vec![0u8; 4]))
        .unwrap();
    w.finish().unwrap();
    let st = dir.path().join("st");
    let err = convert(&prefix, &st, &opts(Target::Safetensors), &|_| {})
        .unwrap_err()
        .to_string();
    assert!(err.contains("words") && err.contains("string"), "{err}");
    assert!(!st.exists());
    let names = ConvertOptions {
        names: Names::Keys,
        dry_run: true,
        ..opts(Target::Safetensors)
    };
    assert!(convert(&prefix, &st, &names, &|_| {}).is_err());
}

fn st_file(path: &Path, header: &str, data: &[u8]) {
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    std::fs::write(path, out).unwrap();
}

#[test]
fn dcp_pieces_are_assembled_and_bad_ones_refused() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("dcp");
    std::fs::create_dir(&src).unwrap();
    // A 2x4 uint8 tensor in two column pieces, one per rank.
    let meta = |o: u64| {
        format!(
            r#""__metadata__":{{"DCP_SHARDING_INFO":"{{\"t\": {{\"saved_offsets\": [0, {o}]}}}}","DCP_VERSION":"1.0","format":"pt"}}"#
        )
    };
    let h = |o| {
        format!(
            r#"{{{},"t":{{"dtype":"U8","shape":[2,2],"data_offsets":[0,4]}}}}"#,
            meta(o)
        )
    };
    st_file(
        &src.join("shard-00001-model-00001-of-00001.safetensors"),
        &h(0),
        &[1, 2, 5, 6],
    );
    st_file(
        &src.join("shard-00002-model-00001-of-00001.safetensors"),
        &h(2),
        &[3, 4, 7, 8],
    );
    let back = dir.path().join("back");
    let r = convert(&src, &back, &opts(Target::Tf), &|_| {}).unwrap();
    assert_eq!(r.tensors[0].pieces, 2);
    let t = BundleReader::open(&back).unwrap().read("t").unwrap();
    assert_eq!(t.shape, [2, 4]);
    let TensorData::Raw(b) = t.data else { panic!() };
    assert_eq!(&b[..], &[1, 2, 3, 4, 5, 6, 7, 8]);
    // Overlapping pieces.
    st_file(
        &src.join("shard-00002-model-00001-of-00001.safetensors"),
        &h(1),
        &[3, 4, 7, 8],
    );
    let err = convert(&src, &dir.path().join("o"), &opts(Target::Tf), &|_| {})
        .unwrap_err()
        .to_string();
    assert!(err.contains("overlaps"), "{err}");
    assert!(!dir.path().join("o.index").exists());
}

#[test]
fn hostile_headers_are_refused_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, Vec<u8>); 5] = [
        ("short", vec![1, 2]),
        ("huge", {
            let mut v = u64::MAX.to_le_bytes().to_vec();
            v.extend_from_slice(b"{}");
            v
        }),
        ("past", {
            let h = r#"{"t":{"dtype":"F32","shape":[1000000],"data_offsets":[0,4000000]}}"#;
            let mut v = (h.len() as u64).to_le_bytes().to_vec();
            v.extend_from_slice(h.as_bytes());
            v
        }),
        ("twice", {
            let h = r#"{"t":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"t":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}"#;
            let mut v = (h.len() as u64).to_le_bytes().to_vec();
            v.extend_from_slice(h.as_bytes());
            v.push(0);
            v
        }),
        ("badjson", {
            let mut v = 3u64.to_le_bytes().to_vec();
            v.extend_from_slice(b"{{{");
            v
        }),
    ];
    for (name, data) in cases {
        let p = dir.path().join(format!("{name}.safetensors"));
        std::fs::write(&p, data).unwrap();
        let err = convert(&p, &dir.path().join(name), &opts(Target::Tf), &|_| {})
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&format!("{name}.safetensors")),
            "{name}: {err}"
        );
        assert!(!dir.path().join(format!("{name}.index")).exists());
    }
}
