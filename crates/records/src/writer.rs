//! [`RecordWriter`]: writes records into simple chunks with Riegeli's chunk
//! boundary rule, and reports each record's numeric position.

use std::io::Write;

use crate::chunk_header::{ChunkHeader, ChunkType};
use crate::chunk_writer::write_chunk;
use crate::compression::{self, Compression};
use crate::error::RecordsError;
use crate::hash::Hasher;
use crate::options::{WriterOptions, SAMPLE_SIZE};
use crate::own_chunk::{encode_own_chunk, EncodedChunk};
use crate::simple_chunk::SimpleEncoder;

/// The open chunk.
enum OpenChunk {
    /// Compression chosen; records go straight into the encoder.
    Encoding(SimpleEncoder),
    /// `store_incompressible`: records kept raw until there is enough data
    /// to judge compressibility.
    Sampling { raw: Vec<u8>, sizes: Vec<usize> },
}

/// Writes a Riegeli/records file of simple chunks to `W`.
///
/// Records accumulate in memory until the chunk is full (the whole chunk
/// must be known before its header, which holds the data hash, is written).
/// Call [`RecordWriter::finish`] to write the last chunk; dropping the writer
/// loses it.
pub struct RecordWriter<W: Write> {
    out: W,
    name: String,
    options: WriterOptions,
    desired_chunk_size: u64,
    /// File position of the next chunk (the open chunk's numeric base).
    pos: u64,
    chunk: Option<OpenChunk>,
    /// Records in the open chunk.
    chunk_records: u64,
    /// Sum of `size + 8` over the open chunk's records.
    chunk_size_so_far: u64,
}

impl<W: Write> RecordWriter<W> {
    /// Starts a file on `out` and writes the file signature.
    pub fn new(out: W, options: WriterOptions) -> Result<Self, RecordsError> {
        Self::with_name(out, options, "<output>")
    }

    /// Like [`RecordWriter::new`], naming the output in errors.
    pub fn with_name(
        out: W,
        options: WriterOptions,
        name: impl Into<String>,
    ) -> Result<Self, RecordsError> {
        let mut w = RecordWriter {
            out,
            name: name.into(),
            options,
            desired_chunk_size: options.effective_chunk_size(),
            pos: 0,
            chunk: None,
            chunk_records: 0,
            chunk_size_so_far: 0,
        };
        let signature = ChunkHeader::for_data(&[], ChunkType::FileSignature, 0, 0);
        w.pos = write_chunk(&mut w.out, 0, &signature, &[] as &[&[u8]]).map_err(|e| w.io(e))?;
        Ok(w)
    }

    /// Numeric position the next record will get (Riegeli `Pos()`).
    pub fn pos(&self) -> u64 {
        self.pos + self.chunk_records
    }

    /// Writes one record; returns its numeric position (what Riegeli's
    /// `LastPos().get().numeric()` gives after `WriteRecord`).
    ///
    /// Chunk boundaries follow Riegeli's `RecordWriter`: each record counts
    /// `size + 8`; the chunk is closed before a record that would push a
    /// non-empty chunk past the chunk size, and right after a record when
    /// not even an empty one would fit any more.
    pub fn write_record(&mut self, record: &[u8]) -> Result<u64, RecordsError> {
        let added = (record.len() as u64).saturating_add(8);
        if self.chunk_size_so_far.saturating_add(added) > self.desired_chunk_size
            && self.chunk_size_so_far > 0
        {
            self.close_chunk()?;
        }
        let pos = self.pos + self.chunk_records;
        self.add(record)?;
        self.chunk_records += 1;
        self.chunk_size_so_far = self.chunk_size_so_far.saturating_add(added);
        if self.chunk_size_so_far.saturating_add(8) > self.desired_chunk_size {
            self.close_chunk()?;
        }
        Ok(pos)
    }

    /// Writes one record given as consecutive parts (for example a serialized message whose
    /// large values are slices of a mapped file), without first concatenating them.
    ///
    /// A record too large to share a chunk (Riegeli's rule would close the chunk around it
    /// anyway) is written as its own chunk straight from the parts: stored chunks are hashed in
    /// one pass and written in a second, compressed ones fed to the compressor piece by piece.
    /// The records and chunk layout are those [`RecordWriter::write_record`] of the concatenation
    /// gives (byte for byte when the chunk is stored; a compressor fed in pieces may cut its
    /// blocks differently).
    /// Returns the record's numeric position.
    pub fn write_record_parts(&mut self, parts: &[&[u8]]) -> Result<u64, RecordsError> {
        let len: u64 = parts.iter().map(|p| p.len() as u64).sum();
        if !self.options.takes_own_chunk(len) {
            let joined: Vec<u8> = parts.concat();
            return self.write_record(&joined);
        }
        match encode_own_chunk(&self.options, parts, &self.name)? {
            Some(encoded) => self.write_encoded(encoded),
            None => {
                if self.chunk_size_so_far > 0 {
                    self.close_chunk()?;
                }
                let pos = self.pos;
                self.write_stored_record(parts, len)?;
                Ok(pos)
            }
        }
    }

    /// Writes a record encoded ahead as a chunk of its own ([`encode_own_chunk`], perhaps on
    /// another thread), closing the open chunk first; returns the record's numeric position.
    /// The file is the one [`RecordWriter::write_record_parts`] of the record's parts writes.
    pub fn write_encoded(&mut self, encoded: EncodedChunk) -> Result<u64, RecordsError> {
        if self.chunk_size_so_far > 0 {
            self.close_chunk()?;
        }
        let pos = self.pos;
        self.pos = write_chunk(&mut self.out, pos, &encoded.header, &encoded.parts)
            .map_err(|e| self.io(e))?;
        self.chunk_records = 0;
        self.chunk_size_so_far = 0;
        Ok(pos)
    }

