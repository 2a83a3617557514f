//! Function calls: outputs inferred through the callee's body with the caller's shapes.

use unbound_proto::tensorflow::op_def::ArgDef;
use unbound_proto::tensorflow::{FunctionDef, FunctionDefLibrary, NameAttrList, OpDef};

use super::*;

/// `name(a: float) -> (y: float)` computing `y = op(a, a)` (or `op(a)` when `binary` is false).
fn function(name: &str, op: &str, binary: bool) -> FunctionDef {
    let arg = |n: &str| ArgDef {
        name: n.into(),
        r#type: FLOAT,
        ..ArgDef::default()
    };
    let inputs: &[&str] = if binary { &["a", "a"] } else { &["a"] };
    FunctionDef {
        signature: Some(OpDef {
            name: name.into(),
            input_arg: vec![arg("a")],
            output_arg: vec![arg("y")],
            ..OpDef::default()
        }),
        node_def: vec![node("body", op, inputs, vec![("T", ty(FLOAT))])],
        ret: [("y".to_string(), "body:z:0".to_string())].into(),
        ..FunctionDef::default()
    }
}

fn infer_in(nodes: Vec<NodeDef>, functions: Vec<FunctionDef>) -> GraphProperties {
    let library = FunctionDefLibrary {
        function: functions,
        ..FunctionDefLibrary::default()
    };
    let graph = GraphDef {
        node: nodes,
        library: Some(library.clone()),
        ..GraphDef::default()
    };
    let ops = OpLibrary::new(Some(&library), None);
    GraphProperties::infer(&graph, &ops, &[], InferOptions::default()).unwrap()
}

fn call(name: &str, op: &str, function: &str, input: &str) -> NodeDef {
    let f = attr(Value::Func(NameAttrList {
        name: function.into(),
        ..NameAttrList::default()
    }));
    let types = || {
        attr(Value::List(ListValue {
            r#type: vec![FLOAT],
            ..ListValue::default()
        }))
    };
    node(
        name,
        op,
        &[input],
        vec![("f", f), ("Tin", types()), ("Tout", types())],
    )
}

#[test]
fn calls_are_inferred_through_the_body() {
    let square = function("square", "Mul", true);
    let props = infer_in(
        vec![
            placeholder("x", FLOAT, &[3, -1]),
            call("pc", "PartitionedCall", "square", "x"),
            call("spc", "StatefulPartitionedCall", "square", "pc"),
            node("direct", "square", &["x"], vec![]),
        ],
        vec![square],
    );
    assert_eq!(out(&props, "pc"), vec![(FLOAT, Some(vec![3, -1]))]);
    assert_eq!(out(&props, "spc"), vec![(FLOAT, Some(vec![3, -1]))]);
    assert_eq!(out(&props, "direct"), vec![(FLOAT, Some(vec![3, -1]))]);
}

#[test]
fn recursive_and_unknown_calls_give_unknown_shapes() {
    // `loop` calls itself: inference must stop, with the dtype from the signature kept.
    let mut looping = function("loop", "Identity", false);
    looping.node_def[0] = node("body", "loop", &["a"], vec![]);
    looping.ret = [("y".to_string(), "body:y:0".to_string())].into();
    let props = infer_in(
        vec![
            placeholder("x", FLOAT, &[2]),
            call("rec", "PartitionedCall", "loop", "x"),
            call("missing", "PartitionedCall", "no_such_function", "x"),
        ],
        vec![looping],
    );
    assert_eq!(out(&props, "rec"), vec![(FLOAT, None)]);
    assert_eq!(out(&props, "missing"), vec![(FLOAT, None)]);
}
