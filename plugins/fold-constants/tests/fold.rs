//! The folding pass and its kernels on hand-made graphs.

mod common;

use common::*;
use prost::bytes::Bytes;
use unbound_plugin_fold_constants::fold;
use unbound_plugin_fold_constants::tensor::{self, Values};
use unbound_proto::tensorflow::{DataType, TensorProto};

#[test]
fn add_of_constants_becomes_a_constant_with_the_same_name() {
    let g = graph(vec![
        f32s("a", &[3], &[1.0, 2.0, 3.0]),
        f32s("b", &[3], &[10.0, 20.0, 30.5]),
        op("sum", "AddV2", &["a", "b:0"], DataType::DtFloat),
        op("out", "Identity", &["sum"], DataType::DtFloat),
    ]);
    let (g, n) = fold(g, &set(&["out"]));
    assert_eq!(n, 1);
    let t = value(&g, "sum");
    assert_eq!(t.shape, [3]);
    assert_eq!(f32_values(&t), [11.0, 22.0, 33.5]);
    let sum = node(&g, "sum");
    assert_eq!(sum.attr["dtype"], node(&g, "a").attr["dtype"]);
    assert!(sum.input.is_empty());
    assert_eq!(node(&g, "out").input, ["sum"]);
    assert_eq!(node(&g, "out").op, "Identity");
}

