//! Bad input: non-Riegeli files, truncation at every length, flipped bytes
//! in block headers, chunk headers and chunk data, absurd sizes. Each must
//! produce the right error kind, naming the offset, and never panic.

mod common;

use bytes::Bytes;
use common::*;
use unbound_records::{
    Compression, HashedPart, RecordReader, RecordWriter, RecordsError, WriterOptions,
};

fn open(file: &[u8]) -> Result<RecordReader, RecordsError> {
    RecordReader::from_bytes(Bytes::copy_from_slice(file), "bad.cpb")
}

/// A file with several chunks, some crossing block boundaries.
fn sample_file(compression: Compression) -> (Vec<u8>, Vec<(u64, Vec<u8>)>) {
    let options = WriterOptions {
        compression,
        chunk_size: Some(50_000),
        store_incompressible: false,
    };
    let mut w = RecordWriter::new(Vec::new(), options).expect("writer");
    let mut records = Vec::new();
    for i in 0..30u64 {
        let r = if i % 3 == 0 {
            noise(i, 20_000)
        } else {
            text(i, 7_000)
        };
        let p = w.write_record(&r).expect("write");
        records.push((p, r));
    }
    (w.finish().expect("finish"), records)
}

/// Reads everything; returns the records or the first error.
fn read_all(r: &RecordReader) -> Result<Vec<(u64, Bytes)>, RecordsError> {
    r.records().collect()
}

#[test]
fn not_riegeli() {
    for junk in [
        &b""[..],
        b"hello world",
        &[0u8; 100][..],
        &noise(5, 1000)[..],
    ] {
        match open(junk) {
            Err(RecordsError::NotRiegeli { file, .. }) => assert_eq!(file, "bad.cpb"),
            other => panic!("expected NotRiegeli, got {other:?}"),
        }
    }
    let err =
        open(b"hello world, this is a text file and not a riegeli file at all...").unwrap_err();
    assert_eq!(
        err.to_string(),
        "bad.cpb: not a Riegeli file: bad signature"
    );
    // A prefix of the signature is a truncated Riegeli file.
    let sig = signature();
    assert!(matches!(
        open(&sig[..30]),
        Err(RecordsError::Truncated { .. })
    ));
    // The signature alone is a valid empty file.
    let empty = open(&sig).expect("signature only");
    assert_eq!(read_all(&empty).expect("no records").len(), 0);
    assert!(matches!(
        empty.last_record(),
        Err(RecordsError::NoRecords { .. })
    ));
    assert!(matches!(
        empty.read_record_at(0),
        Err(RecordsError::PastEnd { pos: 0, .. })
    ));
    assert!(matches!(
        empty.read_record_at(1 << 40),
        Err(RecordsError::PastEnd { .. })
    ));
}

#[test]
fn truncated_at_every_length() {
    for compression in [Compression::None, Compression::Brotli { level: 6 }] {
        let (file, records) = sample_file(compression);
        let full = open(&file).expect("open");
        let boundaries: Vec<u64> = full.chunks().map(|c| c.expect("chunk").end).collect();
        let mut cuts: Vec<usize> = (64..400).collect();
        cuts.extend((400..file.len()).step_by(997));
        for b in &boundaries {
            for d in [0i64, -1, 1, -25, 24, 25] {
                cuts.push((*b as i64 + d).clamp(64, file.len() as i64) as usize);
            }
        }
        for k in 1..=(file.len() / 65_536) {
            for d in 0..30 {
                cuts.push((k * 65_536 + d).min(file.len()));
            }
        }
        for cut in cuts {
            let r = open(&file[..cut]).expect("signature intact");
            let result = read_all(&r);
            if boundaries.contains(&(cut as u64)) {
                let got = result.expect("a cut at a chunk boundary is a valid shorter file");
                for ((gp, gr), (ep, er)) in got.iter().zip(&records) {
                    assert_eq!((gp, &gr[..]), (ep, &er[..]));
                }
            } else {
                match result {
                    Err(RecordsError::Truncated { offset, .. }) => assert!(offset < cut as u64),
                    other => panic!(
                        "cut {cut}: expected Truncated, got {:?}",
                        other.map(|v| v.len())
                    ),
                }
                assert!(
                    r.last_record().is_err(),
                    "cut {cut}: last_record on a truncated file"
                );
            }
            // Random access never panics.
            for (p, _) in records.iter().step_by(5) {
                let _ = r.read_record_at(*p);
                let _ = r.record_len_at(*p);
                let _ = r.copy_record_to(*p, &mut std::io::sink());
            }
        }
    }
}

