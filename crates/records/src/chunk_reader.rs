//! File-level access to chunks: reading and checking chunk headers and the
//! block headers around them, verifying chunk data hashes, and locating the
//! chunk for a numeric record position using block headers (Riegeli's
//! `SeekToChunkContaining` / `SeekToChunkBefore`).
//!
//! Everything read from the file is checked against the file size before it
//! is used: a chunk claiming more bytes than the file has is reported as
//! truncated, never allocated.

use bytes::Bytes;

use crate::block::{self, BlockHeader, BLOCK_HEADER_SIZE};
use crate::chunk_bytes::ChunkBytes;
use crate::chunk_header::{ChunkHeader, ChunkType, CHUNK_HEADER_SIZE};
use crate::error::{HashedPart, RecordsError};
use crate::hash::Hasher;

/// A chunk whose header has been read and checked.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Chunk {
    /// File position where the chunk begins (its numeric record base).
    pub begin: u64,
    /// File position where the next chunk begins.
    pub end: u64,
    /// The decoded header.
    pub header: ChunkHeader,
}

/// Which chunk a position search wants.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Which {
    /// The chunk whose records include the position (or the first chunk
    /// beginning at or after it).
    Containing,
    /// The chunk whose bytes include the position.
    Before,
}

/// The whole file plus its name.
pub(crate) struct FileChunks {
    pub data: Bytes,
    pub name: String,
}

impl FileChunks {
    /// File length.
    pub(crate) fn len(&self) -> u64 {
        self.data.len() as u64
    }

    fn truncated(&self, offset: u64, detail: String) -> RecordsError {
        RecordsError::Truncated {
            file: self.name.clone(),
            offset,
            detail,
        }
    }

    fn corrupt(&self, offset: u64, detail: String) -> RecordsError {
        RecordsError::Corrupt {
            file: self.name.clone(),
            offset,
            detail,
        }
    }

    fn hash_mismatch(&self, part: HashedPart, offset: u64) -> RecordsError {
        RecordsError::HashMismatch {
            file: self.name.clone(),
            part,
            offset,
        }
    }

    /// Reads the block header at the block boundary `block`; `Ok(None)` when
    /// the file ends exactly there.
    pub(crate) fn block_header(&self, block: u64) -> Result<Option<BlockHeader>, RecordsError> {
        if block == self.len() {
            return Ok(None);
        }
        if block > self.len() || self.len() - block < BLOCK_HEADER_SIZE {
            return Err(self.truncated(
                block,
                format!(
                    "block header at {block} does not fit in the file of {} bytes",
                    self.len()
                ),
            ));
        }
        let mut raw = [0u8; 24];
        raw.copy_from_slice(&self.data[block as usize..block as usize + 24]);
        BlockHeader::parse(&raw)
            .map(Some)
            .ok_or_else(|| self.hash_mismatch(HashedPart::BlockHeader, block))
    }

