//! [`ChunkBytes`]: a logical byte range of a chunk, read in place.
//!
//! Chunk data in the file is interrupted by a block header every 64 KiB, so a
//! logical range is a list of file pieces. This view hands those pieces out
//! without copying (for hashing, streaming decompression and streaming
//! output), and makes a contiguous `Bytes` only on request: a zero-copy slice
//! of the file when the range lies inside one block, a copy otherwise.
//!
//! A view can also wrap plain contiguous bytes (decompressed buffers), so the
//! same decoders work on both.

use std::io::{self, BufRead, Read, Write};

use bytes::Bytes;

use crate::block;

/// A logical range of bytes, either inside a chunk of a mapped file (skipping
/// block headers) or inside a plain buffer.
#[derive(Clone)]
pub(crate) struct ChunkBytes {
    file: Bytes,
    /// `Some(chunk_begin)` for a range of a chunk in the file; `None` when
    /// `file` is a plain buffer addressed directly.
    chunk_begin: Option<u64>,
    /// Logical offset of the first byte (from the chunk beginning, header
    /// included; or from the start of the plain buffer).
    start: u64,
    len: u64,
}

impl ChunkBytes {
    /// A range of the chunk at `chunk_begin`. The caller has checked that the
    /// whole range lies inside `file`.
    pub(crate) fn in_chunk(file: Bytes, chunk_begin: u64, start: u64, len: u64) -> Self {
        ChunkBytes {
            file,
            chunk_begin: Some(chunk_begin),
            start,
            len,
        }
    }

    /// A view of a plain buffer.
    pub(crate) fn plain(buf: Bytes) -> Self {
        let len = buf.len() as u64;
        ChunkBytes {
            file: buf,
            chunk_begin: None,
            start: 0,
            len,
        }
    }

    /// Number of logical bytes.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// The sub-range `[offset, offset + len)`, or `None` if it does not fit.
    pub(crate) fn slice(&self, offset: u64, len: u64) -> Option<ChunkBytes> {
        if offset > self.len || len > self.len - offset {
            return None;
        }
        Some(ChunkBytes {
            file: self.file.clone(),
            chunk_begin: self.chunk_begin,
            start: self.start + offset,
            len,
        })
    }

    /// The sub-range from `offset` to the end.
    pub(crate) fn skip(&self, offset: u64) -> Option<ChunkBytes> {
        self.slice(offset, self.len.checked_sub(offset)?)
    }

    /// Iterates over `(offset_in_buffer, length)` of the pieces.
    fn raw_pieces(&self) -> RawPieces {
        match self.chunk_begin {
            Some(begin) => RawPieces::Chunk(block::pieces(begin, self.start, self.len)),
            None => RawPieces::Plain(if self.len == 0 {
                None
            } else {
                Some((self.start, self.len))
            }),
        }
    }

    /// Iterates over the contiguous pieces of the range, in order.
    pub(crate) fn pieces(&self) -> impl Iterator<Item = &[u8]> + '_ {
        self.raw_pieces()
            .map(move |(pos, n)| &self.file[pos as usize..(pos + n) as usize])
    }

    /// The byte at logical `offset` (must be `< len`).
    pub(crate) fn byte_at(&self, offset: u64) -> Option<u8> {
        if offset >= self.len {
            return None;
        }
        let pos = match self.chunk_begin {
            Some(begin) => block::physical(begin, self.start + offset)?,
            None => self.start + offset,
        };
        self.file.get(usize::try_from(pos).ok()?).copied()
    }

    /// Copies up to `n` bytes from the beginning.
    pub(crate) fn prefix(&self, n: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(n.min(self.len as usize));
        for piece in self.pieces() {
            let take = (n - out.len()).min(piece.len());
            out.extend_from_slice(&piece[..take]);
            if out.len() == n {
                break;
            }
        }
        out
    }

    /// Whether the range is one piece of the underlying buffer.
    #[cfg(test)]
    pub(crate) fn is_contiguous(&self) -> bool {
        self.raw_pieces().nth(1).is_none()
    }

    /// The range as contiguous bytes: a slice of the file when possible,
    /// otherwise a copy with block headers removed.
    pub(crate) fn to_bytes(&self) -> Bytes {
        let mut it = self.raw_pieces();
        match (it.next(), it.next()) {
            (None, _) => Bytes::new(),
            (Some((pos, n)), None) => self.file.slice(pos as usize..(pos + n) as usize),
            _ => {
                let mut out = Vec::with_capacity(self.len as usize);
                for piece in self.pieces() {
                    out.extend_from_slice(piece);
                }
                Bytes::from(out)
            }
        }
    }

    /// Writes all bytes to `out`, piece by piece.
    pub(crate) fn write_to(&self, out: &mut dyn Write) -> io::Result<()> {
        for piece in self.pieces() {
            out.write_all(piece)?;
        }
        Ok(())
    }

    /// A `Read`/`BufRead` over the range.
    pub(crate) fn reader(&self) -> PieceReader<'_> {
        PieceReader {
            bytes: self,
            pieces: self.raw_pieces(),
            current: &[],
        }
    }
}

/// Pieces of either kind of view.
enum RawPieces {
    Chunk(block::Pieces),
    Plain(Option<(u64, u64)>),
}

impl Iterator for RawPieces {
    type Item = (u64, u64);

    fn next(&mut self) -> Option<(u64, u64)> {
        match self {
            RawPieces::Chunk(p) => p.next(),
            RawPieces::Plain(p) => p.take(),
        }
    }
}

/// Sequential reader over a [`ChunkBytes`], one piece at a time.
pub(crate) struct PieceReader<'a> {
    bytes: &'a ChunkBytes,
    pieces: RawPieces,
    current: &'a [u8],
}

impl<'a> BufRead for PieceReader<'a> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        while self.current.is_empty() {
            match self.pieces.next() {
                Some((pos, n)) => self.current = &self.bytes.file[pos as usize..(pos + n) as usize],
                None => break,
            }
        }
        Ok(self.current)
    }

    fn consume(&mut self, amt: usize) {
        self.current = &self.current[amt.min(self.current.len())..];
    }
}

impl<'a> Read for PieceReader<'a> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let avail = self.fill_buf()?;
        let n = avail.len().min(buf.len());
        buf[..n].copy_from_slice(&avail[..n]);
        self.consume(n);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_file(len: usize) -> Bytes {
        Bytes::from((0..len).map(|i| (i % 251) as u8).collect::<Vec<u8>>())
    }

    #[test]
    fn contiguous_range_is_zero_copy() {
        let file = fake_file(200_000);
        let v = ChunkBytes::in_chunk(file.clone(), 64, 40, 1000);
        assert!(v.is_contiguous());
        let b = v.to_bytes();
        assert_eq!(b.as_ptr(), file[104..].as_ptr());
    }

    #[test]
    fn crossing_range_skips_header() {
        let file = fake_file(200_000);
        let v = ChunkBytes::in_chunk(file.clone(), 64, 40, 70_000);
        assert!(!v.is_contiguous());
        let b = v.to_bytes();
        assert_eq!(b.len(), 70_000);
        assert_eq!(&b[..65_432], &file[104..65_536]);
        assert_eq!(&b[65_432..], &file[65_560..65_560 + 70_000 - 65_432]);
        let mut r = Vec::new();
        v.reader().read_to_end(&mut r).expect("read");
        assert_eq!(&r[..], &b[..]);
        assert_eq!(v.byte_at(65_432), Some(file[65_560]));
        assert_eq!(v.prefix(65_433).last(), Some(&file[65_560]));
    }
}
