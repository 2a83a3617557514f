//! Conversion tests on hand-written functions.

use std::collections::BTreeMap;

use unbound_proto::tensorflow::attr_value::{ListValue, Value};
use unbound_proto::tensorflow::function_def::ArgAttrs;
use unbound_proto::tensorflow::op_def::ArgDef;
use unbound_proto::tensorflow::{
    AttrValue, DataType, FunctionDef, FunctionDefLibrary, GradientDef, NameAttrList, NodeDef, OpDef,
};

use super::{
    function_to_graph, graph_to_function, reachable_library, stub_library, FunctionError,
    FunctionGraph,
};
use crate::ops::OpLibrary;

const F32: i32 = DataType::DtFloat as i32;
const I32: i32 = DataType::DtInt32 as i32;

fn arg(name: &str, dtype: i32) -> ArgDef {
    ArgDef {
        name: name.into(),
        r#type: dtype,
        ..ArgDef::default()
    }
}

fn attr(value: Value) -> AttrValue {
    AttrValue { value: Some(value) }
}

fn types(types: &[i32]) -> AttrValue {
    attr(Value::List(ListValue {
        r#type: types.to_vec(),
        ..ListValue::default()
    }))
}

fn node(name: &str, op: &str, inputs: &[&str], attrs: &[(&str, AttrValue)]) -> NodeDef {
    NodeDef {
        name: name.into(),
        op: op.into(),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        attr: attrs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
        ..NodeDef::default()
    }
}

fn function(
    name: &str,
    inputs: Vec<ArgDef>,
    outputs: Vec<ArgDef>,
    nodes: Vec<NodeDef>,
    ret: &[(&str, &str)],
) -> FunctionDef {
    FunctionDef {
        signature: Some(OpDef {
            name: name.into(),
            input_arg: inputs,
            output_arg: outputs,
            ..OpDef::default()
        }),
        node_def: nodes,
        ret: ret
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..FunctionDef::default()
    }
}

fn inputs_of<'a>(item: &'a FunctionGraph, name: &str) -> &'a [String] {
    &item
        .graph
        .node
        .iter()
        .find(|n| n.name == name)
        .unwrap_or_else(|| panic!("no node {name}"))
        .input
}

/// Converts to a graph and back, checks the round trip, returns the graph.
fn round_trip(f: &FunctionDef, ops: &OpLibrary) -> FunctionGraph {
    let item = function_to_graph(f, ops, None).unwrap();
    assert_eq!(&graph_to_function(f, &item.graph, ops).unwrap(), f);
    item
}

/// Split (num_split outputs), IdentityN (type list), Unpack (num outputs) feeding AddN (N
/// inputs).
fn list_outputs() -> FunctionDef {
    let t = ("T", attr(Value::Type(F32)));
    function(
        "lists",
        vec![arg("x", F32), arg("axis", I32)],
        vec![arg("y", F32), arg("z", F32)],
        vec![
            node(
                "split",
                "Split",
                &["axis", "x"],
                &[t.clone(), ("num_split", attr(Value::I(3)))],
            ),
            node(
                "idn",
                "IdentityN",
                &["split:output:2", "split:output:0"],
                &[("T", types(&[F32, F32]))],
            ),
            node(
                "unpack",
                "Unpack",
                &["idn:output:1"],
                &[t.clone(), ("num", attr(Value::I(2)))],
            ),
            node(
                "sum",
                "AddN",
                &["unpack:output:1", "idn:output:0", "split:output:1"],
                &[t, ("N", attr(Value::I(3)))],
            ),
        ],
        &[("y", "sum:sum:0"), ("z", "unpack:output:0")],
    )
}

#[test]
fn list_outputs_are_flattened_and_restored() {
    let ops = OpLibrary::builtin();
    let f = list_outputs();
    let item = round_trip(&f, &ops);
    assert_eq!(inputs_of(&item, "split"), ["axis", "x"]);
    assert_eq!(inputs_of(&item, "idn"), ["split:2", "split"]);
    assert_eq!(inputs_of(&item, "unpack"), ["idn:1"]);
    assert_eq!(inputs_of(&item, "sum"), ["unpack:1", "idn", "split:1"]);
    assert_eq!(inputs_of(&item, "y_RetVal"), ["sum"]);
    assert_eq!(inputs_of(&item, "z_RetVal"), ["unpack"]);
    // Unpack's `axis` default was added for the plugin, and removed on the way back.
    let unpack = item.graph.node.iter().find(|n| n.name == "unpack").unwrap();
    assert_eq!(unpack.attr["axis"], attr(Value::I(0)));
    assert_eq!(item.feed, ["x", "axis"]);
    assert_eq!(item.fetch, ["y_RetVal", "z_RetVal"]);
    assert!(item.keep_ops.is_empty());
}

