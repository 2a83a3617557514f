//! Writes tensor bundles with unbound's `BundleWriter`, for checks against TensorFlow
//! (`interop/bundle_check.sh`) and for timing `unbound vars --npy`.
//!
//! ```text
//! cargo run --release -p unbound-bundle --example write_test_bundle -- PREFIX MANIFEST.json
//! cargo run --release -p unbound-bundle --example write_test_bundle -- --big PREFIX MIB
//! ```
//!
//! The first form writes a two-shard bundle holding a tensor of every fixed-size dtype
//! TensorFlow's Python API can hold (numeric, bool, half, bfloat16, complex, quantized, float8,
//! 4-bit), strings (empty, with zero bytes, not UTF-8, long), scalars, an empty tensor, and two
//! partitioned variables stored as slices in both shards; and a JSON manifest of what went in
//! (each tensor's key, dtype name, shape and bytes as hex; each slice's spec), computed from
//! the data written, not read back. The second form writes one float32 variable `big` of MIB
//! MiB (deterministic content) in a SavedModel-style prefix.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use unbound_bundle::{dtype::tf_name, BundleWriter, SliceSpec, Tensor};
use unbound_proto::tensorflow::DataType;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.as_slice() {
        [flag, prefix, mib] if flag == "--big" => match mib.parse() {
            Ok(mib) => write_big(Path::new(prefix), mib),
            Err(_) => Err(format!("not a number of MiB: {mib}")),
        },
        [prefix, manifest] => write_all(Path::new(prefix), &PathBuf::from(manifest)),
        _ => Err("usage: write_test_bundle PREFIX MANIFEST.json | --big PREFIX MIB".into()),
    };
    if let Err(e) = result {
        eprintln!("write_test_bundle: {e}");
        std::process::exit(1);
    }
}

/// Deterministic bytes: an xorshift stream.
fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

fn hex(b: &[u8]) -> String {
    b.iter()
        .fold(String::with_capacity(2 * b.len()), |mut s, x| {
            let _ = write!(s, "{x:02x}");
            s
        })
}

struct Manifest {
    tensors: Vec<String>,
    slices: Vec<String>,
}

