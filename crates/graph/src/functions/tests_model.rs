//! Round trips of the functions of a TensorFlow-made SavedModel.

use prost::Message;
use unbound_proto::tensorflow::attr_value::Value;
use unbound_proto::tensorflow::{FunctionDef, GraphDef, MetaGraphDef, NodeDef, SavedModel};

use super::{function_to_graph, graph_to_function, plugin_library};
use crate::ops::OpLibrary;

/// The first meta graph of `testdata/models/tf2_multi_sig`, written by TensorFlow.
fn meta_graph() -> MetaGraphDef {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../testdata/models/tf2_multi_sig/saved_model.pb"
    );
    let bytes = std::fs::read(path).expect("reading the test SavedModel");
    let model = SavedModel::decode(bytes.as_slice()).expect("decoding the test SavedModel");
    model.meta_graphs.into_iter().next().expect("a meta graph")
}

/// The model's graph and an op library for it.
fn model() -> (GraphDef, OpLibrary) {
    let meta = meta_graph();
    let graph = meta.graph_def.expect("a graph");
    let ops = OpLibrary::new(
        graph.library.as_ref(),
        meta.meta_info_def
            .as_ref()
            .and_then(|m| m.stripped_op_list.as_ref()),
    );
    (graph, ops)
}

/// The library function whose name starts with `prefix`.
fn function<'a>(graph: &'a GraphDef, prefix: &str) -> &'a FunctionDef {
    graph
        .library
        .as_ref()
        .and_then(|l| {
            l.function.iter().find(|f| {
                f.signature
                    .as_ref()
                    .is_some_and(|s| s.name.starts_with(prefix))
            })
        })
        .unwrap_or_else(|| panic!("no function {prefix}"))
}

fn node<'a>(graph: &'a GraphDef, name: &str) -> &'a NodeDef {
    graph
        .node
        .iter()
        .find(|n| n.name == name)
        .unwrap_or_else(|| panic!("no node {name}"))
}

#[test]
fn every_function_round_trips() {
    let (graph, ops) = model();
    let library = graph.library.as_ref().unwrap();
    assert!(library.function.len() >= 10);
    for function in &library.function {
        let name = &function.signature.as_ref().unwrap().name;
        let item = function_to_graph(function, &ops, graph.versions.as_ref())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let back = graph_to_function(function, &item.graph, &ops)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(&back, function, "{name} did not round-trip");
        assert_eq!(back.encode_to_vec(), function.encode_to_vec(), "{name}");
    }
}

#[test]
fn function_graph_has_args_retvals_and_flat_inputs() {
    let (graph, ops) = model();
    let predict = function(&graph, "__inference_predict_");
    let item = function_to_graph(predict, &ops, graph.versions.as_ref()).unwrap();
    let g = &item.graph;
    assert_eq!(
        g.versions.as_ref().unwrap().producer,
        graph.versions.as_ref().unwrap().producer
    );
    assert_eq!(g.versions.as_ref().unwrap().min_consumer, 0);
    assert!(g.library.is_none());
    // 3 args + 7 body nodes + 1 retval.
    assert_eq!(g.node.len(), 11);
    let x = node(g, "x");
    assert_eq!(x.op, "_Arg");
    assert_eq!(x.attr["index"].value, Some(Value::I(0)));
    // The arg's arg_attrs (for instance _user_specified_name) are on the _Arg node.
    for (key, value) in &predict.arg_attr[&0].attr {
        assert_eq!(&x.attr[key], value);
    }
    let matmul = node(g, "MatMul");
    assert_eq!(matmul.input, ["x", "MatMul/ReadVariableOp"]);
    // Default attrs are added, as TensorFlow's instantiation does.
    assert!(matmul.attr.contains_key("transpose_a"));
    assert_eq!(node(g, "add").input, ["MatMul", "Cast"]);
    assert_eq!(node(g, "Identity").input, ["add", "^NoOp"]);
    let retval = node(g, "identity_RetVal");
    assert_eq!(retval.op, "_Retval");
    assert_eq!(retval.input, ["Identity"]);
    assert_eq!(item.fetch, ["identity_RetVal"]);
    let args: Vec<_> = predict
        .signature
        .as_ref()
        .unwrap()
        .input_arg
        .iter()
        .map(|a| a.name.clone())
        .collect();
    assert_eq!(item.feed, args);
    assert_eq!(
        item.keep_ops,
        ["Cast/ReadVariableOp", "MatMul/ReadVariableOp"]
    );
}

