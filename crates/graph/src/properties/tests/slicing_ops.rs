//! Shape functions of slicing, padding, tiling, gather, split, one-hot and range ops.

use super::*;

fn float_op(name: &str, op: &str, inputs: &[&str]) -> NodeDef {
    node(name, op, inputs, vec![("T", ty(FLOAT))])
}

#[test]
fn slice_pad_and_tile_with_constant_arguments() {
    let props = infer(vec![
        placeholder("x", FLOAT, &[2, 8, -1]),
        int_const("begin", &[0, 1, 0]),
        int_const("size", &[2, -1, 3]),
        float_op("slice", "Slice", &["x", "begin", "size"]),
        int_const("size_rest", &[-1, -1, -1]),
        float_op("slice_rest", "Slice", &["x", "begin", "size_rest"]),
        int_tensor("paddings", &[3, 2], &[0, 0, 1, 2, 3, 3]),
        float_op("pad", "Pad", &["x", "paddings"]),
        float_op("mirror", "MirrorPad", &["x", "paddings"]),
        int_const("multiples", &[3, 1, 2]),
        float_op("tile", "Tile", &["x", "multiples"]),
        placeholder("dyn", INT32, &[3]),
        float_op("tile_dyn", "Tile", &["x", "dyn"]),
    ]);
    assert_eq!(out0(&props, "slice"), Some(vec![2, 7, 3]));
    assert_eq!(out0(&props, "slice_rest"), Some(vec![2, 7, -1]));
    assert_eq!(out0(&props, "pad"), Some(vec![2, 11, -1]));
    assert_eq!(out0(&props, "mirror"), Some(vec![2, 11, -1]));
    assert_eq!(out0(&props, "tile"), Some(vec![6, 8, -1]));
    assert_eq!(out0(&props, "tile_dyn"), Some(vec![-1, -1, -1]));
}

#[test]
fn a_slice_size_from_a_shape_is_unknown_where_the_shape_is() {
    // Shape gives [-1, 5] for v; -1 there means "unknown", not "to the end".
    let props = infer(vec![
        placeholder("v", FLOAT, &[-1, 5]),
        node("shape", "Shape", &["v"], vec![("T", ty(FLOAT))]),
        int_const("begin", &[3, 0]),
        float_op("slice", "Slice", &["v", "begin", "shape"]),
        scalar_int("zero", 0),
        scalar_int("one", 1),
        int_const("first", &[0]),
        int_const("second", &[1]),
        int_const("stride", &[1]),
        node(
            "rows",
            "StridedSlice",
            &["shape", "first", "second", "stride"],
            vec![
                ("T", ty(INT32)),
                ("Index", ty(INT32)),
                ("shrink_axis_mask", attr(Value::I(1))),
            ],
        ),
        node(
            "range",
            "Range",
            &["zero", "rows", "one"],
            vec![("Tidx", ty(INT32))],
        ),
    ]);
    assert_eq!(out0(&props, "slice"), Some(vec![-1, 5]));
    assert_eq!(out0(&props, "range"), Some(vec![-1]));
}

#[test]
fn gathers_place_the_indices_at_the_axis() {
    let props = infer(vec![
        placeholder("params", FLOAT, &[2, 5, 6]),
        placeholder("idx", INT32, &[2, 3]),
        scalar_int("axis1", 1),
        scalar_int("axis_neg", -1),
        node(
            "batched",
            "GatherV2",
            &["params", "idx", "axis1"],
            vec![
                ("Tparams", ty(FLOAT)),
                ("Tindices", ty(INT32)),
                ("Taxis", ty(INT32)),
                ("batch_dims", attr(Value::I(1))),
            ],
        ),
        node(
            "last",
            "GatherV2",
            &["params", "idx", "axis_neg"],
            vec![
                ("Tparams", ty(FLOAT)),
                ("Tindices", ty(INT32)),
                ("Taxis", ty(INT32)),
            ],
        ),
        placeholder("dyn_axis", INT32, &[]),
        node(
            "dyn",
            "GatherV2",
            &["params", "idx", "dyn_axis"],
            vec![
                ("Tparams", ty(FLOAT)),
                ("Tindices", ty(INT32)),
                ("Taxis", ty(INT32)),
            ],
        ),
        node(
            "v1",
            "Gather",
            &["params", "idx"],
            vec![("Tparams", ty(FLOAT)), ("Tindices", ty(INT32))],
        ),
    ]);
    assert_eq!(out(&props, "batched"), vec![(FLOAT, Some(vec![2, 3, 6]))]);
    assert_eq!(out0(&props, "last"), Some(vec![2, 5, 2, 3]));
    assert_eq!(out0(&props, "dyn"), Some(vec![-1, -1, -1, -1]));
    assert_eq!(out0(&props, "v1"), Some(vec![2, 3, 5, 6]));
}

