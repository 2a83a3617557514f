//! Round trips through files.
//!
//! 1. A property test: random `unbound.test.ManyFields` messages (nested, maps of many key
//!    types, repeated fields, bytes, every scalar kind), split by the generic splitter with
//!    small random maximum sizes, written as `.cpb` (or `.pb`) with every compression and read
//!    back, decode (with prost, an independent decoder) to the original.
//! 2. A layout matrix whose files are written by the independent `riegeli` crate: one record
//!    per Riegeli chunk, many records per chunk, transposed chunks, each compression; nested
//!    `ChunkedMessage`s, map keys of every key type, a root without chunk index, text scalars,
//!    chunked fields out of order, records crossing block boundaries. `read_cpb` must give the
//!    expected message.

use std::io::Cursor;
use std::path::Path;

use bytes::Bytes;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use prost::Message;
use unbound_chunked::{generic::split_generic, read_cpb, read_prefix, write_split, ChunkSink};
use unbound_proto::tensorflow::proto_splitter::{
    chunk_info::Type as ChunkType, field_index::map_key::Type as K, ChunkInfo, ChunkMetadata,
    ChunkedField, ChunkedMessage, FieldIndex, VersionDef,
};
use unbound_proto::unbound::test::{many_fields::Choice, ManyFields};
use unbound_records::{Compression, RecordReader, WriterOptions};
use unbound_test_support::chunks::{
    chunked_field_at as cf, chunked_field_with as cfm, field_tag as f, index_tag as ix,
    map_key_tag as key,
};
use unbound_test_support::data::noise;
use unbound_wire::WireMessage;

fn desc() -> prost_reflect::MessageDescriptor {
    unbound_proto::descriptor_pool()
        .get_message_by_name("unbound.test.ManyFields")
        .unwrap()
}

// ---------------------------------------------------------------------------------------------
// 1. Random messages through the generic splitter, our writer and our reader.

fn small_string() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => "[a-z]{0,8}",
        1 => "\\PC{0,40}",
        1 => "[a-z ]{50,300}",
    ]
}

fn some_bytes() -> impl Strategy<Value = Bytes> {
    prop_oneof![
        3 => prop::collection::vec(any::<u8>(), 0..16),
        1 => prop::collection::vec(any::<u8>(), 100..600),
    ]
    .prop_map(Bytes::from)
}

fn finite_f32() -> impl Strategy<Value = f32> {
    any::<f32>().prop_filter("finite", |v| v.is_finite())
}

fn finite_f64() -> impl Strategy<Value = f64> {
    any::<f64>().prop_filter("finite", |v| v.is_finite())
}

fn enum_value() -> impl Strategy<Value = i32> {
    prop::sample::select(vec![0, 1, 2, -1])
}

fn vec_of<T: std::fmt::Debug>(s: impl Strategy<Value = T>) -> impl Strategy<Value = Vec<T>> {
    prop::collection::vec(s, 0..4)
}

/// A ManyFields with scalar, repeated scalar, bytes and scalar-map fields (no nesting).
fn leaf() -> impl Strategy<Value = ManyFields> {
    let scalars = (
        any::<i32>(),
        any::<i64>(),
        any::<u32>(),
        any::<u64>(),
        any::<i32>(),
        any::<i64>(),
        any::<u32>(),
        any::<u64>(),
        any::<i32>(),
        any::<i64>(),
        finite_f32(),
        finite_f64(),
    );
    let others = (
        any::<bool>(),
        enum_value(),
        some_bytes(),
        small_string(),
        vec_of(small_string()),
        prop::option::of(any::<i32>()),
        prop::option::of(small_string()),
        prop::option::of(some_bytes()),
        prop::option::of(prop_oneof![
            any::<i64>().prop_map(Choice::ChoiceInt64),
            some_bytes().prop_map(Choice::ChoiceBytes),
        ]),
        small_string(),
        vec_of(some_bytes()),
    );
    let packed = (
        vec_of(any::<i32>()),
        vec_of(any::<i64>()),
        vec_of(any::<u64>()),
        vec_of(any::<i64>()),
        vec_of(any::<u32>()),
        vec_of(finite_f32()),
        vec_of(finite_f64()),
        vec_of(any::<bool>()),
        vec_of(enum_value()),
    );
    let unpacked = (
        vec_of(any::<i32>()),
        vec_of(any::<u64>()),
        vec_of(any::<i32>()),
        vec_of(any::<i64>()),
        vec_of(finite_f64()),
        vec_of(any::<bool>()),
        vec_of(enum_value()),
    );
    let maps = (
        prop::collection::btree_map(any::<u32>(), small_string(), 0..4),
        prop::collection::btree_map(any::<i64>(), small_string(), 0..4),
        prop::collection::btree_map("[a-z]{0,6}", some_bytes(), 0..4),
    );
    (scalars, others, packed, unpacked, maps).prop_map(|(s, o, p, u, m)| ManyFields {
        int32_field: s.0,
        int64_field: s.1,
        uint32_field: s.2,
        uint64_field: s.3,
        sint32_field: s.4,
        sint64_field: s.5,
        fixed32_field: s.6,
        fixed64_field: s.7,
        sfixed32_field: s.8,
        sfixed64_field: s.9,
        float_field: s.10,
        double_field: s.11,
        bool_field: o.0,
        enum_field: o.1,
        bytes_field: o.2,
        string_field: o.3,
        repeated_string_field: o.4,
        optional_int32: o.5,
        optional_string: o.6,
        optional_bytes: o.7,
        choice: o.8,
        max_number_field: o.9,
        repeated_bytes_field: o.10,
        packed_int32: p.0,
        packed_int64: p.1,
        packed_uint64: p.2,
        packed_sint64: p.3,
        packed_fixed32: p.4,
        packed_float: p.5,
        packed_double: p.6,
        packed_bool: p.7,
        packed_enum: p.8,
        unpacked_int32: u.0,
        unpacked_fixed64: u.1,
        unpacked_sfixed32: u.2,
        unpacked_sint64: u.3,
        unpacked_double: u.4,
        unpacked_bool: u.5,
        unpacked_enum: u.6,
        map_field_uint32: m.0,
        map_field_int64: m.1,
        map_field_string_bytes: m.2,
        ..Default::default()
    })
}

