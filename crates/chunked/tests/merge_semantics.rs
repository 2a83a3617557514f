//! The Merger's semantics, chunk layout by chunk layout, on the `unbound.test.ManyFields`
//! schema. Expected results are built with prost's generated types (an independent encoder)
//! and compared after decoding our output with prost.

use bytes::Bytes;
use prost::Message;
use unbound_chunked::{ChunkedError, MemoryChunks, Merger};
use unbound_proto::tensorflow::proto_splitter::{
    field_index::map_key::Type as K, ChunkedField, ChunkedMessage,
};
use unbound_proto::unbound::test::{ManyFields, StringNode};
use unbound_test_support::chunks::{
    chunked_field_at as cf, field_tag as f, index_tag as ix, map_key_tag as key,
};
use unbound_test_support::descriptor as desc;

fn merge(chunks: Vec<Vec<u8>>, cm: &ChunkedMessage) -> Result<ManyFields, ChunkedError> {
    let source = MemoryChunks::new("test", chunks.into_iter().map(Bytes::from).collect());
    let merged = Merger::new(&source).merge(&desc("unbound.test.ManyFields"), cm)?;
    Ok(ManyFields::decode(merged.to_vec()?.as_slice()).expect("merged output decodes"))
}

fn leaf(s: &str) -> ManyFields {
    ManyFields {
        string_field: s.into(),
        ..Default::default()
    }
}

#[test]
fn base_chunk_plus_message_and_map_value_chunks() {
    // TensorFlow's many-field layout: base, field_one ([1]) and nested_map_bool values.
    let base = ManyFields {
        map_field_int64: [(-5, "neg".to_string())].into(),
        ..Default::default()
    };
    let chunks = vec![
        base.encode_to_vec(),
        leaf("one").encode_to_vec(),
        leaf("true value").encode_to_vec(),
        leaf("false value").encode_to_vec(),
    ];
    let cm = ChunkedMessage {
        chunk_index: Some(0),
        chunked_fields: vec![
            cf(vec![f(1)], 1),
            cf(vec![f(7), key(K::Boolean(true))], 2),
            cf(vec![f(7), key(K::Boolean(false))], 3),
        ],
    };
    let mut expected = base.clone();
    expected.field_one = Some(Box::new(leaf("one")));
    expected.nested_map_bool = [(true, leaf("true value")), (false, leaf("false value"))].into();
    assert_eq!(merge(chunks, &cm).unwrap(), expected);
}

#[test]
fn root_without_chunk_index_starts_blank() {
    let cm = ChunkedMessage {
        chunk_index: None,
        chunked_fields: vec![cf(vec![f(1)], 0), cf(vec![f(3)], 1)],
    };
    let merged = merge(vec![leaf("a").encode_to_vec(), b"text".to_vec()], &cm).unwrap();
    assert_eq!(merged.field_one.unwrap().string_field, "a");
    assert_eq!(merged.string_field, "text");
}

#[test]
fn empty_tags_concatenate_in_chunk_order_and_missing_elements_are_created() {
    let part = |names: &[&str]| ManyFields {
        repeated_field: names.iter().map(|n| leaf(n)).collect(),
        ..Default::default()
    };
    let chunks = vec![
        part(&["a"]).encode_to_vec(),
        part(&["b", "c"]).encode_to_vec(),
        part(&["d"]).encode_to_vec(),
        leaf("sixth").encode_to_vec(),
    ];
    // Given out of order: the deeper field first, the [] chunks reversed.
    let cm = ChunkedMessage {
        chunk_index: Some(0),
        chunked_fields: vec![cf(vec![f(2), ix(5)], 3), cf(vec![], 2), cf(vec![], 1)],
    };
    let merged = merge(chunks, &cm).unwrap();
    let names: Vec<&str> = merged
        .repeated_field
        .iter()
        .map(|m| m.string_field.as_str())
        .collect();
    assert_eq!(names, vec!["a", "b", "c", "d", "", "sixth"]);
}

