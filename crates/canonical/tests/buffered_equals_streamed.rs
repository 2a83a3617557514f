//! The buffered encoder (which writes most small messages as it reads them, giving up and
//! collecting them when they need it) writes what the streamed encoder writes (which sizes and
//! collects every message), on node-like messages written every way a writer may write them:
//! fields shuffled, repeated, split in parts, map entries out of order and without keys,
//! unknown fields and wrong wire types between them, packed and unpacked runs, padded varints.

use proptest::prelude::*;
use unbound_canonical::{
    encode_elements_to_vec, encode_streaming_from, encode_to_vec, encode_to_vec_validated, Schema,
};

/// One field as a writer put it: number, wire type, payload (a varint's value, or bytes).
#[derive(Clone, Debug)]
enum Piece {
    Varint(u32, u64),
    Len(u32, Vec<u8>),
    Fixed32(u32, u32),
}

/// Writes `pieces`, padding each varint of a piece whose bit in `pad` is set by one byte.
fn write(pieces: &[Piece], pad: u64) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, piece) in pieces.iter().enumerate() {
        let padded = pad >> (i % 64) & 1 == 1;
        let (number, wire) = match piece {
            Piece::Varint(n, _) => (*n, 0),
            Piece::Len(n, _) => (*n, 2),
            Piece::Fixed32(n, _) => (*n, 5),
        };
        varint(u64::from(number) << 3 | wire, padded, &mut out);
        match piece {
            Piece::Varint(_, v) => varint(*v, padded, &mut out),
            Piece::Len(_, bytes) => {
                varint(bytes.len() as u64, padded, &mut out);
                out.extend_from_slice(bytes);
            }
            Piece::Fixed32(_, v) => out.extend_from_slice(&v.to_le_bytes()),
        }
    }
    out
}

/// `v` as a varint, one byte longer than needed when `padded` (and it is shorter than ten).
fn varint(mut v: u64, padded: bool, out: &mut Vec<u8>) {
    let padded = padded && v < 1 << 63;
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    if padded {
        out.push(v as u8 | 0x80);
        out.push(0);
    } else {
        out.push(v as u8);
    }
}

/// Fields a writer adds that the schema does not know, or knows with another wire type.
fn unknown() -> impl Strategy<Value = Piece> {
    prop_oneof![
        (
            prop::sample::select(vec![1000u32, 2000, 3000]),
            any::<u64>()
        )
            .prop_map(|(n, v)| Piece::Varint(n, v)),
        (
            prop::sample::select(vec![1000u32, 4000]),
            prop::collection::vec(any::<u8>(), 0..4)
        )
            .prop_map(|(n, b)| Piece::Len(n, b)),
        // `name` (a string) as a varint, `op` as a fixed32: kept as unknown fields.
        any::<u64>().prop_map(|v| Piece::Varint(1, v)),
        any::<u32>().prop_map(|v| Piece::Fixed32(2, v)),
    ]
}

/// Pieces in the order given, then shuffled by `order` when it is set, with `extra` unknown
/// fields spliced in.
fn arranged(
    mut pieces: Vec<Piece>,
    order: Option<Vec<usize>>,
    extra: Vec<(usize, Piece)>,
    pad: u64,
) -> Vec<u8> {
    if let Some(order) = order {
        for (i, j) in order.into_iter().enumerate() {
            if !pieces.is_empty() {
                let (a, b) = (i % pieces.len(), j % pieces.len());
                pieces.swap(a, b);
            }
        }
    }
    for (at, piece) in extra {
        let at = at % (pieces.len() + 1);
        pieces.insert(at, piece);
    }
    write(&pieces, pad)
}

fn message(pieces: impl Strategy<Value = Vec<Piece>>) -> impl Strategy<Value = Vec<u8>> {
    (
        pieces,
        prop::option::weighted(0.4, prop::collection::vec(any::<usize>(), 0..4)),
        prop::collection::vec((any::<usize>(), unknown()), 0..3),
        any::<u64>().prop_map(|p| p & p >> 7 & p >> 13),
    )
        .prop_map(|(pieces, order, extra, pad)| arranged(pieces, order, extra, pad))
}

/// A `TensorShapeProto`: dims (size, name), unknown_rank.
fn shape() -> impl Strategy<Value = Vec<u8>> {
    let dim = message(prop::collection::vec(
        prop_oneof![
            (-3i64..300).prop_map(|v| Piece::Varint(1, v as u64)),
            Just(Piece::Len(2, b"batch".to_vec())),
        ],
        0..3,
    ));
    message(prop::collection::vec(
        prop_oneof![
            dim.prop_map(|d| Piece::Len(2, d)),
            any::<bool>().prop_map(|b| Piece::Varint(3, u64::from(b))),
        ],
        0..4,
    ))
}

