//! Reading the TensorFlow-made bundles under `testdata/models`: every dtype they hold (float,
//! double, int32, int64, half, bfloat16, bool, string), the object graph, verification, and
//! the index rewritten by our table builder byte for byte.

use bytes::Bytes;
use unbound_bundle::{
    object_paths, saved_model_prefix, sstable, BundleReader, TensorData, OBJECT_GRAPH_KEY,
};
use unbound_proto::tensorflow::DataType;
use unbound_test_support::testdata::model;

fn var(name: &str) -> String {
    format!("{name}/.ATTRIBUTES/VARIABLE_VALUE")
}

fn raw(r: &BundleReader, key: &str) -> (i32, Vec<i64>, Bytes) {
    let t = r.read(key).unwrap();
    match t.data {
        TensorData::Raw(b) => (t.dtype, t.shape, b),
        other => panic!("{key}: not raw: {other:?}"),
    }
}

fn le<T: Copy, const N: usize>(values: &[T], to: impl Fn(T) -> [u8; N]) -> Vec<u8> {
    values.iter().flat_map(|&v| to(v)).collect()
}

#[test]
fn tf2_model_every_dtype() {
    let r = BundleReader::open(&saved_model_prefix(&model("tf2_multi_sig"))).unwrap();
    assert_eq!(r.num_shards(), 1);
    assert_eq!(r.header().version.as_ref().unwrap().producer, 1);
    let keys: Vec<String> = r
        .tensor_keys()
        .map(|k| String::from_utf8(k.to_vec()).unwrap())
        .collect();
    let mut expected: Vec<String> = [
        "b_f64",
        "big_i64",
        "count_i32",
        "h_f16",
        "mask_bool",
        "step",
        "vocab_str",
        "w_bf16",
        "w_f32",
    ]
    .iter()
    .map(|n| var(n))
    .collect();
    expected.insert(0, OBJECT_GRAPH_KEY.to_string());
    assert_eq!(keys, expected);

    let (dt, shape, b) = raw(&r, &var("count_i32"));
    assert_eq!((dt, shape), (DataType::DtInt32 as i32, vec![5]));
    assert_eq!(b, le(&[0i32, 1, 2, 3, 4], i32::to_le_bytes));
    let (dt, shape, b) = raw(&r, &var("big_i64"));
    assert_eq!((dt, shape), (DataType::DtInt64 as i32, vec![2, 2]));
    assert_eq!(b, le(&[1i64, 1 << 40, -3, 1 << 62], i64::to_le_bytes));
    let (dt, shape, b) = raw(&r, &var("mask_bool"));
    assert_eq!(
        (dt, shape, &b[..]),
        (DataType::DtBool as i32, vec![3], &[1u8, 0, 1][..])
    );
    // float16 0.5, -1.25, 2, 65504 and bfloat16 1, -2, 3.5, as bits.
    let (dt, _, b) = raw(&r, &var("h_f16"));
    assert_eq!(dt, DataType::DtHalf as i32);
    assert_eq!(
        b,
        le(&[0x3800u16, 0xbd00, 0x4000, 0x7bff], u16::to_le_bytes)
    );
    let (dt, _, b) = raw(&r, &var("w_bf16"));
    assert_eq!(dt, DataType::DtBfloat16 as i32);
    assert_eq!(b, le(&[0x3f80u16, 0xc000, 0x4060], u16::to_le_bytes));
    let (dt, shape, b) = raw(&r, &var("step"));
    assert_eq!((dt, shape, b.len()), (DataType::DtInt64 as i32, vec![], 8));
    let (_, shape, b) = raw(&r, &var("w_f32"));
    assert_eq!((shape, b.len()), (vec![4, 3], 48));
    let first = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    assert!((first - 0.647_906_2).abs() < 1e-6, "{first}");
    let (dt, _, b) = raw(&r, &var("b_f64"));
    assert_eq!(dt, DataType::DtDouble as i32);
    let first = f64::from_le_bytes(b[..8].try_into().unwrap());
    assert!((first + 1.061_964_64).abs() < 1e-8, "{first}");

    let t = r.read(var("vocab_str")).unwrap();
    assert_eq!(t.dtype, DataType::DtString as i32);
    assert_eq!(
        t.data,
        TensorData::Strings(vec![
            Bytes::from_static(b"alpha"),
            Bytes::from_static(b"beta"),
            Bytes::from_static(b"\xff\x00binary"),
        ])
    );

    // Streaming gives the same bytes as reading.
    let mut out = Vec::new();
    assert_eq!(r.copy_raw_to(var("w_f32"), &mut out).unwrap(), 48);
    assert_eq!(out, raw(&r, &var("w_f32")).2);
    assert!(r.copy_raw_to(var("vocab_str"), &mut Vec::new()).is_err());
    assert!(r
        .read("no/such/key")
        .unwrap_err()
        .to_string()
        .contains("no/such/key"));
    assert_eq!(r.stored_bytes(var("w_f32")), Some(48));

    // The object graph names every variable by its attribute path.
    let graph = r.object_graph().unwrap().expect("object-based checkpoint");
    let paths = object_paths(&graph);
    assert_eq!(paths[&var("w_f32")], "w_f32");
    assert_eq!(paths[&var("vocab_str")], "vocab_str");
    assert!(r.verify().is_empty(), "{:?}", r.verify());
}

#[test]
fn tf1_model() {
    let r = BundleReader::open(&saved_model_prefix(&model("tf1_large_consts"))).unwrap();
    let keys: Vec<&[u8]> = r.keys().collect();
    assert_eq!(keys, vec![&b"dense/kernel"[..]]);
    let (dt, shape, b) = raw(&r, "dense/kernel");
    assert_eq!(
        (dt, shape, b.len()),
        (DataType::DtFloat as i32, vec![16, 16], 1024)
    );
    assert!(r.object_graph().unwrap().is_none());
    assert!(r.verify().is_empty());
}

#[test]
fn our_table_builder_rewrites_tensorflow_indexes_byte_for_byte() {
    for name in ["tf2_multi_sig", "tf1_large_consts"] {
        let path = saved_model_prefix(&model(name)).with_extension("index");
        let original = Bytes::from(std::fs::read(&path).unwrap());
        let rows = sstable::read_table(&original).unwrap();
        let mut t = sstable::TableBuilder::new();
        for row in &rows {
            assert!(t.add(&row.key, &row.value));
        }
        assert_eq!(t.finish(), original, "{name}");
    }
}
