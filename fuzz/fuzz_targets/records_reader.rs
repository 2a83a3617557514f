//! Arbitrary bytes as a Riegeli/records file: opening, iterating records and
//! chunks, the last record, and random access by position must never panic.
//!
//! Fuzzing builds (`--cfg fuzzing`) of unbound-records accept mismatching
//! hashes, so mutated inputs reach the chunk decoders instead of stopping at
//! the first hash check.

#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use unbound_records::RecordReader;

fuzz_target!(|data: &[u8]| {
    let Ok(reader) = RecordReader::from_bytes(Bytes::copy_from_slice(data), "fuzz") else {
        return;
    };
    let mut positions = Vec::new();
    for record in reader.records().take(1000) {
        match record {
            Ok((pos, _)) => positions.push(pos),
            Err(_) => break,
        }
    }
    let _ = reader.chunks().take(1000).count();
    let _ = reader.last_record();
    let len = reader.len();
    for pos in positions.iter().copied().take(50).chain([0, 64, 65, len / 2, len.saturating_sub(1), len]) {
        let _ = reader.read_record_at(pos);
        let _ = reader.record_len_at(pos);
        let _ = reader.copy_record_to(pos, &mut std::io::sink());
    }
});
