//! Odd graphs: wrong attrs, huge dims, self loops, long chains.

use std::time::Instant;

use super::*;

#[test]
fn wrong_attrs_and_huge_dims_degrade_to_unknown() {
    let props = infer(vec![
        placeholder("x", FLOAT, &[i64::MAX, i64::MAX]),
        // `N` is a string and `T` is missing: dtype unknown (`DT_INVALID`), no panic.
        node("add", "AddN", &["x", "x"], vec![("N", s("two"))]),
        node("size", "Size", &["x"], vec![("T", ty(FLOAT))]),
        int_const("target", &[-1, 5]),
        node("r", "Reshape", &["x", "target"], vec![("T", ty(FLOAT))]),
        // A permutation that is not one.
        int_const("perm", &[7, 0]),
        node("tr", "Transpose", &["x", "perm"], vec![("T", ty(FLOAT))]),
        node(
            "conv",
            "Conv2D",
            &["x", "x"],
            vec![
                ("T", ty(FLOAT)),
                ("strides", ints(&[0, 0, 0, 0])),
                ("padding", s("SAME")),
            ],
        ),
    ]);
    assert_eq!(
        out(&props, "add"),
        vec![(0, Some(vec![i64::MAX, i64::MAX]))]
    );
    assert_eq!(props.input_properties("add").len(), 2);
    assert_eq!(out(&props, "size"), vec![(INT32, Some(vec![]))]);
    assert_eq!(out0(&props, "r"), Some(vec![-1, 5]));
    assert_eq!(out0(&props, "tr"), Some(vec![-1, -1]));
    assert_eq!(out0(&props, "conv"), Some(vec![-1, -1, -1, -1]));
}

#[test]
fn self_loop_and_out_of_range_port() {
    let props = infer(vec![
        node("loop", "Identity", &["loop"], vec![("T", ty(FLOAT))]),
        placeholder("x", FLOAT, &[2]),
        node("id", "Identity", &["x:5"], vec![("T", ty(FLOAT))]),
    ]);
    assert_eq!(out(&props, "loop"), vec![(FLOAT, None)]);
    assert_eq!(
        props
            .input_properties("id")
            .iter()
            .map(summary)
            .collect::<Vec<_>>(),
        vec![(0, None)]
    );
}

#[test]
fn long_chain_is_linear() {
    let n = 100_000;
    let mut nodes = vec![placeholder("n0", FLOAT, &[4, 4])];
    for i in 1..n {
        let input = format!("n{}", i - 1);
        nodes.push(node(
            &format!("n{i}"),
            "Relu",
            &[input.as_str()],
            vec![("T", ty(FLOAT))],
        ));
    }
    let start = Instant::now();
    let props = infer(nodes);
    assert_eq!(out0(&props, &format!("n{}", n - 1)), Some(vec![4, 4]));
    assert!(start.elapsed().as_secs() < 30, "took {:?}", start.elapsed());
}
