//! Property tests: randomly mutated valid files never make the reader
//! panic. Two kinds of mutation: raw byte damage (caught mostly by hashes),
//! and damage to chunk data or headers followed by recomputing the hashes,
//! so the chunk decoders themselves (simple, transposed, every compression)
//! see hostile input.

mod common;

use std::sync::OnceLock;

use bytes::Bytes;
use common::*;
use proptest::prelude::*;
use unbound_records::{Compression, RecordReader, RecordWriter, WriterOptions};

/// Small valid files (under 64 KiB, so every chunk lies inside block 0 and
/// can be rehashed simply) plus one larger file crossing blocks.
fn base_files() -> &'static Vec<Vec<u8>> {
    static FILES: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    FILES.get_or_init(|| {
        let mut files = Vec::new();
        let records: Vec<Vec<u8>> = (0..40)
            .map(|i| {
                if i % 5 == 0 {
                    noise(i, 300)
                } else {
                    text(i, (i as usize * 13) % 200)
                }
            })
            .collect();
        for c in [
            Compression::None,
            Compression::Brotli { level: 6 },
            Compression::Zstd { level: 3 },
            Compression::Snappy,
        ] {
            let mut w = RecordWriter::new(
                Vec::new(),
                WriterOptions {
                    compression: c,
                    chunk_size: Some(2000),
                    store_incompressible: false,
                },
            )
            .expect("writer");
            for r in &records {
                w.write_record(r).expect("write");
            }
            files.push(w.finish().expect("finish"));
        }
        let protos: Vec<Vec<u8>> = (0..60).map(proto_record).collect();
        for c in ["none", "brotli", "zstd", "snappy"] {
            files.push(write_with_riegeli(&protos, c, 3000, true));
        }
        let big: Vec<Vec<u8>> = (0..6).map(|i| noise(i, 40_000)).collect();
        files.push(write_with_riegeli(&big, "brotli", 100_000, false));
        files
    })
}

/// Every read entry point; results are ignored, panics are not.
fn exercise(file: Vec<u8>) {
    let Ok(r) = RecordReader::from_bytes(Bytes::from(file), "mutated") else {
        return;
    };
    let positions: Vec<u64> = r
        .records()
        .take(200)
        .filter_map(|x| x.ok().map(|(p, _)| p))
        .collect();
    let _ = r.chunks().take(200).count();
    let _ = r.last_record();
    let len = r.len();
    for pos in positions.iter().copied().chain([
        0,
        1,
        63,
        64,
        65,
        100,
        len / 2,
        len.saturating_sub(1),
        len,
        len + 5,
    ]) {
        let _ = r.read_record_at(pos);
        let _ = r.record_len_at(pos);
        let _ = r.copy_record_to(pos, &mut std::io::sink());
    }
}

/// Chunk (begin, data_size) list of an unmutated file whose chunks all lie
/// in block 0.
fn chunks_in_block0(file: &[u8]) -> Vec<(usize, usize)> {
    let r = RecordReader::from_bytes(Bytes::copy_from_slice(file), "base").expect("base file");
    r.chunks()
        .map(|c| c.expect("chunk"))
        .filter(|c| c.end <= 65_536 && c.begin > 0)
        .map(|c| (c.begin as usize, c.data_size as usize))
        .collect()
}

/// Recomputes the data hash and header hash of the chunk at `begin`.
fn rehash(file: &mut [u8], begin: usize, data_size: usize) {
    let data_end = (begin + 40 + data_size).min(file.len());
    let h = hh(&file[begin + 40..data_end]);
    file[begin + 16..begin + 24].copy_from_slice(&h.to_le_bytes());
    let h = hh(&file[begin + 8..begin + 40]);
    file[begin..begin + 8].copy_from_slice(&h.to_le_bytes());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1500, .. ProptestConfig::default() })]

    #[test]
    fn raw_mutations_never_panic(
        which in 0usize..9,
        edits in prop::collection::vec((any::<u32>(), any::<u8>(), 0u8..4), 1..8),
    ) {
        let mut file = base_files()[which].clone();
        for (at, value, kind) in edits {
            let at = at as usize % file.len().max(1);
            match kind {
                0 => file[at] ^= value | 1,
                1 => file[at] = value,
                2 => file.truncate(at.max(64)),
                _ => file.insert(at, value),
            }
            if file.is_empty() { break; }
        }
        exercise(file);
    }

    #[test]
    fn rehashed_chunk_mutations_never_panic(
        which in 0usize..8,
        chunk_pick in any::<u32>(),
        edits in prop::collection::vec((any::<u32>(), any::<u8>(), 0u8..3), 1..6),
    ) {
        let base = &base_files()[which];
        let chunks = chunks_in_block0(base);
        prop_assume!(!chunks.is_empty());
        let (begin, data_size) = chunks[chunk_pick as usize % chunks.len()];
        let mut file = base.clone();
        for (at, value, kind) in edits {
            match kind {
                // Damage the chunk data.
                0 | 1 if data_size > 0 => {
                    let at = begin + 40 + at as usize % data_size;
                    if kind == 0 { file[at] ^= value | 1 } else { file[at] = value }
                }
                // Damage num_records / decoded_data_size / chunk type.
                _ => {
                    let at = begin + 24 + at as usize % 16;
                    file[at] ^= value | 1;
                }
            }
        }
        rehash(&mut file, begin, data_size);
        exercise(file);
    }
}

/// Writes the base files as a seed corpus for the fuzz target:
/// `FUZZ_SEED_DIR=fuzz/corpus/records_reader cargo test -p unbound-records
/// --test mutation_props -- --ignored write_fuzz_seeds`.
#[test]
#[ignore]
fn write_fuzz_seeds() {
    let dir = std::env::var("FUZZ_SEED_DIR").expect("FUZZ_SEED_DIR");
    std::fs::create_dir_all(&dir).expect("mkdir");
    for (i, f) in base_files().iter().enumerate() {
        if f.len() < 70_000 {
            std::fs::write(format!("{dir}/seed{i}"), f).expect("write seed");
        }
    }
}