#[test]
fn type_list_and_number_attr_outputs_are_flattened() {
    let (graph, ops) = model();
    let restore = function(&graph, "__inference__traced_restore_");
    let item = function_to_graph(restore, &ops, None).unwrap();
    // RestoreV2's `tensors` is a list of `dtypes` types.
    assert_eq!(node(&item.graph, "Identity").input, ["RestoreV2"]);
    assert_eq!(node(&item.graph, "Identity_3").input, ["RestoreV2:3"]);
    let save = function(&graph, "__inference__traced_save_");
    let item = function_to_graph(save, &ops, None).unwrap();
    // StringJoin takes N inputs; Pack's output follows its N inputs.
    assert_eq!(
        node(&item.graph, "StringJoin").input,
        ["file_prefix", "Select"]
    );
    assert_eq!(
        node(&item.graph, "MergeV2Checkpoints").input,
        ["MergeV2Checkpoints/checkpoint_prefixes", "file_prefix"]
    );
}

#[test]
fn nested_calls_use_the_callee_signature() {
    let (graph, ops) = model();
    let wrapper = function(&graph, "__inference_signature_wrapper_logic_");
    let item = function_to_graph(wrapper, &ops, None).unwrap();
    assert_eq!(
        node(&item.graph, "Identity_2").input,
        ["StatefulPartitionedCall:2", "^NoOp"]
    );
    // The plugin's library: the called function, as a stub.
    let library = plugin_library(graph.library.as_ref().unwrap(), wrapper);
    let names: Vec<_> = library
        .function
        .iter()
        .map(|f| f.signature.as_ref().unwrap().name.clone())
        .collect();
    assert_eq!(names.len(), 1);
    assert!(names[0].starts_with("__inference_logic_"), "{names:?}");
    assert!(library.function[0].node_def.is_empty());
    assert!(library.function[0].ret.is_empty());
    // The same from the serialized library, for every function of the model.
    let full = graph.library.as_ref().unwrap();
    let bytes = bytes::Bytes::from(prost::Message::encode_to_vec(full));
    let index = super::LibraryIndex::new(&bytes).unwrap();
    for f in &full.function {
        assert_eq!(index.plugin_library(f).unwrap(), plugin_library(full, f));
    }
}

#[test]
fn removed_identity_chain_points_ret_at_the_producer() {
    let (graph, ops) = model();
    let increment = function(&graph, "__inference_increment_");
    let mut item = function_to_graph(increment, &ops, None).unwrap();
    // An optimizer removes Identity -> Identity_1, keeping Identity_1's control input.
    let g = &mut item.graph;
    g.node
        .retain(|n| n.name != "Identity" && n.name != "Identity_1");
    for n in &mut g.node {
        if n.name == "identity_1_RetVal" {
            n.input = vec!["Read/ReadVariableOp".into()];
        }
    }
    let back = graph_to_function(increment, g, &ops).unwrap();
    assert_eq!(back.ret["identity_1"], "Read/ReadVariableOp:value:0");
    assert_eq!(back.node_def.len(), increment.node_def.len() - 2);
    assert!(back.node_def.iter().all(|n| !n.op.starts_with('_')));
    assert_eq!(back.control_ret, increment.control_ret);
    assert_eq!(back.signature, increment.signature);
    assert_eq!(back.arg_attr, increment.arg_attr);
    // What remains is unchanged.
    for n in &back.node_def {
        let before = increment
            .node_def
            .iter()
            .find(|b| b.name == n.name)
            .unwrap();
        assert_eq!(n, before);
    }
}

#[test]
fn replaced_node_takes_its_new_op_output_names() {
    let (graph, ops) = model();
    let predict = function(&graph, "__inference_predict_");
    let mut item = function_to_graph(predict, &ops, None).unwrap();
    // Constant folding replaces Cast (output `y`) by a Const (output `output`), and the
    // retval reads add's input directly.
    let cast = item
        .graph
        .node
        .iter_mut()
        .find(|n| n.name == "Cast")
        .unwrap();
    *cast = NodeDef {
        name: "Cast".into(),
        op: "Const".into(),
        attr: node(
            &function_to_graph(predict, &ops, None).unwrap().graph,
            "Cast",
        )
        .attr
        .iter()
        .filter(|(k, _)| k.as_str() == "_output_shapes")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect(),
        ..NodeDef::default()
    };
    for n in &mut item.graph.node {
        if n.name == "identity_RetVal" {
            n.input = vec!["add".into()];
        }
    }
    let back = graph_to_function(predict, &item.graph, &ops).unwrap();
    let add = back.node_def.iter().find(|n| n.name == "add").unwrap();
    assert_eq!(add.input, ["MatMul:product:0", "Cast:output:0"]);
    assert_eq!(back.ret["identity"], "add:z:0");
    let cast = back.node_def.iter().find(|n| n.name == "Cast").unwrap();
    assert_eq!(cast.op, "Const");
}
