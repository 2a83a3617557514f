//! [`DecodeLimits`] and the accounting of the decoded data a reader holds.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;

/// How much decoded data a [`crate::RecordReader`] may hold in memory.
///
/// A compressed chunk declares its decoded size, and the declaration can be true and still
/// hostile: 1 GiB of zeros compresses with Zstd to a few kilobytes, 16 GiB to half a megabyte.
/// Reading records means holding a decoded chunk in memory, so before a chunk is decoded whole
/// the reader checks its declared size against two limits:
///
/// - one chunk may decode to at most [`DecodeLimits::max_chunk`] bytes (default 2 GiB, the
///   largest protobuf message: a chunk of a `.cpb` is one);
/// - all decoded data the reader's records still hold (the cached chunk, and every
///   [`bytes::Bytes`] record handed out that points into a decoded buffer) may reach at most
///   [`DecodeLimits::budget_for`] the file size: `max(floor, ratio × file size)`, by default
///   `max(256 MiB, 64 × file size)`. Real compression of protobufs and tensors stays far below
///   64×; a few-megabyte file can never make the reader hold more than a few hundred MB.
///
/// A caller that really needs more (a model made of a huge zero-filled constant, say) raises
/// the limits explicitly with [`crate::RecordReader::set_decode_limits`]. Streaming reads
/// ([`crate::RecordReader::copy_record_to`], [`crate::RecordReader::check_chunk`]) hold one
/// decoder buffer whatever the chunk declares and are not limited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeLimits {
    /// Largest declared decoded size of one chunk decoded whole.
    pub max_chunk: u64,
    /// Decoded bytes that may always be held at once, whatever the file size.
    pub floor: u64,
    /// Decoded bytes that may be held at once per byte of the file.
    pub ratio: u64,
}

impl DecodeLimits {
    /// The default largest chunk: 2 GiB.
    pub const DEFAULT_MAX_CHUNK: u64 = 2 << 30;
    /// The default floor: 256 MiB.
    pub const DEFAULT_FLOOR: u64 = 256 << 20;
    /// The default ratio: 64 decoded bytes per byte of the file.
    pub const DEFAULT_RATIO: u64 = 64;

    /// No limits at all: for callers that have checked the declared sizes themselves.
    pub const fn unlimited() -> Self {
        DecodeLimits {
            max_chunk: u64::MAX,
            floor: u64::MAX,
            ratio: u64::MAX,
        }
    }

    /// Decoded bytes a file of `file_len` bytes may hold at once:
    /// `max(floor, ratio × file_len)`.
    pub fn budget_for(&self, file_len: u64) -> u64 {
        self.floor.max(self.ratio.saturating_mul(file_len))
    }
}

impl Default for DecodeLimits {
    fn default() -> Self {
        DecodeLimits {
            max_chunk: Self::DEFAULT_MAX_CHUNK,
            floor: Self::DEFAULT_FLOOR,
            ratio: Self::DEFAULT_RATIO,
        }
    }
}

/// Counts the decoded bytes alive in buffers a reader made.
#[derive(Debug, Clone, Default)]
pub(crate) struct Held(Arc<AtomicU64>);

impl Held {
    /// Bytes alive now.
    pub(crate) fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    /// Wraps a decoded buffer so that its bytes count as held until the last slice of it is
    /// dropped.
    pub(crate) fn track(&self, buffer: Bytes) -> Bytes {
        let n = buffer.len() as u64;
        if n == 0 {
            return buffer;
        }
        self.0.fetch_add(n, Ordering::Relaxed);
        Bytes::from_owner(Tracked {
            buffer,
            n,
            held: self.0.clone(),
        })
    }
}

/// The owner of a tracked buffer: gives its bytes back to the count when dropped.
struct Tracked {
    buffer: Bytes,
    n: u64,
    held: Arc<AtomicU64>,
}

impl AsRef<[u8]> for Tracked {
    fn as_ref(&self) -> &[u8] {
        &self.buffer
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.held.fetch_sub(self.n, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_bytes_follow_the_slices() {
        let held = Held::default();
        let b = held.track(Bytes::from(vec![7u8; 1000]));
        assert_eq!(held.get(), 1000);
        let slice = b.slice(10..20);
        drop(b);
        assert_eq!(held.get(), 1000);
        assert_eq!(&slice[..], &[7u8; 10]);
        drop(slice);
        assert_eq!(held.get(), 0);
    }

    #[test]
    fn budget() {
        let l = DecodeLimits::default();
        assert_eq!(l.budget_for(1000), 256 << 20);
        assert_eq!(l.budget_for(1 << 30), 64 << 30);
        assert_eq!(DecodeLimits::unlimited().budget_for(5), u64::MAX);
    }
}
