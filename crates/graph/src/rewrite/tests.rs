//! The one loop over a decoded library and over an indexed one: the same functions, graphs,
//! libraries, notes and rewritten functions.

use bytes::Bytes;
use prost::Message;
use unbound_proto::tensorflow::attr_value::Value;
use unbound_proto::tensorflow::op_def::{ArgDef, AttrDef};
use unbound_proto::tensorflow::{
    AttrValue, DataType, FunctionDef, FunctionDefLibrary, GraphDef, NodeDef, OpDef,
};

use super::{rewrite_functions, rewrite_library, FunctionGraph, FunctionNote, FunctionRewriter};
use crate::functions::LibraryIndex;
use crate::ops::OpLibrary;

const F32: i32 = DataType::DtFloat as i32;

fn arg(name: &str) -> ArgDef {
    ArgDef {
        name: name.into(),
        r#type: F32,
        ..ArgDef::default()
    }
}

fn node(name: &str, op: &str, inputs: &[&str]) -> NodeDef {
    NodeDef {
        name: name.into(),
        op: op.into(),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        attr: [(
            "T".to_string(),
            AttrValue {
                value: Some(Value::Type(F32)),
            },
        )]
        .into(),
        ..NodeDef::default()
    }
}

/// `name(x: float) -> y: float` with one `op` node computing `y`.
fn function(name: &str, op: &str, inputs: &[&str], ret: &str) -> FunctionDef {
    FunctionDef {
        signature: Some(OpDef {
            name: name.into(),
            input_arg: vec![arg("x")],
            output_arg: vec![arg("y")],
            ..OpDef::default()
        }),
        node_def: vec![node("n", op, inputs)],
        ret: [("y".to_string(), ret.to_string())].into(),
        ..FunctionDef::default()
    }
}

/// Double (x + x), Caller (calls Double), Generic (parametrized: cannot be a graph),
/// Unwanted (refused by the rewriter's `wants`).
fn library() -> FunctionDefLibrary {
    let mut generic = function("Generic", "Identity", &["x"], "n:output:0");
    let signature = generic.signature.as_mut().unwrap();
    signature.input_arg[0].r#type = 0;
    signature.input_arg[0].type_attr = "T".into();
    signature.attr.push(AttrDef {
        name: "T".into(),
        r#type: "type".into(),
        ..AttrDef::default()
    });
    FunctionDefLibrary {
        function: vec![
            function("Double", "AddV2", &["x", "x"], "n:z:0"),
            function("Caller", "Double", &["x"], "n:y:0"),
            generic,
            function("Unwanted", "Identity", &["x"], "n:output:0"),
        ],
        ..FunctionDefLibrary::default()
    }
}

/// Records what it is shown; turns Double's AddV2 into a Mul (converts back) and drops
/// Caller's `_Retval` (does not convert back).
#[derive(Default)]
struct Recorder {
    /// Function id, its graph's node ops, the names in its graph's library.
    seen: Vec<(String, Vec<String>, Vec<String>)>,
    notes: Vec<FunctionNote>,
}

impl FunctionRewriter for Recorder {
    fn wants(&mut self, function: &FunctionGraph, graph: &GraphDef) -> bool {
        assert!(graph.library.is_none());
        function.name != "Unwanted"
    }

    fn rewrite(&mut self, function: &FunctionGraph, graph: &mut GraphDef) -> bool {
        let library = graph.library.as_ref().unwrap();
        self.seen.push((
            function.id.clone(),
            graph.node.iter().map(|n| n.op.clone()).collect(),
            library
                .function
                .iter()
                .map(|f| f.signature.as_ref().unwrap().name.clone())
                .collect(),
        ));
        match function.name.as_str() {
            "Double" => {
                for n in &mut graph.node {
                    if n.op == "AddV2" {
                        n.op = "Mul".into();
                    }
                }
                true
            }
            "Caller" => {
                graph.node.retain(|n| n.op != "_Retval");
                true
            }
            _ => false,
        }
    }

    fn note(&mut self, note: FunctionNote) {
        self.notes.push(note);
    }
}

#[test]
fn decoded_and_indexed_libraries_are_walked_alike() {
    let original = library();
    let ops = OpLibrary::new(Some(&original), None);

    let mut graph = GraphDef {
        library: Some(original.clone()),
        ..GraphDef::default()
    };
    let mut decoded = Recorder::default();
    rewrite_functions(&mut graph, &ops, &mut decoded);

    let index = LibraryIndex::new(&Bytes::from(original.encode_to_vec())).unwrap();
    let mut indexed = Recorder::default();
    let mut put_back = Vec::new();
    rewrite_library(&index, &ops, None, &mut indexed, |position, function| {
        put_back.push((position, function))
    })
    .unwrap();

    // Double and Caller are rewritten (Caller's graph carries Double's stub); Generic is
    // skipped, Unwanted never shown, Caller's broken graph leaves Caller as it was.
    let ids = |r: &Recorder| r.seen.iter().map(|s| s.0.clone()).collect::<Vec<_>>();
    assert_eq!(ids(&decoded), ["function Double", "function Caller"]);
    assert_eq!(
        decoded.seen[0].1,
        ["_Arg", "AddV2", "_Retval"].map(String::from).to_vec()
    );
    assert_eq!(decoded.seen[1].2, ["Double".to_string()]);
    assert_eq!(decoded.seen, indexed.seen);
    assert_eq!(decoded.notes.len(), 2);
    assert!(
        matches!(&decoded.notes[1], FunctionNote::Skipped { id, .. } if id == "function Generic")
    );
    assert!(matches!(&decoded.notes[0], FunctionNote::Kept { id, .. } if id == "function Caller"));
    assert_eq!(decoded.notes, indexed.notes);

    // One function put back: Double, now a Mul; the rest of the library as it was.
    assert_eq!(put_back.len(), 1);
    assert_eq!(put_back[0].0, 0);
    assert_eq!(put_back[0].1.node_def[0].op, "Mul");
    let mut expected = original;
    expected.function[0] = put_back[0].1.clone();
    assert_eq!(graph.library, Some(expected));
}
