//! The encoder's fast path (taking serialized messages that are already canonical as they
//! are) changes nothing: on TensorFlow-made models and on wire-level mutations of their
//! messages, the deterministic serialization with the fast path is byte for byte the one
//! without it, or both fail. TensorFlow-made models are canonical, so there the fast path
//! must actually be taken.

use bytes::Bytes;
use proptest::prelude::*;
use prost_reflect::MessageDescriptor;
use unbound_savedmodel::dir::{read_saved_model, saved_model_descriptor};
use unbound_savedmodel::fingerprint::canonical::{Encoder, Source};
use unbound_test_support::testdata::model as testdata;
use unbound_wire::codec::read_field;

fn descriptor(name: &str) -> MessageDescriptor {
    saved_model_descriptor()
        .unwrap()
        .parent_pool()
        .get_message_by_name(name)
        .unwrap()
}

/// Both encodings of `bytes` as a `desc`: with the fast path and without.
fn both(
    bytes: &Bytes,
    desc: &MessageDescriptor,
) -> (Result<Vec<u8>, String>, Result<Vec<u8>, String>) {
    let run = |mut enc: Encoder| {
        enc.encode(&[Source::Raw(bytes.clone())], desc)
            .and_then(|rope| rope.to_vec())
            .map_err(|e| e.to_string())
    };
    (run(Encoder::new()), run(Encoder::without_fast_path()))
}

/// The payloads of every occurrence of field `number` in `buf`.
fn occurrences(buf: &Bytes, number: u32) -> Vec<Bytes> {
    let mut pos = 0;
    let mut out = Vec::new();
    while pos < buf.len() {
        let f = read_field(buf, &mut pos).unwrap();
        if f.number == number {
            out.push(buf.slice(f.start..f.end));
        }
    }
    out
}

/// TensorFlow-made messages of the bundled models: whole MetaGraphDefs and their nodes.
fn samples() -> Vec<(Bytes, &'static str)> {
    let mut out = Vec::new();
    for model in ["tf2_multi_sig", "tf1_large_consts"] {
        let bytes = Bytes::from(std::fs::read(testdata(model).join("saved_model.pb")).unwrap());
        for meta in occurrences(&bytes, 2) {
            for graph in occurrences(&meta, 2) {
                for node in occurrences(&graph, 1) {
                    out.push((node, "tensorflow.NodeDef"));
                }
                for library in occurrences(&graph, 2) {
                    for function in occurrences(&library, 1) {
                        out.push((function, "tensorflow.FunctionDef"));
                    }
                }
            }
            out.push((meta, "tensorflow.MetaGraphDef"));
        }
    }
    out
}

#[test]
fn tensorflow_models_are_taken_as_they_are_with_the_same_result() {
    let desc = saved_model_descriptor().unwrap();
    for model in ["tf2_multi_sig", "tf1_large_consts"] {
        let message = read_saved_model(&testdata(model)).unwrap().message;
        let mut fast = Encoder::new();
        let with = fast
            .encode(&[Source::Ref(&message)], &desc)
            .unwrap()
            .to_vec()
            .unwrap();
        let without = Encoder::without_fast_path()
            .encode(&[Source::Ref(&message)], &desc)
            .unwrap()
            .to_vec()
            .unwrap();
        assert_eq!(with, without, "{model}");
        assert!(
            fast.taken_as_is() > 0,
            "{model}: the fast path was never taken"
        );
    }
}

/// One wire-level change to a message: applied to its top-level fields, or (recursively) to
/// the payload of one of its length-delimited fields.
#[derive(Debug, Clone)]
enum Mutation {
    Swap(usize),
    Duplicate(usize),
    Drop(usize),
    PadKey(usize),
    FlipByte(usize, u8),
    /// The field's value set to its default (0, or empty): an explicit default.
    Zero(usize),
    Into(usize, Box<Mutation>),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let leaf = prop_oneof![
        any::<usize>().prop_map(Mutation::Swap),
        any::<usize>().prop_map(Mutation::Duplicate),
        any::<usize>().prop_map(Mutation::Drop),
        any::<usize>().prop_map(Mutation::PadKey),
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::FlipByte(i, b)),
        any::<usize>().prop_map(Mutation::Zero),
    ];
    leaf.prop_recursive(4, 8, 1, |inner| {
        (any::<usize>(), inner).prop_map(|(i, m)| Mutation::Into(i, Box::new(m)))
    })
}

/// One top-level field: its key and value bytes, where it starts, and its payload's range.
type Piece = (Vec<u8>, usize, usize, usize);

/// The top-level fields of `buf`, or `None` when it does not scan.
fn pieces(buf: &[u8]) -> Option<Vec<Piece>> {
    let mut pos = 0;
    let mut out = Vec::new();
    while pos < buf.len() {
        let at = pos;
        let f = read_field(buf, &mut pos).ok()?;
        out.push((buf[at..pos].to_vec(), at, f.start, f.end));
    }
    Some(out)
}

