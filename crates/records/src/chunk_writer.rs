//! Writing one chunk at the current file position: the chunk header and
//! data with a block header inserted at every 64 KiB boundary, then zero
//! padding up to the chunk end (so the chunk spans at least `num_records`
//! bytes and ends on a possible chunk boundary).

use std::io::{self, Write};

use crate::block::{self, BlockHeader, BLOCK_SIZE};
use crate::chunk_header::{ChunkHeader, CHUNK_HEADER_SIZE};

/// Writes bytes at a tracked file position, inserting block headers.
struct Section<'a, W: Write> {
    out: &'a mut W,
    pos: u64,
    begin: u64,
    end: u64,
}

impl<W: Write> Section<'_, W> {
    fn block_header_if_needed(&mut self) -> io::Result<()> {
        if block::is_block_boundary(self.pos) {
            let h = BlockHeader {
                previous_chunk: self.pos - self.begin,
                next_chunk: self.end - self.pos,
            };
            self.out.write_all(&h.encode())?;
            self.pos += block::BLOCK_HEADER_SIZE;
        }
        Ok(())
    }

    fn write(&mut self, mut data: &[u8]) -> io::Result<()> {
        while !data.is_empty() {
            self.block_header_if_needed()?;
            let n = (data.len() as u64).min(BLOCK_SIZE - self.pos % BLOCK_SIZE) as usize;
            self.out.write_all(&data[..n])?;
            self.pos += n as u64;
            data = &data[n..];
        }
        Ok(())
    }

    fn pad(&mut self) -> io::Result<()> {
        const ZEROS: [u8; 4096] = [0; 4096];
        while self.pos < self.end {
            self.block_header_if_needed()?;
            let n = (self.end - self.pos)
                .min(BLOCK_SIZE - self.pos % BLOCK_SIZE)
                .min(ZEROS.len() as u64);
            self.out.write_all(&ZEROS[..n as usize])?;
            self.pos += n;
        }
        Ok(())
    }
}

/// Writes a chunk whose data is the concatenation of `parts`, beginning at
/// file position `begin`; returns the chunk end (the next position).
pub(crate) fn write_chunk<W: Write, P: AsRef<[u8]>>(
    out: &mut W,
    begin: u64,
    header: &ChunkHeader,
    parts: &[P],
) -> io::Result<u64> {
    let end = block::chunk_end(
        begin,
        CHUNK_HEADER_SIZE + header.data_size,
        header.num_records,
    )
    .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "chunk position overflows"))?;
    let mut s = Section {
        out,
        pos: begin,
        begin,
        end,
    };
    s.write(&header.encode())?;
    for part in parts {
        s.write(part.as_ref())?;
    }
    s.pad()?;
    debug_assert_eq!(s.pos, end);
    Ok(end)
}
