//! Blocks: the 24-byte block header at every multiple of 64 KiB, and the
//! arithmetic that maps a chunk's logical bytes to file positions around
//! those headers.
//!
//! A chunk is written as one logical byte stream (40-byte chunk header, then
//! `data_size` data bytes, then padding). Whenever the write position is a
//! multiple of [`BLOCK_SIZE`], a block header is inserted first. So a chunk's
//! logical byte `k` lives at a file position computed by [`physical`], and a
//! logical range is a list of file pieces, each inside one block.

use crate::hash;

/// Size of a block: a block header sits at every multiple of this.
pub(crate) const BLOCK_SIZE: u64 = 1 << 16;
/// Size of a block header.
pub(crate) const BLOCK_HEADER_SIZE: u64 = 24;
/// Bytes of chunk content a block can hold after its header.
pub(crate) const USABLE_BLOCK_SIZE: u64 = BLOCK_SIZE - BLOCK_HEADER_SIZE;

/// A decoded block header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BlockHeader {
    /// Distance from the beginning of the interrupted chunk to the block.
    pub previous_chunk: u64,
    /// Distance from the block to the end of the interrupted chunk.
    pub next_chunk: u64,
}

impl BlockHeader {
    /// Parses a block header, returning `None` when its hash does not match.
    pub(crate) fn parse(bytes: &[u8; 24]) -> Option<BlockHeader> {
        if !hash::matches(hash::hash(&bytes[8..24]), le64(&bytes[0..8])) {
            return None;
        }
        Some(BlockHeader {
            previous_chunk: le64(&bytes[8..16]),
            next_chunk: le64(&bytes[16..24]),
        })
    }

    /// Serializes with its hash.
    pub(crate) fn encode(&self) -> [u8; 24] {
        let mut out = [0u8; 24];
        out[8..16].copy_from_slice(&self.previous_chunk.to_le_bytes());
        out[16..24].copy_from_slice(&self.next_chunk.to_le_bytes());
        let h = hash::hash(&out[8..24]);
        out[0..8].copy_from_slice(&h.to_le_bytes());
        out
    }
}

/// Reads a little-endian u64 from an 8-byte slice.
pub(crate) fn le64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_le_bytes(a)
}

/// Whether `pos` is a multiple of the block size.
pub(crate) fn is_block_boundary(pos: u64) -> bool {
    pos % BLOCK_SIZE == 0
}

/// The block boundary at or before `pos`.
pub(crate) fn round_down_to_block(pos: u64) -> u64 {
    pos - pos % BLOCK_SIZE
}

/// Bytes from `pos` to the next block boundary (0 at a boundary).
pub(crate) fn remaining_in_block(pos: u64) -> u64 {
    (BLOCK_SIZE - pos % BLOCK_SIZE) % BLOCK_SIZE
}

/// Whether a chunk may begin or end at `pos`: not inside a block header nor
/// immediately after one.
pub(crate) fn is_possible_chunk_boundary(pos: u64) -> bool {
    let r = pos % BLOCK_SIZE;
    r == 0 || r > BLOCK_HEADER_SIZE
}

/// Smallest possible chunk boundary at or after `pos` (saturating).
pub(crate) fn round_up_to_possible_chunk_boundary(pos: u64) -> u64 {
    let r = pos % BLOCK_SIZE;
    if r == 0 || r > BLOCK_HEADER_SIZE {
        pos
    } else {
        pos.saturating_add(BLOCK_HEADER_SIZE + 1 - r)
    }
}

/// File position of logical byte `k` of the chunk beginning at `chunk_begin`
/// (which must be a possible chunk boundary). `None` on u64 overflow.
pub(crate) fn physical(chunk_begin: u64, k: u64) -> Option<u64> {
    // Position of logical byte 0: after the block header if at a boundary.
    let start = if is_block_boundary(chunk_begin) {
        chunk_begin.checked_add(BLOCK_HEADER_SIZE)?
    } else {
        chunk_begin
    };
    let first = BLOCK_SIZE - start % BLOCK_SIZE; // bytes left in start's block
    if k < first {
        return start.checked_add(k);
    }
    let k = k - first;
    let next_block = start.checked_add(first)?;
    let blocks = k / USABLE_BLOCK_SIZE;
    let rem = k % USABLE_BLOCK_SIZE;
    next_block
        .checked_add(blocks.checked_mul(BLOCK_SIZE)?)?
        .checked_add(BLOCK_HEADER_SIZE + rem)
}

/// File position just after logical byte `len - 1` of the chunk at
/// `chunk_begin`, i.e. where `len` logical bytes written from `chunk_begin`
/// end (never skipping a block header that would precede the next byte).
pub(crate) fn physical_end(chunk_begin: u64, len: u64) -> Option<u64> {
    if len == 0 {
        return Some(chunk_begin);
    }
    physical(chunk_begin, len - 1)?.checked_add(1)
}

