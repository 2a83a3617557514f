//! Arbitrary bytes as a Riegeli/records file: opening, iterating records and
//! chunks, the last record, random access by position, ranges of records and
//! the chunk check must never panic.
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
        // Ranges inside, at the end of and past the record, from bytes of the input.
        let offset = u64::from(data.get(pos as usize % data.len().max(1)).copied().unwrap_or(0));
        for len in [0, 1, 100, 70_000, u64::MAX - offset] {
            let _ = reader.copy_record_range_to(pos, offset, len, &mut std::io::sink());
        }
        // Then the chunk's check, which takes a whole stream above as done.
        let _ = reader.check_chunk(pos);
    }
});