impl Manifest {
    fn tensor(&mut self, key: &str, t: &Tensor) {
        let values = match &t.data {
            unbound_bundle::TensorData::Raw(b) => format!("\"hex\": \"{}\"", hex(b)),
            unbound_bundle::TensorData::Strings(v) | unbound_bundle::TensorData::Variants(v) => {
                format!(
                    "\"strings\": [{}]",
                    v.iter()
                        .map(|s| format!("\"{}\"", hex(s)))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
        };
        self.tensors.push(format!(
            "{{\"key\": \"{key}\", \"dtype\": \"{}\", \"shape\": {:?}, {values}}}",
            tf_name(t.dtype),
            t.shape
        ));
    }
}

fn write_all(prefix: &Path, manifest_path: &Path) -> Result<(), String> {
    let err = |e: unbound_bundle::BundleError| e.to_string();
    let mut w = BundleWriter::with_shards(prefix, 2).map_err(err)?;
    let mut m = Manifest {
        tensors: Vec::new(),
        slices: Vec::new(),
    };
    use DataType::*;
    // (dtype, element size, mask applied to each byte so values are valid for the type).
    let fixed: &[(DataType, usize, u8)] = &[
        (DtFloat, 4, 0xff),
        (DtDouble, 8, 0xff),
        (DtInt32, 4, 0xff),
        (DtUint8, 1, 0xff),
        (DtInt16, 2, 0xff),
        (DtInt8, 1, 0xff),
        (DtComplex64, 8, 0xff),
        (DtInt64, 8, 0xff),
        (DtBool, 1, 0x01),
        (DtQint8, 1, 0xff),
        (DtQuint8, 1, 0xff),
        (DtQint32, 4, 0xff),
        (DtBfloat16, 2, 0xff),
        (DtQint16, 2, 0xff),
        (DtQuint16, 2, 0xff),
        (DtUint16, 2, 0xff),
        (DtComplex128, 16, 0xff),
        (DtHalf, 2, 0xff),
        (DtUint32, 4, 0xff),
        (DtUint64, 8, 0xff),
        (DtFloat8E5m2, 1, 0xff),
        (DtFloat8E4m3fn, 1, 0x7f),
        (DtFloat8E4m3fnuz, 1, 0xff),
        (DtFloat8E4m3b11fnuz, 1, 0xff),
        (DtFloat8E5m2fnuz, 1, 0xff),
        (DtInt4, 1, 0x0f),
        (DtUint4, 1, 0x0f),
        (DtInt2, 1, 0x03),
        (DtUint2, 1, 0x03),
        (DtFloat4E2m1fn, 1, 0x0f),
    ];
    for (i, &(dt, size, mask)) in fixed.iter().enumerate() {
        let shape = vec![2, 3];
        let bytes: Vec<u8> = noise(6 * size, i as u64 + 1)
            .into_iter()
            .map(|b| b & mask)
            .collect();
        let t = Tensor::raw(dt, shape, bytes);
        let key = format!("dtypes/{}", tf_name(dt as i32));
        w.add_to_shard((i % 2) as i32, &key, &t).map_err(err)?;
        m.tensor(&key, &t);
    }
    let more: Vec<(&str, Tensor)> = vec![
        (
            "scalar/int64",
            Tensor::raw(DtInt64, vec![], (-5i64).to_le_bytes().to_vec()),
        ),
        ("scalar/string", Tensor::strings(vec![], [&b"just one"[..]])),
        ("empty/float", Tensor::raw(DtFloat, vec![0, 4], Vec::new())),
        (
            "empty/string",
            Tensor::strings(vec![0], Vec::<Bytes>::new()),
        ),
        (
            "strings/mixed",
            Tensor::strings(
                vec![2, 3],
                [
                    Bytes::from_static(b"alpha"),
                    Bytes::new(),
                    Bytes::from_static(b"\x00zero\x00inside"),
                    Bytes::from_static(b"\xff\xfe not utf-8"),
                    Bytes::from(vec![b'x'; 300]),
                    Bytes::from("unicode \u{00e9}\u{4e2d}".as_bytes().to_vec()),
                ],
            ),
        ),
    ];
    for (i, (key, t)) in more.into_iter().enumerate() {
        w.add_to_shard((i % 2) as i32, key, &t).map_err(err)?;
        m.tensor(key, &t);
    }
    // Partitioned variables: a 4x6 float32 in three slices over both shards, and an int64
    // vector in two.
    let full = noise(4 * 6 * 4, 99);
    let cut = |rows: std::ops::Range<usize>, cols: std::ops::Range<usize>| -> Vec<u8> {
        let mut out = Vec::new();
        for r in rows {
            out.extend_from_slice(&full[(r * 6 + cols.start) * 4..(r * 6 + cols.end) * 4]);
        }
        out
    };
    let parts = [
        (
            0,
            SliceSpec::new(vec![(0, Some(2)), (0, None)]),
            cut(0..2, 0..6),
            vec![2, 6],
        ),
        (
            1,
            SliceSpec::new(vec![(2, Some(2)), (0, Some(3))]),
            cut(2..4, 0..3),
            vec![2, 3],
        ),
        (
            0,
            SliceSpec::new(vec![(2, Some(2)), (3, Some(3))]),
            cut(2..4, 3..6),
            vec![2, 3],
        ),
    ];
    let key = "partitioned/kernel";
    for (shard, spec, bytes, shape) in parts {
        m.slices.push(format!(
            "{{\"key\": \"{key}\", \"dtype\": \"float32\", \"shape_and_slice\": \"4 6 {spec}\", \"shape\": {shape:?}, \"hex\": \"{}\"}}",
            hex(&bytes)
        ));
        w.add_slice(
            shard,
            key,
            &[4, 6],
            &spec,
            &Tensor::raw(DtFloat, shape, bytes),
        )
        .map_err(err)?;
    }
    m.tensor(key, &Tensor::raw(DtFloat, vec![4, 6], full.clone()));
    let ints = noise(10 * 8, 7);
    let key = "partitioned/ids";
    for (shard, start, len) in [(1, 0usize, 7usize), (0, 7, 3)] {
        let spec = SliceSpec::new(vec![(start as i64, Some(len as i64))]);
        let bytes = ints[start * 8..(start + len) * 8].to_vec();
        m.slices.push(format!(
            "{{\"key\": \"{key}\", \"dtype\": \"int64\", \"shape_and_slice\": \"10 {spec}\", \"shape\": [{len}], \"hex\": \"{}\"}}",
            hex(&bytes)
        ));
        w.add_slice(
            shard,
            key,
            &[10],
            &spec,
            &Tensor::raw(DtInt64, vec![len as i64], bytes),
        )
        .map_err(err)?;
    }
    m.tensor(key, &Tensor::raw(DtInt64, vec![10], ints));
    w.finish().map_err(err)?;
    let json = format!(
        "{{\n\"tensors\": [\n{}\n],\n\"slices\": [\n{}\n]\n}}\n",
        m.tensors.join(",\n"),
        m.slices.join(",\n")
    );
    std::fs::write(manifest_path, json).map_err(|e| format!("{}: {e}", manifest_path.display()))?;
    Ok(())
}

fn write_big(prefix: &Path, mib: usize) -> Result<(), String> {
    let err = |e: unbound_bundle::BundleError| e.to_string();
    let mut w = BundleWriter::create(prefix).map_err(err)?;
    let bytes = noise(mib << 20, 12345);
    let n = (bytes.len() / 4) as i64;
    w.add("big", &Tensor::raw(DataType::DtFloat, vec![n], bytes))
        .map_err(err)?;
    w.finish().map_err(err)
}
