//! Arbitrary bytes as a `.cpb` file: reading its `ChunkMetadata`, merging the chunks into a
//! `tensorflow.SavedModel` (and into `unbound.test.ManyFields`, whose maps of every key type
//! and scalar fields reach the rest of the Merger) and serializing the result must never
//! panic, hang or allocate beyond what the input can hold. Errors are fine.
//!
//! Differential: the fingerprint `merge` computes from the merged model in memory (whose graph,
//! built from chunks, is checked once and then trusted by both of its hashes) equals the one of
//! the same model read back from its serialization (where nothing is built, so every message
//! is checked), or both fail.
//!
//! Seed it with small valid `.cpb` files (for example `unbound split` of
//! `testdata/models/tf2_multi_sig` with a small `--max-size`).

#![no_main]

use std::path::Path;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use prost_reflect::MessageDescriptor;
use unbound_chunked::{ChunkSource, FileChunks, Merger};
use unbound_records::RecordReader;
use unbound_savedmodel::fingerprint::fingerprint_model_as_pb;
use unbound_wire::WireMessage;

/// Merged messages larger than this are not serialized (a few chunks referenced many times can
/// legitimately describe a message far larger than the input).
const MAX_OUTPUT: u64 = 64 << 20;

fn descriptors() -> &'static [MessageDescriptor; 2] {
    static DESCS: OnceLock<[MessageDescriptor; 2]> = OnceLock::new();
    DESCS.get_or_init(|| {
        let pool = unbound_proto::descriptor_pool();
        [
            pool.get_message_by_name("tensorflow.SavedModel").unwrap(),
            pool.get_message_by_name("unbound.test.ManyFields").unwrap(),
        ]
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(reader) = RecordReader::from_bytes(Bytes::copy_from_slice(data), "fuzz.cpb") else {
        return;
    };
    let Ok((mut chunks, metadata)) = FileChunks::from_reader(Arc::new(reader)) else {
        return;
    };
    let root = metadata.message.clone().unwrap_or_default();
    for (i, desc) in descriptors().iter().enumerate() {
        // Lazy record references for one type, chunks read at merge time for the other.
        chunks.set_lazy(i == 0);
        let Ok(message) = Merger::new(&chunks).merge(desc, &root) else {
            continue;
        };
        if message.encoded_len() > MAX_OUTPUT {
            continue;
        }
        if let Ok(bytes) = message.to_vec() {
            assert_eq!(
                bytes.len() as u64,
                message.encoded_len(),
                "encoded_len is exact"
            );
        }
    }
    chunks.set_lazy(false);
    if let Ok(model) = Merger::new(&chunks).merge(&descriptors()[0], &root) {
        if model.encoded_len() <= MAX_OUTPUT {
            same_fingerprint_as_read_back(&model);
        }
    }
    let _ = chunks.len();
});

/// The hashes of `fingerprint_model_as_pb` (the uuid aside).
fn hashes(model: &WireMessage) -> Option<[u64; 4]> {
    let def = fingerprint_model_as_pb(model, Path::new("fuzz.pb"), 0).ok()?;
    Some([
        def.saved_model_checksum,
        def.graph_def_program_hash,
        def.signature_def_hash,
        def.saved_object_graph_hash,
    ])
}

fn same_fingerprint_as_read_back(model: &WireMessage) {
    let Ok(bytes) = model.to_vec() else {
        return;
    };
    let Ok(read_back) = WireMessage::parse(&Bytes::from(bytes), Some(descriptors()[0].clone()))
    else {
        return;
    };
    assert_eq!(hashes(model), hashes(&read_back), "fingerprint of the model in memory");
}
