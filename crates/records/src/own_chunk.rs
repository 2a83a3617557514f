//! Records large enough to take a chunk of their own, encoded apart from the writer.
//!
//! Compressing such a record is nearly all the work of writing it, and needs nothing of the
//! writer's state but its options: [`encode_own_chunk`] does it on whatever thread calls it,
//! and [`RecordWriter::write_encoded`](crate::RecordWriter::write_encoded) then writes the
//! chunks in order. A caller with several large records compresses them on several cores at
//! once (issue 15: a split of a model of millions of nodes compressed its ten 64 MiB chunks
//! one after another, on one core, while the other had nothing left to do).

use std::io;

use crate::chunk_header::{ChunkHeader, ChunkType};
use crate::compression::Compression;
use crate::error::RecordsError;
use crate::hash::Hasher;
use crate::options::WriterOptions;
use crate::simple_chunk::SimpleEncoder;

/// A record encoded as a compressed chunk of its own ([`encode_own_chunk`]), not yet written.
pub struct EncodedChunk {
    pub(crate) header: ChunkHeader,
    pub(crate) parts: Vec<Vec<u8>>,
}

impl EncodedChunk {
    /// Size of the chunk's data as written (compressed), without its header.
    pub fn data_size(&self) -> u64 {
        self.header.data_size
    }
}

/// Encodes the record made of `parts` (consecutive pieces) as a compressed chunk of its own,
/// exactly as [`RecordWriter::write_record_parts`](crate::RecordWriter::write_record_parts)
/// writes a record that [`WriterOptions::takes_own_chunk`]. `None` when the record is stored
/// uncompressed instead (the options compress nothing, or store incompressible data and a
/// sample of it does not compress by a tenth): such a chunk is written
/// straight from `parts`, with nothing to gain from encoding it ahead.
///
/// `name` names the output in errors (a compressor refusing the data: raw Snappy past its
/// size limit).
pub fn encode_own_chunk(
    options: &WriterOptions,
    parts: &[&[u8]],
    name: &str,
) -> Result<Option<EncodedChunk>, RecordsError> {
    encode(options, parts).map_err(|e| RecordsError::writing(name, e))
}

fn encode(options: &WriterOptions, parts: &[&[u8]]) -> io::Result<Option<EncodedChunk>> {
    let len: u64 = parts.iter().map(|p| p.len() as u64).sum();
    let compression = options.own_chunk_compression(parts, len);
    if compression == Compression::None {
        return Ok(None);
    }
    // A record in one piece (a run of nodes lying in the model file) is compressed by Zstd
    // where it lies, in one call; anything else streams through the encoder (Brotli's output
    // depends on its size hint: kept as it was).
    let encoded = match (compression, parts) {
        (Compression::Zstd { level }, [whole]) => SimpleEncoder::encode_one_zstd(level, whole)?,
        _ => {
            let mut enc = SimpleEncoder::new(compression, options.effective_chunk_size())?;
            enc.add_parts(parts)?;
            enc.finish()?
        }
    };
    Ok(Some(EncodedChunk::of(encoded)))
}

impl EncodedChunk {
    /// The simple chunk `enc` has gathered, encoded, with its header (data size and hash).
    pub(crate) fn finished(enc: SimpleEncoder) -> io::Result<EncodedChunk> {
        enc.finish().map(Self::of)
    }

    /// The simple chunk encoded as `(parts, num_records, decoded_data_size)`
    /// ([`SimpleEncoder::finish`]), with its header (data size and hash).
    fn of((parts, num_records, decoded_data_size): (Vec<Vec<u8>>, u64, u64)) -> EncodedChunk {
        let mut hasher = Hasher::new();
        let mut data_size = 0u64;
        for p in &parts {
            hasher.update(p);
            data_size += p.len() as u64;
        }
        let header = ChunkHeader {
            data_size,
            data_hash: hasher.finish(),
            chunk_type: ChunkType::Simple,
            num_records,
            decoded_data_size,
        };
        EncodedChunk { header, parts }
    }
}
