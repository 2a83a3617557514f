//! Unit tests of static inference, on small hand-built graphs.

use unbound_proto::tensorflow::attr_value::{ListValue, Value};
use unbound_proto::tensorflow::{
    tensor_shape_proto, AttrValue, DataType, GraphDef, NodeDef, TensorProto, TensorShapeProto,
};

use super::{GraphProperties, InferOptions, PropertiesError, TensorProperties};
use crate::ops::OpLibrary;

mod array_ops;
mod calls;
mod robustness;
mod slicing_ops;

const FLOAT: i32 = DataType::DtFloat as i32;
const INT32: i32 = DataType::DtInt32 as i32;
const BOOL: i32 = DataType::DtBool as i32;

fn shape_proto(dims: &[i64]) -> TensorShapeProto {
    TensorShapeProto {
        dim: dims
            .iter()
            .map(|&size| tensor_shape_proto::Dim {
                size,
                name: String::new(),
            })
            .collect(),
        unknown_rank: false,
    }
}

fn attr(value: Value) -> AttrValue {
    AttrValue { value: Some(value) }
}

fn ty(t: i32) -> AttrValue {
    attr(Value::Type(t))
}

fn s(text: &str) -> AttrValue {
    attr(Value::S(text.as_bytes().to_vec().into()))
}

fn ints(v: &[i64]) -> AttrValue {
    attr(Value::List(ListValue {
        i: v.to_vec(),
        ..ListValue::default()
    }))
}

fn node(name: &str, op: &str, inputs: &[&str], attrs: Vec<(&str, AttrValue)>) -> NodeDef {
    NodeDef {
        name: name.into(),
        op: op.into(),
        input: inputs.iter().map(|i| (*i).to_owned()).collect(),
        attr: attrs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect(),
        ..NodeDef::default()
    }
}

fn placeholder(name: &str, dtype: i32, dims: &[i64]) -> NodeDef {
    node(
        name,
        "Placeholder",
        &[],
        vec![
            ("dtype", ty(dtype)),
            ("shape", attr(Value::Shape(shape_proto(dims)))),
        ],
    )
}

fn float_const(name: &str, dims: &[i64], value: f32) -> NodeDef {
    let tensor = TensorProto {
        dtype: FLOAT,
        tensor_shape: Some(shape_proto(dims)),
        float_val: vec![value],
        ..TensorProto::default()
    };
    node(
        name,
        "Const",
        &[],
        vec![("dtype", ty(FLOAT)), ("value", attr(Value::Tensor(tensor)))],
    )
}

/// An int32 constant of shape `dims` holding `values` (row-major).
fn int_tensor(name: &str, dims: &[i64], values: &[i32]) -> NodeDef {
    let tensor = TensorProto {
        dtype: INT32,
        tensor_shape: Some(shape_proto(dims)),
        int_val: values.to_vec(),
        ..TensorProto::default()
    };
    node(
        name,
        "Const",
        &[],
        vec![("dtype", ty(INT32)), ("value", attr(Value::Tensor(tensor)))],
    )
}

/// An int32 vector constant.
fn int_const(name: &str, values: &[i32]) -> NodeDef {
    int_tensor(name, &[values.len() as i64], values)
}

/// An int32 scalar constant.
fn scalar_int(name: &str, value: i32) -> NodeDef {
    int_tensor(name, &[], &[value])
}

fn infer_with(nodes: Vec<NodeDef>, options: InferOptions) -> GraphProperties {
    let graph = GraphDef {
        node: nodes,
        ..GraphDef::default()
    };
    GraphProperties::infer(&graph, &OpLibrary::builtin(), &[], options).unwrap()
}

fn infer(nodes: Vec<NodeDef>) -> GraphProperties {
    infer_with(
        nodes,
        InferOptions {
            assume_valid_feeds: true,
            ..InferOptions::default()
        },
    )
}

/// `(dtype, dims)` of a property; dims `None` for unknown rank.
fn summary(p: &TensorProperties) -> (i32, Option<Vec<i64>>) {
    let shape = p.shape.clone().unwrap_or_default();
    let dims = (!shape.unknown_rank).then(|| shape.dim.iter().map(|d| d.size).collect());
    (p.dtype, dims)
}

fn out(props: &GraphProperties, node: &str) -> Vec<(i32, Option<Vec<i64>>)> {
    props.output_properties(node).iter().map(summary).collect()
}

