//! The schema check `verify` (and so `split` and `merge`) makes of a model: every fault is
//! found and worded the same whether the message is small (checked on one thread) or large
//! (checked in parts on two), and wherever in the model it lies.

use prost::Message as _;
use unbound_proto::tensorflow::{
    attr_value, AttrValue, FunctionDef, FunctionDefLibrary, GraphDef, MetaGraphDef, NodeDef, OpDef,
    SavedModel, TensorProto,
};
use unbound_savedmodel::verify::verify_dir;

/// A SavedModel of `nodes` graph nodes named `zz0000000`..., and one function of 3 `Const`
/// nodes named `yy0`.. whose tensors hold a packed `int_val` run `[1, 2, 300]`.
fn model(nodes: usize) -> Vec<u8> {
    let node = |i: usize| NodeDef {
        name: format!("zz{i:07}"),
        op: "Identity".into(),
        input: vec![format!("a{i}"), format!("b{i}")],
        device: "/cpu:0".into(),
        attr: [(
            "T".to_string(),
            AttrValue {
                value: Some(attr_value::Value::Type(1)),
            },
        )]
        .into(),
        ..Default::default()
    };
    let konst = |i: usize| NodeDef {
        name: format!("yy{i}"),
        op: "Const".into(),
        attr: [(
            "value".to_string(),
            AttrValue {
                value: Some(attr_value::Value::Tensor(TensorProto {
                    dtype: 3,
                    int_val: vec![1, 2, 300],
                    ..Default::default()
                })),
            },
        )]
        .into(),
        ..Default::default()
    };
    let graph = GraphDef {
        node: (0..nodes).map(node).collect(),
        library: Some(FunctionDefLibrary {
            function: vec![FunctionDef {
                signature: Some(OpDef {
                    name: "fn_1".into(),
                    ..Default::default()
                }),
                node_def: (0..3).map(konst).collect(),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    };
    SavedModel {
        saved_model_schema_version: 1,
        meta_graphs: vec![MetaGraphDef {
            graph_def: Some(graph),
            ..Default::default()
        }],
    }
    .encode_to_vec()
}

/// `bytes` with the first occurrence of `from` replaced by `to` (of the same length).
fn patched(mut bytes: Vec<u8>, from: &[u8], to: &[u8]) -> Vec<u8> {
    assert_eq!(from.len(), to.len());
    let at = bytes
        .windows(from.len())
        .position(|w| w == from)
        .expect("pattern present");
    bytes[at..at + to.len()].copy_from_slice(to);
    bytes
}

/// What `verify` says of a directory holding `bytes` as its `saved_model.pb`.
fn faults(bytes: &[u8]) -> Vec<String> {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("saved_model.pb"), bytes).unwrap();
    verify_dir(tmp.path())
        .faults
        .into_iter()
        .map(|f| f.fault)
        .collect()
}

/// Whether `bytes` is a `SavedModel` in canonical form (`Encoder::is_canonical`).
fn canonical(bytes: &[u8]) -> bool {
    let desc = unbound_savedmodel::dir::saved_model_descriptor().unwrap();
    unbound_savedmodel::fingerprint::canonical::Encoder::new()
        .is_canonical(&bytes::Bytes::copy_from_slice(bytes), &desc)
}

/// Whether `bytes` is a canonical `SavedModel` protobuf C++ also parses
/// (`Encoder::is_canonical_and_valid`, what verify takes in place of its schema check).
fn valid(bytes: &[u8]) -> bool {
    let desc = unbound_savedmodel::dir::saved_model_descriptor().unwrap();
    unbound_savedmodel::fingerprint::canonical::Encoder::new()
        .is_canonical_and_valid(&bytes::Bytes::copy_from_slice(bytes), &desc)
}

#[test]
fn faults_in_a_small_model_are_worded_by_their_path() {
    let base = model(5);
    assert_eq!(faults(&base), Vec::<String>::new());
    let cases: [(&[u8], &[u8], &str); 4] = [
        (
            b"zz0000003",
            b"z\xff0000003",
            "not a valid SavedModel: meta_graphs[0].graph_def.node[3].name: string is not valid \
             UTF-8: invalid utf-8 sequence of 1 bytes from index 1",
        ),
        (
            b"yy1",
            b"y\xfe1",
            "not a valid SavedModel: meta_graphs[0].graph_def.library.function[0].node_def[1].name: \
             string is not valid UTF-8: invalid utf-8 sequence of 1 bytes from index 1",
        ),
        (
            b"\x01\x02\xac\x02",
            b"\x01\x02\xac\xac",
            "not a valid SavedModel: meta_graphs[0].graph_def.library.function[0].node_def[0].\
             attr[0].value.tensor.int_val[0]: at byte 2: truncated varint",
        ),
        (
            b"Identity",
            b"Identit\xc3",
            "not a valid SavedModel: meta_graphs[0].graph_def.node[0].op: string is not valid \
             UTF-8: incomplete utf-8 byte sequence from index 7",
        ),
    ];
    for (from, to, expected) in cases {
        assert_eq!(faults(&patched(base.clone(), from, to)), vec![expected]);
    }
}

#[test]
fn faults_in_a_large_model_are_found_in_either_half_and_the_first_is_reported() {
    // About 11 MB (over the 8 MiB from which a message is checked in two parts on two threads).
    let nodes = 220_000;
    let base = model(nodes);
    assert!(base.len() > 9 << 20, "{}", base.len());
    assert_eq!(faults(&base), Vec::<String>::new());
    let name = |i: usize| format!("zz{i:07}").into_bytes();
    let bad_name = |i: usize| {
        let mut b = name(i);
        b[1] = 0xff;
        b
    };
    let fault = |i: usize| {
        format!(
            "not a valid SavedModel: meta_graphs[0].graph_def.node[{i}].name: string is not \
             valid UTF-8: invalid utf-8 sequence of 1 bytes from index 1"
        )
    };
    for i in [10, nodes / 2 + 10, nodes - 1] {
        let one = patched(base.clone(), &name(i), &bad_name(i));
        assert_eq!(faults(&one), vec![fault(i)], "node {i}");
    }
    // Faults in both halves: the first in field order is reported, as on one thread.
    let both = patched(base.clone(), &name(nodes - 5), &bad_name(nodes - 5));
    let both = patched(both, &name(20), &bad_name(20));
    assert_eq!(faults(&both), vec![fault(20)]);
    // The function after the nodes, in the second half.
    let late = patched(base, b"yy2", b"y\xfe2");
    assert_eq!(
        faults(&late),
        vec![
            "not a valid SavedModel: meta_graphs[0].graph_def.library.function[0].node_def[2].\
             name: string is not valid UTF-8: invalid utf-8 sequence of 1 bytes from index 1"
                .to_string()
        ]
    );
}

#[test]
fn a_parsed_message_of_many_fields_is_checked_in_two_halves_with_the_same_faults() {
    use unbound_savedmodel::dir::message_descriptor;
    use unbound_savedmodel::verify::check_schema;
    use unbound_wire::WireMessage;
    let nodes = 100_000;
    let graph = GraphDef::decode(
        &SavedModel::decode(&model(nodes)[..]).unwrap().meta_graphs[0]
            .graph_def
            .as_ref()
            .unwrap()
            .encode_to_vec()[..],
    )
    .unwrap()
    .encode_to_vec();
    let desc = message_descriptor("tensorflow.GraphDef").unwrap();
    let check = |bytes: Vec<u8>| {
        let message = WireMessage::parse(&bytes::Bytes::from(bytes), Some(desc.clone())).unwrap();
        assert!(message.fields.len() > nodes);
        check_schema(&message, &desc, "g").map_err(|e| e.to_string())
    };
    assert_eq!(check(graph.clone()), Ok(()));
    let name = |i: usize| format!("zz{i:07}").into_bytes();
    let bad_name = |i: usize| {
        let mut b = name(i);
        b[1] = 0xff;
        b
    };
    for i in [7, nodes - 7] {
        let err = check(patched(graph.clone(), &name(i), &bad_name(i))).unwrap_err();
        assert!(
            err.ends_with(&format!(
                "not a valid tensorflow.GraphDef: node[{i}].name: string is not valid UTF-8: \
                 invalid utf-8 sequence of 1 bytes from index 1"
            )),
            "{err}"
        );
    }
    let both = patched(graph.clone(), &name(nodes - 7), &bad_name(nodes - 7));
    let err = check(patched(both, &name(7), &bad_name(7))).unwrap_err();
    assert!(err.contains("node[7].name"), "{err}");
}

/// The models above are canonical (prost writes fields in order and these maps sorted), so
/// `verify` takes their schema check from the fingerprint's canonical check
/// (`Encoder::is_canonical_and_valid`): the faults above were found after that check said no.
/// Here, what it must refuse that a canonical check alone accepts.
#[test]
fn the_canonical_check_that_answers_verify_refuses_what_protobuf_refuses() {
    let base = model(5);
    assert!(canonical(&base) && valid(&base), "the base model");
    // Strings that are not UTF-8, in a field, in a map key: canonical still, not valid.
    for (from, to) in [
        (&b"zz0000003"[..], &b"z\xff0000003"[..]),
        (b"Identity", b"Identit\xc3"),
        (b"\x0a\x01T", b"\x0a\x01\x80"),
    ] {
        let bad = patched(base.clone(), from, to);
        assert!(canonical(&bad), "{from:?}: still canonical");
        assert!(!valid(&bad), "{from:?}: not valid");
        assert_eq!(faults(&bad).len(), 1, "{from:?}: verify finds it");
    }
}

/// Nesting is counted as protobuf C++ counts it, a map entry being a level: a chain of
/// `AttrValue.func.attr[...]` is refused at the depth the schema check refuses it, though the
/// encoder's own count (entries not counted) is lower.
#[test]
fn the_canonical_check_that_answers_verify_counts_map_entries_as_levels() {
    use bytes::Bytes;
    use unbound_proto::tensorflow::NameAttrList;
    use unbound_savedmodel::dir::saved_model_descriptor;
    use unbound_savedmodel::fingerprint::canonical::Encoder;
    let desc = saved_model_descriptor().unwrap();
    // An AttrValue nested `levels` times through func.attr["a"].
    let chain = |levels: usize| {
        let mut value = AttrValue {
            value: Some(attr_value::Value::I(1)),
        };
        for _ in 0..levels {
            value = AttrValue {
                value: Some(attr_value::Value::Func(NameAttrList {
                    name: "f".into(),
                    attr: [("a".to_string(), value)].into(),
                })),
            };
        }
        let node = NodeDef {
            name: "n".into(),
            op: "Op".into(),
            attr: [("x".to_string(), value)].into(),
            ..Default::default()
        };
        SavedModel {
            saved_model_schema_version: 1,
            meta_graphs: vec![MetaGraphDef {
                graph_def: Some(GraphDef {
                    node: vec![node],
                    ..Default::default()
                }),
                ..Default::default()
            }],
        }
        .encode_to_vec()
    };
    // SavedModel 0, meta graph 1, graph 2, node 3, attr entry 4, AttrValue 5; then each level
    // adds NameAttrList, entry and AttrValue: 3 per level for protobuf C++, 2 for the encoder.
    let mut refused_at = None;
    for levels in 25..40 {
        let bytes = Bytes::from(chain(levels));
        assert!(Encoder::new().is_canonical(&bytes, &desc), "{levels}");
        let valid = Encoder::new().is_canonical_and_valid(&bytes, &desc);
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("saved_model.pb"), &bytes).unwrap();
        let schema_ok = !verify_dir(tmp.path())
            .faults
            .iter()
            .any(|f| f.fault.contains("nested deeper"));
        assert_eq!(valid, schema_ok, "{levels} levels");
        if !valid && refused_at.is_none() {
            refused_at = Some(levels);
        }
    }
    assert_eq!(
        refused_at,
        Some(32),
        "where protobuf C++'s limit of 100 is passed"
    );
}

/// Map entries equal to one already accepted are accepted without a second check (the
/// `_output_shapes` and `T` of millions of nodes): an entry that differs only on the last of
/// many nodes, by a key that is not UTF-8 or by its key and value swapped, is still checked
/// and refused.
#[test]
fn an_entry_repeated_on_every_node_is_checked_again_where_it_differs() {
    let base = model(50);
    assert!(canonical(&base) && valid(&base), "the base model");
    // The attribute entry of the 50th node: key "T", then AttrValue{type: DT_FLOAT}.
    let entry = b"\x0a\x01T\x12\x02\x30\x01";
    let last = base
        .windows(entry.len())
        .rposition(|w| w == entry)
        .expect("an entry T");
    let with_last = |to: &[u8]| {
        let mut bytes = base.clone();
        bytes[last..last + to.len()].copy_from_slice(to);
        bytes
    };
    let not_utf8 = with_last(b"\x0a\x01\x80\x12\x02\x30\x01");
    assert!(canonical(&not_utf8), "a key that is not UTF-8 is canonical");
    assert!(!valid(&not_utf8), "but not valid");
    let swapped = with_last(b"\x12\x02\x30\x01\x0a\x01T");
    assert!(!canonical(&swapped), "value before key");
    assert!(!valid(&swapped), "value before key");
}

/// Length-delimited field `number` holding `payload`.
fn ld(number: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    prost::encoding::encode_key(number, prost::encoding::WireType::LengthDelimited, &mut out);
    prost::encoding::encode_varint(payload.len() as u64, &mut out);
    out.extend_from_slice(payload);
    out
}

/// A SavedModel of `nodes` nodes, each written `op` before `name` when `scrambled` (as other
/// writers may: not canonical), the third one's name not UTF-8.
fn model_with_bad_name(nodes: usize, scrambled: bool) -> Vec<u8> {
    let graph: Vec<u8> = (0..nodes)
        .flat_map(|i| {
            let name = if i == 3 {
                b"\xffz0000003".to_vec()
            } else {
                format!("zz{i:07}").into_bytes()
            };
            let (name, op) = (ld(1, &name), ld(2, b"NoOp"));
            let node = if scrambled {
                [op, name].concat()
            } else {
                [name, op].concat()
            };
            ld(1, &node)
        })
        .collect();
    let meta_graph = [ld(1, &ld(4, b"serve")), ld(2, &graph)].concat();
    ld(2, &meta_graph)
}

#[test]
fn a_merge_refuses_a_merged_message_verify_refuses_in_its_words() {
    // The merge of a `.cpb` whose chunks are mostly canonical checks the merged message on
    // its own; of one mostly not canonical, by the encoder that makes its canonical form:
    // refused either way as verify refuses it, and nothing written.
    use unbound_savedmodel::write::{merge_dir, write_model_dir, WriteOptions};
    for scrambled in [false, true] {
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("src");
        std::fs::create_dir(&src).unwrap();
        let bytes = bytes::Bytes::from(model_with_bad_name(400, scrambled));
        let desc = unbound_savedmodel::dir::saved_model_descriptor().unwrap();
        let model = unbound_wire::WireMessage::parse(&bytes, Some(desc)).unwrap();
        let cpb = tmp.path().join("cpb");
        write_model_dir(
            &src,
            &cpb,
            model,
            &WriteOptions::default().with_max_size(2000),
        )
        .unwrap();
        assert!(cpb.join("saved_model.cpb").is_file());
        let verified = verify_dir(&cpb).faults;
        assert_eq!(verified.len(), 1, "{verified:?}");
        assert!(
            verified[0]
                .fault
                .contains("the merged message is not a valid SavedModel")
                && verified[0].fault.contains("not valid UTF-8"),
            "{verified:?}"
        );
        let out = tmp.path().join("out");
        let refused = merge_dir(&cpb, &out, &mut |_, _| {}).unwrap_err();
        match refused {
            unbound_savedmodel::SavedModelError::Unverified { faults, .. } => {
                let faults: Vec<_> = faults.into_iter().map(|f| f.fault).collect();
                assert_eq!(
                    faults,
                    vec![verified[0].fault.clone()],
                    "scrambled: {scrambled}"
                );
            }
            other => panic!("scrambled: {scrambled}: {other}"),
        }
        assert!(!out.exists());
    }
}