/// An `AttrValue`: list (i packed or not, s), s, i, b, type, shape (a oneof: several may be set).
fn attr_value() -> impl Strategy<Value = Vec<u8>> {
    let packed = prop::collection::vec(any::<i32>(), 0..4).prop_map(|vs| {
        let mut run = Vec::new();
        for v in vs {
            varint(v as i64 as u64, false, &mut run);
        }
        Piece::Len(3, run)
    });
    let list = message(prop::collection::vec(
        prop_oneof![
            packed,
            any::<i64>().prop_map(|v| Piece::Varint(3, v as u64)),
            Just(Piece::Len(2, b"x".to_vec())),
        ],
        0..4,
    ));
    message(prop::collection::vec(
        prop_oneof![
            list.prop_map(|l| Piece::Len(1, l)),
            Just(Piece::Len(2, b"s".to_vec())),
            any::<i64>().prop_map(|v| Piece::Varint(3, v as u64)),
            (0u64..3).prop_map(|v| Piece::Varint(5, v)),
            (0u64..30).prop_map(|v| Piece::Varint(6, v)),
            shape().prop_map(|s| Piece::Len(7, s)),
        ],
        0..3,
    ))
}

/// A map entry of `NodeDef.attr`: key and value, either missing, in either order, repeated.
fn attr_entry() -> impl Strategy<Value = Vec<u8>> {
    message(prop::collection::vec(
        prop_oneof![
            prop::sample::select(vec!["T", "dtype", "shape", "value", ""])
                .prop_map(|k| Piece::Len(1, k.as_bytes().to_vec())),
            attr_value().prop_map(|v| Piece::Len(2, v)),
        ],
        0..3,
    ))
}

/// A `NodeDef`.
fn node() -> impl Strategy<Value = Vec<u8>> {
    message(prop::collection::vec(
        prop_oneof![
            prop::sample::select(vec!["a", "b", ""]).prop_map(|s| Piece::Len(1, s.into())),
            Just(Piece::Len(2, b"Const".to_vec())),
            prop::sample::select(vec!["x", "y:1", "^z"]).prop_map(|s| Piece::Len(3, s.into())),
            Just(Piece::Len(4, b"/cpu:0".to_vec())),
            attr_entry().prop_map(|e| Piece::Len(5, e)),
            attr_entry().prop_map(|e| Piece::Len(5, e)),
        ],
        0..8,
    ))
}