fn out0(props: &GraphProperties, node: &str) -> Option<Vec<i64>> {
    out(props, node).first().and_then(|(_, d)| d.clone())
}

#[test]
fn add_n_of_two_inputs_like_tensorflows_grappler_test() {
    let props = infer(vec![
        float_const("a", &[10, 1], 1.0),
        placeholder("b", FLOAT, &[10, 1]),
        node(
            "add",
            "AddN",
            &["a", "b:0"],
            vec![("N", attr(Value::I(2))), ("T", ty(FLOAT))],
        ),
    ]);
    let inputs: Vec<_> = props.input_properties("add").iter().map(summary).collect();
    assert_eq!(inputs, vec![(FLOAT, Some(vec![10, 1])); 2]);
    assert_eq!(out(&props, "add"), vec![(FLOAT, Some(vec![10, 1]))]);
    assert!(props.output_properties("add")[0].value.is_none());
    assert!(props.input_properties("nope").is_empty());
    assert!(props.output_properties("nope").is_empty());
}

#[test]
fn binary_ops_broadcast_and_comparisons_are_bool() {
    let props = infer(vec![
        placeholder("x", FLOAT, &[8, 1, 3]),
        placeholder("y", FLOAT, &[5, 1]),
        placeholder("u", FLOAT, &[-1, 4]),
        node("add", "AddV2", &["x", "y"], vec![("T", ty(FLOAT))]),
        node("less", "Less", &["x", "y"], vec![("T", ty(FLOAT))]),
        node("mul", "Mul", &["u", "y"], vec![("T", ty(FLOAT))]),
    ]);
    assert_eq!(out(&props, "add"), vec![(FLOAT, Some(vec![8, 5, 3]))]);
    assert_eq!(out(&props, "less"), vec![(BOOL, Some(vec![8, 5, 3]))]);
    assert_eq!(out(&props, "mul"), vec![(FLOAT, Some(vec![5, 4]))]);
}

#[test]
fn matmul_honours_transposes() {
    let props = infer(vec![
        placeholder("a", FLOAT, &[3, 7]),
        placeholder("b", FLOAT, &[5, 7]),
        node(
            "mm",
            "MatMul",
            &["a", "b"],
            vec![("T", ty(FLOAT)), ("transpose_b", attr(Value::B(true)))],
        ),
        node(
            "mm_ta",
            "MatMul",
            &["a", "a"],
            vec![("T", ty(FLOAT)), ("transpose_a", attr(Value::B(true)))],
        ),
        placeholder("p", FLOAT, &[2, 1, 3, 7]),
        placeholder("q", FLOAT, &[6, 7, 4]),
        node("bmm", "BatchMatMulV2", &["p", "q"], vec![("T", ty(FLOAT))]),
    ]);
    assert_eq!(out0(&props, "mm"), Some(vec![3, 5]));
    assert_eq!(out0(&props, "mm_ta"), Some(vec![7, 7]));
    assert_eq!(out0(&props, "bmm"), Some(vec![2, 6, 3, 4]));
}

#[test]
fn conv2d_same_and_valid_in_both_layouts() {
    let conv = |name: &str, input: &str, padding: &str, format: &str, strides: &[i64]| {
        node(
            name,
            "Conv2D",
            &[input, "f"],
            vec![
                ("T", ty(FLOAT)),
                ("padding", s(padding)),
                ("data_format", s(format)),
                ("strides", ints(strides)),
            ],
        )
    };
    let props = infer(vec![
        placeholder("x", FLOAT, &[-1, 224, 224, 3]),
        placeholder("xc", FLOAT, &[1, 3, 32, 31]),
        placeholder("f", FLOAT, &[3, 3, 3, 64]),
        conv("same", "x", "SAME", "NHWC", &[1, 2, 2, 1]),
        conv("valid", "x", "VALID", "NHWC", &[1, 2, 2, 1]),
        conv("nchw", "xc", "VALID", "NCHW", &[1, 1, 1, 1]),
        node(
            "pool",
            "MaxPool",
            &["x"],
            vec![
                ("T", ty(FLOAT)),
                ("padding", s("VALID")),
                ("ksize", ints(&[1, 3, 3, 1])),
                ("strides", ints(&[1, 2, 2, 1])),
            ],
        ),
    ]);
    assert_eq!(out0(&props, "same"), Some(vec![-1, 112, 112, 64]));
    assert_eq!(out0(&props, "valid"), Some(vec![-1, 111, 111, 64]));
    assert_eq!(out0(&props, "nchw"), Some(vec![1, 64, 30, 29]));
    assert_eq!(out0(&props, "pool"), Some(vec![-1, 111, 111, 3]));
}

