//! Our writer, our reader: round trips, positions, chunking rule,
//! zero-copy, mmap, store_incompressible.

mod common;

use bytes::Bytes;
use common::*;
use proptest::prelude::*;
use unbound_records::{
    ChunkType, Compression, CompressionType, RecordReader, RecordWriter, WriterOptions,
};

fn write(records: &[Vec<u8>], options: WriterOptions) -> (Vec<u8>, Vec<u64>) {
    let mut w = RecordWriter::new(Vec::new(), options).expect("writer");
    let positions = records
        .iter()
        .map(|r| w.write_record(r).expect("write"))
        .collect();
    (w.finish().expect("finish"), positions)
}

fn opts(compression: Compression, chunk_size: Option<u64>) -> WriterOptions {
    WriterOptions {
        compression,
        chunk_size,
        store_incompressible: false,
    }
}

#[test]
fn reader_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<RecordReader>();
    check::<unbound_records::RecordsError>();
}

#[test]
fn concurrent_readers_share_one_reader() {
    let records: Vec<Vec<u8>> = (0..8).map(|i| noise(i, 300_000)).collect();
    let (file, positions) = write(&records, WriterOptions::default());
    let r = RecordReader::from_bytes(Bytes::from(file), "mt").expect("open");
    std::thread::scope(|s| {
        for (p, rec) in positions.iter().zip(&records) {
            let r = &r;
            s.spawn(move || {
                let mut out = Vec::new();
                r.copy_record_to(*p, &mut out).expect("copy");
                assert!(out == *rec);
                assert!(r.read_record_at(*p).expect("read").1 == rec[..]);
            });
        }
    });
}

#[test]
fn empty_file() {
    let (file, _) = write(&[], WriterOptions::default());
    assert_eq!(file.len(), 64);
    let r = RecordReader::from_bytes(Bytes::from(file), "empty").expect("open");
    assert_eq!(r.records().count(), 0);
    assert_eq!(r.chunks().count(), 1);
}

#[test]
fn chunk_boundary_rule_matches_riegeli() {
    // chunk_size 100, records of 40 bytes count 48 each: two fit (96), then
    // 96 + 8 > 100 closes the chunk right after the second record.
    let records: Vec<Vec<u8>> = (0..5).map(|i| vec![i as u8; 40]).collect();
    let (file, positions) = write(&records, opts(Compression::None, Some(100)));
    let r = RecordReader::from_bytes(Bytes::from(file), "rule").expect("open");
    let chunks: Vec<_> = r
        .chunks()
        .map(|c| c.expect("chunk"))
        .filter(|c| c.num_records > 0)
        .collect();
    assert_eq!(
        chunks.iter().map(|c| c.num_records).collect::<Vec<_>>(),
        vec![2, 2, 1]
    );
    assert_eq!(positions[0], 64);
    assert_eq!(positions[1], 65);
    assert_eq!(positions[2], chunks[1].begin);
    assert_eq!(positions[4], chunks[2].begin);
    // A record of 93 bytes (101 counted) alone exceeds the chunk: it closes
    // the open chunk before it and its own chunk right after.
    let records = vec![vec![1u8; 10], vec![2u8; 93], vec![3u8; 10]];
    let (file, _) = write(&records, opts(Compression::None, Some(100)));
    let r = RecordReader::from_bytes(Bytes::from(file), "rule").expect("open");
    let counts: Vec<u64> = r
        .chunks()
        .map(|c| c.expect("chunk").num_records)
        .filter(|&n| n > 0)
        .collect();
    assert_eq!(counts, vec![1, 1, 1]);
}

#[test]
fn default_chunk_sizes() {
    assert_eq!(WriterOptions::default().effective_chunk_size(), 1 << 20);
    assert_eq!(opts(Compression::None, None).effective_chunk_size(), 4096);
    assert_eq!(
        WriterOptions::default().compression,
        Compression::Brotli { level: 6 }
    );
    // 100 records of 1000 bytes: 4 per 4 KiB chunk when uncompressed.
    let records: Vec<Vec<u8>> = (0..100).map(|i| text(i, 1000)).collect();
    let (file, _) = write(&records, opts(Compression::None, None));
    let r = RecordReader::from_bytes(Bytes::from(file), "d").expect("open");
    assert_eq!(
        r.chunks()
            .filter(|c| c.as_ref().expect("chunk").num_records > 0)
            .count(),
        25
    );
}