#[test]
fn map_keys_of_every_key_type() {
    let cases: Vec<(u32, K)> = vec![
        (8, K::S("k".into())),
        (9, K::I32(-3)),
        (10, K::I64(-(1 << 40))),
        (11, K::Ui32(u32::MAX)),
        (12, K::Ui64(u64::MAX)),
        (13, K::I32(-7)),
        (14, K::I64(-8)),
        (15, K::Ui32(9)),
        (16, K::Ui64(10)),
        (17, K::I32(-11)),
        (18, K::I64(-12)),
        (7, K::Boolean(true)),
    ];
    let mut chunks = vec![ManyFields::default().encode_to_vec()];
    let mut fields = Vec::new();
    for (i, (field, k)) in cases.iter().enumerate() {
        chunks.push(leaf(&format!("v{i}")).encode_to_vec());
        fields.push(cf(vec![f(*field), key(k.clone())], i as u64 + 1));
    }
    let merged = merge(
        chunks,
        &ChunkedMessage {
            chunk_index: Some(0),
            chunked_fields: fields,
        },
    )
    .unwrap();
    assert_eq!(merged.nested_map_string["k"].string_field, "v0");
    assert_eq!(merged.nested_map_int32[&-3].string_field, "v1");
    assert_eq!(merged.nested_map_int64[&-(1 << 40)].string_field, "v2");
    assert_eq!(merged.nested_map_uint32[&u32::MAX].string_field, "v3");
    assert_eq!(merged.nested_map_uint64[&u64::MAX].string_field, "v4");
    assert_eq!(merged.nested_map_sint32[&-7].string_field, "v5");
    assert_eq!(merged.nested_map_sint64[&-8].string_field, "v6");
    assert_eq!(merged.nested_map_fixed32[&9].string_field, "v7");
    assert_eq!(merged.nested_map_fixed64[&10].string_field, "v8");
    assert_eq!(merged.nested_map_sfixed32[&-11].string_field, "v9");
    assert_eq!(merged.nested_map_sfixed64[&-12].string_field, "v10");
    assert_eq!(merged.nested_map_bool[&true].string_field, "v11");
}

#[test]
fn map_value_chunk_merges_into_existing_entry() {
    let mut base = ManyFields::default();
    base.nested_map_string.insert(
        "k".into(),
        ManyFields {
            int32_field: 4,
            ..Default::default()
        },
    );
    let cm = ChunkedMessage {
        chunk_index: Some(0),
        chunked_fields: vec![cf(vec![f(8), key(K::S("k".into())), f(3)], 1)],
    };
    let merged = merge(vec![base.encode_to_vec(), b"deep".to_vec()], &cm).unwrap();
    assert_eq!(merged.nested_map_string["k"].int32_field, 4);
    assert_eq!(merged.nested_map_string["k"].string_field, "deep");
    assert_eq!(merged.nested_map_string.len(), 1);
}

#[test]
fn bytes_chunks_for_scalars_are_parsed_as_text() {
    let texts: Vec<(u32, &str)> = vec![
        (20, "-42"),
        (21, "-9000000000"),
        (22, "4000000000"),
        (23, "18446744073709551615"),
        (24, "-5"),
        (25, "-6"),
        (26, "7"),
        (27, "8"),
        (28, "-9"),
        (29, "-10"),
        (30, "1.5"),
        (31, "-2.25e3"),
        (32, "true"),
        (33, "TEST_ENUM_NEGATIVE"),
        (34, "raw\u{1}bytes"),
        (3, "replaced"),
    ];
    let base = ManyFields {
        string_field: "old".into(),
        int32_field: 1,
        ..Default::default()
    };
    let mut chunks = vec![base.encode_to_vec()];
    let mut fields = Vec::new();
    for (i, (field, text)) in texts.iter().enumerate() {
        chunks.push(text.as_bytes().to_vec());
        fields.push(cf(vec![f(*field)], i as u64 + 1));
    }
    let m = merge(
        chunks,
        &ChunkedMessage {
            chunk_index: Some(0),
            chunked_fields: fields,
        },
    )
    .unwrap();
    assert_eq!(m.int32_field, -42);
    assert_eq!(m.int64_field, -9_000_000_000);
    assert_eq!(m.uint32_field, 4_000_000_000);
    assert_eq!(m.uint64_field, u64::MAX);
    assert_eq!(m.sint32_field, -5);
    assert_eq!(m.sint64_field, -6);
    assert_eq!(m.fixed32_field, 7);
    assert_eq!(m.fixed64_field, 8);
    assert_eq!(m.sfixed32_field, -9);
    assert_eq!(m.sfixed64_field, -10);
    assert_eq!(m.float_field, 1.5);
    assert_eq!(m.double_field, -2250.0);
    assert!(m.bool_field);
    assert_eq!(m.enum_field, -1);
    assert_eq!(&m.bytes_field[..], b"raw\x01bytes");
    assert_eq!(m.string_field, "replaced");
}

#[test]
fn repeated_scalar_elements_are_replaced_packed_or_not() {
    let base = ManyFields {
        packed_int32: vec![1, 2, 3],
        unpacked_double: vec![0.5, 0.25],
        repeated_string_field: vec!["a".into(), "b".into()],
        ..Default::default()
    };
    let cm = ChunkedMessage {
        chunk_index: Some(0),
        chunked_fields: vec![
            cf(vec![f(40), ix(1)], 1),
            cf(vec![f(71), ix(0)], 2),
            cf(vec![f(4), ix(1)], 3),
        ],
    };
    let m = merge(
        vec![
            base.encode_to_vec(),
            b"-20".to_vec(),
            b"8".to_vec(),
            b"B".to_vec(),
        ],
        &cm,
    )
    .unwrap();
    assert_eq!(m.packed_int32, vec![1, -20, 3]);
    assert_eq!(m.unpacked_double, vec![8.0, 0.25]);
    assert_eq!(
        m.repeated_string_field,
        vec!["a".to_string(), "B".to_string()]
    );
}