#[test]
fn reshape_solves_minus_one_and_reads_shape_tensors() {
    let props = infer(vec![
        placeholder("x", FLOAT, &[4, 6, 5]),
        int_const("target", &[-1, 10]),
        node("r", "Reshape", &["x", "target"], vec![("T", ty(FLOAT))]),
        placeholder("y", FLOAT, &[-1, 3, 2]),
        node("shape", "Shape", &["y"], vec![("T", ty(FLOAT))]),
        node("r2", "Reshape", &["x", "shape"], vec![("T", ty(FLOAT))]),
    ]);
    assert_eq!(out(&props, "r"), vec![(FLOAT, Some(vec![12, 10]))]);
    assert_eq!(out(&props, "shape"), vec![(INT32, Some(vec![3]))]);
    assert_eq!(out0(&props, "r2"), Some(vec![20, 3, 2]));
}

#[test]
fn unknown_shape_function_falls_back_to_op_def_dtypes() {
    let props = infer(vec![
        placeholder("x", FLOAT, &[4]),
        node(
            "u",
            "Unique",
            &["x"],
            vec![("T", ty(FLOAT)), ("out_idx", ty(DataType::DtInt64 as i32))],
        ),
        node("mystery", "NotARealOp", &["u:1"], vec![("T", ty(BOOL))]),
        node("sink", "Identity", &["mystery:2"], vec![("T", ty(BOOL))]),
    ]);
    assert_eq!(
        out(&props, "u"),
        vec![(FLOAT, None), (DataType::DtInt64 as i32, None)]
    );
    // No OpDef: as many outputs as consumers use, typed by `T`.
    assert_eq!(out(&props, "mystery"), vec![(BOOL, None); 3]);
}

#[test]
fn output_shapes_attr_fills_in_what_is_unknown() {
    let declared = attr(Value::List(ListValue {
        shape: vec![shape_proto(&[2, 9]), shape_proto(&[7])],
        ..ListValue::default()
    }));
    let props = infer(vec![
        placeholder("x", FLOAT, &[-1, 9]),
        node(
            "call",
            "StatefulPartitionedCall",
            &["x"],
            vec![
                (
                    "Tin",
                    attr(Value::List(ListValue {
                        r#type: vec![FLOAT],
                        ..ListValue::default()
                    })),
                ),
                (
                    "Tout",
                    attr(Value::List(ListValue {
                        r#type: vec![FLOAT, INT32],
                        ..ListValue::default()
                    })),
                ),
                ("_output_shapes", declared.clone()),
            ],
        ),
        node(
            "id",
            "Identity",
            &["x"],
            vec![("T", ty(FLOAT)), ("_output_shapes", declared)],
        ),
    ]);
    assert_eq!(
        out(&props, "call"),
        vec![(FLOAT, Some(vec![2, 9])), (INT32, Some(vec![7]))]
    );
    assert_eq!(out0(&props, "id"), Some(vec![2, 9]));
}

#[test]
fn cycles_do_not_hang_and_get_unknown_shapes() {
    let props = infer(vec![
        placeholder("x", FLOAT, &[3]),
        node(
            "enter",
            "Enter",
            &["x"],
            vec![("T", ty(FLOAT)), ("frame_name", s("f"))],
        ),
        node(
            "merge",
            "Merge",
            &["enter", "next"],
            vec![("T", ty(FLOAT)), ("N", attr(Value::I(2)))],
        ),
        node("body", "Relu", &["merge"], vec![("T", ty(FLOAT))]),
        node("next", "NextIteration", &["body"], vec![("T", ty(FLOAT))]),
        node("after", "Neg", &["body"], vec![("T", ty(FLOAT))]),
    ]);
    assert_eq!(out0(&props, "enter"), Some(vec![3]));
    assert_eq!(
        out(&props, "merge"),
        vec![(FLOAT, None), (INT32, Some(vec![]))]
    );
    assert_eq!(out(&props, "body"), vec![(FLOAT, None)]);
    assert_eq!(out(&props, "after"), vec![(FLOAT, None)]);
    assert_eq!(props.input_properties("merge").len(), 2);
}

