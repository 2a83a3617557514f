//! `show` on TensorFlow-made models: signatures, dtypes, shapes and tensor names equal what
//! TensorFlow reported when it made them (`testdata/models/*.expected.json`), the same for a
//! `.pb` and its `.cpb` split, and a `.cpb`'s large tensor chunks are not read.

use std::fs;
use std::path::Path;

use serde_json::Value;
use unbound_records::RecordReader;
use unbound_savedmodel::show::{show, text, SavedModelInfo};
use unbound_savedmodel::write::{split_dir, WriteOptions};
use unbound_test_support::testdata::model as testdata;

fn expected(name: &str) -> Value {
    let text = fs::read_to_string(testdata(&format!("{name}.expected.json"))).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn json(info: &SavedModelInfo) -> Value {
    serde_json::to_value(info).unwrap()
}

/// The signatures of `info` in the shape of `expected.json` (key, method, and per tensor its
/// name, dtype and shape).
fn signatures(info: &Value) -> Value {
    let sigs = info["meta_graphs"][0]["signatures"].as_object().unwrap();
    let side = |m: &Value| -> Value {
        m.as_object()
            .unwrap()
            .iter()
            .map(|(k, t)| {
                let t = serde_json::json!({
                    "dtype": t["dtype"], "name": t["name"], "shape": t["shape"],
                });
                (k.clone(), t)
            })
            .collect::<serde_json::Map<_, _>>()
            .into()
    };
    sigs.iter()
        .map(|(k, s)| {
            let s = serde_json::json!({
                "method_name": s["method_name"],
                "inputs": side(&s["inputs"]),
                "outputs": side(&s["outputs"]),
            });
            (k.clone(), s)
        })
        .collect::<serde_json::Map<_, _>>()
        .into()
}

fn check_against_tensorflow(name: &str) -> Value {
    let info = json(&show(&testdata(name)).unwrap());
    let want = expected(name);
    assert_eq!(signatures(&info), want["signatures"], "{name}: signatures");
    let mg = &info["meta_graphs"][0];
    assert_eq!(mg["tags"], want["tags"], "{name}: tags");
    assert_eq!(mg["graph_nodes"], want["graph"]["nodes"], "{name}: nodes");
    assert_eq!(
        mg["library_function_nodes"], want["graph"]["function_nodes"],
        "{name}: function nodes"
    );
    let mut functions: Vec<Value> = mg["library_functions"].as_array().unwrap().clone();
    functions.sort_by(|a, b| a.as_str().cmp(&b.as_str()));
    assert_eq!(Value::from(functions), want["graph"]["functions"]);
    assert_eq!(mg["tensorflow_version"], want["tensorflow_version"]);
    assert_eq!(info["format"], "pb");
    assert_eq!(info["model_file_bytes"], want["saved_model_pb_bytes"]);
    info
}

/// The numpy name of a DataType name (`DT_FLOAT` -> `float32`).
fn numpy_name(dtype: &Value) -> Value {
    let d = dtype.as_str().unwrap();
    match d {
        "DT_FLOAT" => "float32".into(),
        "DT_DOUBLE" => "float64".into(),
        "DT_HALF" => "float16".into(),
        other => other[3..].to_ascii_lowercase().into(),
    }
}

#[test]
fn tf2_multi_sig_matches_tensorflow() {
    let info = check_against_tensorflow("tf2_multi_sig");
    let want = expected("tf2_multi_sig");
    let og = &info["meta_graphs"][0]["object_graph"];
    assert_eq!(og["nodes"], want["object_graph_nodes"]);
    let names: Vec<&str> = og["concrete_functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    let want_names: Vec<&str> = want["concrete_functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    assert_eq!(names, want_names);
    // Every variable of the object graph is in TensorFlow's checkpoint listing under its
    // checkpoint key, with the same dtype and shape (numpy names there, DataType names here);
    // so is every key of the bundle.
    let vars = og["variables"].as_array().unwrap();
    assert_eq!(vars.len(), 9);
    for v in vars {
        let key = v["checkpoint_key"].as_str().unwrap();
        assert_eq!(
            key,
            format!("{}/.ATTRIBUTES/VARIABLE_VALUE", v["path"].as_str().unwrap())
        );
        let w = &want["variables"][key];
        assert_eq!(v["shape"], w["shape"], "{key}");
        assert_eq!(numpy_name(&v["dtype"]), w["dtype"], "{key}");
    }
    let keys = info["checkpoint"]["keys"].as_array().unwrap();
    assert_eq!(keys.len(), want["variables"].as_object().unwrap().len());
    for k in keys {
        let w = &want["variables"][k["key"].as_str().unwrap()];
        assert_eq!(k["shape"], w["shape"], "{k}");
        assert_eq!(numpy_name(&k["dtype"]), w["dtype"], "{k}");
    }
    // The functions saved_model_cli lists, with their argument specs.
    let functions = og["functions"].as_array().unwrap();
    let names: Vec<&str> = functions
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["add_ints", "greet", "increment", "logic", "predict"]
    );
    let arg = &functions[0]["concrete_functions"][0]["args"][1];
    assert_eq!(arg["kind"], "tensor_spec");
    assert_eq!(arg["name"], "b");
    assert_eq!(arg["dtype"], "DT_INT64");
    assert_eq!(arg["shape"], serde_json::json!([-1]));
    assert_eq!(
        arg["text"],
        "TensorSpec(shape=(None,), dtype=tf.int64, name='b')"
    );
}

#[test]
fn tf1_large_consts_matches_tensorflow() {
    let info = check_against_tensorflow("tf1_large_consts");
    assert!(info["meta_graphs"][0]["object_graph"].is_null());
    let keys = info["checkpoint"]["keys"].as_array().unwrap();
    let want = expected("tf1_large_consts");
    assert_eq!(keys.len(), 1);
    assert_eq!(keys[0]["key"], "dense/kernel");
    assert_eq!(keys[0]["shape"], want["variables"]["dense/kernel"]["shape"]);
    assert_eq!(keys[0]["bytes"], 1024);
    let ops = info["meta_graphs"][0]["ops"].as_array().unwrap();
    // The library function is reached through PartitionedCall: its Mul counts, its name not.
    assert!(ops.contains(&"Mul".into()));
    assert!(ops.contains(&"PartitionedCall".into()));
    assert!(!ops
        .iter()
        .any(|o| o.as_str().unwrap().starts_with("__inference")));
}

/// `info` without what differs between a `.pb` and its `.cpb`.
fn content(info: &SavedModelInfo) -> Value {
    let mut v = json(info);
    for k in ["dir", "format", "model_file", "model_file_bytes", "chunks"] {
        v.as_object_mut().unwrap().remove(k);
    }
    v
}

#[test]
fn cpb_shows_the_same_as_pb() {
    for name in ["tf2_multi_sig", "tf1_large_consts"] {
        for max in [100_000, 2_000, 300] {
            let tmp = tempfile::tempdir().unwrap();
            let out = tmp.path().join("split");
            split_dir(
                &testdata(name),
                &out,
                &WriteOptions::default().with_max_size(max),
                &|_| {},
            )
            .unwrap();
            if !out.join("saved_model.cpb").exists() {
                continue;
            }
            let pb = show(&testdata(name)).unwrap();
            let cpb = show(&out).unwrap();
            assert_eq!(cpb.format, "cpb");
            assert!(cpb.chunks.unwrap() > 1, "{name} at {max}");
            assert_eq!(content(&cpb), content(&pb), "{name} split at {max}");
            assert_eq!(
                text::render(&cpb).lines().skip(3).collect::<Vec<_>>(),
                text::render(&pb).lines().skip(3).collect::<Vec<_>>()
            );
        }
    }
}

/// A SavedModel in `dir` with one signature and `consts` float Consts of `bytes_each` bytes of
/// incompressible content.
fn write_model_with_big_consts(dir: &Path, consts: usize, bytes_each: usize) {
    use prost::Message;
    use unbound_proto::tensorflow::{
        attr_value, meta_graph_def::MetaInfoDef, tensor_info, tensor_shape_proto::Dim, AttrValue,
        GraphDef, MetaGraphDef, NodeDef, SavedModel, SignatureDef, TensorInfo, TensorProto,
        TensorShapeProto,
    };
    let shape = |dims: &[i64]| TensorShapeProto {
        dim: dims
            .iter()
            .map(|&size| Dim {
                size,
                name: String::new(),
            })
            .collect(),
        unknown_rank: false,
    };
    let mut x = 0x2545_f491_u32;
    let node = |i: usize, x: &mut u32| {
        let mut content = Vec::with_capacity(bytes_each);
        while content.len() < bytes_each {
            *x ^= *x << 13;
            *x ^= *x >> 17;
            *x ^= *x << 5;
            content.extend_from_slice(&x.to_le_bytes());
        }
        let tensor = TensorProto {
            dtype: 1,
            tensor_shape: Some(shape(&[(bytes_each / 4) as i64])),
            tensor_content: content.into(),
            ..Default::default()
        };
        NodeDef {
            name: format!("big_{i}"),
            op: "Const".into(),
            attr: [
                (
                    "dtype".to_string(),
                    AttrValue {
                        value: Some(attr_value::Value::Type(1)),
                    },
                ),
                (
                    "value".to_string(),
                    AttrValue {
                        value: Some(attr_value::Value::Tensor(tensor)),
                    },
                ),
            ]
            .into_iter()
            .collect(),
            ..Default::default()
        }
    };
    let nodes = (0..consts).map(|i| node(i, &mut x)).collect();
    let info = |name: &str, dims: &[i64]| TensorInfo {
        dtype: 1,
        tensor_shape: Some(shape(dims)),
        encoding: Some(tensor_info::Encoding::Name(name.into())),
    };
    let sig = SignatureDef {
        inputs: [("x".to_string(), info("x:0", &[-1, 3]))]
            .into_iter()
            .collect(),
        outputs: [("y".to_string(), info("big_0:0", &[-1]))]
            .into_iter()
            .collect(),
        method_name: "tensorflow/serving/predict".into(),
        ..Default::default()
    };
    let model = SavedModel {
        saved_model_schema_version: 1,
        meta_graphs: vec![MetaGraphDef {
            meta_info_def: Some(MetaInfoDef {
                tags: vec!["serve".into()],
                ..Default::default()
            }),
            graph_def: Some(GraphDef {
                node: nodes,
                ..Default::default()
            }),
            signature_def: [("serving_default".to_string(), sig)].into_iter().collect(),
            ..Default::default()
        }],
    };
    fs::create_dir_all(dir).unwrap();
    fs::write(dir.join("saved_model.pb"), model.encode_to_vec()).unwrap();
}

#[test]
fn cpb_large_tensor_chunks_are_not_read() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("model");
    let out = tmp.path().join("split");
    write_model_with_big_consts(&src, 2, 3 << 20);
    split_dir(
        &src,
        &out,
        &WriteOptions::default().with_max_size(2 << 20),
        &|_| {},
    )
    .unwrap();
    let cpb = out.join("saved_model.cpb");
    // Damage the Riegeli chunk holding the second constant's tensor content.
    let target = RecordReader::open(&cpb)
        .unwrap()
        .chunks()
        .map(Result::unwrap)
        .filter(|c| c.decoded_data_size == 3 << 20)
        .nth(1)
        .expect("a chunk for big_1");
    let mut bytes = fs::read(&cpb).unwrap();
    let mut at = (target.begin + target.end) / 2;
    while at % 65_536 < 24 {
        at += 24;
    }
    bytes[at as usize] ^= 0x55;
    fs::write(&cpb, &bytes).unwrap();
    assert!(RecordReader::open(&cpb)
        .unwrap()
        .read_record_at(target.begin)
        .is_err());
    let info = show(&out).unwrap();
    assert_eq!(info.chunks, Some(3));
    assert_eq!(info.meta_graphs[0].graph_nodes, 2);
    assert_eq!(content(&info), content(&show(&src).unwrap()));
}