#[test]
fn bad_text_scalars_and_missing_scalar_elements_are_errors() {
    let cm = ChunkedMessage {
        chunk_index: None,
        chunked_fields: vec![cf(vec![f(20)], 0)],
    };
    let err = merge(vec![b"forty".to_vec()], &cm).unwrap_err();
    assert!(err.to_string().contains("int32"), "{err}");
    let cm = ChunkedMessage {
        chunk_index: None,
        chunked_fields: vec![cf(vec![f(33)], 0)],
    };
    assert!(merge(vec![b"NOPE".to_vec()], &cm).is_err());
    let cm = ChunkedMessage {
        chunk_index: None,
        chunked_fields: vec![cf(vec![f(40), ix(3)], 0)],
    };
    let err = merge(vec![b"1".to_vec()], &cm).unwrap_err();
    assert!(err.to_string().contains("out of range"), "{err}");
}

#[test]
fn nested_chunked_messages() {
    // StringNode tree, one chunk per node, metadata nested like TensorFlow's df-split-tree.
    let node = |v: &str| {
        StringNode {
            val: v.into(),
            child_nodes: vec![],
        }
        .encode_to_vec()
    };
    let chunks = vec![node("root"), node("c0"), node("c0.0"), node("c1")];
    let cm = ChunkedMessage {
        chunk_index: Some(0),
        chunked_fields: vec![
            ChunkedField {
                field_tag: vec![f(2), ix(0)],
                message: Some(ChunkedMessage {
                    chunk_index: Some(1),
                    chunked_fields: vec![cf(vec![f(2), ix(0)], 2)],
                }),
            },
            cf(vec![f(2), ix(1)], 3),
        ],
    };
    let source = MemoryChunks::new("tree", chunks.into_iter().map(Bytes::from).collect());
    let merged = Merger::new(&source)
        .merge(&desc("unbound.test.StringNode"), &cm)
        .unwrap();
    let tree = StringNode::decode(merged.to_vec().unwrap().as_slice()).unwrap();
    assert_eq!(tree.val, "root");
    assert_eq!(tree.child_nodes[0].val, "c0");
    assert_eq!(tree.child_nodes[0].child_nodes[0].val, "c0.0");
    assert_eq!(tree.child_nodes[1].val, "c1");
}

#[test]
fn unknown_fields_survive() {
    // Field 1000 is not in the schema; it must come out exactly as it went in.
    let mut base = ManyFields {
        int32_field: 3,
        ..Default::default()
    }
    .encode_to_vec();
    base.extend_from_slice(&[0xc2, 0x3e, 0x03, b'x', b'y', b'z']); // field 1000, LEN, "xyz"
    let mut inner = leaf("in").encode_to_vec();
    inner.extend_from_slice(&[0xc0, 0x3e, 0x07]); // field 1000, varint 7
    let cm = ChunkedMessage {
        chunk_index: Some(0),
        chunked_fields: vec![cf(vec![f(1)], 1)],
    };
    let source = MemoryChunks::new("t", vec![Bytes::from(base), Bytes::from(inner)]);
    let merged = Merger::new(&source)
        .merge(&desc("unbound.test.ManyFields"), &cm)
        .unwrap();
    let out = merged.to_vec().unwrap();
    assert!(out
        .windows(6)
        .any(|w| w == [0xc2, 0x3e, 0x03, b'x', b'y', b'z']));
    assert!(out.windows(3).any(|w| w == [0xc0, 0x3e, 0x07]));
}

#[test]
fn metadata_faults_are_reported_not_panicked() {
    let check = |cm: ChunkedMessage, needle: &str| {
        let err = merge(vec![ManyFields::default().encode_to_vec()], &cm).unwrap_err();
        assert!(
            err.to_string().contains(needle),
            "{err} should mention {needle}"
        );
    };
    check(
        ChunkedMessage {
            chunk_index: Some(9),
            chunked_fields: vec![],
        },
        "out of range",
    );
    check(
        ChunkedMessage {
            chunk_index: None,
            chunked_fields: vec![cf(vec![f(999)], 0)],
        },
        "not found",
    );
    check(
        ChunkedMessage {
            chunk_index: None,
            chunked_fields: vec![cf(vec![ix(0)], 0)],
        },
        "index",
    );
    check(
        ChunkedMessage {
            chunk_index: None,
            chunked_fields: vec![cf(vec![f(3), f(1)], 0)],
        },
        "scalar",
    );
    // Absurd nesting: field_one.field_one.... 500 levels.
    check(
        ChunkedMessage {
            chunk_index: None,
            chunked_fields: vec![cf(vec![f(1); 500], 0)],
        },
        "nesting",
    );
}
