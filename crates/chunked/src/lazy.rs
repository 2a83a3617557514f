//! Riegeli files as the [`RecordSource`] of lazy wire values.

use std::collections::HashMap;
use std::io::Write;
use std::sync::Arc;

use bytes::Bytes;
use unbound_records::{CompressionType, RecordReader, RecordsError};
use unbound_wire::{RecordSource, SourceError};

use crate::cache::ChunkCache;
use crate::layout::size_matches;
use unbound_proto::tensorflow::proto_splitter::ChunkInfo;

/// A Riegeli file whose records lazy [`unbound_wire::Payload::Record`] values point into.
#[derive(Debug, Clone)]
pub struct RecordFile(pub Arc<RecordReader>);

impl RecordSource for RecordFile {
    fn name(&self) -> &str {
        self.0.name()
    }

    fn read_record(&self, position: u64) -> Result<Bytes, SourceError> {
        Ok(self.0.read_record_at(position)?.1)
    }

    fn copy_record_to(&self, position: u64, out: &mut dyn Write) -> Result<u64, SourceError> {
        Ok(self.0.copy_record_to(position, out)?)
    }

    fn copy_record_range_to(
        &self,
        position: u64,
        offset: u64,
        len: u64,
        out: &mut dyn Write,
    ) -> Result<u64, SourceError> {
        Ok(self.0.copy_record_range_to(position, offset, len, out)?)
    }

    fn decoding_is_costly(&self, position: u64) -> bool {
        match self.0.chunk_of(position) {
            Ok(c) => {
                let compressed = !matches!(c.compression, None | Some(CompressionType::None));
                // Brotli's stored meta-blocks keep the size; real compression shrinks it.
                compressed
                    && c.data_size.saturating_mul(100) < c.decoded_data_size.saturating_mul(99)
            }
            Err(_) => false, // the error surfaces when the record is streamed
        }
    }
}

/// A Riegeli file whose kept chunks ([`crate::FileChunks::keep_decoded`]) are read through the
/// shared [`ChunkCache`]: a lazy value whose record is a kept chunk is decoded once for every
/// reader of the file in the process (the check, the merges, the fingerprints, the write),
/// and the others stream from the file as [`RecordFile`] does.
#[derive(Debug)]
pub(crate) struct KeptRecordFile {
    /// The file itself.
    pub(crate) file: RecordFile,
    /// The decoded chunks, shared with the `FileChunks` that kept them.
    pub(crate) cache: Arc<ChunkCache>,
    /// Kept chunk index by record position (each the only record of its Riegeli chunk).
    pub(crate) kept_at: Arc<HashMap<u64, u64>>,
}

impl KeptRecordFile {
    /// The bytes of the record at `position` when its chunk is kept (decoded now if no reader
    /// decoded it yet), or `None` when it is not kept.
    fn kept(&self, position: u64) -> Option<Result<Bytes, RecordsError>> {
        let index = *self.kept_at.get(&position)?;
        Some(
            self.cache
                .get_or_decode(index, || decode_kept(&self.file.0, position)),
        )
    }
}

/// Writes `bytes` to `out` in pieces, as the streaming copy writes: each kernel copy's source
/// stays in cache.
fn write_in_pieces(bytes: &[u8], out: &mut dyn Write) -> std::io::Result<()> {
    bytes
        .chunks(1 << 20)
        .try_for_each(|piece| out.write_all(piece))
}

/// Decodes the kept chunk whose only record is at `position`, then releases its file pages
/// ([`release_if_compressed`]).
fn decode_kept(reader: &RecordReader, position: u64) -> Result<Bytes, RecordsError> {
    let (_, bytes) = reader.read_record_at(position)?;
    release_if_compressed(reader, position);
    Ok(bytes)
}

/// Gives the file pages of the chunk at `position` back to the kernel when it is compressed
/// and was just decoded whole (for keeping, or by a reader done with its compressed form): its
/// decoded bytes are what is read from now on, so its compressed form need not stay resident
/// beside them (a stored chunk's bytes are the file's pages themselves, and stay). The pages
/// stay in the page cache; a later read maps them back.
pub(crate) fn release_if_compressed(reader: &RecordReader, position: u64) {
    if let Ok(chunk) = reader.chunk_of(position) {
        if !matches!(chunk.compression, None | Some(CompressionType::None)) {
            reader.release_chunk_pages(position);
        }
    }
}

impl RecordSource for KeptRecordFile {
    fn name(&self) -> &str {
        self.file.name()
    }

    fn read_record(&self, position: u64) -> Result<Bytes, SourceError> {
        match self.kept(position) {
            Some(bytes) => Ok(bytes?),
            None => self.file.read_record(position),
        }
    }

    fn copy_record_to(&self, position: u64, out: &mut dyn Write) -> Result<u64, SourceError> {
        let Some(bytes) = self.kept(position) else {
            return self.file.copy_record_to(position, out);
        };
        let bytes = bytes?;
        write_in_pieces(&bytes, out)?;
        Ok(bytes.len() as u64)
    }

    fn copy_record_range_to(
        &self,
        position: u64,
        offset: u64,
        len: u64,
        out: &mut dyn Write,
    ) -> Result<u64, SourceError> {
        let Some(bytes) = self.kept(position) else {
            return self.file.copy_record_range_to(position, offset, len, out);
        };
        let bytes = bytes?;
        let range = usize::try_from(offset)
            .ok()
            .zip(usize::try_from(len).ok())
            .and_then(|(offset, len)| bytes.get(offset..offset.checked_add(len)?))
            .ok_or_else(|| {
                format!(
                    "{}: {len} bytes at byte {offset} of the record at {position} ({} bytes): past its end",
                    self.name(),
                    bytes.len()
                )
            })?;
        write_in_pieces(range, out)?;
        Ok(len)
    }

    fn decoding_is_costly(&self, position: u64) -> bool {
        // A kept chunk is decoded once, by whichever reader comes first; later ones copy.
        !self.kept_at.contains_key(&position) && self.file.decoding_is_costly(position)
    }
}

/// One chunk of a file for a reader that reads it once, later
/// ([`crate::FileChunks::read_later`]): nothing of it is read until then; read, its record is
/// checked (its hash, as every read checks it, and its size against the one the chunk's
/// `ChunkInfo` declares) and its compressed form given back to the kernel
/// ([`release_if_compressed`]).
#[derive(Debug)]
pub(crate) struct ReadOnce {
    pub(crate) reader: Arc<RecordReader>,
    pub(crate) index: u64,
    pub(crate) info: ChunkInfo,
}

impl RecordSource for ReadOnce {
    fn name(&self) -> &str {
        self.reader.name()
    }

    fn read_record(&self, position: u64) -> Result<Bytes, SourceError> {
        let (at, bytes) = self.reader.read_record_at(position)?;
        release_if_compressed(&self.reader, position);
        if at != self.info.offset {
            // `check_layout` makes this impossible; kept so no other record is ever taken.
            return Err(format!(
                "{}: chunk {} has no record at {}",
                self.name(),
                self.index,
                self.info.offset
            )
            .into());
        }
        size_matches(&self.reader, self.index, &self.info, bytes.len() as u64)?;
        Ok(bytes)
    }

    fn copy_record_to(&self, position: u64, out: &mut dyn Write) -> Result<u64, SourceError> {
        Ok(self.reader.copy_record_to(position, out)?)
    }

    fn decoding_is_costly(&self, position: u64) -> bool {
        RecordFile(Arc::clone(&self.reader)).decoding_is_costly(position)
    }
}
