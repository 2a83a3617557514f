//! Reading one 128 MiB incompressible record (float tensor bytes), the case
//! the SavedModel merger hits 12 times per large model.
//!
//! Each iteration uses a fresh reader over the same memory-mapped file, so
//! the chunk data hash is verified every time (the reader remembers verified
//! chunks). Throughput is in decompressed bytes.

#![allow(missing_docs)] // criterion_group! generates an undocumented function

use std::hint::black_box;
use std::io::Write;

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use unbound_records::{Compression, RecordReader, RecordWriter, WriterOptions};

const RECORD: usize = 128 << 20;

/// xorshift64 step.
fn next(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

/// Incompressible bytes: Brotli quality 6 stores them as uncompressed
/// meta-blocks (what the merger sees for random-looking tensor data).
fn random_bytes(n: usize) -> Vec<u8> {
    let mut x = 0x853c_49e6_748f_ea9bu64;
    (0..n).map(|_| next(&mut x) as u8).collect()
}

/// Normally distributed float32 weights (std 0.05), like trained layers:
/// their exponent bytes are skewed, so Brotli quality 6 does compress them
/// (to about 92.5%) with ordinary meta-blocks.
fn normal_f32(n: usize) -> Vec<u8> {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut out = Vec::with_capacity(n + 4);
    while out.len() < n {
        let u1 = (next(&mut x) >> 11) as f64 / (1u64 << 53) as f64 + 1e-12;
        let u2 = (next(&mut x) >> 11) as f64 / (1u64 << 53) as f64;
        let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
        out.extend_from_slice(&((z * 0.05) as f32).to_le_bytes());
    }
    out.truncate(n);
    out
}

/// Writes `record` as the only record of a file and memory-maps it.
fn mapped_file(
    dir: &tempfile::TempDir,
    name: &str,
    record: &[u8],
    compression: Compression,
) -> (Bytes, u64) {
    let options = WriterOptions {
        compression,
        chunk_size: None,
        store_incompressible: false,
    };
    let mut w = RecordWriter::new(Vec::new(), options).expect("writer");
    let pos = w.write_record(record).expect("write");
    let file = w.finish().expect("finish");
    let path = dir.path().join(name);
    std::fs::write(&path, &file).expect("write file");
    (unbound_io::map_file(&path).expect("mmap"), pos)
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let random = random_bytes(RECORD);
    let normal = normal_f32(RECORD);
    let mut group = c.benchmark_group("128MiB_record");
    group.sample_size(10);
    group.throughput(Throughput::Bytes(RECORD as u64));

    for (label, data, compression, with_read) in [
        (
            "random/brotli6",
            &random,
            Compression::Brotli { level: 6 },
            true,
        ),
        ("random/uncompressed", &random, Compression::None, true),
        (
            "random/zstd3",
            &random,
            Compression::Zstd { level: 3 },
            true,
        ),
        (
            "normal_f32/brotli6",
            &normal,
            Compression::Brotli { level: 6 },
            false,
        ),
        (
            "normal_f32/zstd3",
            &normal,
            Compression::Zstd { level: 3 },
            false,
        ),
    ] {
        let (bytes, pos) = mapped_file(&dir, &label.replace('/', "_"), data, compression);
        group.bench_function(format!("copy_record_to_sink/{label}"), |b| {
            b.iter(|| {
                let r = RecordReader::from_bytes(bytes.clone(), label).expect("open");
                black_box(r.copy_record_to(pos, &mut std::io::sink()).expect("copy"))
            })
        });
        if with_read {
            // Into a reused buffer: the cost of actually landing the bytes.
            // Non-zero fill so the pages are really touched before timing.
            let mut buf: Vec<u8> = vec![1; RECORD];
            group.bench_function(format!("copy_record_to_vec/{label}"), |b| {
                b.iter(|| {
                    buf.clear();
                    let r = RecordReader::from_bytes(bytes.clone(), label).expect("open");
                    black_box(r.copy_record_to(pos, &mut buf).expect("copy"))
                })
            });
            group.bench_function(format!("read_record_at/{label}"), |b| {
                b.iter(|| {
                    let r = RecordReader::from_bytes(bytes.clone(), label).expect("open");
                    black_box(r.read_record_at(pos).expect("read").1.len())
                })
            });
        }
    }

    // For comparison: the general Rust Brotli decoder on Brotli quality 6
    // streams of the same data (what reading would cost without the
    // uncompressed meta-block fast path, and on compressed meta-blocks).
    for (label, data) in [("random", &random), ("normal_f32", &normal)] {
        let mut enc = brotli::CompressorWriter::new(Vec::new(), 1 << 16, 6, 22);
        enc.write_all(data).expect("compress");
        let stream = enc.into_inner();
        group.bench_function(format!("brotli_crate_decoder_to_sink/{label}"), |b| {
            b.iter(|| {
                let mut input = &stream[..];
                let mut sink = std::io::sink();
                brotli::BrotliDecompress(&mut input, &mut sink).expect("decompress");
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
