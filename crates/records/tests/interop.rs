//! Interop with the independent `riegeli` crate, both ways: files it writes
//! (every compression, many records per chunk, one record per chunk, records
//! crossing block boundaries, records larger than a block, transposed
//! chunks, metadata chunks) read back here with the same positions, and
//! files written here read back there with the positions `write_record`
//! returned.

mod common;

use bytes::Bytes;
use common::*;
use unbound_records::{
    encode_own_chunk, Compression, RecordReader, RecordWriter, RecordsError, WriterOptions,
};

const COMPRESSIONS: [&str; 4] = ["none", "brotli", "zstd", "snappy"];

/// Record sets with different chunk layouts: (label, records, chunk size).
fn layouts(seed: u64) -> Vec<(&'static str, Vec<Vec<u8>>, u64)> {
    let small: Vec<Vec<u8>> = (0..2000)
        .map(|i| text(seed + i, (i as usize * 37) % 300))
        .collect();
    let single: Vec<Vec<u8>> = (0..50)
        .map(|i| noise(seed + i, 1 + (i as usize * 61) % 3000))
        .collect();
    let crossing: Vec<Vec<u8>> = (0..40)
        .map(|i| {
            if i % 2 == 0 {
                noise(seed + i, 30_000 + i as usize * 1700)
            } else {
                text(seed + i, 50_000)
            }
        })
        .collect();
    let huge: Vec<Vec<u8>> = (0..5)
        .map(|i| noise(seed + i, 200_000 + i as usize * 250_000))
        .collect();
    let with_empty: Vec<Vec<u8>> = (0..300)
        .map(|i| {
            if i % 4 == 0 {
                Vec::new()
            } else {
                text(seed + i, i as usize % 90)
            }
        })
        .collect();
    vec![
        ("many per chunk", small, 64 << 10),
        ("one per chunk", single, 1),
        ("crossing blocks", crossing, 1 << 20),
        ("larger than a block", huge, 1 << 20),
        ("empty records", with_empty, 4096),
    ]
}

/// Checks every read path of our reader against the expected records and
/// positions.
fn check(file: Vec<u8>, expected: &[(u64, Vec<u8>)], label: &str) {
    let bytes = Bytes::from(file);
    let reader = RecordReader::from_bytes(bytes.clone(), label).expect("open");
    let got: Vec<(u64, Bytes)> = reader.records().collect::<Result<_, _>>().expect("records");
    assert_eq!(got.len(), expected.len(), "{label}: record count");
    for ((gp, gr), (ep, er)) in got.iter().zip(expected) {
        assert_eq!(gp, ep, "{label}: position");
        assert_eq!(&gr[..], &er[..], "{label}: record at {ep}");
    }
    let total: u64 = reader.chunks().map(|c| c.expect("chunk").num_records).sum();
    assert_eq!(total, expected.len() as u64, "{label}: chunk record counts");

    // Random access on fresh readers (no cache), by exact and in-between
    // positions.
    let fresh = || RecordReader::from_bytes(bytes.clone(), label).expect("open");
    let step = (expected.len() / 60).max(1);
    for (k, (pos, rec)) in expected.iter().enumerate().step_by(step) {
        let r = fresh();
        let (p, got) = r.read_record_at(*pos).expect("read_record_at");
        assert_eq!(
            (p, &got[..]),
            (*pos, &rec[..]),
            "{label}: read_record_at({pos})"
        );
        assert_eq!(
            fresh().record_len_at(*pos).expect("record_len_at"),
            rec.len() as u64,
            "{label}"
        );
        let mut out = Vec::new();
        let n = fresh()
            .copy_record_to(*pos, &mut out)
            .expect("copy_record_to");
        assert_eq!(
            (n, &out[..]),
            (rec.len() as u64, &rec[..]),
            "{label}: copy_record_to({pos})"
        );
        if k > 0 {
            // A position just after the previous record finds this record.
            let prev = expected[k - 1].0;
            if prev < *pos {
                let (p, _) = fresh().read_record_at(prev + 1).expect("between");
                assert_eq!(
                    p,
                    *pos,
                    "{label}: read_record_at({}) after {prev}",
                    prev + 1
                );
            }
        }
    }
    // Sequential access through one reader uses the chunk cache.
    for (pos, rec) in expected.iter().take(200) {
        assert_eq!(
            &reader.read_record_at(*pos).expect("cached").1[..],
            &rec[..]
        );
    }
    let (lp, lr) = fresh().last_record().expect("last_record");
    let (ep, er) = expected.last().expect("non-empty");
    assert_eq!((lp, &lr[..]), (*ep, &er[..]), "{label}: last_record");
    assert_eq!(fresh().read_record_at(0).expect("first").0, expected[0].0);
    match fresh().read_record_at(ep + 1) {
        Err(RecordsError::PastEnd { .. }) => {}
        other => panic!("{label}: expected PastEnd after the last record, got {other:?}"),
    }
}