/// End of the chunk beginning at `chunk_begin` whose header and data take
/// `content_len` logical bytes and which holds `num_records` records: the
/// chunk is padded to span at least `num_records` bytes and to end on a
/// possible chunk boundary.
pub(crate) fn chunk_end(chunk_begin: u64, content_len: u64, num_records: u64) -> Option<u64> {
    let data_end = round_up_to_possible_chunk_boundary(physical_end(chunk_begin, content_len)?);
    let records_end = round_up_to_possible_chunk_boundary(chunk_begin.checked_add(num_records)?);
    Some(data_end.max(records_end))
}

/// Iterates over the file pieces holding logical bytes `[k, k + len)` of the
/// chunk at `chunk_begin`: `(file_position, piece_length)`, each piece inside
/// one block. The caller has checked that the range is inside the file (so
/// no arithmetic overflows).
pub(crate) fn pieces(chunk_begin: u64, k: u64, len: u64) -> Pieces {
    Pieces {
        pos: if len == 0 {
            0
        } else {
            physical(chunk_begin, k).unwrap_or(u64::MAX)
        },
        left: len,
    }
}

/// Iterator returned by [`pieces`].
pub(crate) struct Pieces {
    pos: u64,
    left: u64,
}

impl Iterator for Pieces {
    type Item = (u64, u64);

    fn next(&mut self) -> Option<(u64, u64)> {
        if self.left == 0 {
            return None;
        }
        if is_block_boundary(self.pos) {
            self.pos = self.pos.saturating_add(BLOCK_HEADER_SIZE);
        }
        let n = self.left.min(BLOCK_SIZE - self.pos % BLOCK_SIZE);
        let piece = (self.pos, n);
        self.pos = self.pos.saturating_add(n);
        self.left -= n;
        Some(piece)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reference from the format spec: AddWithOverhead(pos, size).
    fn add_with_overhead(pos: u64, size: u64) -> u64 {
        let n = (size + (pos + USABLE_BLOCK_SIZE - 1) % BLOCK_SIZE) / USABLE_BLOCK_SIZE;
        pos + size + n * BLOCK_HEADER_SIZE
    }

    /// Reference from the spec: RoundUpToPossibleChunkBoundary.
    fn spec_round_up(pos: u64) -> u64 {
        let remaining = BLOCK_SIZE - 1 - (pos + BLOCK_SIZE - 1) % BLOCK_SIZE;
        pos + remaining.saturating_sub(USABLE_BLOCK_SIZE - 1)
    }

    #[test]
    fn physical_end_matches_spec_formula() {
        for begin in [
            0u64, 64, 100, 65_000, 65_535, 65_536, 65_561, 131_072, 200_000,
        ] {
            if !is_possible_chunk_boundary(begin) {
                continue;
            }
            for size in [
                1u64,
                39,
                40,
                41,
                65_000,
                65_472,
                65_473,
                65_512,
                65_513,
                200_000,
                1 << 24,
            ] {
                assert_eq!(
                    physical_end(begin, size),
                    Some(add_with_overhead(begin, size)),
                    "begin {begin} size {size}"
                );
            }
        }
    }

    #[test]
    fn round_up_matches_spec() {
        for pos in (0..200_000u64)
            .step_by(7)
            .chain(65_530..65_570)
            .chain(131_060..131_100)
        {
            assert_eq!(
                round_up_to_possible_chunk_boundary(pos),
                spec_round_up(pos),
                "pos {pos}"
            );
        }
    }

    #[test]
    fn pieces_skip_headers() {
        let p: Vec<_> = pieces(65_500, 0, 100).collect();
        assert_eq!(p, vec![(65_500, 36), (65_536 + 24, 64)]);
        let p: Vec<_> = pieces(65_536, 0, 10).collect();
        assert_eq!(p, vec![(65_560, 10)]);
        let total: u64 = pieces(64, 40, 1 << 20).map(|(_, n)| n).sum();
        assert_eq!(total, 1 << 20);
        for (pos, n) in pieces(64, 40, 1 << 20) {
            assert!(pos % BLOCK_SIZE >= BLOCK_HEADER_SIZE);
            assert!(pos % BLOCK_SIZE + n <= BLOCK_SIZE);
        }
    }

    #[test]
    fn signature_block_header() {
        let h = BlockHeader {
            previous_chunk: 0,
            next_chunk: 64,
        }
        .encode();
        assert_eq!(&h[0..8], &[0x83, 0xaf, 0x70, 0xd1, 0x0d, 0x88, 0x4a, 0x3f]);
        assert_eq!(
            BlockHeader::parse(&h),
            Some(BlockHeader {
                previous_chunk: 0,
                next_chunk: 64
            })
        );
    }
}