#[test]
fn whole_list_input_expands() {
    let ops = OpLibrary::builtin();
    let mut f = list_outputs();
    // `split:output` names all three outputs of the list.
    f.node_def[3].input = vec!["split:output".into()];
    let item = function_to_graph(&f, &ops, None).unwrap();
    assert_eq!(inputs_of(&item, "sum"), ["split", "split:1", "split:2"]);
    let back = graph_to_function(&f, &item.graph, &ops).unwrap();
    assert_eq!(
        back.node_def[3].input,
        ["split:output:0", "split:output:1", "split:output:2"]
    );
}

#[test]
fn nested_function_call_uses_the_callee_signature() {
    let callee = function(
        "callee",
        vec![arg("a", F32)],
        vec![arg("first", F32), arg("second", F32)],
        vec![node(
            "id",
            "Identity",
            &["a"],
            &[("T", attr(Value::Type(F32)))],
        )],
        &[("first", "id:output:0"), ("second", "a")],
    );
    let caller = function(
        "caller",
        vec![arg("x", F32)],
        vec![arg("y", F32)],
        vec![
            node("call", "callee", &["x", "^x"], &[]),
            node(
                "out",
                "Identity",
                &["call:second:0", "^call"],
                &[("T", attr(Value::Type(F32)))],
            ),
        ],
        &[("y", "out:output:0")],
    );
    let library = FunctionDefLibrary {
        function: vec![callee.clone(), caller.clone()],
        ..FunctionDefLibrary::default()
    };
    let ops = OpLibrary::new(Some(&library), None);
    let item = round_trip(&caller, &ops);
    assert_eq!(inputs_of(&item, "call"), ["x", "^x"]);
    assert_eq!(inputs_of(&item, "out"), ["call:1", "^call"]);
    // A function returning its own input round-trips too.
    let item = round_trip(&callee, &ops);
    assert_eq!(inputs_of(&item, "second_RetVal"), ["a"]);
    // The plugin sees the callee as a stub.
    let reachable = reachable_library(&library, &caller.node_def);
    assert_eq!(reachable.function, std::slice::from_ref(&callee));
    let stub = stub_library(&reachable);
    assert_eq!(stub.function[0].signature, callee.signature);
    assert!(stub.function[0].node_def.is_empty() && stub.function[0].ret.is_empty());
}

#[test]
fn arg_attrs_resource_ids_and_ints_on_device() {
    let ops = OpLibrary::builtin();
    let mut f = function(
        "f",
        vec![arg("n", I32), arg("r", DataType::DtResource as i32)],
        vec![arg("m", I32)],
        vec![node(
            "id",
            "Identity",
            &["n", "^r"],
            &[("T", attr(Value::Type(I32)))],
        )],
        &[("m", "id:output:0")],
    );
    f.attr
        .insert(super::INTS_ON_DEVICE_ATTR.into(), attr(Value::B(true)));
    f.resource_arg_unique_id.insert(1, 7);
    f.arg_attr.insert(
        1,
        ArgAttrs {
            attr: BTreeMap::from([
                ("_user_specified_name".into(), attr(Value::S("r".into()))),
                // An arg attr never overrides the arg node's own attrs.
                ("index".into(), attr(Value::I(99))),
            ]),
        },
    );
    let item = round_trip(&f, &ops);
    let n = &item.graph.node[0];
    assert_eq!(
        (n.op.as_str(), n.attr["T"].clone()),
        ("_DeviceArg", attr(Value::Type(I32)))
    );
    let r = &item.graph.node[1];
    assert_eq!(r.op, "_Arg");
    assert_eq!(r.attr["index"], attr(Value::I(1)));
    assert_eq!(r.attr["_resource_arg_unique_id"], attr(Value::I(7)));
    assert_eq!(r.attr["_user_specified_name"], attr(Value::S("r".into())));
    let ret = item.graph.node.last().unwrap();
    assert_eq!(
        (ret.name.as_str(), ret.op.as_str()),
        ("m_RetVal", "_DeviceRetval")
    );

    f.arg_attr.insert(5, ArgAttrs::default());
    let err = function_to_graph(&f, &ops, None).unwrap_err();
    assert!(
        err.to_string().contains("Invalid attribute index, got 5"),
        "{err}"
    );
}

