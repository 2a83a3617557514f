//! [`WriterOptions`]: how records are cut into chunks and compressed, and the rules that
//! follow from them alone (the chunk size in effect, which records take a chunk of their own,
//! whether data is worth compressing). Both the [`RecordWriter`](crate::RecordWriter) and
//! [`encode_own_chunk`](crate::encode_own_chunk) follow them.

use crate::compression::{self, Compression};

/// Options for [`RecordWriter`](crate::RecordWriter). The default matches what TensorFlow uses
/// (Riegeli's defaults): Brotli quality 6 with a 4 MiB window (`window_log`
/// 22), automatic chunk size, no padding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriterOptions {
    /// Compression of chunk buffers.
    pub compression: Compression,
    /// Desired chunk size in bytes, counting each record as its size plus 8.
    /// `None` is Riegeli's automatic size: 1 MiB when compressing, 4 KiB when
    /// not. A record that does not fit closes the chunk; a record larger than
    /// the chunk size gets a chunk of its own.
    pub chunk_size: Option<u64>,
    /// When true, a chunk whose data does not compress by at least 10% (judged
    /// by compressing a sample of up to 64 KiB first) is stored uncompressed:
    /// reading it is then a copy (or zero-copy) instead of a decompression.
    pub store_incompressible: bool,
}

impl Default for WriterOptions {
    fn default() -> Self {
        WriterOptions {
            compression: Compression::Brotli { level: 6 },
            chunk_size: None,
            store_incompressible: false,
        }
    }
}

impl WriterOptions {
    /// The chunk size in effect.
    pub fn effective_chunk_size(&self) -> u64 {
        self.chunk_size
            .unwrap_or(if self.compression == Compression::None {
                4 << 10
            } else {
                1 << 20
            })
            .max(1)
    }

    /// Whether a record of `len` bytes is written as a chunk of its own: Riegeli's rule closes
    /// the chunk around any record that would not leave room for another (each counts its size
    /// plus 8) within the chunk size.
    pub fn takes_own_chunk(&self, len: u64) -> bool {
        len.saturating_add(16) > self.effective_chunk_size()
    }

    /// The compression a record of `len` bytes made of `parts`, in a chunk of its own, is
    /// written with: none when the options compress nothing, or when they store incompressible
    /// data and a sample of it does not compress by a tenth.
    pub(crate) fn own_chunk_compression(&self, parts: &[&[u8]], len: u64) -> Compression {
        if self.compression == Compression::None {
            return Compression::None;
        }
        if self.store_incompressible {
            let sample = sample_of_parts(parts, len);
            if !compression::worth_compressing(self.compression, &sample) {
                return Compression::None;
            }
        }
        self.compression
    }
}

/// How much raw data to collect before deciding whether a chunk is worth
/// compressing (with `store_incompressible`).
pub(crate) const SAMPLE_SIZE: usize = 64 << 10;

/// A compressibility sample of a record given as parts: pieces of its beginning, middle and
/// end, at most [`SAMPLE_SIZE`].
fn sample_of_parts(parts: &[&[u8]], len: u64) -> Vec<u8> {
    let piece = (SAMPLE_SIZE / 3) as u64;
    let mut sample = Vec::with_capacity(SAMPLE_SIZE);
    for start in [
        0,
        (len / 2).saturating_sub(piece / 2),
        len.saturating_sub(piece),
    ] {
        copy_range(parts, start, piece.min(len), &mut sample);
    }
    sample
}

/// Appends bytes `[start, start + n)` of the concatenation of `parts` to `out`.
fn copy_range(parts: &[&[u8]], start: u64, n: u64, out: &mut Vec<u8>) {
    let (mut skip, mut left) = (start, n);
    for p in parts {
        if left == 0 {
            break;
        }
        let plen = p.len() as u64;
        if skip >= plen {
            skip -= plen;
            continue;
        }
        let take = (plen - skip).min(left);
        out.extend_from_slice(&p[skip as usize..(skip + take) as usize]);
        left -= take;
        skip = 0;
    }
}