/// Mostly-empty leaves keep the nested messages small enough for a fast test.
fn sparse_leaf() -> impl Strategy<Value = ManyFields> {
    prop_oneof![
        2 => (small_string(), some_bytes(), any::<i64>()).prop_map(|(s, b, i)| ManyFields {
            string_field: s,
            bytes_field: b,
            int64_field: i,
            ..Default::default()
        }),
        1 => leaf(),
    ]
}

/// Nested ManyFields; `message_maps` adds message-valued maps of eight key types.
fn many_fields_with(message_maps: bool) -> impl Strategy<Value = ManyFields> {
    sparse_leaf().prop_recursive(3, 24, 4, move |inner| {
        let n = if message_maps { 0..3 } else { 0..1 };
        let maps = (
            prop::collection::btree_map(any::<bool>(), inner.clone(), n.clone()),
            prop::collection::btree_map("[a-z]{0,4}", inner.clone(), n.clone()),
            prop::collection::btree_map(any::<i32>(), inner.clone(), n.clone()),
            prop::collection::btree_map(any::<u64>(), inner.clone(), n.clone()),
            prop::collection::btree_map(any::<i64>(), inner.clone(), n.clone()),
            prop::collection::btree_map(any::<u32>(), inner.clone(), n.clone()),
            prop::collection::btree_map(any::<i32>(), inner.clone(), n.clone()),
            prop::collection::btree_map(any::<i64>(), inner.clone(), n),
        );
        (
            sparse_leaf(),
            prop::option::of(inner.clone()),
            prop::collection::vec(inner.clone(), 0..4),
            maps,
            prop::option::of(inner),
        )
            .prop_map(|(mut m, one, rep, maps, choice)| {
                m.field_one = one.map(Box::new);
                m.repeated_field = rep;
                m.nested_map_bool = maps.0;
                m.nested_map_string = maps.1;
                m.nested_map_int32 = maps.2;
                m.nested_map_uint64 = maps.3;
                m.nested_map_sint64 = maps.4;
                m.nested_map_fixed32 = maps.5;
                m.nested_map_sfixed32 = maps.6;
                m.nested_map_int64 = maps.7;
                if let Some(c) = choice {
                    m.choice = Some(Choice::ChoiceMessage(Box::new(c)));
                }
                m
            })
    })
}

fn our_compressions() -> [Compression; 4] {
    [
        Compression::None,
        Compression::Brotli { level: 6 },
        Compression::Zstd { level: 3 },
        Compression::Snappy,
    ]
}

/// Splits `original` with `max_size`, writes it with `compression` under `dir`, reads it
/// back; returns the decoded message and whether a `.cpb` was written.
fn split_write_read(
    original: &ManyFields,
    max_size: u64,
    compression: Compression,
    chunk_size: Option<u64>,
    dir: &Path,
) -> (ManyFields, bool, usize) {
    let desc = desc();
    let encoded = Bytes::from(original.encode_to_vec());
    let mut message = WireMessage::parse(&encoded, Some(desc.clone())).unwrap();
    let mut sink = ChunkSink::new(desc.clone(), true);
    split_generic(&mut message, &desc, &mut sink.root(), max_size).unwrap();
    let split = sink.finish(message);
    let prefix = dir.join("model");
    let options = WriterOptions {
        compression,
        chunk_size,
        store_incompressible: false,
    };
    let written = write_split(&prefix, split, options, &mut |_| {}).unwrap();
    let read = read_prefix(&prefix, &desc).unwrap();
    let bytes = read.message.to_vec().unwrap();
    let decoded = ManyFields::decode(bytes.as_slice()).unwrap();
    (decoded, written.chunked, written.chunks)
}

