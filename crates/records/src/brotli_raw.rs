//! Fast path for Brotli streams made only of uncompressed meta-blocks.
//!
//! TensorFlow writes `.cpb` files with Brotli quality 6. For incompressible
//! data (float tensors) the Brotli encoder gives up on compression and emits
//! *uncompressed meta-blocks*: a few header bits, then the bytes verbatim.
//! Running such a stream through a general decoder costs a copy through its
//! ring buffer at well under memory speed. Instead [`scan`] parses only the
//! meta-block headers (RFC 7932 section 9.2) and, when every meta-block is
//! uncompressed (or metadata) and the stream ends cleanly, returns the
//! verbatim byte ranges, which callers copy or stream straight from the file.
//! Any compressed meta-block, or anything unusual, returns `None` and the
//! caller decodes the whole stream with the real decoder instead, so the
//! fast path never has to be right about the hard cases.

use crate::chunk_bytes::ChunkBytes;

/// LSB-first bit reader over a [`ChunkBytes`].
struct Bits<'a> {
    src: &'a ChunkBytes,
    byte: u64,
    bit: u32,
}

impl Bits<'_> {
    fn read(&mut self, n: u32) -> Option<u64> {
        let mut value = 0u64;
        for i in 0..n {
            let b = self.src.byte_at(self.byte)?;
            value |= u64::from((b >> self.bit) & 1) << i;
            self.bit += 1;
            if self.bit == 8 {
                self.bit = 0;
                self.byte += 1;
            }
        }
        Some(value)
    }

    /// Skips to the next byte boundary; the skipped bits must be zero.
    fn align_zero(&mut self) -> Option<()> {
        if self.bit != 0 {
            let pad = self.read(8 - self.bit)?;
            if pad != 0 {
                return None;
            }
        }
        Some(())
    }
}

/// Returns the verbatim byte ranges of `stream` if it consists only of
/// uncompressed and metadata meta-blocks followed by an empty last
/// meta-block, with nothing after it; `None` otherwise (use the decoder).
pub(crate) fn scan(stream: &ChunkBytes) -> Option<Vec<ChunkBytes>> {
    let mut bits = Bits {
        src: stream,
        byte: 0,
        bit: 0,
    };
    // Stream header: WBITS. The window size does not matter for verbatim
    // data; only recognise the standard encodings.
    if bits.read(1)? == 1 && bits.read(3)? == 0 && bits.read(3)? == 1 {
        return None; // large-window stream; let the decoder judge
    }
    let mut segments = Vec::new();
    loop {
        let is_last = bits.read(1)? == 1;
        if is_last {
            // ISLASTEMPTY must be set: a last meta-block with data is always
            // compressed (ISUNCOMPRESSED is only present when not last).
            if bits.read(1)? != 1 {
                return None;
            }
            bits.align_zero()?;
            return if bits.byte == stream.len() {
                Some(segments)
            } else {
                None
            };
        }
        let nibbles = match bits.read(2)? {
            0 => 4,
            1 => 5,
            2 => 6,
            _ => 0,
        };
        if nibbles == 0 {
            // Metadata meta-block: reserved bit, MSKIPBYTES, MSKIPLEN - 1.
            if bits.read(1)? != 0 {
                return None;
            }
            let skip_bytes = bits.read(2)? as u32;
            let mut skip_len = 0u64;
            if skip_bytes > 0 {
                skip_len = bits.read(8 * skip_bytes)?;
                if skip_bytes > 1 && skip_len >> (8 * (skip_bytes - 1)) == 0 {
                    return None;
                }
                skip_len += 1;
            }
            bits.align_zero()?;
            bits.byte = bits.byte.checked_add(skip_len)?;
            if bits.byte > stream.len() {
                return None;
            }
            continue;
        }
        let mlen_minus_1 = bits.read(4 * nibbles)?;
        if nibbles > 4 && mlen_minus_1 >> (4 * (nibbles - 1)) == 0 {
            return None;
        }
        let mlen = mlen_minus_1 + 1;
        if bits.read(1)? != 1 {
            return None; // compressed meta-block
        }
        bits.align_zero()?;
        segments.push(stream.slice(bits.byte, mlen)?);
        bits.byte += mlen;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use std::io::Write;

    fn compress(data: &[u8], quality: u32) -> Vec<u8> {
        let mut w = brotli::CompressorWriter::new(Vec::new(), 4096, quality, 22);
        w.write_all(data).expect("write");
        w.into_inner()
    }

    fn noise(n: usize) -> Vec<u8> {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    #[test]
    fn random_data_is_all_verbatim() {
        let data = noise(3 << 20);
        let stream = ChunkBytes::plain(Bytes::from(compress(&data, 6)));
        let segments = scan(&stream).expect("uncompressed meta-blocks");
        let joined: Vec<u8> = segments
            .iter()
            .flat_map(|s| s.to_bytes().to_vec())
            .collect();
        assert_eq!(joined, data);
    }

    /// TensorFlow's files are written by C Brotli; its stream framing for
    /// incompressible data must take the fast path too.
    #[test]
    fn c_brotli_random_data_is_all_verbatim() {
        let data = noise(5 << 20);
        let options = brotlic::BrotliEncoderOptions::new()
            .quality(brotlic::Quality::new(6).expect("quality"))
            .window_size(brotlic::WindowSize::new(22).expect("window"))
            .size_hint(1 << 20)
            .build()
            .expect("encoder");
        let mut w = brotlic::CompressorWriter::with_encoder(options, Vec::new());
        w.write_all(&data).expect("write");
        let stream = ChunkBytes::plain(Bytes::from(w.into_inner().expect("finish")));
        let segments = scan(&stream).expect("uncompressed meta-blocks");
        let joined: Vec<u8> = segments
            .iter()
            .flat_map(|s| s.to_bytes().to_vec())
            .collect();
        assert_eq!(joined, data);
    }

    #[test]
    fn compressible_data_falls_back() {
        let data: Vec<u8> = b"abcabcabd".iter().copied().cycle().take(100_000).collect();
        let stream = ChunkBytes::plain(Bytes::from(compress(&data, 6)));
        assert!(scan(&stream).is_none());
    }

    #[test]
    fn trailing_garbage_falls_back() {
        let data = noise(100_000);
        let mut c = compress(&data, 6);
        c.push(0);
        assert!(scan(&ChunkBytes::plain(Bytes::from(c))).is_none());
    }

    #[test]
    fn truncated_stream_falls_back() {
        let data = noise(100_000);
        let c = compress(&data, 6);
        for cut in [0, 1, 5, c.len() / 2, c.len() - 1] {
            assert!(scan(&ChunkBytes::plain(Bytes::copy_from_slice(&c[..cut]))).is_none());
        }
    }
}