#[test]
fn flipped_byte_in_block_header() {
    let (file, records) = sample_file(Compression::None);
    for k in 0..24 {
        let mut bad = file.clone();
        bad[65_536 + k] ^= 0x40;
        let r = open(&bad).expect("open");
        match read_all(&r) {
            Err(RecordsError::HashMismatch {
                part: HashedPart::BlockHeader,
                offset: 65_536,
                ..
            }) => {}
            other => panic!(
                "byte {k}: expected block header hash mismatch, got {:?}",
                other.map(|v| v.len())
            ),
        }
        let err = read_all(&r).unwrap_err();
        assert_eq!(
            err.to_string(),
            "bad.cpb: header hash mismatch in block header at offset 65536"
        );
        // Seeking into the damaged block reports the same.
        let in_block = records
            .iter()
            .find(|(p, _)| *p > 65_536 && *p < 131_072)
            .map(|(p, _)| *p);
        if let Some(p) = in_block {
            assert!(matches!(
                r.read_record_at(p),
                Err(RecordsError::HashMismatch {
                    part: HashedPart::BlockHeader,
                    offset: 65_536,
                    ..
                })
            ));
        }
    }
}

#[test]
fn flipped_byte_in_chunk_header() {
    let (file, _) = sample_file(Compression::Brotli { level: 6 });
    for k in 0..40 {
        let mut bad = file.clone();
        bad[64 + k] ^= 0x01;
        let r = open(&bad).expect("open");
        match read_all(&r) {
            Err(RecordsError::HashMismatch {
                part: HashedPart::ChunkHeader,
                offset: 64,
                ..
            }) => {}
            other => panic!(
                "byte {k}: expected chunk header hash mismatch, got {:?}",
                other.map(|v| v.len())
            ),
        }
        assert!(matches!(
            r.read_record_at(64),
            Err(RecordsError::HashMismatch {
                part: HashedPart::ChunkHeader,
                offset: 64,
                ..
            })
        ));
        assert!(r.chunks().any(|c| c.is_err()));
    }
}

#[test]
fn flipped_byte_in_chunk_data() {
    for compression in [
        Compression::None,
        Compression::Brotli { level: 6 },
        Compression::Zstd { level: 3 },
    ] {
        let (file, _) = sample_file(compression);
        let first = open(&file)
            .expect("open")
            .chunks()
            .nth(1)
            .expect("chunk")
            .expect("ok");
        for k in [0usize, 1, 5, 100, 1000, 30_000]
            .into_iter()
            .filter(|&k| (k as u64) < first.data_size)
        {
            let mut bad = file.clone();
            bad[104 + k] ^= 0x80;
            let r = open(&bad).expect("open");
            let err = r.read_record_at(64).unwrap_err();
            assert!(
                matches!(
                    err,
                    RecordsError::HashMismatch {
                        part: HashedPart::ChunkData,
                        offset: 64,
                        ..
                    }
                ),
                "{compression:?} byte {k}: {err:?}"
            );
            assert_eq!(
                err.to_string(),
                "bad.cpb: chunk data hash mismatch for chunk at offset 64"
            );
            assert!(r.copy_record_to(64, &mut std::io::sink()).is_err());
            assert!(r.record_len_at(64).is_err());
        }
    }
}