fn check_round_trip(
    original: &ManyFields,
    max_size: u64,
    many_per_chunk: bool,
) -> Result<(), TestCaseError> {
    let chunk_size = if many_per_chunk {
        Some(1 << 16)
    } else {
        Some(1)
    };
    for compression in our_compressions() {
        let dir = tempfile::tempdir().unwrap();
        let (decoded, chunked, chunks) =
            split_write_read(original, max_size, compression, chunk_size, dir.path());
        prop_assert_eq!(
            &decoded,
            original,
            "{:?}, max size {}",
            compression,
            max_size
        );
        let movable = largest_movable_part(original) as u64 > max_size / 3;
        if original.encoded_len() as u64 > max_size * 4 && movable && max_size < 1 << 30 {
            // Something that large, with a part the splitter moves, must have been split.
            prop_assert!(
                chunked && chunks > 1,
                "{} bytes with max {} not split",
                original.encoded_len(),
                max_size
            );
        }
    }
    Ok(())
}

/// The size of the largest value the generic splitter moves whole into a chunk once it is
/// above a third of the maximum: a singular message or one in a repeated field or map, or a
/// singular string or bytes. A message made only of scalars, packed fields and maps of
/// scalars has none, and stays one `.pb` however large it is.
fn largest_movable_part(m: &ManyFields) -> usize {
    let messages = m
        .field_one
        .iter()
        .map(|b| b.as_ref())
        .chain(&m.repeated_field)
        .chain(m.nested_map_bool.values())
        .chain(m.nested_map_string.values())
        .chain(m.nested_map_int32.values())
        .chain(m.nested_map_int64.values())
        .chain(m.nested_map_uint32.values())
        .chain(m.nested_map_uint64.values())
        .chain(m.nested_map_sint32.values())
        .chain(m.nested_map_sint64.values())
        .chain(m.nested_map_fixed32.values())
        .chain(m.nested_map_fixed64.values())
        .chain(m.nested_map_sfixed32.values())
        .chain(m.nested_map_sfixed64.values())
        .map(|v| v.encoded_len());
    let choice = match &m.choice {
        Some(Choice::ChoiceMessage(c)) => c.encoded_len(),
        _ => 0,
    };
    messages
        .chain([choice, m.string_field.len(), m.bytes_field.len()])
        .max()
        .unwrap_or(0)
}

fn max_sizes() -> impl Strategy<Value = u64> {
    prop_oneof![1u64..16, 16u64..200, 200u64..2000, Just(1u64 << 30)]
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 40,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn random_messages_survive_split_write_read(
        original in many_fields_with(false),
        max_size in max_sizes(),
        many_per_chunk in any::<bool>(),
    ) {
        check_round_trip(&original, max_size, many_per_chunk)?;
    }

    #[test]
    fn random_messages_with_message_maps_survive_split_write_read(
        original in many_fields_with(true),
        max_size in max_sizes(),
        many_per_chunk in any::<bool>(),
    ) {
        check_round_trip(&original, max_size, many_per_chunk)?;
    }
}

/// Splits `original` in memory and merges it back.
fn split_and_merge(original: &ManyFields, max_size: u64) -> (ManyFields, ChunkedMessage) {
    let desc = desc();
    let encoded = Bytes::from(original.encode_to_vec());
    let mut message = WireMessage::parse(&encoded, Some(desc.clone())).unwrap();
    let mut sink = ChunkSink::new(desc.clone(), true);
    split_generic(&mut message, &desc, &mut sink.root(), max_size).unwrap();
    let split = sink.finish(message);
    let mut chunks = Vec::new();
    for c in &split.chunks {
        chunks.push(match c {
            unbound_chunked::Chunk::Message(m) => Bytes::from(m.to_vec().unwrap()),
            unbound_chunked::Chunk::SerializedMessage(p) | unbound_chunked::Chunk::Bytes(p) => {
                p.bytes().unwrap()
            }
        });
    }
    let source = unbound_chunked::MemoryChunks::new("split", chunks);
    let merged = unbound_chunked::Merger::new(&source)
        .merge(&desc, &split.message)
        .unwrap();
    let decoded = ManyFields::decode(merged.to_vec().unwrap().as_slice()).unwrap();
    (decoded, split.message)
}

#[test]
fn split_message_map_value_keeps_its_chunked_fields() {
    // Found by the property test. The map value is larger than the maximum: its bytes field
    // becomes a BYTES chunk at [12, key 0, 34] (leaving an empty placeholder), then the value
    // itself a MESSAGE chunk at [12, key 0]. Merge order compares tags only up to a map key
    // (TensorFlow's rule), so the metadata order stands: the bytes are set first, then the
    // value's chunk is merged and its empty placeholder wins.
    let value = ManyFields {
        string_field: "aa".into(),
        int64_field: -1,
        bytes_field: Bytes::from(vec![0u8; 13]),
        ..Default::default()
    };
    let original = ManyFields {
        nested_map_uint64: [(0, value.clone())].into(),
        ..Default::default()
    };
    let (merged, metadata) = split_and_merge(&original, 16);
    assert_eq!(merged, original, "metadata: {metadata:?}");
}