#[test]
fn missing_and_malformed_inputs_are_errors_naming_the_node() {
    let graph = GraphDef {
        node: vec![node("a", "Identity", &["ghost:0"], vec![])],
        ..GraphDef::default()
    };
    let err = GraphProperties::infer(&graph, &OpLibrary::builtin(), &[], InferOptions::default())
        .unwrap_err();
    assert_eq!(
        err,
        PropertiesError::MissingInput {
            node: "a".into(),
            input: "ghost:0".into()
        }
    );
    assert!(err.to_string().contains("'a'"));
    let graph = GraphDef {
        node: vec![node("b", "NoOp", &["^"], vec![])],
        ..GraphDef::default()
    };
    let err = GraphProperties::infer(&graph, &OpLibrary::builtin(), &[], InferOptions::default())
        .unwrap_err();
    assert!(matches!(err, PropertiesError::BadInput { ref node, .. } if node == "b"));
}

#[test]
fn const_values_are_reported_only_when_asked() {
    let nodes = || {
        vec![
            float_const("c", &[2, 2], 0.5),
            node("neg", "Neg", &["c"], vec![("T", ty(FLOAT))]),
            placeholder("x", FLOAT, &[-1, 4]),
            node("sh", "Shape", &["c"], vec![("T", ty(FLOAT))]),
        ]
    };
    let plain = infer(nodes());
    assert!(plain.output_properties("c")[0].value.is_none());
    let props = infer_with(
        nodes(),
        InferOptions {
            include_output_tensor_values: true,
            ..InferOptions::default()
        },
    );
    let value = props.output_properties("c")[0].value.clone().unwrap();
    assert_eq!(value.dtype, FLOAT);
    assert_eq!(value.float_val, vec![0.5]);
    assert_eq!(value.tensor_shape, Some(shape_proto(&[2, 2])));
    assert!(props.output_properties("neg")[0].value.is_none());
    assert!(props.input_properties("neg")[0].value.is_none());
    // A fully known shape tensor is materialized as TensorFlow does.
    let sh = props.output_properties("sh")[0].value.clone().unwrap();
    assert_eq!((sh.dtype, sh.int_val.clone()), (INT32, vec![2, 2]));
    let props = infer_with(
        nodes(),
        InferOptions {
            include_input_tensor_values: true,
            ..InferOptions::default()
        },
    );
    assert_eq!(
        props.input_properties("neg")[0]
            .value
            .as_ref()
            .unwrap()
            .float_val,
        vec![0.5]
    );
    assert!(props.output_properties("c")[0].value.is_none());
}

#[test]
fn fed_shapes_are_forgotten_unless_feeds_are_assumed_valid() {
    let graph = GraphDef {
        node: vec![
            placeholder("x", FLOAT, &[2, 3]),
            node("r", "Relu", &["x"], vec![("T", ty(FLOAT))]),
            // `_output_shapes` recorded from the declared feed shape: forgotten with it (as
            // TensorFlow does), used when feeds are valid.
            node(
                "s",
                "Sigmoid",
                &["r"],
                vec![
                    ("T", ty(FLOAT)),
                    (
                        "_output_shapes",
                        attr(Value::List(ListValue {
                            shape: vec![shape_proto(&[2, 3])],
                            ..ListValue::default()
                        })),
                    ),
                ],
            ),
        ],
        ..GraphDef::default()
    };
    let feeds = vec!["x:0".to_owned()];
    let lib = OpLibrary::builtin();
    let props = GraphProperties::infer(&graph, &lib, &feeds, InferOptions::default()).unwrap();
    assert_eq!(out(&props, "r"), vec![(FLOAT, None)]);
    assert_eq!(out(&props, "s"), vec![(FLOAT, None)]);
    let valid = InferOptions {
        assume_valid_feeds: true,
        ..InferOptions::default()
    };
    let props = GraphProperties::infer(&graph, &lib, &feeds, valid).unwrap();
    assert_eq!(out(&props, "r"), vec![(FLOAT, Some(vec![2, 3]))]);
    assert_eq!(out(&props, "s"), vec![(FLOAT, Some(vec![2, 3]))]);
}
