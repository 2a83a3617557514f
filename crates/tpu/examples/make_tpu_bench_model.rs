//! Generates the benchmark model of `scripts/bench_tpu.sh`: the 1.6 GB model of
//! `scripts/bench.sh` (12 float32 constants of 128 MiB, roughly normal values, the same seeds
//! as `crates/savedmodel/examples/make_bench_model.rs`) laid out as TensorFlow 2 saves a model:
//! the constants and the `MatMul` chain are the body of a function `__inference_predict_1`, which
//! the top-level graph calls through a `StatefulPartitionedCall` that the `serving_default`
//! signature reads. (The TF1-shaped `make_bench_model` graph has no function to run on TPU.)
//!
//! ```text
//! cargo run --release -p unbound-tpu --example make_tpu_bench_model -- OUT [--consts N] [--mib M]
//! ```
//!
//! Writes `OUT/saved_model.pb`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use bytes::Bytes;
use prost::Message;
use unbound_proto::tensorflow::attr_value::{ListValue, Value};
use unbound_proto::tensorflow::meta_graph_def::MetaInfoDef;
use unbound_proto::tensorflow::op_def::ArgDef;
use unbound_proto::tensorflow::{
    tensor_info, AttrValue, DataType, FunctionDef, FunctionDefLibrary, GraphDef, MetaGraphDef,
    NameAttrList, NodeDef, OpDef, SavedModel, SignatureDef, TensorInfo, VersionDef,
};
use unbound_test_support::data::normalish_f32_bytes;
use unbound_test_support::models::{const_node, op_node, placeholder_node, shape};

const COLS: i64 = 1024;
const FUNCTION: &str = "__inference_predict_1";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = || -> ! {
        eprintln!("usage: make_tpu_bench_model OUT [--consts N] [--mib M]");
        std::process::exit(2)
    };
    let mut out: Option<PathBuf> = None;
    let (mut consts, mut mib) = (12usize, 128u64);
    let mut i = 0;
    while i < args.len() {
        let value = |i: usize| args.get(i + 1).cloned().unwrap_or_else(|| usage());
        match args[i].as_str() {
            "--consts" => consts = value(i).parse().unwrap_or_else(|_| usage()),
            "--mib" => mib = value(i).parse().unwrap_or_else(|_| usage()),
            s if !s.starts_with('-') && out.is_none() => {
                out = Some(PathBuf::from(s));
                i += 1;
                continue;
            }
            _ => usage(),
        }
        i += 2;
    }
    let Some(out) = out else { usage() };
    let model = build(consts, mib);
    std::fs::create_dir_all(&out).expect("create OUT");
    std::fs::write(out.join("saved_model.pb"), model.encode_to_vec()).expect("write the model");
    eprintln!(
        "make_tpu_bench_model: wrote {}",
        out.join("saved_model.pb").display()
    );
}

fn attr(value: Value) -> AttrValue {
    AttrValue { value: Some(value) }
}

fn float_types() -> AttrValue {
    attr(Value::List(ListValue {
        r#type: vec![DataType::DtFloat as i32],
        ..ListValue::default()
    }))
}

fn build(consts: usize, mib: u64) -> SavedModel {
    let rows = (mib << 20) as i64 / (4 * COLS);
    let mut body = Vec::new();
    let mut prev = "x".to_string();
    for k in 0..consts {
        let content = Bytes::from(normalish_f32_bytes(
            (rows * COLS) as usize,
            0.05,
            2000 + k as u64,
        ));
        let w = format!("dense_{k:02}/kernel");
        body.push(const_node(&w, &[rows, COLS], content));
        let y = format!("dense_{k:02}/MatMul");
        body.push(op_node(&y, "MatMul", &[&prev, &format!("{w}:output:0")]));
        prev = format!("{y}:product:0");
    }
    body.push(op_node("y", "Identity", &[&prev]));
    let arg = |name: &str| ArgDef {
        name: name.into(),
        r#type: DataType::DtFloat as i32,
        ..ArgDef::default()
    };
    let function = FunctionDef {
        signature: Some(OpDef {
            name: FUNCTION.into(),
            input_arg: vec![arg("x")],
            output_arg: vec![arg("identity")],
            ..OpDef::default()
        }),
        node_def: body,
        ret: BTreeMap::from([("identity".to_string(), "y:output:0".to_string())]),
        ..FunctionDef::default()
    };
    let call = NodeDef {
        name: "StatefulPartitionedCall".into(),
        op: "StatefulPartitionedCall".into(),
        input: vec!["x".into()],
        attr: BTreeMap::from([
            ("Tin".to_string(), float_types()),
            ("Tout".to_string(), float_types()),
            (
                "f".to_string(),
                attr(Value::Func(NameAttrList {
                    name: FUNCTION.into(),
                    attr: BTreeMap::new(),
                })),
            ),
            ("config".to_string(), attr(Value::S(Bytes::new()))),
            ("config_proto".to_string(), attr(Value::S(Bytes::new()))),
            ("executor_type".to_string(), attr(Value::S(Bytes::new()))),
        ]),
        ..NodeDef::default()
    };
    let info = |name: &str, dims: &[i64]| TensorInfo {
        dtype: DataType::DtFloat as i32,
        tensor_shape: Some(shape(dims)),
        encoding: Some(tensor_info::Encoding::Name(name.into())),
    };
    let signature = SignatureDef {
        inputs: BTreeMap::from([("x".to_string(), info("x:0", &[1, rows]))]),
        outputs: BTreeMap::from([(
            "y".to_string(),
            info("StatefulPartitionedCall:0", &[1, COLS]),
        )]),
        method_name: "tensorflow/serving/predict".into(),
        ..SignatureDef::default()
    };
    SavedModel {
        saved_model_schema_version: 1,
        meta_graphs: vec![MetaGraphDef {
            meta_info_def: Some(MetaInfoDef {
                tags: vec!["serve".into()],
                tensorflow_version: "2.21.0".into(),
                ..MetaInfoDef::default()
            }),
            graph_def: Some(GraphDef {
                node: vec![placeholder_node("x", &[1, rows]), call],
                library: Some(FunctionDefLibrary {
                    function: vec![function],
                    ..FunctionDefLibrary::default()
                }),
                versions: Some(VersionDef {
                    producer: 2129,
                    min_consumer: 12,
                    bad_consumers: vec![],
                }),
                ..GraphDef::default()
            }),
            signature_def: BTreeMap::from([("serving_default".to_string(), signature)]),
            ..MetaGraphDef::default()
        }],
    }
}
