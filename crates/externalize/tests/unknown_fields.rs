//! A rewrite passes through what it does not understand: a TensorFlow-made model with fields
//! our schema does not know (as a newer TensorFlow writes) at several depths, in messages the
//! rewrite changes and in ones it does not, keeps every one of them after `externalize` and
//! after `--inline` back, as a raw walk of the output's wire finds.

use std::path::Path;

use bytes::Bytes;
use prost_reflect::{Kind, MessageDescriptor};
use unbound_externalize::{externalize, inline, ExternalizeOptions};
use unbound_proto::fields::tensorflow::{
    function_def, function_def_library, graph_def, meta_graph_def, node_def, op_def, saved_model,
};
use unbound_wire::{wire_type_fits, Payload, WireField, WireMessage, WireValue};

fn desc(name: &str) -> MessageDescriptor {
    unbound_proto::descriptor_pool()
        .get_message_by_name(name)
        .unwrap()
}

/// An unknown field: number 5000 + `k`, a string naming where it was put.
fn unknown(k: u32, place: &str) -> WireField {
    WireField {
        number: 5000 + k,
        value: WireValue::Bytes(Payload::Inline(Bytes::from(format!("unknown at {place}")))),
    }
}

/// The last occurrence of a string field.
fn string(m: &WireMessage, number: u32) -> String {
    m.fields
        .iter()
        .rev()
        .find(|f| f.number == number)
        .and_then(|f| match &f.value {
            WireValue::Bytes(Payload::Inline(b)) => Some(String::from_utf8_lossy(b).into_owned()),
            _ => None,
        })
        .unwrap_or_default()
}