#[test]
fn control_outputs_are_kept_and_checked() {
    let ops = OpLibrary::builtin();
    let mut f = list_outputs();
    f.node_def.push(node("noop", "NoOp", &["^sum"], &[]));
    f.control_ret.insert("side".into(), "noop".into());
    let item = round_trip(&f, &ops);
    assert_eq!(item.keep_ops, ["noop"]);

    let mut removed = item.graph.clone();
    removed.node.retain(|n| n.name != "noop");
    let err = graph_to_function(&f, &removed, &ops).unwrap_err();
    assert!(err.to_string().contains("node noop is no longer"), "{err}");

    f.control_ret.insert("gone".into(), "nowhere".into());
    assert!(matches!(
        function_to_graph(&f, &ops, None),
        Err(FunctionError::Invalid { .. })
    ));
}

#[test]
fn bad_functions_are_errors() {
    let ops = OpLibrary::builtin();
    let good = list_outputs();

    let mut f = good.clone();
    f.node_def[0].op = "NoSuchOp".into();
    assert_eq!(
        function_to_graph(&f, &ops, None).unwrap_err(),
        FunctionError::UnknownOp {
            function: "lists".into(),
            node: "split".into(),
            op: "NoSuchOp".into()
        }
    );

    for bad in [
        "nowhere",
        "split:nothing:0",
        "split:output:3",
        "split:output:x",
        "x:1",
        "a:b:c:d",
        "",
        "split:output:99999999999999999999999",
    ] {
        let mut f = good.clone();
        f.node_def[1].input[0] = bad.into();
        let err = function_to_graph(&f, &ops, None).unwrap_err();
        assert_eq!(
            err,
            FunctionError::UnknownInput {
                function: "lists".into(),
                node: "idn".into(),
                input: bad.into()
            },
            "{bad}"
        );
    }

    let mut f = good.clone();
    f.node_def[1].input.insert(0, "^split".into());
    assert!(
        function_to_graph(&f, &ops, None).is_err(),
        "data after control"
    );
    let mut f = good.clone();
    f.node_def[1].input.push("^nowhere".into());
    assert!(matches!(
        function_to_graph(&f, &ops, None),
        Err(FunctionError::UnknownInput { .. })
    ));

    let mut f = good.clone();
    f.ret.remove("y");
    let err = function_to_graph(&f, &ops, None).unwrap_err();
    assert!(err.to_string().contains("Return y missing"), "{err}");

    let mut f = good.clone();
    f.ret.insert("y".into(), "split:output".into());
    assert!(
        function_to_graph(&f, &ops, None).is_err(),
        "list as a single result"
    );

    let mut f = good.clone();
    f.node_def[2].attr.insert("num".into(), attr(Value::I(-1)));
    assert!(
        function_to_graph(&f, &ops, None).is_err(),
        "negative number_attr"
    );

    let mut f = good.clone();
    f.node_def[1].attr.remove("T");
    assert!(
        function_to_graph(&f, &ops, None).is_err(),
        "missing type list"
    );

    let mut f = good.clone();
    f.node_def.push(f.node_def[0].clone());
    assert!(function_to_graph(&f, &ops, None).is_err(), "duplicate node");

    let mut f = good.clone();
    f.signature = None;
    assert!(matches!(
        function_to_graph(&f, &ops, None),
        Err(FunctionError::NoName { .. })
    ));

    let mut f = good.clone();
    if let Some(s) = f.signature.as_mut() {
        s.input_arg[0].type_attr = "T".into();
    }
    assert!(matches!(
        function_to_graph(&f, &ops, None),
        Err(FunctionError::Parametrized { .. })
    ));

    let mut f = good;
    f.node_def[0]
        .attr
        .insert("T".into(), attr(Value::Placeholder("T".into())));
    assert!(matches!(
        function_to_graph(&f, &ops, None),
        Err(FunctionError::Parametrized { .. })
    ));
}