#[test]
fn splits_give_one_shape_per_output() {
    let props = infer(vec![
        placeholder("x", FLOAT, &[4, 10]),
        scalar_int("axis1", 1),
        node(
            "split",
            "Split",
            &["axis1", "x"],
            vec![("T", ty(FLOAT)), ("num_split", attr(Value::I(2)))],
        ),
        int_const("sizes", &[3, -1, 2]),
        node(
            "splitv",
            "SplitV",
            &["x", "sizes", "axis1"],
            vec![
                ("T", ty(FLOAT)),
                ("Tlen", ty(INT32)),
                ("num_split", attr(Value::I(3))),
            ],
        ),
        placeholder("dyn_axis", INT32, &[]),
        node(
            "split_dyn",
            "Split",
            &["dyn_axis", "x"],
            vec![("T", ty(FLOAT)), ("num_split", attr(Value::I(2)))],
        ),
    ]);
    let shapes =
        |n: &str| -> Vec<Option<Vec<i64>>> { out(&props, n).into_iter().map(|(_, s)| s).collect() };
    assert_eq!(shapes("split"), vec![Some(vec![4, 5]), Some(vec![4, 5])]);
    assert_eq!(
        shapes("splitv"),
        vec![Some(vec![4, 3]), Some(vec![4, 5]), Some(vec![4, 2])]
    );
    assert_eq!(
        shapes("split_dyn"),
        vec![Some(vec![-1, -1]), Some(vec![-1, -1])]
    );
}

#[test]
fn one_hot_and_range() {
    let props = infer(vec![
        placeholder("idx", INT32, &[4, 2]),
        scalar_int("depth", 10),
        float_const("on", &[], 1.0),
        float_const("off", &[], 0.0),
        node(
            "last",
            "OneHot",
            &["idx", "depth", "on", "off"],
            vec![("T", ty(FLOAT)), ("TI", ty(INT32))],
        ),
        node(
            "middle",
            "OneHot",
            &["idx", "depth", "on", "off"],
            vec![
                ("T", ty(FLOAT)),
                ("TI", ty(INT32)),
                ("axis", attr(Value::I(1))),
            ],
        ),
        scalar_int("start", 10),
        scalar_int("limit", 0),
        scalar_int("delta", -4),
        node(
            "down",
            "Range",
            &["start", "limit", "delta"],
            vec![("Tidx", ty(INT32))],
        ),
        node(
            "empty",
            "Range",
            &["limit", "start", "delta"],
            vec![("Tidx", ty(INT32))],
        ),
    ]);
    assert_eq!(out0(&props, "last"), Some(vec![4, 2, 10]));
    assert_eq!(out0(&props, "middle"), Some(vec![4, 10, 2]));
    assert_eq!(out(&props, "down"), vec![(INT32, Some(vec![3]))]);
    assert_eq!(out0(&props, "empty"), Some(vec![0]));
}

#[test]
fn split_sizes_that_overflow_give_unknown_dims() {
    let props = infer(vec![
        placeholder("x", FLOAT, &[4, 10]),
        scalar_int("axis1", 1),
        node(
            "sizes",
            "Const",
            &[],
            vec![
                ("dtype", ty(DataType::DtInt64 as i32)),
                (
                    "value",
                    attr(Value::Tensor(TensorProto {
                        dtype: DataType::DtInt64 as i32,
                        tensor_shape: Some(shape_proto(&[3])),
                        int64_val: vec![i64::MAX, i64::MAX, -1],
                        ..TensorProto::default()
                    })),
                ),
            ],
        ),
        node(
            "splitv",
            "SplitV",
            &["x", "sizes", "axis1"],
            vec![
                ("T", ty(FLOAT)),
                ("Tlen", ty(DataType::DtInt64 as i32)),
                ("num_split", attr(Value::I(3))),
            ],
        ),
    ]);
    let shapes: Vec<_> = out(&props, "splitv").into_iter().map(|(_, s)| s).collect();
    assert_eq!(
        shapes,
        vec![
            Some(vec![4, i64::MAX]),
            Some(vec![4, i64::MAX]),
            Some(vec![4, -1])
        ]
    );
}