#[test]
fn reads_simple_chunks_written_by_riegeli_crate() {
    for compression in COMPRESSIONS {
        for (label, records, chunk_size) in layouts(1) {
            let file = write_with_riegeli(&records, compression, chunk_size, false);
            let expected = read_with_riegeli(&file);
            assert_eq!(expected.len(), records.len());
            check(
                file,
                &expected,
                &format!("riegeli-written {compression} {label}"),
            );
        }
    }
}

#[test]
fn reads_transposed_chunks_written_by_riegeli_crate() {
    // Proto records (every node kind) mixed with non-proto records.
    let mut records: Vec<Vec<u8>> = (0..600).map(proto_record).collect();
    for i in (0..records.len()).step_by(17) {
        records[i] = noise(i as u64, 40 + i % 100);
    }
    records.push(Vec::new());
    records.push(noise(99, 120_000)); // a big non-proto record crossing blocks
    for compression in COMPRESSIONS {
        for chunk_size in [16 << 10, 1 << 20] {
            let file = write_with_riegeli(&records, compression, chunk_size, true);
            let reader = RecordReader::from_bytes(Bytes::from(file.clone()), "t").expect("open");
            assert!(
                reader.chunks().any(|c| c.expect("chunk").chunk_type == unbound_records::ChunkType::Transposed),
                "the riegeli crate wrote transposed chunks"
            );
            let expected = read_with_riegeli(&file);
            let plain: Vec<&Vec<u8>> = expected.iter().map(|(_, r)| r).collect();
            assert_eq!(plain, records.iter().collect::<Vec<_>>());
            check(
                file,
                &expected,
                &format!("transposed {compression} chunk {chunk_size}"),
            );
        }
    }
}

#[test]
fn skips_metadata_chunk() {
    let records: Vec<Vec<u8>> = (0..10).map(|i| text(i, 100)).collect();
    let mut buf = Vec::new();
    let opts = riegeli::WriterOptions::new()
        .compression(riegeli::CompressionType::Brotli)
        .set_serialized_metadata(b"\x0a\x04Test".to_vec());
    let mut w = riegeli::RecordWriter::new(std::io::Cursor::new(&mut buf), opts).expect("writer");
    for r in &records {
        w.write_record(r).expect("write");
    }
    w.close().expect("close");
    let reader = RecordReader::from_bytes(Bytes::from(buf.clone()), "m").expect("open");
    let types: Vec<_> = reader
        .chunks()
        .map(|c| c.expect("chunk").chunk_type)
        .collect();
    assert!(types.contains(&unbound_records::ChunkType::FileMetadata));
    check(buf.clone(), &read_with_riegeli(&buf), "metadata");
}

fn our_compression(name: &str) -> Compression {
    match name {
        "none" => Compression::None,
        "brotli" => Compression::Brotli { level: 6 },
        "zstd" => Compression::Zstd { level: 3 },
        "snappy" => Compression::Snappy,
        other => panic!("{other}"),
    }
}

#[test]
fn riegeli_crate_reads_our_files() {
    for compression in COMPRESSIONS {
        for (label, records, chunk_size) in layouts(2) {
            for store_incompressible in [false, true] {
                let options = WriterOptions {
                    compression: our_compression(compression),
                    chunk_size: Some(chunk_size),
                    store_incompressible,
                };
                let mut w = RecordWriter::new(Vec::new(), options).expect("writer");
                let positions: Vec<u64> = records
                    .iter()
                    .map(|r| w.write_record(r).expect("write"))
                    .collect();
                let file = w.finish().expect("finish");
                let theirs = read_with_riegeli(&file);
                let label = format!(
                    "ours {compression} {label} store_incompressible={store_incompressible}"
                );
                assert_eq!(theirs.len(), records.len(), "{label}");
                for ((tp, tr), (p, r)) in theirs.iter().zip(positions.iter().zip(&records)) {
                    assert_eq!(tp, p, "{label}: position");
                    assert_eq!(tr, r, "{label}: record");
                }
                let expected: Vec<(u64, Vec<u8>)> =
                    positions.into_iter().zip(records.iter().cloned()).collect();
                check(file, &expected, &label);
            }
        }
    }
}

