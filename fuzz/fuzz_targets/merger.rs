//! Arbitrary bytes as a `.cpb` file: reading its `ChunkMetadata`, merging the chunks into a
//! `tensorflow.SavedModel` (and into `unbound.test.ManyFields`, whose maps of every key type
//! and scalar fields reach the rest of the Merger) and serializing the result must never
//! panic, hang or allocate beyond what the input can hold. Errors are fine.
//!
//! (`merge` fingerprints the file it writes, so there is no fingerprint of a model in memory
//! to compare with a read-back any more: issue 29.)
//!
//! Seed it with small valid `.cpb` files (for example `unbound split` of
//! `testdata/models/tf2_multi_sig` with a small `--max-size`).

#![no_main]

use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use prost_reflect::MessageDescriptor;
use unbound_chunked::{ChunkSource, FileChunks, Merger};
use unbound_records::RecordReader;

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
    let _ = chunks.len();
});