#[test]
fn huge_claimed_sizes() {
    // data_size of 4 TB.
    let data = simple_uncompressed(&[3], b"abc");
    let f = file_with_chunk(&data, b'r', 1, 3, Some(4_000_000_000_000));
    let r = open(&f).expect("open");
    let err = r.read_record_at(64).unwrap_err();
    assert!(
        matches!(err, RecordsError::Truncated { offset: 64, .. }),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        format!(
            "bad.cpb: truncated: chunk at 64 claims 4000000000000 bytes but file has {}",
            f.len()
        )
    );
    // num_records near the 7-byte maximum.
    let f = file_with_chunk(&data, b'r', (1 << 56) - 1, 3, None);
    assert!(matches!(
        open(&f).expect("open").read_record_at(64),
        Err(RecordsError::Truncated { .. })
    ));
    // decoded_data_size and a record size of 2^60, uncompressed.
    let data = simple_uncompressed(&[1 << 60], b"abc");
    let f = file_with_chunk(&data, b'r', 1, 1 << 60, None);
    assert!(matches!(
        open(&f).expect("open").read_record_at(64),
        Err(RecordsError::Corrupt { offset: 64, .. })
    ));
    // More records than the sizes buffer can describe.
    let data = simple_uncompressed(&[1, 1], b"ab");
    let f = file_with_chunk(&data, b'r', 1000, 2, None);
    assert!(matches!(
        open(&f).expect("open").read_record_at(64),
        Err(RecordsError::Corrupt { .. })
    ));
    // Compressed buffers declaring terabytes.
    for ct in [b'b', b'z', b's'] {
        let mut d = vec![ct];
        let mut sizes = Vec::new();
        varint(1, &mut sizes); // decompressed size of the sizes buffer
        sizes.extend_from_slice(&[0x0b, 0x00, 0x80, 0x00, 0x03]); // junk
        varint(sizes.len() as u64, &mut d);
        d.extend_from_slice(&sizes);
        varint(1 << 42, &mut d);
        d.extend_from_slice(&noise(1, 50));
        let f = file_with_chunk(&d, b'r', 1, 1 << 42, None);
        let r = open(&f).expect("open");
        // Refused by the decode limits before decompressing anything.
        assert!(matches!(
            r.read_record_at(64),
            Err(RecordsError::DecodeLimit { offset: 64, .. })
        ));
        assert!(r.copy_record_to(64, &mut std::io::sink()).is_err());
        assert!(matches!(
            r.check_chunk(64),
            Err(RecordsError::Decompression { .. } | RecordsError::Corrupt { .. })
        ));
    }
    // A transposed chunk claiming a giant state machine and buffers.
    let mut t = vec![0u8];
    let mut header = Vec::new();
    varint(1, &mut header); // buckets
    varint(u32::MAX as u64, &mut header); // buffers
    let mut d = Vec::new();
    varint(header.len() as u64, &mut d);
    t.extend_from_slice(&d);
    t.extend_from_slice(&header);
    let f = file_with_chunk(&t, b't', 1, 1 << 40, None);
    assert!(matches!(
        open(&f).expect("open").read_record_at(64),
        Err(RecordsError::DecodeLimit { .. })
    ));
    // Without limits, the decoder itself refuses it.
    let mut r = open(&f).expect("open");
    r.set_decode_limits(unbound_records::DecodeLimits::unlimited());
    assert!(matches!(
        r.read_record_at(64),
        Err(RecordsError::Corrupt { .. })
    ));
    // An unknown chunk type holding records; one without records is skipped.
    let f = file_with_chunk(b"zz", b'Q', 1, 0, None);
    assert!(matches!(
        open(&f).expect("open").read_record_at(64),
        Err(RecordsError::Unsupported { .. })
    ));
    let f = file_with_chunk(b"zz", b'Q', 0, 0, None);
    assert!(matches!(
        open(&f).expect("open").read_record_at(64),
        Err(RecordsError::PastEnd { .. })
    ));
    // An unknown compression type.
    let mut data = simple_uncompressed(&[3], b"abc");
    data[0] = b'x';
    let f = file_with_chunk(&data, b'r', 1, 3, None);
    assert!(matches!(
        open(&f).expect("open").read_record_at(64),
        Err(RecordsError::Unsupported { .. })
    ));
}

#[test]
fn hand_built_chunk_reads() {
    // Sanity check of the hand-made chunk helpers used above.
    let data = simple_uncompressed(&[3, 0, 2], b"abcde");
    let f = file_with_chunk(&data, b'r', 3, 5, None);
    let r = open(&f).expect("open");
    let got: Vec<(u64, Bytes)> = read_all(&r).expect("read");
    assert_eq!(
        got,
        vec![
            (64, Bytes::from_static(b"abc")),
            (65, Bytes::new()),
            (66, Bytes::from_static(b"de"))
        ]
    );
}

/// A chunk of one record decoded whole to hand its record out (`read_record_at`) is
/// remembered as decompressed whole, as one streamed whole is, so that `check_chunk` need not
/// decompress it again; a chunk only located is not, and one whose decoding failed is not.
#[test]
fn a_chunk_decoded_whole_is_remembered_as_decompressed() {
    let options = WriterOptions {
        compression: Compression::Zstd { level: 1 },
        chunk_size: Some(1),
        store_incompressible: false,
    };
    let mut w = RecordWriter::new(Vec::new(), options).expect("writer");
    let first = w.write_record(&text(1, 40_000)).expect("write");
    let second = w.write_record(&text(2, 40_000)).expect("write");
    let file = w.finish().expect("finish");
    let r = open(&file).unwrap();
    assert!(!r.decompressed_whole(first) && !r.decompressed_whole(second));
    r.read_record_at(first).unwrap();
    assert!(r.decompressed_whole(first));
    assert!(!r.decompressed_whole(second));
    assert_eq!(r.check_chunk(first).unwrap(), vec![40_000]);

    // The second chunk's compressed data broken past its header: its decode fails, so it is
    // not remembered, and its check decompresses it and fails too.
    let mut bad = file.clone();
    let at = bad.len() - 100;
    bad[at] ^= 0xff;
    let r = open(&bad).unwrap();
    assert!(r.read_record_at(second).is_err());
    assert!(!r.decompressed_whole(second));
    assert!(r.check_chunk(second).is_err());
}
