//! Arbitrary bytes as a tensor bundle: the input is split into a `.index` file and data shards
//! (a two-byte length of the index first, then the index, then the shards, cut at `SHARD_CUT`
//! markers). Opening it, listing its keys, reading every tensor (partitioned ones assembled
//! from slices, strings and variants decoded, checksums verified), its object graph and its
//! full verification must never panic, hang or allocate beyond what the input can hold.
//! Errors are fine.
//!
//! Seed it with the bundles of `testdata/models/*/variables` in this format (see
//! `fuzz/README.md`).

#![no_main]

use std::path::Path;

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use unbound_bundle::BundleReader;

/// Separates data shards in the input.
const SHARD_CUT: &[u8] = b"\0SHARD\0";

/// Splits the input into the index and the data shards.
fn split(data: &[u8]) -> Option<(Bytes, Vec<Bytes>)> {
    let (len, rest) = data.split_first_chunk::<2>()?;
    let len = usize::from(u16::from_le_bytes(*len)).min(rest.len());
    let (index, mut rest) = rest.split_at(len);
    let mut shards = Vec::new();
    loop {
        match rest.windows(SHARD_CUT.len()).position(|w| w == SHARD_CUT) {
            Some(at) => {
                shards.push(Bytes::copy_from_slice(&rest[..at]));
                rest = &rest[at + SHARD_CUT.len()..];
            }
            None => {
                shards.push(Bytes::copy_from_slice(rest));
                break;
            }
        }
    }
    Some((Bytes::copy_from_slice(index), shards))
}

fuzz_target!(|data: &[u8]| {
    let Some((index, shards)) = split(data) else {
        return;
    };
    let Ok(reader) = BundleReader::from_bytes(Path::new("fuzz/variables"), index, shards) else {
        return;
    };
    let keys: Vec<Vec<u8>> = reader.keys().map(<[u8]>::to_vec).collect();
    for key in &keys {
        let _ = reader.stored_bytes(key);
        let _ = reader.read(key);
    }
    let _ = reader.tensor_keys().count();
    let _ = reader.object_graph();
    let _ = reader.verify();
});
