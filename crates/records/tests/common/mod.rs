//! Shared helpers for the integration tests: deterministic data, and the
//! `riegeli` crate as an independent writer and reader.

#![allow(dead_code)]

use std::io::Cursor;

/// Deterministic xorshift bytes.
pub fn noise(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Compressible text-like bytes.
pub fn text(seed: u64, n: usize) -> Vec<u8> {
    let words: [&[u8]; 6] = [
        b"tensor ", b"graph ", b"node ", b"const ", b"float ", b"shape ",
    ];
    let r = noise(seed, n / 4 + 1);
    let mut out = Vec::with_capacity(n + 8);
    let mut i = 0;
    while out.len() < n {
        out.extend_from_slice(words[r[i % r.len()] as usize % words.len()]);
        i += 1;
    }
    out.truncate(n);
    out
}

/// A varint.
pub fn varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A small protocol buffer message with varint, string, fixed32, fixed64 and
/// nested fields, so transposed chunks exercise every node kind.
pub fn proto_record(i: u64) -> Vec<u8> {
    let mut m = Vec::new();
    varint(1 << 3, &mut m);
    varint(i * 7919, &mut m);
    if i % 3 != 0 {
        let s = format!("name-{i}");
        varint((2 << 3) | 2, &mut m);
        varint(s.len() as u64, &mut m);
        m.extend_from_slice(s.as_bytes());
    }
    varint((3 << 3) | 5, &mut m);
    m.extend_from_slice(&(i as u32).to_le_bytes());
    varint((5 << 3) | 1, &mut m);
    m.extend_from_slice(&(i * 1_000_003).to_le_bytes());
    // Nested message in field 4: {1: small varint (inline), 2: bytes}.
    let mut sub = Vec::new();
    varint(1 << 3, &mut sub);
    varint(i % 100, &mut sub);
    varint((2 << 3) | 2, &mut sub);
    let payload = noise(i, (i % 50) as usize);
    varint(payload.len() as u64, &mut sub);
    sub.extend_from_slice(&payload);
    varint((4 << 3) | 2, &mut m);
    varint(sub.len() as u64, &mut m);
    m.extend_from_slice(&sub);
    m
}

/// Compression settings understood by the `riegeli` crate.
pub fn riegeli_type(name: &str) -> riegeli::CompressionType {
    match name {
        "none" => riegeli::CompressionType::None,
        "brotli" => riegeli::CompressionType::Brotli,
        "zstd" => riegeli::CompressionType::Zstd,
        "snappy" => riegeli::CompressionType::Snappy,
        other => panic!("unknown compression {other}"),
    }
}

/// Writes `records` with the `riegeli` crate.
pub fn write_with_riegeli(
    records: &[Vec<u8>],
    compression: &str,
    chunk_size: u64,
    transpose: bool,
) -> Vec<u8> {
    let mut buf = Vec::new();
    let opts = riegeli::WriterOptions::new()
        .compression(riegeli_type(compression))
        .chunk_size(chunk_size)
        .transpose(transpose);
    let mut w = riegeli::RecordWriter::new(Cursor::new(&mut buf), opts).expect("riegeli writer");
    for r in records {
        w.write_record(r).expect("riegeli write");
    }
    w.close().expect("riegeli close");
    buf
}

/// Reads every record with the `riegeli` crate, with numeric positions.
pub fn read_with_riegeli(file: &[u8]) -> Vec<(u64, Vec<u8>)> {
    let mut r = riegeli::RecordReader::new(Cursor::new(file), riegeli::ReaderOptions::new())
        .expect("riegeli reader");
    let mut out = Vec::new();
    while let Some(rec) = r.read_record().expect("riegeli read") {
        out.push((r.last_pos().numeric(), rec));
    }
    out
}

/// HighwayHash-64 with the Riegeli key (an independent copy for building
/// hand-made chunks in tests).
pub fn hh(data: &[u8]) -> u64 {
    use highway::{HighwayHash, HighwayHasher, Key};
    let k = [
        0x2f69_6c65_6765_6952,
        0x0a73_6472_6f63_6572,
        0x2f69_6c65_6765_6952,
        0x0a73_6472_6f63_6572,
    ];
    HighwayHasher::new(Key(k)).hash64(data)
}

/// The fixed 64-byte file start.
pub fn signature() -> Vec<u8> {
    let mut block = vec![0u8; 24];
    block[16..24].copy_from_slice(&64u64.to_le_bytes());
    let h = hh(&block[8..24]);
    block[0..8].copy_from_slice(&h.to_le_bytes());
    block.extend_from_slice(&chunk_header(&[], b's', 0, 0, None));
    block
}

/// A 40-byte chunk header for `data`; `data_size` overrides the size field.
pub fn chunk_header(
    data: &[u8],
    chunk_type: u8,
    num_records: u64,
    decoded: u64,
    data_size: Option<u64>,
) -> Vec<u8> {
    let mut h = vec![0u8; 40];
    h[8..16].copy_from_slice(&data_size.unwrap_or(data.len() as u64).to_le_bytes());
    h[16..24].copy_from_slice(&hh(data).to_le_bytes());
    h[24..32].copy_from_slice(&((num_records << 8) | chunk_type as u64).to_le_bytes());
    h[32..40].copy_from_slice(&decoded.to_le_bytes());
    let hash = hh(&h[8..40]);
    h[0..8].copy_from_slice(&hash.to_le_bytes());
    h
}

/// A file with one hand-made chunk at 64 (which must end before 65536):
/// header, data, and zero padding so the chunk spans `num_records` bytes.
pub fn file_with_chunk(
    data: &[u8],
    chunk_type: u8,
    num_records: u64,
    decoded: u64,
    data_size: Option<u64>,
) -> Vec<u8> {
    let mut f = signature();
    f.extend_from_slice(&chunk_header(
        data,
        chunk_type,
        num_records,
        decoded,
        data_size,
    ));
    f.extend_from_slice(data);
    while (f.len() as u64) < 64 + num_records.min(60_000) {
        f.push(0);
    }
    f
}

/// Simple chunk data with no compression for the given record sizes and values.
pub fn simple_uncompressed(sizes: &[u64], values: &[u8]) -> Vec<u8> {
    let mut s = Vec::new();
    for &n in sizes {
        varint(n, &mut s);
    }
    let mut d = vec![0u8];
    varint(s.len() as u64, &mut d);
    d.extend_from_slice(&s);
    d.extend_from_slice(values);
    d
}

/// Appends a chunk at the end of `file` (a valid file so far), inserting a
/// block header at every 64 KiB boundary and padding as the format says. An
/// independent implementation of the chunk layout, for hand-made files.
pub fn append_chunk(
    file: &mut Vec<u8>,
    data: &[u8],
    chunk_type: u8,
    num_records: u64,
    decoded: u64,
) {
    const B: u64 = 1 << 16;
    let begin = file.len() as u64;
    let header = chunk_header(data, chunk_type, num_records, decoded, None);
    let content: Vec<u8> = header.iter().chain(data).copied().collect();
    // Where the content ends, placing it around block headers.
    let mut pos = begin;
    let mut left = content.len() as u64;
    while left > 0 {
        if pos % B == 0 {
            pos += 24;
        }
        let n = left.min(B - pos % B);
        pos += n;
        left -= n;
    }
    let round_up = |p: u64| {
        if p % B == 0 || p % B > 24 {
            p
        } else {
            p + 25 - p % B
        }
    };
    let end = round_up(pos).max(round_up(begin + num_records));
    let mut content = content.into_iter();
    let mut pos = begin;
    while pos < end {
        if pos % B == 0 {
            let mut bh = vec![0u8; 24];
            bh[8..16].copy_from_slice(&(pos - begin).to_le_bytes());
            bh[16..24].copy_from_slice(&(end - pos).to_le_bytes());
            let h = hh(&bh[8..24]);
            bh[0..8].copy_from_slice(&h.to_le_bytes());
            file.extend_from_slice(&bh);
            pos += 24;
            continue;
        }
        file.push(content.next().unwrap_or(0));
        pos += 1;
    }
}

/// Compresses with C Brotli (what TensorFlow uses) at quality 6, window 22.
pub fn c_brotli(data: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let options = brotlic::BrotliEncoderOptions::new()
        .quality(brotlic::Quality::new(6).expect("quality"))
        .window_size(brotlic::WindowSize::new(22).expect("window"))
        .build()
        .expect("encoder");
    let mut w = brotlic::CompressorWriter::with_encoder(options, Vec::new());
    w.write_all(data).expect("write");
    w.into_inner().expect("finish")
}

/// A simple chunk's data holding `records`, compressed with C Brotli.
pub fn simple_c_brotli(records: &[Vec<u8>]) -> Vec<u8> {
    let mut sizes = Vec::new();
    let mut values = Vec::new();
    for r in records {
        varint(r.len() as u64, &mut sizes);
        values.extend_from_slice(r);
    }
    let mut sizes_block = Vec::new();
    varint(sizes.len() as u64, &mut sizes_block);
    sizes_block.extend_from_slice(&c_brotli(&sizes));
    let mut d = vec![b'b'];
    varint(sizes_block.len() as u64, &mut d);
    d.extend_from_slice(&sizes_block);
    varint(values.len() as u64, &mut d);
    d.extend_from_slice(&c_brotli(&values));
    d
}