fn varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn apply(buf: &[u8], m: &Mutation) -> Vec<u8> {
    if let Mutation::FlipByte(i, b) = m {
        let mut out = buf.to_vec();
        if !out.is_empty() {
            let i = i % out.len();
            out[i] ^= b | 1;
        }
        return out;
    }
    let Some(mut fields) = pieces(buf) else {
        return buf.to_vec();
    };
    if fields.is_empty() {
        return buf.to_vec();
    }
    let n = fields.len();
    match m {
        Mutation::Swap(i) if n > 1 => fields.swap(i % (n - 1), i % (n - 1) + 1),
        Mutation::Duplicate(i) => {
            let f = fields[i % n].clone();
            fields.insert(i % n, f);
        }
        Mutation::Drop(i) => {
            fields.remove(i % n);
        }
        Mutation::PadKey(i) => {
            // The same key as a one-byte-longer varint.
            let f = &mut fields[i % n];
            let mut pos = 0;
            let key = unbound_wire::codec::read_varint(&f.0, &mut pos).unwrap();
            let mut padded = Vec::new();
            varint(key, &mut padded);
            *padded.last_mut().unwrap() |= 0x80;
            padded.push(0);
            padded.extend_from_slice(&f.0[pos..]);
            f.0 = padded;
        }
        Mutation::Zero(i) => {
            let (_, at, _, _) = fields[i % n].clone();
            let mut pos = at;
            let key = unbound_wire::codec::read_varint(buf, &mut pos).unwrap();
            let mut piece = Vec::new();
            varint(key, &mut piece);
            match key & 7 {
                0 | 2 => piece.push(0),
                1 => piece.extend_from_slice(&[0; 8]),
                5 => piece.extend_from_slice(&[0; 4]),
                _ => piece = fields[i % n].0.clone(),
            }
            fields[i % n].0 = piece;
        }
        Mutation::Into(i, inner) => {
            let (_, at, start, end) = fields[i % n].clone();
            if start > at && end >= start && !buf[start..end].is_empty() {
                let body = apply(&buf[start..end], inner);
                // Rebuild key + new length + new body.
                let mut pos = at;
                let key = unbound_wire::codec::read_varint(buf, &mut pos).unwrap();
                let mut piece = Vec::new();
                varint(key, &mut piece);
                if key & 7 == 2 {
                    varint(body.len() as u64, &mut piece);
                    piece.extend_from_slice(&body);
                    fields[i % n].0 = piece;
                }
            }
        }
        _ => {}
    }
    fields.into_iter().flat_map(|f| f.0).collect()
}

/// The sample `pick` chooses, with `mutations` applied, and its type.
fn mutant(pick: prop::sample::Index, mutations: &[Mutation]) -> (Bytes, &'static str) {
    let samples = samples();
    let (bytes, name) = &samples[pick.index(samples.len())];
    let mut mutant = bytes.to_vec();
    for m in mutations {
        mutant = apply(&mutant, m);
    }
    (Bytes::from(mutant), name)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn fast_path_equals_full_encoding_on_mutants(
        pick in any::<prop::sample::Index>(),
        mutations in prop::collection::vec(mutation(), 0..4),
    ) {
        let (mutant, name) = mutant(pick, &mutations);
        let desc = descriptor(name);
        let (with, without) = both(&mutant, &desc);
        match (with, without) {
            (Ok(a), Ok(b)) => prop_assert!(a == b, "{name}: the fast path changed the encoding"),
            (Err(_), Err(_)) => {}
            (a, b) => prop_assert!(false, "{name}: fast path {:?}, full encoding {:?}", a.map(|v| v.len()), b.map(|v| v.len())),
        }
    }
}

/// The deterministic serialization of TensorFlow-made model `model` (TensorFlow's own files
/// are not all canonical; unbound's merge output and TensorFlow's deterministic writes are).
fn canonical_model(model: &str) -> Bytes {
    let bytes = Bytes::from(std::fs::read(testdata(model).join("saved_model.pb")).unwrap());
    let desc = saved_model_descriptor().unwrap();
    let rope = Encoder::without_fast_path()
        .encode(&[Source::Raw(bytes)], &desc)
        .unwrap();
    Bytes::from(rope.to_vec().unwrap())
}

