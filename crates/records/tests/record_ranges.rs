//! `copy_record_range_to` writes exactly the bytes `read_record_at` returns for the same range,
//! for every compression, for ranges inside one 64 KiB block and across block headers, for a
//! chunk holding one record and a chunk holding several; a range past the record's end is an
//! error naming the file, never a short copy.

mod common;

use common::noise;
use unbound_records::{Compression, RecordReader, RecordWriter, WriterOptions};

/// Writes `records` and returns the file with each record's position.
fn file(compression: Compression, records: &[Vec<u8>], one_per_chunk: bool) -> (Vec<u8>, Vec<u64>) {
    // A chunk size smaller than any record closes the chunk after each one.
    let options = WriterOptions {
        compression,
        chunk_size: Some(if one_per_chunk { 1 } else { 16 << 20 }),
        ..WriterOptions::default()
    };
    let mut w = RecordWriter::new(Vec::new(), options).unwrap();
    let mut positions = Vec::new();
    for r in records {
        positions.push(w.write_record(r).unwrap());
    }
    (w.finish().unwrap(), positions)
}

#[test]
fn a_range_is_the_bytes_of_that_range() {
    // 400 KB crosses six block headers; the text compresses, the noise does not.
    let records = vec![
        noise(3, 400_000),
        b"tensor ".repeat(60_000),
        b"small".to_vec(),
    ];
    let ranges = |len: usize| {
        vec![
            (0, len),
            (0, 0),
            (1, 10),
            (len / 3, len / 3),
            (65_000, 2_000), // across the first block header (for the first record)
            (len.saturating_sub(7), 7),
            (len, 0),
        ]
    };
    for compression in [
        Compression::None,
        Compression::Brotli { level: 1 },
        Compression::Zstd { level: 3 },
        Compression::Snappy,
    ] {
        for one_per_chunk in [true, false] {
            let (bytes, positions) = file(compression, &records, one_per_chunk);
            let reader = RecordReader::from_bytes(bytes.into(), "ranges.cpb").unwrap();
            for (record, &pos) in records.iter().zip(&positions) {
                for (offset, len) in ranges(record.len()) {
                    if offset + len > record.len() {
                        continue;
                    }
                    let mut out = Vec::new();
                    let n = reader
                        .copy_record_range_to(pos, offset as u64, len as u64, &mut out)
                        .unwrap();
                    assert_eq!(n, len as u64, "{compression:?} at {pos}: {offset}+{len}");
                    assert!(
                        out == record[offset..offset + len],
                        "{compression:?}, one per chunk {one_per_chunk}, record at {pos}: \
                         bytes {offset}..{} differ",
                        offset + len
                    );
                }
            }
        }
    }
}

#[test]
fn a_range_past_the_record_is_refused() {
    let records = vec![noise(5, 200_000), b"x".repeat(10)];
    for compression in [Compression::None, Compression::Zstd { level: 3 }] {
        let (bytes, positions) = file(compression, &records, true);
        let reader = RecordReader::from_bytes(bytes.into(), "short.cpb").unwrap();
        for (offset, len) in [(199_999, 2), (200_001, 0), (0, 200_001), (u64::MAX, 1)] {
            let mut out = Vec::new();
            let err = reader
                .copy_record_range_to(positions[0], offset, len, &mut out)
                .expect_err("a range past the end was copied");
            assert!(err.to_string().contains("short.cpb"), "{err}");
            assert!(
                out.is_empty(),
                "{compression:?}: {} bytes copied",
                out.len()
            );
        }
    }
}