#[test]
fn huge_records_every_compression() {
    let records = vec![
        noise(1, 5 << 20),
        text(2, 3 << 20),
        Vec::new(),
        noise(3, 70_000),
    ];
    for c in [
        Compression::None,
        Compression::Brotli { level: 6 },
        Compression::Zstd { level: 3 },
        Compression::Snappy,
    ] {
        let (file, positions) = write(&records, opts(c, None));
        let bytes = Bytes::from(file);
        let r = RecordReader::from_bytes(bytes.clone(), "huge").expect("open");
        for (p, rec) in positions.iter().zip(&records) {
            let fresh = RecordReader::from_bytes(bytes.clone(), "huge").expect("open");
            let mut out = Vec::new();
            assert_eq!(
                fresh.copy_record_to(*p, &mut out).expect("copy"),
                rec.len() as u64
            );
            assert!(out == *rec, "{c:?} copy_record_to");
            assert_eq!(fresh.record_len_at(*p).expect("len"), rec.len() as u64);
            assert!(
                r.read_record_at(*p).expect("read").1 == rec[..],
                "{c:?} read_record_at"
            );
        }
        assert!(r.last_record().expect("last").1 == records[3][..]);
    }
}

#[test]
fn uncompressed_records_are_slices_of_the_file() {
    let records: Vec<Vec<u8>> = (0..50)
        .map(|i| text(i, 500))
        .chain([noise(9, 200_000)])
        .collect();
    let (file, positions) = write(&records, opts(Compression::None, Some(1 << 20)));
    let bytes = Bytes::from(file);
    let range = bytes.as_ptr() as usize..bytes.as_ptr() as usize + bytes.len();
    let r = RecordReader::from_bytes(bytes.clone(), "zc").expect("open");
    let mut inside = 0;
    for (p, rec) in positions.iter().zip(&records) {
        let (_, got) = r.read_record_at(*p).expect("read");
        assert!(got == rec[..]);
        if range.contains(&(got.as_ptr() as usize)) {
            inside += 1;
        }
    }
    // The small records that do not straddle a block header are zero-copy;
    // the 200 KB record spans blocks and is de-interleaved.
    assert!(
        inside >= 45,
        "{inside} of 51 records are slices of the file"
    );
    let (_, big) = r.read_record_at(positions[50]).expect("big");
    assert!(!range.contains(&(big.as_ptr() as usize)));
}

#[test]
fn released_chunk_pages_read_back_the_same() {
    // Two records of 1 MiB, one chunk each: releasing the first chunk's pages gives back
    // whole pages of the mapped file, and both records still read the same afterwards.
    let records: Vec<Vec<u8>> = (0..2).map(|i| noise(i, 1 << 20)).collect();
    let (file, positions) = write(&records, opts(Compression::None, Some(1)));
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("x.cpb");
    std::fs::write(&path, &file).expect("write");
    let r = RecordReader::open(&path).expect("open");
    let mut first = Vec::new();
    r.copy_record_to(positions[0], &mut first).expect("copy");
    let released = r.release_chunk_pages(positions[0]);
    assert!(
        released >= (1 << 20) - 2 * 4096,
        "released {released} bytes"
    );
    assert!(
        released <= file.len() / 2 + 4096,
        "released {released} bytes"
    );
    assert_eq!(
        r.read_record_at(positions[0]).expect("read").1,
        records[0][..]
    );
    assert_eq!(
        r.read_record_at(positions[1]).expect("read").1,
        records[1][..]
    );
    assert_eq!(first, records[0]);
    assert_eq!(
        r.release_chunk_pages(file.len() as u64 + 10),
        0,
        "past the end"
    );
    // In memory (not a file map), nothing is released.
    let memory = RecordReader::from_bytes(Bytes::from(file), "memory").expect("open");
    assert_eq!(memory.release_chunk_pages(positions[0]), 0);
}