/// A `.pb`'s fingerprint hashes the graph a second time after `SimpleDelete`, trusting the
/// nodes the whole-model scan already found canonical: the result is the encoding without any
/// fast path, on TensorFlow-made graphs whose `StatefulPartitionedCall` nodes are edited.
#[test]
fn a_trusted_regularized_graph_encodes_as_without_the_fast_path() {
    use unbound_savedmodel::fingerprint::regularize::simple_delete;
    use unbound_wire::WireMessage;
    let graph_desc = descriptor("tensorflow.GraphDef");
    for model in ["tf2_multi_sig", "tf1_large_consts"] {
        let bytes = canonical_model(model);
        let mut enc = Encoder::new();
        assert!(enc.is_canonical(&bytes, &saved_model_descriptor().unwrap()));
        let meta = occurrences(&bytes, 2).remove(0);
        let graph_bytes = occurrences(&meta, 2).remove(0);
        let mut graph = WireMessage::parse(&graph_bytes, Some(graph_desc.clone())).unwrap();
        simple_delete(&mut graph).unwrap();
        enc.trust_children(true);
        let trusted = enc
            .encode(&[Source::Ref(&graph)], &graph_desc)
            .unwrap()
            .to_vec()
            .unwrap();
        let without = Encoder::without_fast_path()
            .encode(&[Source::Ref(&graph)], &graph_desc)
            .unwrap()
            .to_vec()
            .unwrap();
        assert_eq!(trusted, without, "{model}");
        assert!(enc.taken_as_is() > 0, "{model}: nothing was trusted");
    }
}

/// A non-canonical model (a field written twice) is not taken for canonical.
#[test]
fn a_model_with_a_repeated_singular_field_is_not_canonical() {
    let bytes = canonical_model("tf2_multi_sig").to_vec();
    // saved_model_schema_version (field 1, varint) written once more at the end.
    let mut twice = bytes.clone();
    twice.extend_from_slice(&[0x08, 0x01]);
    let desc = saved_model_descriptor().unwrap();
    assert!(Encoder::new().is_canonical(&Bytes::from(bytes), &desc));
    assert!(!Encoder::new().is_canonical(&Bytes::from(twice), &desc));
}

/// A field numbered past protobuf's largest (2^29 - 1) is a malformed message, not an unknown
/// field taken as canonical: the fast path refuses it as the full encoder does (found by the
/// `canonical_encoder` fuzz target).
#[test]
fn a_field_number_past_the_largest_is_not_taken_for_an_unknown_field() {
    let desc = saved_model_descriptor().unwrap();
    // Key of field 2^29 (varint), then the value 27; and the largest number, which is fine.
    let past = [0x80, 0x80, 0x80, 0x80, 0x10, 0x1b];
    let largest = [0xf8, 0xff, 0xff, 0xff, 0x0f, 0x1b];
    for (bytes, valid) in [(&past[..], false), (&largest[..], true)] {
        let encode = |mut enc: Encoder| {
            enc.encode(&[Source::Raw(Bytes::copy_from_slice(bytes))], &desc)
                .and_then(|rope| rope.to_vec())
                .ok()
        };
        let (fast, full) = (encode(Encoder::new()), encode(Encoder::without_fast_path()));
        assert_eq!(fast, full, "{bytes:02x?}");
        assert_eq!(full.is_some(), valid, "{bytes:02x?}");
    }
}

/// `node` (a serialized NodeDef) as a GraphDef `node` field.
fn node_field(node: &[u8]) -> Vec<u8> {
    let mut out = vec![0x0a];
    let mut len = node.len();
    while len >= 0x80 {
        out.push((len as u8) | 0x80);
        len >>= 7;
    }
    out.push(len as u8);
    out.extend_from_slice(node);
    out
}

/// A GraphDef past the size checked on two threads (16 MiB), made of copies of the canonical
/// nodes of a TensorFlow-made model, with `edit` applied to the copy numbered `at`.
fn large_graph(at: usize, edit: impl Fn(&mut Vec<u8>)) -> (Bytes, usize) {
    let bytes = canonical_model("tf2_multi_sig");
    let meta = occurrences(&bytes, 2).remove(0);
    let graph = occurrences(&meta, 2).remove(0);
    let nodes = occurrences(&graph, 1);
    let mut out = Vec::new();
    let mut count = 0;
    while out.len() < 20 << 20 {
        let mut node = nodes[count % nodes.len()].to_vec();
        if count == at {
            edit(&mut node);
        }
        out.extend(node_field(&node));
        count += 1;
    }
    (Bytes::from(out), count)
}