    /// Writes a one-record uncompressed simple chunk directly from `parts`.
    fn write_stored_record(&mut self, parts: &[&[u8]], len: u64) -> Result<(), RecordsError> {
        let mut sizes = Vec::new();
        crate::varint::write_u64(&mut sizes, len);
        let mut head = vec![Compression::None.compression_type().to_byte()];
        crate::varint::write_u64(&mut head, sizes.len() as u64);
        head.extend_from_slice(&sizes);
        let mut all: Vec<&[u8]> = Vec::with_capacity(parts.len() + 1);
        all.push(&head);
        all.extend_from_slice(parts);
        let mut hasher = Hasher::new();
        for p in &all {
            hasher.update(p);
        }
        let header = ChunkHeader {
            data_size: head.len() as u64 + len,
            data_hash: hasher.finish(),
            chunk_type: ChunkType::Simple,
            num_records: 1,
            decoded_data_size: len,
        };
        self.pos = write_chunk(&mut self.out, self.pos, &header, &all).map_err(|e| self.io(e))?;
        self.chunk_records = 0;
        self.chunk_size_so_far = 0;
        Ok(())
    }

    /// Writes the last chunk and flushes; returns the output.
    pub fn finish(mut self) -> Result<W, RecordsError> {
        self.close_chunk()?;
        self.out.flush().map_err(|e| self.io(e))?;
        Ok(self.out)
    }

    fn io(&self, source: std::io::Error) -> RecordsError {
        RecordsError::writing(&self.name, source)
    }

    /// Adds a record to the open chunk, opening one if needed.
    fn add(&mut self, record: &[u8]) -> Result<(), RecordsError> {
        if self.chunk.is_none() {
            self.chunk = Some(
                if self.options.store_incompressible
                    && self.options.compression != Compression::None
                {
                    OpenChunk::Sampling {
                        raw: Vec::new(),
                        sizes: Vec::new(),
                    }
                } else {
                    OpenChunk::Encoding(self.encoder(self.options.compression)?)
                },
            );
        }
        if let Some(OpenChunk::Sampling { raw, sizes }) = &mut self.chunk {
            if raw.len() + record.len() < SAMPLE_SIZE {
                raw.extend_from_slice(record);
                sizes.push(record.len());
                return Ok(());
            }
            let sample = sample_of(raw, record);
            let (raw, sizes) = (std::mem::take(raw), std::mem::take(sizes));
            self.start_encoding(&sample, &raw, &sizes)?;
        }
        match &mut self.chunk {
            Some(OpenChunk::Encoding(enc)) => enc.add(record).map_err(|e| RecordsError::Io {
                file: self.name.clone(),
                source: e,
            }),
            _ => Ok(()),
        }
    }

    /// Chooses the compression for the open chunk from `sample` and feeds
    /// the records collected so far into a new encoder.
    fn start_encoding(
        &mut self,
        sample: &[u8],
        raw: &[u8],
        sizes: &[usize],
    ) -> Result<(), RecordsError> {
        let compression = if compression::worth_compressing(self.options.compression, sample) {
            self.options.compression
        } else {
            Compression::None
        };
        let mut enc = self.encoder(compression)?;
        let mut offset = 0usize;
        for &n in sizes {
            enc.add(&raw[offset..offset + n]).map_err(|e| self.io(e))?;
            offset += n;
        }
        self.chunk = Some(OpenChunk::Encoding(enc));
        Ok(())
    }

    fn encoder(&self, compression: Compression) -> Result<SimpleEncoder, RecordsError> {
        SimpleEncoder::new(compression, self.desired_chunk_size).map_err(|e| self.io(e))
    }

    /// Encodes and writes the open chunk, if any.
    fn close_chunk(&mut self) -> Result<(), RecordsError> {
        if let Some(OpenChunk::Sampling { raw, sizes }) = &mut self.chunk {
            let (raw, sizes) = (std::mem::take(raw), std::mem::take(sizes));
            self.start_encoding(&raw, &raw, &sizes)?;
        }
        let Some(OpenChunk::Encoding(enc)) = self.chunk.take() else {
            return Ok(());
        };
        debug_assert_eq!(enc.num_records(), self.chunk_records);
        let encoded = EncodedChunk::finished(enc).map_err(|e| self.io(e))?;
        self.pos = write_chunk(&mut self.out, self.pos, &encoded.header, &encoded.parts)
            .map_err(|e| self.io(e))?;
        self.chunk_records = 0;
        self.chunk_size_so_far = 0;
        Ok(())
    }
}

/// Builds a compressibility sample from the collected records plus pieces
/// of the beginning, middle and end of `record`, at most [`SAMPLE_SIZE`].
fn sample_of(raw: &[u8], record: &[u8]) -> Vec<u8> {
    let mut sample = Vec::with_capacity(SAMPLE_SIZE);
    sample.extend_from_slice(raw);
    let room = SAMPLE_SIZE.saturating_sub(raw.len());
    if record.len() <= room {
        sample.extend_from_slice(record);
    } else {
        let piece = room / 3;
        let mid = record.len() / 2 - piece / 2;
        sample.extend_from_slice(&record[..piece]);
        sample.extend_from_slice(&record[mid..mid + piece]);
        sample.extend_from_slice(&record[record.len() - piece..]);
    }
    sample
}
