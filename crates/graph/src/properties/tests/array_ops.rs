//! Shape functions of array, reduction and variable ops.

use super::*;

#[test]
fn concat_transpose_expand_squeeze_pack() {
    let props = infer(vec![
        placeholder("a", FLOAT, &[2, 3, 4]),
        placeholder("b", FLOAT, &[2, 5, -1]),
        scalar_int("axis1", 1),
        node(
            "cat",
            "ConcatV2",
            &["a", "b", "axis1"],
            vec![("T", ty(FLOAT)), ("N", attr(Value::I(2)))],
        ),
        int_const("perm", &[2, 0, 1]),
        node("tr", "Transpose", &["a", "perm"], vec![("T", ty(FLOAT))]),
        scalar_int("minus1", -1),
        node("ed", "ExpandDims", &["a", "minus1"], vec![("T", ty(FLOAT))]),
        placeholder("c", FLOAT, &[1, 3, 1]),
        node("sq_all", "Squeeze", &["c"], vec![("T", ty(FLOAT))]),
        node(
            "sq_0",
            "Squeeze",
            &["c"],
            vec![("T", ty(FLOAT)), ("squeeze_dims", ints(&[0]))],
        ),
        node(
            "pk",
            "Pack",
            &["a", "a", "a"],
            vec![
                ("T", ty(FLOAT)),
                ("N", attr(Value::I(3))),
                ("axis", attr(Value::I(1))),
            ],
        ),
    ]);
    assert_eq!(out0(&props, "cat"), Some(vec![2, 8, 4]));
    assert_eq!(out0(&props, "tr"), Some(vec![4, 2, 3]));
    assert_eq!(out0(&props, "ed"), Some(vec![2, 3, 4, 1]));
    assert_eq!(out0(&props, "sq_all"), Some(vec![3]));
    assert_eq!(out0(&props, "sq_0"), Some(vec![3, 1]));
    assert_eq!(out0(&props, "pk"), Some(vec![2, 3, 3, 4]));
}

#[test]
fn reductions_keep_or_drop_axes() {
    let props = infer(vec![
        placeholder("x", FLOAT, &[2, 3, 4]),
        int_const("axes", &[0, -1]),
        node("mean", "Mean", &["x", "axes"], vec![("T", ty(FLOAT))]),
        node(
            "sum_keep",
            "Sum",
            &["x", "axes"],
            vec![("T", ty(FLOAT)), ("keep_dims", attr(Value::B(true)))],
        ),
        scalar_int("one", 1),
        node("argmax", "ArgMax", &["x", "one"], vec![("T", ty(FLOAT))]),
        placeholder("dyn_axes", INT32, &[-1]),
        node("max", "Max", &["x", "dyn_axes"], vec![("T", ty(FLOAT))]),
    ]);
    assert_eq!(out(&props, "mean"), vec![(FLOAT, Some(vec![3]))]);
    assert_eq!(out0(&props, "sum_keep"), Some(vec![1, 3, 1]));
    assert_eq!(
        out(&props, "argmax"),
        vec![(DataType::DtInt64 as i32, Some(vec![2, 4]))]
    );
    assert_eq!(out(&props, "max"), vec![(FLOAT, None)]);
}

#[test]
fn shape_size_rank_and_fill() {
    let props = infer(vec![
        placeholder("x", FLOAT, &[2, -1, 4]),
        node(
            "shape64",
            "Shape",
            &["x"],
            vec![("T", ty(FLOAT)), ("out_type", ty(DataType::DtInt64 as i32))],
        ),
        node("rank", "Rank", &["x"], vec![("T", ty(FLOAT))]),
        node("size", "Size", &["x"], vec![("T", ty(FLOAT))]),
        int_const("dims", &[3, 2]),
        float_const("zero", &[], 0.0),
        node("fill", "Fill", &["dims", "zero"], vec![("T", ty(FLOAT))]),
    ]);
    assert_eq!(
        out(&props, "shape64"),
        vec![(DataType::DtInt64 as i32, Some(vec![3]))]
    );
    assert_eq!(out(&props, "rank"), vec![(INT32, Some(vec![]))]);
    assert_eq!(out(&props, "size"), vec![(INT32, Some(vec![]))]);
    assert_eq!(out(&props, "fill"), vec![(FLOAT, Some(vec![3, 2]))]);
}

#[test]
fn variables_no_op_and_bias_add() {
    let props = infer(vec![
        node(
            "v",
            "VarHandleOp",
            &[],
            vec![
                ("dtype", ty(FLOAT)),
                ("shape", attr(Value::Shape(shape_proto(&[3, 16])))),
            ],
        ),
        node("read", "ReadVariableOp", &["v"], vec![("dtype", ty(FLOAT))]),
        node("init", "NoOp", &["^read"], vec![]),
        placeholder("x", FLOAT, &[8, -1]),
        placeholder("bias", FLOAT, &[16]),
        node("ba", "BiasAdd", &["x", "bias"], vec![("T", ty(FLOAT))]),
    ]);
    assert_eq!(
        out(&props, "v"),
        vec![(DataType::DtResource as i32, Some(vec![]))]
    );
    assert_eq!(out(&props, "read"), vec![(FLOAT, Some(vec![3, 16]))]);
    assert!(props.output_properties("init").is_empty());
    assert!(props.input_properties("init").is_empty());
    assert!(props.has_node("init"));
    assert_eq!(out0(&props, "ba"), Some(vec![8, 16]));
}

#[test]
fn depthwise_conv_multiplies_channels() {
    let props = infer(vec![
        placeholder("x", FLOAT, &[1, 10, 10, 8]),
        placeholder("f", FLOAT, &[3, 3, 8, 2]),
        node(
            "dw",
            "DepthwiseConv2dNative",
            &["x", "f"],
            vec![
                ("T", ty(FLOAT)),
                ("padding", s("SAME")),
                ("strides", ints(&[1, 1, 1, 1])),
            ],
        ),
    ]);
    assert_eq!(out0(&props, "dw"), Some(vec![1, 10, 10, 16]));
}
