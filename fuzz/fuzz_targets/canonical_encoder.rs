//! Arbitrary bytes as a message the fingerprint serializes deterministically (a `NodeDef`, a
//! `FunctionDef`, a `MetaGraphDef` or a whole `SavedModel`, chosen by the first byte), and as a
//! `SavedModel` verify checks against its schema. Differential: the encoder with its
//! already-canonical fast path gives exactly the bytes of the full re-encoding, or both fail;
//! verify's schema check (scanned in place first) never panics, and accepts whatever the
//! canonical check accepts in its validating mode (which verify takes in its place); the byte
//! encoder of `unbound-canonical` (streaming messages from a size the second byte picks, and in
//! memory) writes exactly the full re-encoding's bytes, or both fail; its validating mode fails
//! exactly where verify's schema check fails, and writes the same bytes otherwise.
//!
//! Seed it with `testdata/models/*/saved_model.pb` (prefixed by a type byte, or not).

#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use unbound_savedmodel::fingerprint::canonical::{Encoder, Source};
use unbound_wire::WireMessage;

const TYPES: [&str; 4] = [
    "tensorflow.SavedModel",
    "tensorflow.MetaGraphDef",
    "tensorflow.NodeDef",
    "tensorflow.FunctionDef",
];

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let pool = unbound_proto::descriptor_pool();
    let desc = pool
        .get_message_by_name(TYPES[usize::from(pick) % TYPES.len()])
        .unwrap();
    let bytes = Bytes::copy_from_slice(rest);
    let encode = |mut enc: Encoder| {
        enc.encode(&[Source::Raw(bytes.clone())], &desc)
            .and_then(|rope| rope.to_vec())
            .ok()
    };
    let fast = encode(Encoder::new());
    let full = encode(Encoder::without_fast_path());
    assert_eq!(fast, full, "the fast path changed the deterministic encoding");

    let schema = unbound_canonical::Schema::new(&desc);
    let big = [1, 16, 256, 1 << 20][usize::from(rest.first().copied().unwrap_or(0)) % 4];
    let mut streamed = Vec::new();
    let streamed = unbound_canonical::encode_streaming_from(big, &schema, schema.root(), &[rest], &mut streamed)
        .ok()
        .map(|_| streamed);
    assert_eq!(streamed, full, "the byte encoder (streamed from {big}) differs");
    let in_memory = unbound_canonical::encode_to_vec(&schema, schema.root(), &[rest]).ok();
    assert_eq!(in_memory, full, "the byte encoder (in memory) differs");

    // verify skips its schema check of a `.pb` this accepts: the schema check must agree.
    let valid = Encoder::new().is_canonical_and_valid(&bytes, &desc);
    let schema_ok = match WireMessage::parse(&bytes, Some(desc.clone())) {
        Ok(message) => {
            let checked = unbound_savedmodel::verify::check_schema(&message, &desc, "fuzz input");
            assert!(
                !valid || checked.is_ok(),
                "accepted as canonical and valid, but the schema check says {checked:?}"
            );
            checked.is_ok()
        }
        Err(_) => {
            assert!(!valid, "accepted as canonical and valid, but it does not parse");
            false
        }
    };

    // verify takes the validating encoder's output as canonical and valid with no check of
    // its own: it refuses exactly what the schema check refuses of the input (every
    // occurrence, also those the canonical form leaves out), and writes what the plain
    // encoder writes.
    let validated =
        unbound_canonical::encode_to_vec_validated(&schema, schema.root(), &[rest]);
    assert_eq!(
        validated.is_ok(),
        schema_ok,
        "the validating encoder says {:?}, the schema check {schema_ok}",
        validated.as_ref().map(Vec::len)
    );
    if let Ok(validated) = validated {
        assert_eq!(Some(validated), in_memory, "the validating encoder wrote other bytes");
    }
});