/// Every unknown field of `bytes` (a message of type `d`), at every depth, as
/// `(type, number, value)`.
fn unknown_fields(bytes: &Bytes, d: &MessageDescriptor, out: &mut Vec<(String, u32, Vec<u8>)>) {
    let m = WireMessage::parse(bytes, None).unwrap();
    for f in &m.fields {
        match d.get_field(f.number) {
            Some(fd) if wire_type_fits(&fd, &f.value) => {
                if let (Kind::Message(sub), WireValue::Bytes(p)) = (fd.kind(), &f.value) {
                    unknown_fields(&p.bytes().unwrap(), &sub, out);
                }
            }
            _ => {
                let value = match &f.value {
                    WireValue::Bytes(p) => p.bytes().unwrap().to_vec(),
                    other => format!("{other:?}").into_bytes(),
                };
                out.push((d.full_name().to_string(), f.number, value));
            }
        }
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// `tf1_large_consts` (TensorFlow-made: a TF1 graph with large constants, calling a function
/// that holds one) with unknown fields put in: the SavedModel, its MetaGraphDef, meta info and
/// SaverDef, the GraphDef, the library, every graph node (the constants that move, the call
/// site that is rewired, nodes left as they are), every function, its signature and first
/// argument, its nodes, and the value of every attribute of the graph's call sites. Returns
/// the unknown fields put in.
fn scrambled(dir: &Path) -> Vec<(String, u32, Vec<u8>)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/models/tf1_large_consts");
    copy_dir(&src, dir);
    let bytes = Bytes::from(std::fs::read(dir.join("saved_model.pb")).unwrap());
    let root_desc = desc("tensorflow.SavedModel");
    let mut root = WireMessage::parse(&bytes, Some(root_desc.clone())).unwrap();
    let mut k = 0;
    let mut next = |place: &str| {
        k += 1;
        unknown(k, place)
    };
    root.fields.push(next("SavedModel"));
    let meta = root
        .expand_at(
            root.message_positions(saved_model::META_GRAPHS)[0],
            &desc("tensorflow.MetaGraphDef"),
        )
        .unwrap();
    meta.fields.push(next("MetaGraphDef"));
    for (number, name) in [
        (
            meta_graph_def::META_INFO_DEF,
            "tensorflow.MetaGraphDef.MetaInfoDef",
        ),
        (meta_graph_def::SAVER_DEF, "tensorflow.SaverDef"),
    ] {
        if let Some(&p) = meta.message_positions(number).first() {
            meta.expand_at(p, &desc(name))
                .unwrap()
                .fields
                .push(next(name));
        }
    }
    let g = meta.message_positions(meta_graph_def::GRAPH_DEF)[0];
    let graph = meta.expand_at(g, &desc("tensorflow.GraphDef")).unwrap();
    graph.fields.push(next("GraphDef"));
    let attr_entry = desc("tensorflow.NodeDef.AttrEntry");
    for n in graph.message_positions(graph_def::NODE) {
        let node = graph.expand_at(n, &desc("tensorflow.NodeDef")).unwrap();
        let name = string(node, node_def::NAME);
        let op = string(node, node_def::OP);
        node.fields.push(next(&format!("node {name}")));
        if op.ends_with("PartitionedCall") {
            for a in node.message_positions(node_def::ATTR) {
                let entry = node.expand_at(a, &attr_entry).unwrap();
                let key = string(entry, 1);
                for v in entry.message_positions(2) {
                    entry
                        .expand_at(v, &desc("tensorflow.AttrValue"))
                        .unwrap()
                        .fields
                        .push(next(&format!("node {name} attr {key}")));
                }
            }
        }
    }
    let l = graph.message_positions(graph_def::LIBRARY)[0];
    let library = graph
        .expand_at(l, &desc("tensorflow.FunctionDefLibrary"))
        .unwrap();
    library.fields.push(next("FunctionDefLibrary"));
    for f in library.message_positions(function_def_library::FUNCTION) {
        let function = library
            .expand_at(f, &desc("tensorflow.FunctionDef"))
            .unwrap();
        function.fields.push(next("FunctionDef"));
        let s = function.message_positions(function_def::SIGNATURE)[0];
        let signature = function.expand_at(s, &desc("tensorflow.OpDef")).unwrap();
        let fname = string(signature, op_def::NAME);
        signature.fields.push(next(&format!("signature {fname}")));
        if let Some(&a) = signature.message_positions(op_def::INPUT_ARG).first() {
            signature
                .expand_at(a, &desc("tensorflow.OpDef.ArgDef"))
                .unwrap()
                .fields
                .push(next(&format!("first argument of {fname}")));
        }
        for n in function.message_positions(function_def::NODE_DEF) {
            let node = function.expand_at(n, &desc("tensorflow.NodeDef")).unwrap();
            let name = string(node, node_def::NAME);
            node.fields.push(next(&format!("{fname} node {name}")));
        }
    }
    let bytes = Bytes::from(root.to_vec().unwrap());
    std::fs::write(dir.join("saved_model.pb"), &bytes).unwrap();
    let _ = std::fs::remove_file(dir.join("fingerprint.pb"));
    let mut put = Vec::new();
    unknown_fields(&bytes, &root_desc, &mut put);
    assert!(put.len() > 20, "only {} unknown fields put in", put.len());
    put
}

fn unknown_fields_of(dir: &Path) -> Vec<(String, u32, Vec<u8>)> {
    let bytes = Bytes::from(std::fs::read(dir.join("saved_model.pb")).unwrap());
    let mut out = Vec::new();
    unknown_fields(&bytes, &desc("tensorflow.SavedModel"), &mut out);
    out
}

#[test]
fn externalize_and_inline_keep_unknown_fields_at_every_depth() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    let put = scrambled(&src);
    let ext = tmp.path().join("ext");
    let options = ExternalizeOptions {
        min_size: 1000,
        dry_run: false,
    };
    let report = externalize(&src, &ext, &options).unwrap();
    // The constants moved from the graph and from inside a function: the messages around
    // them were rewritten.
    assert!(report.moved.iter().any(|m| m.function.is_none()));
    assert!(report.moved.iter().any(|m| m.function.is_some()));
    let kept = unknown_fields_of(&ext);
    for field in &put {
        assert!(
            kept.contains(field),
            "externalize lost {} field {} ({})",
            field.0,
            field.1,
            String::from_utf8_lossy(&field.2)
        );
    }
    assert!(unbound_savedmodel::verify::verify_dir(&ext)
        .faults
        .is_empty());

    let back = tmp.path().join("back");
    let report = inline(&ext, &back, false).unwrap();
    assert!(!report.inlined.is_empty());
    let kept = unknown_fields_of(&back);
    for field in &put {
        assert!(
            kept.contains(field),
            "--inline lost {} field {} ({})",
            field.0,
            field.1,
            String::from_utf8_lossy(&field.2)
        );
    }
}