/// The check of a large message splits it between two threads; a fault in either half, at
/// any depth, is still found, and the hash is the one of the full encoding.
#[test]
fn a_large_graph_checked_on_two_threads_gives_the_one_thread_answer() {
    let desc = descriptor("tensorflow.GraphDef");
    let (graph, count) = large_graph(usize::MAX, |_| {});
    assert!(Encoder::new().is_canonical(&graph, &desc));
    let full = Encoder::without_fast_path()
        .encode(&[Source::Raw(graph.clone())], &desc)
        .unwrap()
        .to_vec()
        .unwrap();
    assert_eq!(full, graph.to_vec());
    let hashed = Encoder::new()
        .fingerprint64(&[Source::Raw(graph.clone())], &desc)
        .unwrap();
    let reference = Encoder::without_fast_path()
        .fingerprint64(&[Source::Raw(graph)], &desc)
        .unwrap();
    assert_eq!(hashed, reference);

    // `op` written again after the attributes: out of order, so not canonical.
    let twice = |node: &mut Vec<u8>| node.extend_from_slice(&[0x12, 0x01, b'X']);
    for at in [1, count / 2 + 1, count - 2] {
        let (edited, _) = large_graph(at, twice);
        assert!(
            !Encoder::new().is_canonical(&edited, &desc),
            "node {at} of {count}: the repeated op was not seen"
        );
        let (with, without) = both(&edited, &desc);
        assert_eq!(with.unwrap(), without.unwrap(), "node {at} of {count}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// `verify` skips its schema check of a `.pb` the fingerprint's canonical check accepts in
    /// its validating mode: whatever that mode accepts, the schema check accepts too, on
    /// wire-level mutants of TensorFlow-made messages (flipped bytes break strings and
    /// lengths, padded keys and explicit defaults break canonical form).
    #[test]
    fn what_the_validating_canonical_check_accepts_the_schema_check_accepts(
        pick in any::<prop::sample::Index>(),
        mutations in prop::collection::vec(mutation(), 0..4),
    ) {
        let (mutant, name) = mutant(pick, &mutations);
        let desc = descriptor(name);
        if Encoder::new().is_canonical_and_valid(&mutant, &desc) {
            let parsed = unbound_wire::WireMessage::parse(&mutant, Some(desc.clone()));
            prop_assert!(parsed.is_ok(), "{name}: accepted but does not parse");
            let checked = unbound_savedmodel::verify::check_schema(&parsed.unwrap(), &desc, name);
            prop_assert!(checked.is_ok(), "{name}: accepted, but the schema check says {checked:?}");
        }
    }
}

/// The samples the property above mutates are mostly accepted as they are (so it tests
/// acceptance, not only refusal).
#[test]
fn most_tensorflow_made_samples_are_canonical_and_valid() {
    let samples = samples();
    let accepted = samples
        .iter()
        .filter(|(bytes, name)| Encoder::new().is_canonical_and_valid(bytes, &descriptor(name)))
        .count();
    assert!(
        accepted * 2 > samples.len(),
        "{accepted} of {}",
        samples.len()
    );
}

/// The streaming encoder of `unbound-canonical` on `bytes` as a `desc`, streaming messages
/// from `big` bytes on (so that small samples take both its paths).
fn streamed(bytes: &Bytes, desc: &MessageDescriptor, big: usize) -> Result<Vec<u8>, String> {
    let schema = unbound_canonical::Schema::new(desc);
    let mut out = Vec::new();
    unbound_canonical::encode_streaming_from(big, &schema, schema.root(), &[bytes], &mut out)
        .map_err(|e| e.to_string())?;
    Ok(out)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// The streaming encoder writes what the reference encoder writes (which the interop
    /// suite holds to protobuf C++), buffered or streamed, on the same mutants; when one
    /// refuses, so does the other.
    #[test]
    fn streaming_encoder_equals_the_reference_on_mutants(
        pick in any::<prop::sample::Index>(),
        mutations in prop::collection::vec(mutation(), 0..6),
        big in prop::sample::select(vec![1usize, 40, 300, 1 << 20]),
    ) {
        let (mutant, name) = mutant(pick, &mutations);
        let desc = descriptor(name);
        let reference = Encoder::without_fast_path()
            .encode(&[Source::Raw(mutant.clone())], &desc)
            .and_then(|rope| rope.to_vec())
            .map_err(|e| e.to_string());
        match (streamed(&mutant, &desc, big), reference) {
            (Ok(a), Ok(b)) => prop_assert!(a == b, "{name}: streamed from {big}: differs"),
            (Err(_), Err(_)) => {}
            (a, b) => prop_assert!(false, "{name}: streamed {:?}, reference {:?}", a.map(|v| v.len()), b.map(|v| v.len())),
        }
    }
}

#[test]
fn streaming_encoder_takes_canonical_models_as_they_are_and_writes_them_back() {
    for model in ["tf2_multi_sig", "tf1_large_consts"] {
        let bytes = canonical_model(model);
        let desc = saved_model_descriptor().unwrap();
        let schema = unbound_canonical::Schema::new(&desc);
        assert!(
            unbound_canonical::is_canonical(&schema, schema.root(), &bytes).unwrap(),
            "{model}"
        );
        for big in [1, 64, 1 << 20] {
            assert_eq!(
                streamed(&bytes, &desc, big).unwrap(),
                bytes.to_vec(),
                "{model} from {big}"
            );
        }
    }
}