#[test]
fn bad_optimized_graphs_are_errors() {
    let ops = OpLibrary::builtin();
    let f = list_outputs();
    let item = function_to_graph(&f, &ops, None).unwrap();
    let edit = |change: &dyn Fn(&mut Vec<NodeDef>)| {
        let mut graph = item.graph.clone();
        change(&mut graph.node);
        graph_to_function(&f, &graph, &ops)
    };
    let set_input = |name: &'static str, input: &'static str| {
        move |nodes: &mut Vec<NodeDef>| {
            if let Some(n) = nodes.iter_mut().find(|n| n.name == name) {
                n.input = vec![input.to_string()];
            }
        }
    };

    let err = edit(&set_input("unpack", "idn:7")).unwrap_err();
    assert!(matches!(err, FunctionError::UnknownInput { .. }), "{err}");
    assert!(edit(&set_input("unpack", "x:1")).is_err(), "arg output 1");
    assert!(edit(&set_input("unpack", "gone")).is_err(), "missing node");
    assert!(
        edit(&set_input("unpack", "^gone")).is_err(),
        "missing control"
    );
    assert!(
        edit(&set_input("y_RetVal", "^sum")).is_err(),
        "control-only retval"
    );
    assert!(
        edit(&|n| n.retain(|n| n.name != "z_RetVal")).is_err(),
        "retval gone"
    );
    assert!(
        edit(&|n| n[2].op = "NoSuchOp".into()).is_err(),
        "unknown op"
    );
    assert!(
        edit(&|n| {
            let d = n[2].clone();
            n.push(d)
        })
        .is_err(),
        "duplicate node"
    );

    // A node the optimizer added, reading an arg, keeps its attrs as given.
    let back = edit(&|n| {
        n.push(node(
            "extra",
            "Identity",
            &["x", "^axis"],
            &[("T", attr(Value::Type(F32)))],
        ));
        if let Some(r) = n.iter_mut().find(|n| n.name == "z_RetVal") {
            r.input = vec!["extra".into()];
        }
    })
    .unwrap();
    assert_eq!(back.ret["z"], "extra:output:0");
    let extra = back.node_def.iter().find(|n| n.name == "extra").unwrap();
    assert_eq!(extra.input, ["x", "^axis"]);
}

#[test]
fn reachable_library_follows_attrs_gradients_and_apis() {
    let plain = |name: &str| function(name, vec![], vec![], vec![], &[]);
    let mut api_a = plain("api_a");
    api_a
        .attr
        .insert("api_implements".into(), attr(Value::S("lstm".into())));
    let api_b = FunctionDef {
        attr: api_a.attr.clone(),
        ..plain("api_b")
    };
    let mut body = plain("body");
    body.node_def.push(node(
        "while",
        "While",
        &[],
        &[(
            "body",
            attr(Value::Func(NameAttrList {
                name: "api_a".into(),
                ..NameAttrList::default()
            })),
        )],
    ));
    let library = FunctionDefLibrary {
        function: vec![
            plain("unused"),
            api_b.clone(),
            plain("grad"),
            body.clone(),
            api_a.clone(),
        ],
        gradient: vec![
            GradientDef {
                function_name: "body".into(),
                gradient_func: "grad".into(),
            },
            GradientDef {
                function_name: "unused".into(),
                gradient_func: "grad".into(),
            },
        ],
        ..FunctionDefLibrary::default()
    };
    let caller = node(
        "call",
        "PartitionedCall",
        &[],
        &[(
            "f",
            attr(Value::List(ListValue {
                func: vec![NameAttrList {
                    name: "body".into(),
                    ..NameAttrList::default()
                }],
                ..ListValue::default()
            })),
        )],
    );
    let reachable = reachable_library(&library, std::slice::from_ref(&caller));
    let names: Vec<_> = reachable
        .function
        .iter()
        .map(|f| f.signature.as_ref().unwrap().name.as_str())
        .collect();
    assert_eq!(names, ["api_b", "grad", "body", "api_a"]);
    assert_eq!(reachable.gradient, library.gradient[..1]);
    assert!(reachable_library(&library, &[]).function.is_empty());

    // The serialized index walks the same way, decoding only what it reaches.
    let bytes = bytes::Bytes::from(prost::Message::encode_to_vec(&library));
    let index = super::LibraryIndex::new(&bytes).unwrap();
    assert_eq!(index.len(), 5);
    let mut with_caller = plain("with_caller");
    with_caller.node_def.push(caller);
    for f in library.function.iter().chain([&with_caller]) {
        assert_eq!(
            index.plugin_library(f).unwrap(),
            super::plugin_library(&library, f),
            "{:?}",
            f.signature
        );
    }
    assert_eq!(index.decode(3).unwrap(), body);
    let ops = index.op_library(None);
    assert_eq!(ops.function("body"), Some(&body));
    assert!(ops.op_def("api_a").is_some());
    assert!(super::LibraryIndex::new(&bytes.slice(..bytes.len() - 1)).is_err());
}
