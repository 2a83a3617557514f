//! unpack, relayout and pack against the components TensorFlow's DTensor produced on 8
//! logical CPU devices (`dtensor.unpack(dtensor.relayout(...))`), for every dtype.

mod common;

use common::{cases, ints, unhex};
use serde_json::Value;
use unbound_dtensor::{pack, relayout, unpack, Chunking, HostArray, Layout, Sharding};

fn itemsize(dtype: &str) -> Option<usize> {
    Some(match dtype {
        "int8" | "uint8" | "bool" => 1,
        "float16" | "bfloat16" | "int16" | "uint16" => 2,
        "float32" | "int32" | "uint32" => 4,
        "float64" | "int64" | "uint64" | "complex64" => 8,
        "complex128" => 16,
        "string" => return None,
        other => panic!("dtype {other}"),
    })
}

fn array(dtype: &str, shape: Vec<i64>, data: &Value) -> HostArray {
    match itemsize(dtype) {
        Some(n) => HostArray::from_bytes(shape, n, unhex(data.as_str().unwrap())).unwrap(),
        None => HostArray::from_strings(
            shape,
            data.as_array()
                .unwrap()
                .iter()
                .map(|s| unhex(s.as_str().unwrap()))
                .collect(),
        )
        .unwrap(),
    }
}

fn components(dtype: &str, v: &Value) -> Option<Vec<HostArray>> {
    Some(
        v.as_array()?
            .iter()
            .map(|c| array(dtype, ints(&c["shape"]), &c["data"]))
            .collect(),
    )
}

#[test]
fn unpack_relayout_pack_match_tensorflow() {
    let (mut unpacked, mut relayouts, mut packed) = (0, 0, 0);
    let mut dtypes = std::collections::BTreeSet::new();
    for case in cases("data.json") {
        let dtype = case["dtype"].as_str().unwrap();
        let shape = ints(&case["global_shape"]);
        let global = array(dtype, shape.clone(), &case["global"]);
        let from = Sharding::from_layout(
            &Layout::parse(case["from"].as_str().unwrap()).unwrap(),
            Chunking::Even,
        )
        .unwrap();
        let to = Sharding::from_layout(
            &Layout::parse(case["to"].as_str().unwrap()).unwrap(),
            Chunking::Even,
        )
        .unwrap();
        let ctx = format!("{dtype} {} -> {}", from.describe(), to.describe());
        let ours_from = unpack(&global, &from).unwrap();
        if let Some(tf_from) = components(dtype, &case["from_components"]) {
            assert_eq!(ours_from, tf_from, "unpack {ctx}");
            unpacked += 1;
            dtypes.insert(dtype.to_string());
        }
        let ours_to = relayout(&ours_from, &from, &to, &shape).unwrap();
        if let Some(tf_to) = components(dtype, &case["to_components"]) {
            assert_eq!(ours_to, tf_to, "relayout {ctx}");
            relayouts += 1;
            assert_eq!(pack(&tf_to, &to, &shape).unwrap(), global, "pack {ctx}");
            packed += 1;
        }
        // Whatever TensorFlow could not run (collectives it lacks for some dtypes), the
        // round trip must still hold here.
        assert_eq!(pack(&ours_to, &to, &shape).unwrap(), global, "pack {ctx}");
    }
    assert_eq!(dtypes.len(), 16, "{dtypes:?}");
    assert!(
        unpacked >= 140 && relayouts >= 120 && packed >= 120,
        "{unpacked} {relayouts} {packed}"
    );
}