    /// Checks the block header at `block`, which interrupts the chunk
    /// `[begin, end)`.
    fn check_block_header(
        &self,
        block: u64,
        begin: u64,
        end: Option<u64>,
    ) -> Result<(), RecordsError> {
        let h = self.block_header(block)?.ok_or_else(|| {
            self.truncated(
                block,
                format!("file ends at {block} inside the chunk at {begin}"),
            )
        })?;
        if h.previous_chunk != block - begin {
            return Err(self.corrupt(
                begin,
                format!(
                    "block header at {block} says the chunk begins {} bytes before it, but it begins at {begin}",
                    h.previous_chunk
                ),
            ));
        }
        if let Some(end) = end {
            if h.next_chunk != end - block {
                return Err(self.corrupt(
                    begin,
                    format!(
                        "block header at {block} says the chunk ends {} bytes after it, but it ends at {end}",
                        h.next_chunk
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Block boundaries `b` with `from <= b < to`.
    fn blocks_between(from: u64, to: u64) -> impl Iterator<Item = u64> {
        let first = from + block::remaining_in_block(from);
        (0..)
            .map(move |i| first + i * block::BLOCK_SIZE)
            .take_while(move |&b| b < to)
    }

    /// Reads and checks the chunk header at `begin`, plus the block headers
    /// interrupting it.
    pub(crate) fn chunk_at(&self, begin: u64) -> Result<Chunk, RecordsError> {
        let len = self.len();
        if !block::is_possible_chunk_boundary(begin) {
            return Err(self.corrupt(begin, format!("{begin} is not a possible chunk boundary")));
        }
        let header_end = block::physical_end(begin, CHUNK_HEADER_SIZE).unwrap_or(u64::MAX);
        if header_end > len {
            return Err(self.truncated(
                begin,
                format!("chunk header at {begin} does not fit in the file of {len} bytes"),
            ));
        }
        let mut raw = [0u8; 40];
        let mut filled = 0usize;
        for (pos, n) in block::pieces(begin, 0, CHUNK_HEADER_SIZE) {
            raw[filled..filled + n as usize]
                .copy_from_slice(&self.data[pos as usize..(pos + n) as usize]);
            filled += n as usize;
        }
        for b in Self::blocks_between(begin, header_end) {
            self.check_block_header(b, begin, None)?;
        }
        let header = ChunkHeader::parse(&raw)
            .ok_or_else(|| self.hash_mismatch(HashedPart::ChunkHeader, begin))?;
        if header.data_size > len {
            return Err(self.truncated(
                begin,
                format!(
                    "chunk at {begin} claims {} bytes but file has {len}",
                    header.data_size
                ),
            ));
        }
        let end = header
            .content_len()
            .and_then(|content| block::chunk_end(begin, content, header.num_records))
            .filter(|&end| end <= len)
            .ok_or_else(|| {
                self.truncated(
                    begin,
                    format!(
                        "chunk at {begin} with {} data bytes and {} records does not fit in the file of {len} bytes",
                        header.data_size, header.num_records
                    ),
                )
            })?;
        for b in Self::blocks_between(begin, header_end) {
            self.check_block_header(b, begin, Some(end))?;
        }
        if begin == 0
            && (header.chunk_type != ChunkType::FileSignature
                || header.data_size != 0
                || header.num_records != 0
                || header.decoded_data_size != 0)
        {
            return Err(RecordsError::NotRiegeli {
                file: self.name.clone(),
                detail: "missing file signature chunk".into(),
            });
        }
        Ok(Chunk { begin, end, header })
    }

    /// The chunk's data as a view into the file.
    pub(crate) fn data_of(&self, chunk: &Chunk) -> ChunkBytes {
        ChunkBytes::in_chunk(
            self.data.clone(),
            chunk.begin,
            CHUNK_HEADER_SIZE,
            chunk.header.data_size,
        )
    }

    /// Checks the block headers interrupting the chunk data and the data
    /// hash.
    pub(crate) fn verify_data(&self, chunk: &Chunk) -> Result<(), RecordsError> {
        let header_end = block::physical_end(chunk.begin, CHUNK_HEADER_SIZE).unwrap_or(u64::MAX);
        let data_end = block::physical_end(chunk.begin, CHUNK_HEADER_SIZE + chunk.header.data_size)
            .unwrap_or(u64::MAX);
        for b in Self::blocks_between(header_end, data_end) {
            self.check_block_header(b, chunk.begin, Some(chunk.end))?;
        }
        let mut hasher = Hasher::new();
        for piece in self.data_of(chunk).pieces() {
            hasher.update(piece);
        }
        if !crate::hash::matches(hasher.finish(), chunk.header.data_hash) {
            return Err(self.hash_mismatch(HashedPart::ChunkData, chunk.begin));
        }
        Ok(())
    }

    /// Finds where reading records from numeric position `pos` starts:
    /// returns a chunk beginning `c` such that either `c >= pos` (records
    /// start at the first record at or after `c`), or the chunk at `c`
    /// contains `pos` (per `which`). Returns the file length at the end.
    /// Requires `pos <= len`.
    pub(crate) fn seek(&self, pos: u64, which: Which) -> Result<u64, RecordsError> {
        let block_begin = block::round_down_to_block(pos);
        let Some(h) = self.block_header(block_begin)? else {
            return Ok(block_begin); // the file ends at this block boundary
        };
        let mut c = if h.previous_chunk == 0 {
            block_begin
        } else {
            let next = block_begin.checked_add(h.next_chunk).ok_or_else(|| {
                self.corrupt(
                    block_begin,
                    format!("block header at {block_begin} has an impossible next chunk"),
                )
            })?;
            if next > pos {
                block_begin.checked_sub(h.previous_chunk).ok_or_else(|| {
                    self.corrupt(
                        block_begin,
                        format!(
                            "block header at {block_begin} implies a chunk before the file start"
                        ),
                    )
                })?
            } else {
                next
            }
        };
        loop {
            if c >= pos {
                return Ok(c);
            }
            let chunk = self.chunk_at(c)?;
            match which {
                Which::Containing if chunk.header.num_records > pos - c => return Ok(c),
                Which::Before if chunk.end > pos => return Ok(c),
                _ => c = chunk.end,
            }
        }
    }
}