#[test]
fn split_message_map_value_keeps_its_repeated_elements() {
    // The same with a repeated message field in the value: its first element is chunked at
    // [8, "k", 2, [0]], then the value's own chunk appends its placeholder element and the
    // rest again.
    let big = |s: &str| ManyFields {
        string_field: s.repeat(25),
        ..Default::default()
    };
    let value = ManyFields {
        repeated_field: vec![big("a"), big("b")],
        ..Default::default()
    };
    let original = ManyFields {
        nested_map_string: [("k".to_string(), value)].into(),
        ..Default::default()
    };
    let (merged, metadata) = split_and_merge(&original, 40);
    assert_eq!(merged, original, "metadata: {metadata:?}");
}

#[test]
fn split_of_a_fixed_message_is_chunked_and_round_trips() {
    // A deterministic case that must split into several chunks of each kind, so the property
    // test above is known to exercise real chunking.
    let big = |s: &str| ManyFields {
        string_field: s.repeat(400),
        bytes_field: Bytes::from(vec![7u8; 3000]),
        ..Default::default()
    };
    let original = ManyFields {
        field_one: Some(Box::new(big("one"))),
        repeated_field: vec![big("a"), big("b"), ManyFields::default(), big("c")],
        nested_map_string: [
            ("k".to_string(), big("v")),
            ("e".to_string(), ManyFields::default()),
        ]
        .into(),
        nested_map_sint64: [(-3, big("neg"))].into(),
        nested_map_bool: [(false, big("f"))].into(),
        repeated_bytes_field: vec![Bytes::from(vec![1u8; 5000]), Bytes::new()],
        map_field_string_bytes: [("blob".to_string(), Bytes::from(vec![2u8; 4000]))].into(),
        int32_field: -5,
        ..Default::default()
    };
    for compression in our_compressions() {
        for max_size in [64, 1000, 4000] {
            let dir = tempfile::tempdir().unwrap();
            let (decoded, chunked, chunks) =
                split_write_read(&original, max_size, compression, Some(1), dir.path());
            assert_eq!(decoded, original, "{compression:?} max {max_size}");
            assert!(
                chunked && chunks >= 5,
                "{compression:?} max {max_size}: {chunks} chunks"
            );
            let meta = read_cpb(&dir.path().join("model.cpb"), &desc())
                .unwrap()
                .metadata
                .unwrap();
            let types: Vec<i32> = meta.chunks.iter().map(|c| c.r#type).collect();
            assert!(types.contains(&(ChunkType::Bytes as i32)), "{types:?}");
            assert!(
                types
                    .iter()
                    .filter(|t| **t == ChunkType::Message as i32)
                    .count()
                    >= 2,
                "{types:?}"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// 2. Layouts written by the independent `riegeli` crate.

fn leaf_named(s: &str) -> ManyFields {
    ManyFields {
        string_field: s.into(),
        ..Default::default()
    }
}

/// One chunk of a hand-made layout.
enum C {
    Msg(Box<ManyFields>),
    Raw(Vec<u8>),
}

fn msg(m: ManyFields) -> C {
    C::Msg(Box::new(m))
}

impl C {
    fn bytes(&self) -> (Vec<u8>, ChunkType) {
        match self {
            C::Msg(m) => (m.encode_to_vec(), ChunkType::Message),
            C::Raw(b) => (b.clone(), ChunkType::Bytes),
        }
    }
}

/// A layout: its chunks, the metadata placing them and the message it must merge into.
struct Layout {
    name: &'static str,
    chunks: Vec<C>,
    message: ChunkedMessage,
    expected: ManyFields,
}

fn layouts() -> Vec<Layout> {
    let mut out = Vec::new();

    // Nested ChunkedMessages, with a record larger than a Riegeli block.
    let blob = noise(1, 200_000);
    out.push(Layout {
        name: "nested chunked messages",
        chunks: vec![
            msg(ManyFields {
                int32_field: 5,
                string_field: "base".into(),
                ..Default::default()
            }),
            msg(ManyFields {
                int64_field: 6,
                ..Default::default()
            }),
            C::Raw(b"inner string".to_vec()),
            msg(leaf_named("rep0")),
            msg(ManyFields {
                uint32_field: 9,
                ..Default::default()
            }),
            C::Raw(blob.clone()),
        ],
        message: ChunkedMessage {
            chunk_index: Some(0),
            chunked_fields: vec![cfm(
                vec![f(1)],
                ChunkedMessage {
                    chunk_index: Some(1),
                    chunked_fields: vec![
                        cf(vec![f(3)], 2),
                        cf(vec![f(2), ix(0)], 3),
                        cfm(
                            vec![f(1)],
                            ChunkedMessage {
                                chunk_index: Some(4),
                                chunked_fields: vec![cf(vec![f(34)], 5)],
                            },
                        ),
                    ],
                },
            )],
        },
        expected: ManyFields {
            int32_field: 5,
            string_field: "base".into(),
            field_one: Some(Box::new(ManyFields {
                int64_field: 6,
                string_field: "inner string".into(),
                repeated_field: vec![leaf_named("rep0")],
                field_one: Some(Box::new(ManyFields {
                    uint32_field: 9,
                    bytes_field: Bytes::from(blob),
                    ..Default::default()
                })),
                ..Default::default()
            })),
            ..Default::default()
        },
    });

    // Map keys of every key type, message and scalar values.
    let keyed: Vec<(u32, K)> = vec![
        (7, K::Boolean(true)),
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
    ];
    let base = ManyFields {
        map_field_int64: [(-5, "old".to_string()), (6, "kept".to_string())].into(),
        nested_map_string: [(
            "k".to_string(),
            ManyFields {
                int32_field: 4,
                ..Default::default()
            },
        )]
        .into(),
        ..Default::default()
    };
    let mut chunks = vec![msg(base)];
    let mut fields = Vec::new();
    for (i, (field, k)) in keyed.iter().enumerate() {
        chunks.push(msg(leaf_named(&format!("v{i}"))));
        fields.push(cf(vec![f(*field), key(k.clone())], i as u64 + 1));
    }
    let n = chunks.len() as u64;
    chunks.push(C::Raw(b"seven".to_vec()));
    fields.push(cf(vec![f(5), key(K::Ui32(7))], n));
    chunks.push(C::Raw(b"new".to_vec()));
    fields.push(cf(vec![f(6), key(K::I64(-5))], n + 1));
    chunks.push(C::Raw(vec![0, 1, 2, 255]));
    fields.push(cf(vec![f(19), key(K::S("blob".into()))], n + 2));
    chunks.push(C::Raw(b"deep".to_vec()));
    fields.push(cf(vec![f(9), key(K::I32(-3)), f(1), f(3)], n + 3));
    let v = |i: usize| leaf_named(&format!("v{i}"));
    out.push(Layout {
        name: "map keys of every key type",
        chunks,
        message: ChunkedMessage {
            chunk_index: Some(0),
            chunked_fields: fields,
        },
        expected: ManyFields {
            nested_map_bool: [(true, v(0))].into(),
            nested_map_string: [(
                "k".to_string(),
                ManyFields {
                    int32_field: 4,
                    ..v(1)
                },
            )]
            .into(),
            nested_map_int32: [(
                -3,
                ManyFields {
                    field_one: Some(Box::new(leaf_named("deep"))),
                    ..v(2)
                },
            )]
            .into(),
            nested_map_int64: [(-(1 << 40), v(3))].into(),
            nested_map_uint32: [(u32::MAX, v(4))].into(),
            nested_map_uint64: [(u64::MAX, v(5))].into(),
            nested_map_sint32: [(-7, v(6))].into(),
            nested_map_sint64: [(-8, v(7))].into(),
            nested_map_fixed32: [(9, v(8))].into(),
            nested_map_fixed64: [(10, v(9))].into(),
            nested_map_sfixed32: [(-11, v(10))].into(),
            nested_map_sfixed64: [(-12, v(11))].into(),
            map_field_uint32: [(7, "seven".to_string())].into(),
            map_field_int64: [(-5, "new".to_string()), (6, "kept".to_string())].into(),
            map_field_string_bytes: [("blob".to_string(), Bytes::from_static(&[0, 1, 2, 255]))]
                .into(),
            ..Default::default()
        },
    });

    // A root without a chunk index: the message starts blank.
    out.push(Layout {
        name: "root without chunk index",
        chunks: vec![
            msg(leaf_named("a")),
            C::Raw(b"text".to_vec()),
            msg(ManyFields {
                repeated_field: vec![leaf_named("x")],
                int64_field: 3,
                ..Default::default()
            }),
        ],
        message: ChunkedMessage {
            chunk_index: None,
            chunked_fields: vec![cf(vec![f(1)], 0), cf(vec![f(3)], 1), cf(vec![], 2)],
        },
        expected: ManyFields {
            field_one: Some(Box::new(leaf_named("a"))),
            string_field: "text".into(),
            repeated_field: vec![leaf_named("x")],
            int64_field: 3,
            ..Default::default()
        },
    });

    // Text scalars of every kind, at the top and nested, plus repeated scalar elements.
    let texts: Vec<(Vec<FieldIndex>, &str)> = vec![
        (vec![f(20)], "-42"),
        (vec![f(21)], "-9000000000"),
        (vec![f(22)], "4000000000"),
        (vec![f(23)], "18446744073709551615"),
        (vec![f(24)], "-5"),
        (vec![f(25)], "-6"),
        (vec![f(26)], "7"),
        (vec![f(27)], "8"),
        (vec![f(28)], "-9"),
        (vec![f(29)], "-10"),
        (vec![f(30)], "1.5"),
        (vec![f(31)], "-2.25e3"),
        (vec![f(32)], "true"),
        (vec![f(33)], "TEST_ENUM_TWO"),
        (vec![f(80)], "12"),
        (vec![f(1), f(20)], "77"),
        (vec![f(40), ix(1)], "-20"),
        (vec![f(71), ix(0)], "8"),
    ];
    let base = ManyFields {
        int32_field: 1,
        packed_int32: vec![1, 2, 3],
        unpacked_double: vec![0.5, 0.25],
        ..Default::default()
    };
    let mut chunks = vec![msg(base)];
    let mut fields = Vec::new();
    for (i, (tags, text)) in texts.into_iter().enumerate() {
        chunks.push(C::Raw(text.as_bytes().to_vec()));
        fields.push(cf(tags, i as u64 + 1));
    }
    out.push(Layout {
        name: "text scalars",
        chunks,
        message: ChunkedMessage {
            chunk_index: Some(0),
            chunked_fields: fields,
        },
        expected: ManyFields {
            int32_field: -42,
            int64_field: -9_000_000_000,
            uint32_field: 4_000_000_000,
            uint64_field: u64::MAX,
            sint32_field: -5,
            sint64_field: -6,
            fixed32_field: 7,
            fixed64_field: 8,
            sfixed32_field: -9,
            sfixed64_field: -10,
            float_field: 1.5,
            double_field: -2250.0,
            bool_field: true,
            enum_field: 2,
            optional_int32: Some(12),
            field_one: Some(Box::new(ManyFields {
                int32_field: 77,
                ..Default::default()
            })),
            packed_int32: vec![1, -20, 3],
            unpacked_double: vec![8.0, 0.25],
            ..Default::default()
        },
    });

    // Chunked fields out of order: the Merger sorts them (shorter paths first, then field
    // numbers and indices, then chunk order).
    out.push(Layout {
        name: "chunked fields out of order",
        chunks: vec![
            msg(ManyFields {
                repeated_string_field: vec!["a".into(), "b".into()],
                ..Default::default()
            }),
            msg(leaf_named("A")),
            msg(ManyFields {
                repeated_string_field: vec!["c".into()],
                ..Default::default()
            }),
            msg(ManyFields {
                repeated_string_field: vec!["d".into()],
                ..Default::default()
            }),
            msg(leaf_named("B")),
            C::Raw(b"z".to_vec()),
            C::Raw(b"first".to_vec()),
            C::Raw(b"second".to_vec()),
        ],
        message: ChunkedMessage {
            chunk_index: Some(0),
            chunked_fields: vec![
                // Element 2 exists only once both [] chunks were merged.
                cf(vec![f(4), ix(2)], 5),
                cf(vec![f(2), ix(1)], 4),
                cf(vec![f(3)], 7),
                cf(vec![], 3),
                cf(vec![f(2), ix(0)], 1),
                cf(vec![f(3)], 6),
                cf(vec![], 2),
            ],
        },
        expected: ManyFields {
            repeated_string_field: vec!["a".into(), "b".into(), "z".into(), "d".into()],
            repeated_field: vec![leaf_named("A"), leaf_named("B")],
            string_field: "second".into(),
            ..Default::default()
        },
    });

    // Many small records and a few large ones, crossing block boundaries in every layout.
    let mut chunks = vec![msg(ManyFields::default())];
    let mut fields = Vec::new();
    let mut expected = ManyFields::default();
    for i in 0..300u64 {
        let size = if i % 50 == 7 {
            70_000
        } else {
            (i as usize * 37) % 200
        };
        let b = noise(i + 10, size);
        chunks.push(C::Raw(b.clone()));
        expected.repeated_bytes_field.push(Bytes::from(b));
        fields.push(ChunkedField {
            field_tag: vec![f(74)],
            message: Some(ChunkedMessage {
                chunk_index: Some(i + 1),
                chunked_fields: vec![],
            }),
        });
    }
    out.push(Layout {
        name: "many records, some crossing blocks",
        chunks,
        message: ChunkedMessage {
            chunk_index: Some(0),
            chunked_fields: fields,
        },
        expected,
    });
    out
}

/// How the `riegeli` crate is asked to lay the records out.
#[derive(Clone, Copy, Debug)]
enum RiegeliLayout {
    OnePerChunk,
    ManyPerChunk,
    Transposed,
}

fn riegeli_write(records: &[Vec<u8>], compression: &str, layout: RiegeliLayout) -> Vec<u8> {
    let compression = match compression {
        "none" => riegeli::CompressionType::None,
        "brotli" => riegeli::CompressionType::Brotli,
        "zstd" => riegeli::CompressionType::Zstd,
        "snappy" => riegeli::CompressionType::Snappy,
        other => panic!("{other}"),
    };
    let (chunk_size, transpose) = match layout {
        RiegeliLayout::OnePerChunk => (1, false),
        RiegeliLayout::ManyPerChunk => (1 << 20, false),
        RiegeliLayout::Transposed => (1 << 20, true),
    };
    let opts = riegeli::WriterOptions::new()
        .compression(compression)
        .chunk_size(chunk_size)
        .transpose(transpose);
    let mut buf = Vec::new();
    let mut w = riegeli::RecordWriter::new(Cursor::new(&mut buf), opts).unwrap();
    for r in records {
        w.write_record(r).unwrap();
    }
    w.close().unwrap();
    buf
}

/// Numeric positions of the records, as the `riegeli` crate reads them.
fn riegeli_positions(file: &[u8]) -> Vec<u64> {
    let mut r =
        riegeli::RecordReader::new(Cursor::new(file), riegeli::ReaderOptions::new()).unwrap();
    let mut out = Vec::new();
    while r.read_record().unwrap().is_some() {
        out.push(r.last_pos().numeric());
    }
    out
}

/// A `.cpb` of `layout` written entirely by the `riegeli` crate: the chunks, then the
/// `ChunkMetadata` whose `ChunkInfo` offsets are the positions the `riegeli` crate gave them.
fn riegeli_cpb(layout: &Layout, compression: &str, how: RiegeliLayout) -> Vec<u8> {
    let chunks: Vec<(Vec<u8>, ChunkType)> = layout.chunks.iter().map(C::bytes).collect();
    let mut records: Vec<Vec<u8>> = chunks.iter().map(|(b, _)| b.clone()).collect();
    // Positions do not depend on records written after them: find them with a first pass.
    let positions = riegeli_positions(&riegeli_write(&records, compression, how));
    let metadata = ChunkMetadata {
        version: Some(VersionDef {
            splitter_version: 1,
            join_version: 0,
            bad_consumers: vec![],
        }),
        chunks: chunks
            .iter()
            .zip(&positions)
            .map(|((b, t), p)| ChunkInfo {
                r#type: *t as i32,
                size: b.len() as u64,
                offset: *p,
            })
            .collect(),
        message: Some(layout.message.clone()),
    };
    records.push(metadata.encode_to_vec());
    let file = riegeli_write(&records, compression, how);
    let final_positions = riegeli_positions(&file);
    assert_eq!(
        &final_positions[..positions.len()],
        &positions[..],
        "{}: positions moved",
        layout.name
    );
    file
}

#[test]
fn layouts_written_by_the_riegeli_crate() {
    let desc = desc();
    let dir = tempfile::tempdir().unwrap();
    let mut saw_transposed = false;
    for layout in layouts() {
        for compression in ["none", "brotli", "zstd", "snappy"] {
            for how in [
                RiegeliLayout::OnePerChunk,
                RiegeliLayout::ManyPerChunk,
                RiegeliLayout::Transposed,
            ] {
                let what = format!("{} / {compression} / {how:?}", layout.name);
                let file = riegeli_cpb(&layout, compression, how);
                // The layout is what it claims to be.
                let reader = RecordReader::from_bytes(Bytes::from(file.clone()), "check").unwrap();
                let summaries: Vec<_> = reader.chunks().map(|c| c.unwrap()).collect();
                let most = summaries.iter().map(|c| c.num_records).max().unwrap();
                match how {
                    RiegeliLayout::OnePerChunk => assert_eq!(most, 1, "{what}"),
                    RiegeliLayout::ManyPerChunk => assert!(most > 1, "{what}"),
                    RiegeliLayout::Transposed => {
                        let t = summaries
                            .iter()
                            .any(|c| c.chunk_type == unbound_records::ChunkType::Transposed);
                        saw_transposed |= t;
                    }
                }
                let path = dir.path().join("layout.cpb");
                std::fs::write(&path, &file).unwrap();
                let read = read_cpb(&path, &desc).unwrap_or_else(|e| panic!("{what}: {e}"));
                let bytes = read
                    .message
                    .to_vec()
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                let got =
                    ManyFields::decode(bytes.as_slice()).unwrap_or_else(|e| panic!("{what}: {e}"));
                assert_eq!(got, layout.expected, "{what}");
                // read_prefix prefers the .cpb.
                std::fs::write(dir.path().join("layout.pb"), b"not read").unwrap();
                let again = read_prefix(&dir.path().join("layout"), &desc).unwrap();
                assert_eq!(again.message.to_vec().unwrap(), bytes, "{what}");
                std::fs::remove_file(dir.path().join("layout.pb")).unwrap();
            }
        }
    }
    assert!(saw_transposed, "the riegeli crate wrote transposed chunks");
}

#[test]
fn metadata_alone_in_its_own_chunk_after_many_records() {
    // TensorFlow's writer flushes records into chunks as they come; the metadata may share the
    // last chunk with chunk records or sit alone. Both must read.
    let layout = &layouts()[0];
    let chunks: Vec<Vec<u8>> = layout.chunks.iter().map(|c| c.bytes().0).collect();
    let base = riegeli_cpb(layout, "zstd", RiegeliLayout::ManyPerChunk);
    let reader = RecordReader::from_bytes(Bytes::from(base), "x").unwrap();
    let last = reader.chunks().map(|c| c.unwrap()).last().unwrap();
    assert!(last.num_records > 1, "the metadata shares its chunk");
    // One record per chunk puts it alone.
    let alone = riegeli_cpb(layout, "zstd", RiegeliLayout::OnePerChunk);
    let reader = RecordReader::from_bytes(Bytes::from(alone.clone()), "x").unwrap();
    let last = reader.chunks().map(|c| c.unwrap()).last().unwrap();
    assert_eq!(last.num_records, 1);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("alone.cpb");
    std::fs::write(&path, alone).unwrap();
    let read = read_cpb(&path, &desc()).unwrap();
    assert_eq!(read.metadata.unwrap().chunks.len(), chunks.len());
}

// ---------------------------------------------------------------------------------------------
// 4. Chunks compressed ahead, on worker threads, give the file a writer writes one at a time.

/// `write_split` compresses the chunks that take a Riegeli chunk of their own on other
/// threads and writes them in order; the file must be byte for byte the one a
/// `RecordWriter` writes record by record, small records sharing chunks between them.
#[test]
fn chunks_compressed_ahead_give_the_file_written_one_at_a_time() {
    let desc = desc();
    // Large values of varied sizes, so that some records take chunks of their own and some
    // share one.
    let original = ManyFields {
        repeated_bytes_field: (0..24u64)
            .map(|i| {
                let len = if i % 3 == 0 {
                    300
                } else {
                    70_000 + 9_000 * i as usize
                };
                // Noise, or text that compresses.
                let value = if i % 2 == 0 {
                    noise(i, len)
                } else {
                    b"unbound ".iter().copied().cycle().take(len).collect()
                };
                Bytes::from(value)
            })
            .collect(),
        string_field: "root".into(),
        ..Default::default()
    };
    for compression in our_compressions() {
        let encoded = Bytes::from(original.encode_to_vec());
        let mut message = WireMessage::parse(&encoded, Some(desc.clone())).unwrap();
        let mut sink = ChunkSink::new(desc.clone(), true);
        split_generic(&mut message, &desc, &mut sink.root(), 100_000).unwrap();
        let split = sink.finish(message);
        assert!(
            split.chunks.len() > 4,
            "{compression:?}: {}",
            split.chunks.len()
        );
        let options = WriterOptions {
            compression,
            chunk_size: Some(200_000),
            store_incompressible: compression == Compression::Snappy,
        };

        let mut writer = unbound_records::RecordWriter::new(Vec::new(), options).unwrap();
        let mut infos = Vec::new();
        for chunk in &split.chunks {
            let segments = split.segments(chunk).unwrap();
            let parts: Vec<&[u8]> = segments.iter().map(|b| b.as_ref()).collect();
            let offset = writer.write_record_parts(&parts).unwrap();
            let kind = match chunk {
                unbound_chunked::Chunk::Bytes(_) => ChunkType::Bytes,
                _ => ChunkType::Message,
            };
            infos.push(ChunkInfo {
                r#type: kind as i32,
                size: parts.iter().map(|p| p.len() as u64).sum(),
                offset,
            });
        }
        let metadata = ChunkMetadata {
            version: Some(unbound_chunked::write::version_def()),
            chunks: infos,
            message: Some(split.message.clone()),
        };
        writer.write_record(&metadata.encode_to_vec()).unwrap();
        let one_at_a_time = writer.finish().unwrap();

        let dir = tempfile::tempdir().unwrap();
        let prefix = dir.path().join("model");
        let written = write_split(&prefix, split, options, &mut |_| {}).unwrap();
        let ahead = std::fs::read(&written.path).unwrap();
        assert!(ahead == one_at_a_time, "{compression:?}: the files differ");
    }
}

/// `SplitOutput::segments_at` keeps a chunk that is one piece lying in the split's source
/// for every later reader (the writer and the fingerprint, on two threads): each reader, first
/// or not, gets the pieces `segments` finds, and a kept piece is the source's own bytes.
#[test]
fn segments_found_once_are_those_found_afresh_for_every_reader() {
    let desc = desc();
    let original = ManyFields {
        repeated_field: (0..40u64)
            .map(|i| ManyFields {
                string_field: format!("element {i}"),
                bytes_field: Bytes::from(noise(i, 300)),
                ..Default::default()
            })
            .collect(),
        string_field: "root".into(),
        ..Default::default()
    };
    let encoded = Bytes::from(original.encode_to_vec());
    let mut message = WireMessage::parse(&encoded, Some(desc.clone())).unwrap();
    let mut sink = ChunkSink::new(desc.clone(), true);
    split_generic(&mut message, &desc, &mut sink.root(), 2_000).unwrap();
    let split = sink.finish(message).within(vec![encoded.clone()]);
    assert!(split.chunks.len() > 3, "{}", split.chunks.len());
    let joined = |pieces: Vec<Bytes>| pieces.concat();
    let in_source = |piece: &Bytes| {
        let (start, end) = (
            encoded.as_ptr() as usize,
            encoded.as_ptr() as usize + encoded.len(),
        );
        (start..end).contains(&(piece.as_ptr() as usize))
    };
    let mut kept = 0;
    std::thread::scope(|s| {
        let other = s.spawn(|| {
            (0..split.chunks.len())
                .map(|i| split.segments_at(i).unwrap())
                .collect::<Vec<_>>()
        });
        for i in 0..split.chunks.len() {
            let afresh = split.segments(&split.chunks[i]).unwrap();
            let first = split.segments_at(i).unwrap();
            let again = split.segments_at(i).unwrap();
            if let [one] = &again[..] {
                kept += usize::from(in_source(one));
            }
            assert_eq!(joined(first), joined(afresh.clone()), "chunk {i}");
            assert_eq!(joined(again), joined(afresh), "chunk {i}");
        }
        for (i, pieces) in other.join().unwrap().into_iter().enumerate() {
            let afresh = split.segments(&split.chunks[i]).unwrap();
            assert_eq!(
                joined(pieces),
                joined(afresh),
                "chunk {i} on the other thread"
            );
        }
    });
    assert!(kept > 0, "no chunk was one piece of the source");
    assert!(split.segments_at(split.chunks.len()).is_err());
}
