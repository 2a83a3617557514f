//! The "Concrete Functions" part of `show` on a hand-built object graph: concrete functions in
//! TensorFlow's import order, Python-valued arguments (defaults) rendered as `saved_model_cli`
//! does, function aliases and assets.

use std::fs;

use prost::Message;
use unbound_proto::tensorflow::{
    meta_graph_def::MetaInfoDef, saved_object, structured_value::Kind,
    trackable_object_graph::trackable_object::ObjectReference, FunctionDef, FunctionDefLibrary,
    GraphDef, MetaGraphDef, NodeDef, OpDef, SavedConcreteFunction, SavedFunction, SavedModel,
    SavedObject, SavedObjectGraph, SavedUserObject, StructuredValue, TensorShapeProto,
    TensorSpecProto, TupleValue,
};
use unbound_savedmodel::show::{show, text, ArgValue};

fn value(kind: Kind) -> StructuredValue {
    StructuredValue { kind: Some(kind) }
}

fn tuple(values: Vec<StructuredValue>) -> StructuredValue {
    value(Kind::TupleValue(TupleValue { values }))
}

fn function(name: &str, calls: &[&str]) -> FunctionDef {
    FunctionDef {
        signature: Some(OpDef {
            name: name.into(),
            ..Default::default()
        }),
        node_def: calls
            .iter()
            .map(|op| NodeDef {
                name: format!("call_{op}"),
                op: op.to_string(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

/// `f` has three concrete functions; `__inference_f_30` calls `__inference_f_20` as an op, so
/// TensorFlow imports `f_20` first, then `f_30`, and `f_10` (a stack: the last ready first).
fn model() -> SavedModel {
    let spec = value(Kind::TensorSpecValue(TensorSpecProto {
        name: "x".into(),
        shape: Some(TensorShapeProto {
            dim: vec![unbound_proto::tensorflow::tensor_shape_proto::Dim {
                size: -1,
                name: String::new(),
            }],
            unknown_rank: false,
        }),
        dtype: 1,
    }));
    let args = tuple(vec![
        spec,
        value(Kind::BoolValue(false)),
        value(Kind::Float64Value(2.5)),
        value(Kind::StringValue("a".into())),
        tuple(vec![
            value(Kind::Int64Value(1)),
            value(Kind::StringValue("b".into())),
        ]),
        value(Kind::NoneValue(Default::default())),
    ]);
    let signature = tuple(vec![args, value(Kind::DictValue(Default::default()))]);
    let concrete = |bound: usize| SavedConcreteFunction {
        bound_inputs: (0..bound as i32).collect(),
        canonicalized_input_signature: Some(signature.clone()),
        output_signature: None,
    };
    let names = ["__inference_f_10", "__inference_f_20", "__inference_f_30"];
    let object_graph = SavedObjectGraph {
        nodes: vec![
            SavedObject {
                children: vec![ObjectReference {
                    node_id: 1,
                    local_name: "f".into(),
                }],
                kind: Some(saved_object::Kind::UserObject(SavedUserObject::default())),
                ..Default::default()
            },
            SavedObject {
                kind: Some(saved_object::Kind::Function(SavedFunction {
                    concrete_functions: names.iter().map(|n| n.to_string()).collect(),
                    function_spec: None,
                })),
                ..Default::default()
            },
        ],
        concrete_functions: names
            .iter()
            .enumerate()
            .map(|(i, n)| (n.to_string(), concrete(i)))
            .collect(),
    };
    let library = FunctionDefLibrary {
        function: vec![
            function("__inference_f_10", &[]),
            function("__inference_f_30", &["__inference_f_20", "Identity"]),
            function("__inference_f_20", &["AddV2"]),
        ],
        ..Default::default()
    };
    SavedModel {
        saved_model_schema_version: 1,
        meta_graphs: vec![MetaGraphDef {
            meta_info_def: Some(MetaInfoDef {
                tags: vec!["serve".into(), "gpu".into()],
                function_aliases: [("my_alias".to_string(), "__inference_f_10".to_string())]
                    .into_iter()
                    .collect(),
                ..Default::default()
            }),
            graph_def: Some(GraphDef {
                node: vec![NodeDef {
                    name: "a".into(),
                    op: "__inference_f_30".into(),
                    ..Default::default()
                }],
                library: Some(library),
                ..Default::default()
            }),
            asset_file_def: vec![unbound_proto::tensorflow::AssetFileDef {
                tensor_info: None,
                filename: "vocab.txt".into(),
            }],
            object_graph_def: Some(object_graph),
            ..Default::default()
        }],
    }
}

#[test]
fn concrete_functions_python_arguments_aliases_and_assets() {
    let tmp = tempfile::tempdir().unwrap();
    fs::write(tmp.path().join("saved_model.pb"), model().encode_to_vec()).unwrap();
    let info = show(tmp.path()).unwrap();
    let mg = &info.meta_graphs[0];
    assert_eq!(mg.tags, ["serve", "gpu"]);
    assert_eq!(mg.function_aliases["my_alias"], "__inference_f_10");
    assert_eq!(mg.assets[0].filename, "vocab.txt");
    // The graph calls f_30, which calls f_20: their ops count, function names do not.
    assert_eq!(mg.ops, ["AddV2", "Identity"]);
    let og = mg.object_graph.as_ref().unwrap();
    assert_eq!(og.concrete_functions[2].bound_inputs, 2);
    let f = &og.functions[0];
    let order: Vec<&str> = f
        .concrete_functions
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(
        order,
        ["__inference_f_20", "__inference_f_30", "__inference_f_10"]
    );
    let args = &f.concrete_functions[0].args;
    assert_eq!(
        args[1],
        ArgValue::Value {
            r#type: "bool".into(),
            value: "False".into()
        }
    );
    let text = text::render(&info);
    let tail = &text[text.find("\nConcrete Functions:").unwrap()..];
    let want = "
Concrete Functions:
  Function Name: 'f'
    Option #1
      Callable with:
        Argument #1
          x: TensorSpec(shape=(None,), dtype=tf.float32, name='x')
        Argument #2
          DType: bool
          Value: False
        Argument #3
          DType: float
          Value: 2.5
        Argument #4
          a
        Argument #5
          DType: tuple
          Value: [1, 'b']
        Argument #6
          DType: NoneType
          Value: None
";
    assert!(tail.starts_with(want), "{tail}");
    assert!(text.contains("MetaGraphDef with tag-set: 'serve, gpu'"));
    assert!(text.contains("    my_alias: __inference_f_10"));
}