/// Records encoded ahead as chunks of their own (`encode_own_chunk`, as a split compresses its
/// chunks on worker threads), from one piece (compressed in one call) and from several
/// (streamed), read back by the riegeli crate and by our reader as the records they are.
#[test]
fn riegeli_crate_reads_records_encoded_ahead() {
    let text = b"node { name: \"a\" op: \"Const\" } ".repeat(60_000);
    let noise: Vec<u8> = (0..1_500_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    for compression in COMPRESSIONS {
        for record in [&text, &noise] {
            let options = WriterOptions {
                compression: our_compression(compression),
                ..WriterOptions::default()
            };
            assert!(options.takes_own_chunk(record.len() as u64));
            let (a, b) = record.split_at(record.len() / 3);
            let mut w = RecordWriter::new(Vec::new(), options).expect("writer");
            let mut positions = Vec::new();
            for parts in [vec![record.as_slice()], vec![a, &b[..10], &b[10..]]] {
                positions.push(
                    match encode_own_chunk(&options, &parts, "test").expect("encode") {
                        Some(encoded) => w.write_encoded(encoded).expect("write"),
                        None => w.write_record_parts(&parts).expect("write"),
                    },
                );
            }
            let file = w.finish().expect("finish");
            let expected: Vec<(u64, Vec<u8>)> =
                positions.into_iter().map(|p| (p, record.clone())).collect();
            assert_eq!(read_with_riegeli(&file), expected, "{compression}");
            check(file, &expected, compression);
        }
    }
}

#[test]
fn uncompressed_files_are_byte_identical_to_riegeli_crate() {
    // With no compression the encoding is deterministic, so both writers
    // must produce the same bytes (same chunk boundaries, padding, block
    // headers).
    for (label, records, chunk_size) in layouts(3) {
        let theirs = write_with_riegeli(&records, "none", chunk_size, false);
        let options = WriterOptions {
            compression: Compression::None,
            chunk_size: Some(chunk_size),
            store_incompressible: false,
        };
        let mut w = RecordWriter::new(Vec::new(), options).expect("writer");
        for r in &records {
            w.write_record(r).expect("write");
        }
        let ours = w.finish().expect("finish");
        assert!(
            ours == theirs,
            "{label}: files differ ({} vs {} bytes)",
            ours.len(),
            theirs.len()
        );
    }
}

#[test]
fn reads_c_brotli_chunks_as_tensorflow_writes_them() {
    // One chunk per big record (random: uncompressed meta-blocks; text and
    // float weights: compressed meta-blocks), then a chunk of small records.
    let big = vec![noise(1, 3 << 20), text(2, 1 << 20), {
        let mut f = Vec::new();
        for i in 0..250_000u32 {
            f.extend_from_slice(&(((i as f32) * 0.37).sin() * 0.05).to_le_bytes());
        }
        f
    }];
    let small: Vec<Vec<u8>> = (0..100).map(|i| text(i, 200)).collect();
    let mut file = signature();
    let mut expected = Vec::new();
    for r in &big {
        let begin = file.len() as u64;
        append_chunk(
            &mut file,
            &simple_c_brotli(std::slice::from_ref(r)),
            b'r',
            1,
            r.len() as u64,
        );
        expected.push((begin, r.clone()));
    }
    let begin = file.len() as u64;
    let total: u64 = small.iter().map(|r| r.len() as u64).sum();
    append_chunk(
        &mut file,
        &simple_c_brotli(&small),
        b'r',
        small.len() as u64,
        total,
    );
    for (i, r) in small.iter().enumerate() {
        expected.push((begin + i as u64, r.clone()));
    }
    // The hand-made layout agrees with the riegeli crate...
    assert_eq!(read_with_riegeli(&file), expected);
    // ...and with every read path here.
    check(file, &expected, "C brotli");
}