/// The encodings of `bytes` as a `name`: into memory, buffered, streamed (an error as `None`:
/// valid pieces make valid messages, so the three must agree on the bytes). The validating
/// encoder, given such a valid message, must write what the plain one writes: checked here.
fn encodings(name: &str, bytes: &[u8]) -> [Option<Vec<u8>>; 3] {
    let desc = unbound_proto::descriptor_pool()
        .get_message_by_name(name)
        .expect("a known type");
    let schema = Schema::new(&desc);
    let streamed = |big| {
        let mut out = Vec::new();
        encode_streaming_from(big, &schema, schema.root(), &[bytes], &mut out)
            .map(|_| out)
            .ok()
    };
    let to_vec = encode_to_vec(&schema, schema.root(), &[bytes]).ok();
    let validated = encode_to_vec_validated(&schema, schema.root(), &[bytes]).ok();
    assert_eq!(
        validated, to_vec,
        "the validating encoder on a valid {name}"
    );
    [to_vec, streamed(1 << 20), streamed(1)]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn a_node_written_any_way_encodes_the_same_buffered_or_streamed(node in node()) {
        let [to_vec, buffered, streamed] = encodings("tensorflow.NodeDef", &node);
        prop_assert!(streamed.is_some());
        prop_assert_eq!(&to_vec, &streamed);
        prop_assert_eq!(&buffered, &streamed);
    }

    #[test]
    fn a_graph_of_such_nodes_encodes_the_same_buffered_or_streamed(
        nodes in prop::collection::vec(node(), 0..6),
        versions_first in any::<bool>(),
    ) {
        let mut pieces: Vec<Piece> = nodes.into_iter().map(|n| Piece::Len(1, n)).collect();
        let versions = Piece::Len(4, vec![0x08, 0x1b]);
        if versions_first {
            pieces.insert(0, versions);
        } else {
            pieces.push(versions);
        }
        let graph = write(&pieces, 0);
        let [to_vec, buffered, streamed] = encodings("tensorflow.GraphDef", &graph);
        prop_assert_eq!(&to_vec, &streamed);
        prop_assert_eq!(&buffered, &streamed);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// A graph's nodes encoded a batch at a time (`encode_elements_to_vec`, what a reader of
    /// a graph chunk by chunk does) are the node fields of the graph's own encoding: few
    /// nodes, one thread; past a megabyte of them, on every core.
    #[test]
    fn nodes_encoded_as_elements_are_the_node_fields_of_their_graph(
        nodes in prop::collection::vec(node(), 1..12),
        copies in prop::sample::select(vec![1usize, 30_000]),
    ) {
        let nodes: Vec<Vec<u8>> = nodes.iter().cycle().take(nodes.len() * copies).cloned().collect();
        let graph = write(&nodes.iter().map(|n| Piece::Len(1, n.clone())).collect::<Vec<_>>(), 0);
        let desc = unbound_proto::descriptor_pool()
            .get_message_by_name("tensorflow.GraphDef")
            .expect("a known type");
        let schema = Schema::new(&desc);
        let whole = encode_to_vec(&schema, schema.root(), &[&graph]).unwrap();
        let elements: Vec<&[u8]> = nodes.iter().map(|n| &n[..]).collect();
        let batch = encode_elements_to_vec(&schema, schema.root(), 1, &elements).unwrap();
        prop_assert_eq!(batch.len(), whole.len());
        prop_assert!(batch == whole);
    }
}

#[test]
fn only_a_repeated_message_field_is_encoded_as_elements() {
    let desc = unbound_proto::descriptor_pool()
        .get_message_by_name("tensorflow.GraphDef")
        .expect("a known type");
    let schema = Schema::new(&desc);
    // 4 is `versions`, a singular message; 99 no field at all.
    for number in [4, 99] {
        let error = encode_elements_to_vec(&schema, schema.root(), number, &[b""]).unwrap_err();
        assert!(
            error.to_string().contains(&format!("numbered {number}")),
            "{error}"
        );
    }
}

/// A oneof whose member is set, cleared by another member, set again and met again after
/// another field: protobuf C++ keeps the member set last, merged from its occurrences since
/// it was set. Written as read (buffered), the first setting's fields must not come back.
#[test]
fn a_oneof_member_set_again_keeps_only_what_came_since() {
    let user_object = |fields: &[Piece]| Piece::Len(4, write(fields, 0));
    let object = write(
        &[
            // user_object { identifier: "a", metadata: "m" }: cleared by the asset.
            user_object(&[Piece::Len(1, b"a".to_vec()), Piece::Len(3, b"m".to_vec())]),
            Piece::Len(5, write(&[Piece::Varint(1, 1)], 0)),
            user_object(&[Piece::Len(1, b"b".to_vec())]),
            // children: field 1, after the member (out of order).
            Piece::Len(1, write(&[Piece::Varint(1, 7)], 0)),
            // user_object { version { producer: 2 } }: merged into "b".
            user_object(&[Piece::Len(2, write(&[Piece::Varint(1, 2)], 0))]),
        ],
        0,
    );
    let [to_vec, buffered, streamed] = encodings("tensorflow.SavedObject", &object);
    let expected = write(
        &[
            Piece::Len(1, write(&[Piece::Varint(1, 7)], 0)),
            user_object(&[
                Piece::Len(1, b"b".to_vec()),
                Piece::Len(2, write(&[Piece::Varint(1, 2)], 0)),
            ]),
        ],
        0,
    );
    assert_eq!(streamed.as_deref(), Some(&expected[..]));
    assert_eq!(to_vec, streamed);
    assert_eq!(buffered, streamed);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    /// A graph of megabytes of nodes in field order, with unknown fields among them and its
    /// other fields after them: encoded in memory, its nodes go to worker threads a batch at a
    /// time while the reading goes on, and what the workers made is appended in order; the
    /// output is the streamed encoding's, byte for byte.
    #[test]
    fn a_graph_whose_nodes_go_to_workers_encodes_as_streamed(
        nodes in prop::collection::vec(node(), 1..8),
        unknown_every in prop::sample::select(vec![0usize, 1, 997, 40_000]),
        megabytes in prop::sample::select(vec![5usize, 9]),
    ) {
        let mut pieces = Vec::new();
        let mut bytes = 0;
        for (i, node) in nodes.iter().cycle().enumerate() {
            if bytes >= megabytes << 20 {
                break;
            }
            bytes += node.len() + 2;
            pieces.push(Piece::Len(1, node.clone()));
            if unknown_every > 0 && i % unknown_every == 0 {
                pieces.push(Piece::Varint(99, i as u64));
            }
        }
        // `library` (an empty one) and `versions` after the nodes, in field order.
        pieces.push(Piece::Len(2, Vec::new()));
        pieces.push(Piece::Len(4, vec![0x08, 0x2a]));
        let graph = write(&pieces, 0);
        prop_assert!(graph.len() > 4 << 20, "past the size encoded in parallel");
        let [to_vec, buffered, streamed] = encodings("tensorflow.GraphDef", &graph);
        prop_assert!(streamed.is_some());
        prop_assert!(to_vec == streamed);
        prop_assert!(buffered == streamed);
    }
}