#[test]
fn broadcasting_follows_numpy() {
    let g = graph(vec![
        f32s("m", &[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
        f32s("row", &[3], &[10.0, 20.0, 30.0]),
        f32s("col", &[2, 1], &[100.0, 200.0]),
        f32s("s", &[], &[0.5]),
        op("mr", "Add", &["m", "row"], DataType::DtFloat),
        op("outer", "Mul", &["col", "row"], DataType::DtFloat),
        op("scaled", "Sub", &["s", "m"], DataType::DtFloat),
    ]);
    let (g, n) = fold(g, &set(&[]));
    assert_eq!(n, 3);
    let mr = value(&g, "mr");
    assert_eq!(mr.shape, [2, 3]);
    assert_eq!(f32_values(&mr), [11.0, 22.0, 33.0, 14.0, 25.0, 36.0]);
    let outer = value(&g, "outer");
    assert_eq!(outer.shape, [2, 3]);
    assert_eq!(
        f32_values(&outer),
        [1000.0, 2000.0, 3000.0, 2000.0, 4000.0, 6000.0]
    );
    let scaled = value(&g, "scaled");
    assert_eq!(scaled.shape, [2, 3]);
    assert_eq!(f32_values(&scaled), [-0.5, -1.5, -2.5, -3.5, -4.5, -5.5]);
}

#[test]
fn integers_wrap_like_tensorflow() {
    let g = graph(vec![
        i32s("max", &[2], &[i32::MAX, i32::MIN]),
        i32s("one", &[], &[1]),
        op("plus", "Add", &["max", "one"], DataType::DtInt32),
        op("neg", "Neg", &["max"], DataType::DtInt32),
        op("sq", "Square", &["max"], DataType::DtInt32),
        op("hi", "Maximum", &["max", "one"], DataType::DtInt32),
    ]);
    let (g, n) = fold(g, &set(&[]));
    assert_eq!(n, 4);
    assert_eq!(
        value(&g, "plus").values,
        Values::I32(vec![i32::MIN, i32::MIN + 1])
    );
    assert_eq!(
        value(&g, "neg").values,
        Values::I32(vec![-i32::MAX, i32::MIN])
    );
    assert_eq!(value(&g, "sq").values, Values::I32(vec![1, 0]));
    assert_eq!(value(&g, "hi").values, Values::I32(vec![i32::MAX, 1]));
}

#[test]
fn int64_and_double_fold() {
    let i64s = |name: &str, v: &[i64]| {
        constant(
            name,
            TensorProto {
                dtype: DataType::DtInt64 as i32,
                tensor_shape: shape(&[v.len() as i64]),
                int64_val: v.to_vec(),
                ..Default::default()
            },
        )
    };
    let f64s = |name: &str, v: &[f64]| {
        constant(
            name,
            TensorProto {
                dtype: DataType::DtDouble as i32,
                tensor_shape: shape(&[v.len() as i64]),
                double_val: v.to_vec(),
                ..Default::default()
            },
        )
    };
    let g = graph(vec![
        i64s("a", &[i64::MIN, 5]),
        i64s("b", &[1, 7]),
        op("d", "Sub", &["a", "b"], DataType::DtInt64),
        f64s("x", &[1.0, 9.0]),
        f64s("y", &[3.0, 0.0]),
        op("q", "RealDiv", &["x", "y"], DataType::DtDouble),
        op("r", "Sqrt", &["x"], DataType::DtDouble),
    ]);
    let (g, n) = fold(g, &set(&[]));
    assert_eq!(n, 3);
    assert_eq!(value(&g, "d").values, Values::I64(vec![i64::MAX, -2]));
    assert_eq!(
        value(&g, "q").values,
        Values::F64(vec![1.0 / 3.0, f64::INFINITY])
    );
    assert_eq!(value(&g, "r").values, Values::F64(vec![1.0, 3.0]));
}

#[test]
fn nan_propagates_through_maximum_and_minimum() {
    let g = graph(vec![
        f32s("a", &[3], &[f32::NAN, 1.0, 2.0]),
        f32s("b", &[3], &[1.0, f32::NAN, 3.0]),
        op("hi", "Maximum", &["a", "b"], DataType::DtFloat),
        op("lo", "Minimum", &["a", "b"], DataType::DtFloat),
    ]);
    let (g, _) = fold(g, &set(&[]));
    let hi = f32_values(&value(&g, "hi"));
    let lo = f32_values(&value(&g, "lo"));
    assert!(hi[0].is_nan() && hi[1].is_nan() && hi[2] == 3.0);
    assert!(lo[0].is_nan() && lo[1].is_nan() && lo[2] == 2.0);
}

#[test]
fn chains_fold_to_a_fixed_point_in_any_order() {
    let g = graph(vec![
        op("c", "Neg", &["b"], DataType::DtFloat),
        op("b", "Mul", &["a", "a"], DataType::DtFloat),
        op("a", "Add", &["x", "y"], DataType::DtFloat),
        f32s("x", &[2], &[1.0, 2.0]),
        f32s("y", &[2], &[3.0, 4.0]),
    ]);
    let (g, n) = fold(g, &set(&[]));
    assert_eq!(n, 3);
    assert_eq!(f32_values(&value(&g, "c")), [-16.0, -36.0]);
}

#[test]
fn typed_fields_follow_the_fill_rule() {
    let splat = TensorProto {
        dtype: DataType::DtFloat as i32,
        tensor_shape: shape(&[2, 2]),
        float_val: vec![5.0],
        ..Default::default()
    };
    assert_eq!(
        tensor::read(&splat).unwrap().values,
        Values::F32(vec![5.0; 4])
    );
    let short = TensorProto {
        dtype: DataType::DtInt64 as i32,
        tensor_shape: shape(&[4]),
        int64_val: vec![1, 2],
        ..Default::default()
    };
    assert_eq!(
        tensor::read(&short).unwrap().values,
        Values::I64(vec![1, 2, 2, 2])
    );
    let zeros = TensorProto {
        dtype: DataType::DtInt32 as i32,
        tensor_shape: shape(&[3]),
        ..Default::default()
    };
    assert_eq!(
        tensor::read(&zeros).unwrap().values,
        Values::I32(vec![0; 3])
    );
    let content = TensorProto {
        dtype: DataType::DtInt32 as i32,
        tensor_shape: shape(&[2]),
        tensor_content: Bytes::from_static(&[1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff]),
        ..Default::default()
    };
    assert_eq!(
        tensor::read(&content).unwrap().values,
        Values::I32(vec![1, -1])
    );
    let truncated = TensorProto {
        tensor_content: Bytes::from_static(&[1, 0, 0]),
        ..content
    };
    assert!(tensor::read(&truncated).is_none());
}

#[test]
fn control_inputs_are_kept_and_inherited() {
    let mut a = f32s("a", &[1], &[1.0]);
    a.input.push("^frame".into());
    let g = graph(vec![
        a,
        f32s("b", &[1], &[2.0]),
        op(
            "sum",
            "Add",
            &["a", "b", "^dep", "^frame"],
            DataType::DtFloat,
        ),
    ]);
    let (g, n) = fold(g, &set(&[]));
    assert_eq!(n, 1);
    assert_eq!(node(&g, "sum").input, ["^dep", "^frame"]);
    assert_eq!(f32_values(&value(&g, "sum")), [3.0]);
}

#[test]
fn nothing_folds_outside_the_rules() {
    let big = constant(
        "big",
        TensorProto {
            dtype: DataType::DtFloat as i32,
            tensor_shape: shape(&[4097]),
            float_val: vec![1.0],
            ..Default::default()
        },
    );
    let half = constant(
        "half",
        TensorProto {
            dtype: DataType::DtHalf as i32,
            tensor_shape: shape(&[1]),
            half_val: vec![0x3c00],
            ..Default::default()
        },
    );
    // 64 x 65 = 4160 elements once broadcast: too big a result.
    let g = graph(vec![
        big,
        half,
        f32s("f", &[2], &[1.0, 2.0]),
        f32s("f3", &[3], &[1.0, 2.0, 3.0]),
        f32s("col", &[64, 1], &[1.0; 64]),
        f32s("row", &[65], &[1.0; 65]),
        i32s("i", &[1], &[4]),
        i32s("z", &[1], &[0]),
        op("p", "Placeholder", &[], DataType::DtFloat),
        op("too_big", "Add", &["big", "big"], DataType::DtFloat),
        op("halves", "Add", &["half", "half"], DataType::DtHalf),
        op("preserved", "Add", &["f", "f"], DataType::DtFloat),
        op("mismatch", "Add", &["f", "f3"], DataType::DtFloat),
        op("outer", "Mul", &["col", "row"], DataType::DtFloat),
        op("int_div", "RealDiv", &["i", "z"], DataType::DtInt32),
        op("int_sqrt", "Sqrt", &["i"], DataType::DtInt32),
        op("not_const", "Add", &["f", "p"], DataType::DtFloat),
        op("port", "Add", &["f", "f:1"], DataType::DtFloat),
        op("wrong_t", "Add", &["f", "f"], DataType::DtDouble),
        op("unknown", "Exp", &["f"], DataType::DtFloat),
    ]);
    let before = g.clone();
    let (g, n) = fold(g, &set(&["preserved"]));
    assert_eq!(n, 0);
    assert_eq!(g, before);
}