#[test]
fn open_maps_a_file() {
    let records: Vec<Vec<u8>> = (0..20).map(|i| text(i, 3000)).collect();
    let (file, positions) = write(&records, WriterOptions::default());
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("x.cpb");
    std::fs::write(&path, &file).expect("write");
    let r = RecordReader::open(&path).expect("open");
    assert_eq!(r.name(), path.display().to_string());
    assert_eq!(r.len(), file.len() as u64);
    assert_eq!(
        r.read_record_at(positions[7]).expect("read").1,
        records[7][..]
    );
    let empty = dir.path().join("empty");
    std::fs::write(&empty, b"").expect("write");
    assert!(matches!(
        RecordReader::open(&empty),
        Err(unbound_records::RecordsError::NotRiegeli { .. })
    ));
    assert!(matches!(
        RecordReader::open(&dir.path().join("missing")),
        Err(unbound_records::RecordsError::Io { .. })
    ));
}

#[test]
fn store_incompressible_chooses_per_chunk() {
    let options = WriterOptions {
        compression: Compression::Brotli { level: 6 },
        chunk_size: Some(300_000),
        store_incompressible: true,
    };
    let records = vec![
        noise(1, 250_000),
        text(2, 250_000),
        noise(3, 1000),
        noise(4, 1000),
        text(5, 100_000),
    ];
    let (file, positions) = write(&records, options);
    let r = RecordReader::from_bytes(Bytes::from(file), "si").expect("open");
    let comps: Vec<Option<CompressionType>> = r
        .chunks()
        .map(|c| c.expect("chunk"))
        .filter(|c| c.chunk_type == ChunkType::Simple)
        .map(|c| c.compression)
        .collect();
    assert_eq!(comps[0], Some(CompressionType::None), "random data stored");
    assert_eq!(comps[1], Some(CompressionType::Brotli), "text compressed");
    for (p, rec) in positions.iter().zip(&records) {
        assert!(r.read_record_at(*p).expect("read").1 == rec[..]);
    }
}

#[test]
fn positions_between_records_and_after_end() {
    let records: Vec<Vec<u8>> = (0..10).map(|i| text(i, 30_000)).collect();
    let (file, positions) = write(&records, opts(Compression::Zstd { level: 3 }, Some(1)));
    let r = RecordReader::from_bytes(Bytes::from(file), "p").expect("open");
    for w in positions.windows(2) {
        for pos in [w[0] + 1, (w[0] + w[1]) / 2, w[1] - 1, w[1]] {
            assert_eq!(r.read_record_at(pos).expect("read").0, w[1], "pos {pos}");
        }
    }
    assert_eq!(r.read_record_at(0).expect("read").0, positions[0]);
    assert!(r.read_record_at(positions[9] + 1).is_err());
    assert!(r.read_record_at(u64::MAX).is_err());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, .. ProptestConfig::default() })]

    #[test]
    fn random_round_trip(
        sizes in prop::collection::vec(prop_oneof![8 => 0usize..2000, 1 => 60_000usize..140_000], 0..40),
        chunk_size in prop_oneof![Just(None), (1u64..300_000).prop_map(Some)],
        codec in 0u8..4,
        store_incompressible in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let compression = match codec {
            0 => Compression::None,
            1 => Compression::Brotli { level: 3 },
            2 => Compression::Zstd { level: 1 },
            _ => Compression::Snappy,
        };
        let records: Vec<Vec<u8>> = sizes
            .iter()
            .enumerate()
            .map(|(i, &n)| if i % 2 == 0 { noise(seed ^ i as u64, n) } else { text(seed ^ i as u64, n) })
            .collect();
        let (file, positions) = write(&records, WriterOptions { compression, chunk_size, store_incompressible });
        let r = RecordReader::from_bytes(Bytes::from(file.clone()), "prop").expect("open");
        let got: Vec<(u64, Bytes)> = r.records().collect::<Result<_, _>>().expect("records");
        prop_assert_eq!(got.len(), records.len());
        for ((gp, gr), (p, rec)) in got.iter().zip(positions.iter().zip(&records)) {
            prop_assert_eq!(gp, p);
            prop_assert!(gr[..] == rec[..]);
        }
        if let Some(last) = records.last() {
            prop_assert!(r.last_record().expect("last").1[..] == last[..]);
        }
        prop_assert_eq!(read_with_riegeli(&file).len(), records.len());
    }
}
